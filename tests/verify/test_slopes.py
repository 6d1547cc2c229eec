"""The slope fitter and verdict rule (``verify.stats.slopes``, ``verify.stats.theorem``) on
synthetic
power laws."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.factories import NS, synthetic
from verify.stats.slopes import fit_slope
from verify.stats.theorem import theorem_test


def meets_band(fit, exponent):
    """The slope's interval meets the band ``[e, e + shift]`` (the theorem's log factor)."""
    return fit.ci_low <= exponent + fit.shift and fit.ci_high >= exponent


def check_rate_recovery(exponent, log_power, R=5, noise=0.1, seed=0):
    """One-line check used below: the log-corrected slope recovers the exponent within
    4 of its standard errors and the interval meets the band (it covers the truth)."""
    V = synthetic(exponent, log_power, R, noise, seed)
    fit = fit_slope(NS, V, log_power=log_power)
    assert abs(fit.corrected_slope - exponent) < 4 * fit.se_slope + 1e-9
    assert meets_band(fit, exponent)
    return fit


@pytest.mark.parametrize("exponent", [-0.25, -0.5, -2 / 3, -1.0])
@pytest.mark.parametrize("log_power", [0.0, 2.0])
def test_recovers_power_laws_with_log_factors(exponent, log_power):
    check_rate_recovery(exponent, log_power)


def test_exact_power_law_exact_slope():
    V = np.tile(2.0 * NS**-0.5, (3, 1))
    fit = fit_slope(NS, V)
    assert fit.slope == pytest.approx(-0.5, abs=1e-12)
    np.testing.assert_allclose(fit.local_slopes, -0.5, atol=1e-12)
    assert fit.ci_low == pytest.approx(-0.5) and fit.ci_high == pytest.approx(-0.5)


@pytest.mark.parametrize("R", [3, 8])
def test_confidence_interval_covers_at_the_declared_rate(R):
    """Coverage of the 95% interval for the slope of the replicate mean, over 400 seeds.
    The target is the slope of log E[value] (the fitted quantity); with multiplicative
    log-normal noise it equals the exponent.  Declared tolerance: 400 seeds give a
    binomial SE of 1.1%, so coverage must lie in [0.91, 0.99] (about 3.6 SE)."""
    hits = 0
    for seed in range(400):
        fit = fit_slope(NS, synthetic(-0.5, 0.0, R, 0.15, seed), n_boot=400, seed=seed)
        hits += fit.ci_low <= -0.5 <= fit.ci_high
    assert 0.91 <= hits / 400 <= 0.99


def test_slower_rates_fail_the_one_sided_test():
    V = synthetic(-0.5, 2.0, 5, 0.1, 3)
    fit = fit_slope(NS, V, log_power=2.0)
    assert meets_band(fit, -0.5)
    # against twice the exponent the data are slower than the band allows: FAIL
    t = theorem_test(fit, -1.0)
    assert (t.verdict, t.direction) == ("FAIL", "slower")
    # a truth converging far slower fails the -0.5 test; note that n^-0.25 would not:
    # over n = 250..8000, n^-0.5 log^2 n has a local slope near -0.25 (the band's width)
    slow = fit_slope(NS, synthetic(-0.1, 0.0, 5, 0.1, 4), log_power=2.0)
    assert theorem_test(slow, -0.5).verdict == "FAIL"
    # the band's shift c ell (c = 2) over NS, worked by hand: ell is the least-squares slope
    # of log log n on log n; log n = 5.52146 + k log 2 (k = 0..5) is evenly spaced, so
    # ell = sum_k (k - 2.5) log log n_k / (17.5 log 2), with log log n_k = 1.70864, 1.82690,
    # 1.93264, 2.02827, 2.11554, 2.19580: 2.5 * 0.48716 + 1.5 * 0.28864 + 0.5 * 0.09563 =
    # 1.69866, ell = 1.69866 / 12.13008 = 0.14004, c ell = 0.28007
    assert fit.shift == pytest.approx(0.28007, abs=1e-4)


def test_bad_inputs():
    with pytest.raises(ValueError, match="3 sample sizes"):
        fit_slope([10, 20], np.ones((2, 2)))
    with pytest.raises(ValueError, match="positive"):
        fit_slope(NS, -np.ones((2, NS.size)))
    with pytest.raises(ValueError, match="increasing"):
        fit_slope(NS[::-1], np.ones((2, NS.size)))
    one = fit_slope(NS, synthetic(-0.5, 0, 1, 0.1, 0))
    assert np.isnan(one.ci_low) and theorem_test(one, -0.5).verdict == "INCONCLUSIVE"


@settings(max_examples=25)
@given(st.floats(1e-6, 1e6), st.integers(0, 2**16))
def test_fit_slope_is_invariant_to_scaling_the_values(c, seed):
    rng = np.random.default_rng(seed)
    ns = np.array([250, 1000, 4000, 16000])
    V = 0.3 * ns**-0.5 * np.exp(rng.normal(0, 0.05, (4, ns.size)))
    a, b = fit_slope(ns, V), fit_slope(ns, c * V)
    assert b.slope == pytest.approx(a.slope, abs=1e-9)
    assert (b.ci_low, b.ci_high) == pytest.approx((a.ci_low, a.ci_high), abs=1e-9)
