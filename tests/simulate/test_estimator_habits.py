"""The estimators with scikit-learn's habits (issue 77, item 5): ``random_state`` (the
former ``seed`` read one more release, with a ``FutureWarning``), an unknown parameter named
with the valid ones, ``summary()`` consistent with itself, intervals through a
``Pipeline``."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from simulate.estimators import ASVIRegressor, SVIClassifier, SVIRegressor
from simulate.estimators.inputs import AUTO_CAP_STEPS, cap_steps

FAST = dict(epochs=2, batch_size=100, progress=False)


def _data(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 2))
    return X, np.sin(3 * X[:, 0]) + 0.3 * rng.standard_normal(n)


def test_random_state_is_the_seed_and_seed_is_read_once_more_with_a_warning():
    X, y = _data()
    assert ASVIRegressor().get_params()["random_state"] == 0
    a = SVIRegressor(width=3, random_state=4, **FAST).fit(X, y).predict(X[:20])
    b = SVIRegressor(width=3, random_state=4, **FAST).fit(X, y).predict(X[:20])
    c = SVIRegressor(width=3, random_state=5, **FAST).fit(X, y).predict(X[:20])
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)  # the seed acts
    with pytest.warns(FutureWarning, match="'seed' was renamed 'random_state'"):
        old = SVIRegressor(width=3, seed=4, **FAST).fit(X, y).predict(X[:20])
    np.testing.assert_array_equal(old, a)
    gen = SVIRegressor(width=3, random_state=np.random.RandomState(0), **FAST).fit(X, y)
    assert np.isfinite(gen.predict(X[:5])).all()
    with pytest.raises(ValueError, match="random_state"):
        SVIRegressor(width=3, random_state=-1, **FAST).fit(X, y)


@pytest.mark.parametrize("cls", [ASVIRegressor, SVIClassifier])
def test_an_unknown_parameter_names_the_valid_ones(cls):
    with pytest.raises(TypeError) as err:
        cls(rand_state=0)
    text = str(err.value)
    assert f"{cls.__name__}() got an unknown parameter 'rand_state'" in text
    assert "did you mean 'random_state'?" in text
    listed = text.split("its parameters: ")[1].split(", ")
    assert set(listed) == set(cls().get_params()) - {"seed"}
    with pytest.raises(TypeError, match="keyword arguments only"):
        cls((2, 4))


def test_intervals_through_a_pipeline():
    """``pipe.predict(X, return_std=True)`` reaches the regressor (scikit-learn passes the
    keyword to the last step): the same mean and sd as the step's own on the scaled X."""
    X, y = _data()
    pipe = make_pipeline(StandardScaler(), SVIRegressor(width=3, random_state=0, **FAST))
    pipe.fit(X, y)
    mean, sd = pipe.predict(X[:10], return_std=True)
    own_mean, own_sd = pipe[-1].predict(pipe[:-1].transform(X[:10]), return_std=True)
    np.testing.assert_allclose(mean, own_mean)
    np.testing.assert_allclose(sd, own_sd)
    assert (sd > 0).all()


def test_the_summary_says_why_a_capped_width_ran_fewer_steps_than_the_cap():
    """With the noise learned, a candidate's warm-up and EM phase share the cap, so a capped
    candidate can stop short of it; the summary said "capped at max_epochs after 900 steps"
    beside "cap 1200 steps" and nothing else.  Now it gives both numbers and the reason."""
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m = ASVIRegressor(widths=(2, 4, 6, 8, 10), max_epochs=400, batch_size=100,
                          random_state=0, progress=False).fit(X[:, :1], y)  # fmt: skip
    k, cap = m.selected_index_, m.stop_rule_.max_steps
    assert not m.converged_[k] and m.n_iter_[k] < cap  # the case (its numbers measured)
    text = " ".join(m.summary().split())
    assert f"after {m.n_iter_[k]} steps of the cap's {cap}" in text
    assert "warm-up and its EM phase share the cap" in text


def test_the_default_cap_is_the_papers_epochs_with_a_floor_in_steps():
    """``max_epochs="auto"``: 7000 epochs of n / batch steps, at least 40,000 steps (at n
    below the batch an epoch is one step: 7000 of them stopped the diabetes fits' candidates
    at the cap); a number is taken as given; anything else refused."""
    assert cap_steps("auto", 1.0, 7000) == AUTO_CAP_STEPS == 40_000
    assert cap_steps("auto", 10_000 / 1024, 7000) == math.ceil(7000 * 10_000 / 1024)
    assert cap_steps(300, 2.0, 7000) == 600
    for bad in ("Auto", 0, 1.5, None):
        with pytest.raises(ValueError, match="max_epochs"):
            cap_steps(bad, 1.0, 7000)
    with pytest.raises(ValueError, match="max_epochs"):
        ASVIRegressor(max_epochs="long", progress=False).fit(*_data(40))


def test_default_fit_on_the_diabetes_data_raises_and_warns_nothing():
    """The issue's ordinary problem: scikit-learn's bundled diabetes data (442 rows, 10
    features) fitted with every default but the seed.  Under the former cap (7000 steps)
    every fit warned; now every candidate converges or is retired by the race."""
    from sklearn.datasets import load_diabetes

    X, y = load_diabetes(return_X_y=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = ASVIRegressor(random_state=0, progress=False).fit(X, y)
    assert (m.converged_ | m.retired_).all()
    assert m.converged_[m.selected_index_]
    assert m.summary().count("capped") == 0
