"""Issue #38 item 8: the estimators never silently treat a target as constant, and their
training length is bounded.

* Targets of any scale float64 holds (1e-300, 1e300, 1e300 plus a spread of 1e290) are
  fitted like the same targets at scale 1, with a ``UserWarning`` outside the float32
  range the core trains in; a target whose values are all equal keeps the constant rule
  (centred, ``y_scale_ = 1``); non-finite targets are refused.
* Values that the float32 cast would turn into inf or flush to zero (features, or targets
  with ``standardize_y=False``) are refused with a ``ValueError``.
* ``epochs`` and ``max_epochs`` are whole numbers in [1, 10**6]
  (``simulate.estimators.MAX_EPOCHS``): 1e30, inf, nan, 1.5, True, 0 and -1 are refused in
  ``fit`` before any training; the bound itself passes validation (``build_trainer`` is
  replaced by a stub that stops the fit where training would begin, so the bound is never
  trained to, and a value that slips through fails the test at once instead of training
  without end).

Fits are tiny (200 points, 6 steps); the scale-1 fit and the rescaled one see standardised
targets that agree to float64 rounding, so their predictions agree to float32 training's
rounding (1e-4 relative, the tolerance of test_practitioner's scale test).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from simulate.estimators import SmallSampleWarning, SVIClassifier, SVIRegressor, base, inputs

MAX_EPOCHS = 10**6  # simulate.estimators.MAX_EPOCHS (said here too: the tests name the bound)

TINY = dict(width=4, epochs=3, batch_size=100, random_state=0, predict_draws=5, progress=False)
# long enough to fit y ~ x_1 (R^2 0.69 at scale 1, 100 steps, 0.1 s): a constant fit shows
FIT = dict(TINY, epochs=50, lr=1e-2)


def _data(n=200, seed=0):
    r = np.random.default_rng(seed)
    X = r.uniform(-1, 1, (n, 2))
    return X, X[:, 0] + 0.1 * r.normal(size=n)


@pytest.fixture(scope="module")
def scale_one():
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # scale 1: no warning
        m = SVIRegressor(**FIT).fit(X, y)
    return X, y, m.predict(X[:50])


@pytest.mark.parametrize("scale", [1e-300, 1e300])
def test_targets_at_extreme_scales_are_fitted_like_scale_one(scale_one, scale):
    """Reproducer 9 (1e-300: ``y.std()`` underflowed to 0, the target was fitted as
    constant, predictions ~ -0.002, no warning) and its twin (1e300: the squares overflowed,
    predictions -inf)."""
    X, y, ref = scale_one
    with pytest.warns(UserWarning, match="sd .* is outside"):
        m = SVIRegressor(**FIT).fit(X, scale * y)
    assert m.y_scale_ == pytest.approx(scale * y.std(), rel=1e-12)
    pred = m.predict(X[:50]) / scale
    np.testing.assert_allclose(pred, ref, rtol=1e-4, atol=1e-6)
    assert np.corrcoef(pred, X[:50, 0])[0, 1] > 0.9  # not a constant: it follows x_1


def test_a_huge_offset_with_a_spread_is_fitted():
    """y = 1e300 + 1e290 y_1: the mean is fine but the squared deviations (1e580)
    overflowed.  The targets carry float64 rounding of 1e300's ulp (1e-6 of the spread), so
    the fit agrees with scale 1's to that, not bit for bit: correlation, not equality."""
    X, y = _data()
    ref = SVIRegressor(**FIT).fit(X, y).predict(X[:50])
    with pytest.warns(UserWarning, match="outside"):
        m = SVIRegressor(**FIT).fit(X, 1e300 + 1e290 * y)
    shifted = (m.predict(X[:50]) - 1e300) / 1e290
    assert np.all(np.isfinite(shifted)) and np.corrcoef(shifted, ref)[0, 1] > 0.999
    assert np.corrcoef(shifted, X[:50, 0])[0, 1] > 0.9


@pytest.mark.parametrize("c", [3.0, 1e-300, 0.1])
def test_a_constant_target_keeps_the_constant_rule(c):
    """Every target the same number: centred, scale 1, no warning.  (0.1 x 3: the mean's
    rounding gave ``y.std()`` 1.4e-17 and a "spread" of rounding; now constant too.)"""
    X, _ = _data(3 if c == 0.1 else 200)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # 3 points' learned noise sd is said (SmallSampleWarning, its own tests); this
        # test is about the constant rule's
        warnings.simplefilter("ignore", SmallSampleWarning)
        m = SVIRegressor(**TINY).fit(X, np.full(len(X), c))
    assert (m.y_mean_, m.y_scale_) == (c, 1.0)
    assert np.all(np.isfinite(m.predict(X)))


def test_ordinary_scales_standardise_bit_for_bit_as_before():
    """The power-of-two scaling commutes with rounding: at ordinary scales the mean, sd and
    standardised targets are numpy's own, so no existing fit moves."""
    _, y = _data()
    for s in (1e-3, 1.0, 7.0, 1e5):
        mean, sd, z = inputs._standardise(s * y + 40.0)
        assert (mean, sd) == ((s * y + 40.0).mean(), (s * y + 40.0).std())
        np.testing.assert_array_equal(z, (s * y + 40.0 - mean) / sd)


def test_non_finite_targets_are_refused():
    X, y = _data()
    for bad in (np.inf, -np.inf, np.nan):
        with pytest.raises(ValueError, match="y"):
            SVIRegressor(**TINY).fit(X, np.r_[y[:-1], bad])


def test_values_the_float32_cast_would_lose_are_refused():
    """Features are the user's (not standardised): at 1e300 they became inf in float32
    (every model failed), at 1e-300 zeros (a constant feature, fitted silently); likewise
    unstandardised targets.  float64 takes them."""
    X, y = _data()
    for scale in (1e300, 1e-300):
        with pytest.raises(ValueError, match="^X has .*float32"):
            SVIRegressor(**TINY).fit(scale * X, y)
    with pytest.raises(ValueError, match="^y has .*float32.*standardize_y=True"):
        SVIRegressor(**TINY, standardize_y=False).fit(X, 1e-300 * y)
    with pytest.raises(ValueError, match="^X has .*float32"):
        SVIClassifier(**TINY).fit(1e300 * X, y > 0)
    SVIRegressor(**{**TINY, "epochs": 1}, dtype="float64").fit(1e-300 * X, y)


class _Started(Exception):
    """Raised where training would begin: validation let the value through."""


@pytest.fixture
def no_training(monkeypatch):
    def stub(*args, **kwargs):
        raise _Started

    monkeypatch.setattr(base, "train_models", stub)


BAD_COUNTS = [1e30, float("inf"), float("nan"), 1.5, True, 0, -1, MAX_EPOCHS + 1, "100"]


@pytest.mark.parametrize("bad", BAD_COUNTS, ids=repr)
@pytest.mark.parametrize("name", ["epochs", "max_epochs"])
def test_epoch_counts_outside_the_bound_are_refused(no_training, name, bad):
    """Reproducer 14b (``epochs=1e30`` trained without bound), and the same rule for
    ``max_epochs`` (1e30 made a stopping rule with a cap of 2e30 steps)."""
    X, y = _data()
    kw = {**TINY, "epochs": None, name: bad}
    with pytest.raises(ValueError, match=f"^{name} must be a whole number in \\[1, 1000000\\]"):
        SVIRegressor(**kw).fit(X, y)


def test_a_classifier_refuses_them_too(no_training):
    X, y = _data()
    with pytest.raises(ValueError, match="^epochs must be"):
        SVIClassifier(**{**TINY, "epochs": 1e30}).fit(X, y > 0)


@pytest.mark.parametrize("ok", [MAX_EPOCHS, float(MAX_EPOCHS), np.int64(MAX_EPOCHS)], ids=repr)
def test_the_bound_itself_passes_validation(no_training, ok):
    """Accepted up to where training would begin (never trained to)."""
    X, y = _data()
    for kw in ({"epochs": ok}, {"epochs": None, "max_epochs": ok}):
        with pytest.raises(_Started):
            SVIRegressor(**{**TINY, **kw}).fit(X, y)
    steps, _ = SVIRegressor(**{**TINY, "epochs": ok})._budget(200, 100)
    assert steps == 2 * MAX_EPOCHS  # exact: 2 steps an epoch


def test_an_integral_float_is_the_whole_number_it_names():
    """``epochs=2.0`` (what ``teacher --epochs`` parses) trains exactly what 2 does."""
    X, y = _data()
    a = SVIRegressor(**{**TINY, "epochs": 2.0}).fit(X, y)
    b = SVIRegressor(**{**TINY, "epochs": 2}).fit(X, y)
    assert a.n_steps_ == b.n_steps_ == 4
    np.testing.assert_array_equal(a.predict(X[:5]), b.predict(X[:5]))


def test_count_constraint():
    from simulate.core.constraints import Count

    assert inputs.MAX_EPOCHS == MAX_EPOCHS
    c = Count(1, 10)
    assert all(c.accepts(v) for v in (1, 10, 3.0, np.int64(5)))
    assert not any(c.accepts(v) for v in (0, 11, 2.5, True, np.True_, float("inf"), "3", None))
    assert str(c) == "a whole number in [1, 10]" and str(Count(0)) == "a whole number >= 0"


def test_a_spread_below_float64_is_refused_not_fitted_in_other_units():
    """Targets 0 and 5e-324 (the smallest subnormal): their sd, 2**-1075, is not a float64;
    it was a sd of 0 beside standardised targets, predictions about -0.64, no warning."""
    from simulate.estimators.inputs import _standardise

    y = np.array([0.0, 5e-324] * 8)
    with pytest.raises(ValueError, match="below the smallest float64"):
        _standardise(y)
