"""The scikit-learn contract, checked by scikit-learn itself, and the tools built on it.

Every estimator runs ``parametrize_with_checks`` with small settings: 50 epochs of batch 32
on the checks' 20..200-sample datasets (enough for ``check_regressors_train``'s R^2 > 0.5
and ``check_classifiers_train``'s accuracy > 0.83, measured: 2 epochs fail both), two
candidate widths for ASVI, 5 predictive draws.  The classifiers get ``lambda_s = 3``,
``lam = 10`` (the teacher experiment's priors): their defaults are the paper's MNIST
priors for n = 60,000 (lambda_s = 50 per edge), which prune every edge of a net trained
on 200 samples; and ASVI's candidates are 8 and 16 (with 4 and 8 it selects 4 on the
three-blob data and misses the 0.83 accuracy, measured).  No check is expected to fail.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from simulate.estimators import (
    ASVIClassifier,
    ASVIRegressor,
    BNNClassifier,
    BNNRegressor,
    DenseBNNRegressor,
    HSBNNRegressor,
    SVIClassifier,
    SVIRegressor,
)

SMALL = dict(epochs=50, batch_size=32, predict_draws=5)
CLS = dict(SMALL, lambda_s=3.0, lam=10.0)
ESTIMATORS = [
    ASVIRegressor(widths=(2, 4), **SMALL),
    SVIRegressor(width=4, **SMALL),
    DenseBNNRegressor(width=4, **SMALL),
    HSBNNRegressor(width=4, **SMALL),
    ASVIClassifier(widths=(8, 16), **CLS),
    SVIClassifier(width=8, **CLS),
    BNNRegressor(family="horseshoe", widths=(2, 4), **SMALL),
    BNNClassifier(widths=(8, 16), **CLS),
]


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def _data(n=200, p=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, p))
    return X, np.sin(2 * X[:, 0]) + 0.1 * rng.standard_normal(n)


def test_unfitted_raises_not_fitted_error():
    with pytest.raises(NotFittedError):
        ASVIRegressor().predict(np.zeros((2, 3)))


def test_cross_val_score_pipeline_and_grid_search():
    """With the noise sd the data has (0.1): with sigma = 1 ASVI on this data selects a
    width-2 net that predicts a constant (R^2 ~ 0, measured), a finding about a
    misspecified likelihood, not about the contract."""
    X, y = _data()
    kw = dict(SMALL, sigma=0.1)
    scores = cross_val_score(SVIRegressor(width=4, **kw), X, y, cv=3)
    assert scores.shape == (3,) and np.all(scores > 0.5)  # R^2 of sin(2x) + 0.1 noise
    pipe = Pipeline([("scale", StandardScaler()), ("asvi", ASVIRegressor(widths=(2, 4), **kw))])
    assert pipe.fit(X, y).score(X, y) > 0.5
    grid = GridSearchCV(SVIRegressor(**kw), {"width": [2, 8]}, cv=2).fit(X, y)
    assert grid.best_params_["width"] in (2, 8) and hasattr(grid.best_estimator_, "posterior_")


@pytest.mark.parametrize(
    "bad",
    [
        {"depth": 1.5},
        {"batch_size": 2.5},
        {"predict_draws": 0},
        {"seed": 10**20},
        {"seed": -1},
        {"dtype": "float16"},
        {"lr": float("nan")},
        {"epochs": 0},
        {"elbo_draws": 5},
    ],
)
def test_bad_parameters_fail_at_fit_with_a_clear_error(bad):
    X, y = _data(50)
    with pytest.raises(ValueError, match=next(iter(bad))):
        SVIRegressor(width=2, **{**SMALL, **bad}).fit(X, y)


def test_bad_data_is_refused():
    X, y = _data(50)
    m = SVIRegressor(width=2, **SMALL)
    with pytest.raises(ValueError, match="[Cc]omplex"):
        m.fit(X + 1j, y)
    with pytest.raises(ValueError):
        SVIClassifier(width=2, **CLS).fit(X, np.where(y > 0, 1.0, np.nan))
    m.fit(X, y)
    with pytest.raises(ValueError, match="2D array"):
        m.predict(X[0])


def test_batch_larger_than_n_trains_full_batch():
    X, y = _data(20)
    m = SVIRegressor(width=2, epochs=3, batch_size=1024, predict_draws=5).fit(X, y)
    assert m.n_steps_ == 3  # one full-batch step per epoch


def test_a_tiny_width_prior_rate_selects_normally():
    """lam = 1e-17: log pi(N) is finite (it was +inf, and fit said every width failed)."""
    X, y = _data(100)
    m = ASVIRegressor(widths=(2, 4), lam=1e-17, **SMALL).fit(X, y)
    assert m.selected_width_ == 2  # the prior's mass sits at N = 1: the smallest wins
    assert np.all(np.isfinite(m.penalized_elbo_))


def test_one_estimator_covers_the_named_ones():
    """BNNRegressor with a family and widths fits exactly what the named class fits."""
    X, y = _data(100)
    pairs = [
        (ASVIRegressor(widths=(2, 4), **SMALL), BNNRegressor(widths=(2, 4), **SMALL)),
        (DenseBNNRegressor(width=4, **SMALL), BNNRegressor(family="dense", widths=[4], **SMALL)),
    ]
    for named, general in pairs:
        a, b = named.fit(X, y).predict(X[:7]), general.fit(X, y).predict(X[:7])
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="family"):
        BNNRegressor(family="nope", widths=[2], **SMALL).fit(X, y)
