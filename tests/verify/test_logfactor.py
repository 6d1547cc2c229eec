"""Log factor or power (``verify.stats.logfactor``) on known answers: exact curves (the allowed
range and the change, against ``loglog_slope`` directly), power laws with log factors
that must not fail at the declared rate, curves that flatten as a power that must fail,
and k-NN regression whose neighbour count stops growing inside the design (fails) or
does not (does not fail)."""

import math

import numpy as np
import pytest

from tests.factories import synthetic
from verify.stats.logfactor import halves, log_or_power, ratio_slope
from verify.stats.slopes import loglog_slope, paired_slope_diff

NS = 500.0 * 4.0 ** np.arange(6)  # 500 .. 512,000, the confirm-v4 Hoelder grid
C_PROOF = 3.77  # the log power of the proved bound at alpha = 0.5
CV = 0.2  # the replicate noise: lognormal sd 0.2 (a cv of about 0.2), per cell and replicate
SEEDS = 200
ALPHA_ONE_SIDED = 0.025
# the false-verdict rate's tolerance: the nominal one-sided 2.5% plus 3 binomial SEs over
# SEEDS draws (a correct test exceeds it with probability ~0.2%)
TOLERANCE = ALPHA_ONE_SIDED + 3 * math.sqrt(ALPHA_ONE_SIDED * (1 - ALPHA_ONE_SIDED) / SEEDS)


def test_halves_share_the_middle_of_an_odd_design():
    lo, up = halves(NS[:5])
    assert lo.tolist() == [0, 1, 2] and up.tolist() == [2, 3, 4]
    lo, up = halves(NS)
    assert lo.tolist() == [0, 1, 2] and up.tolist() == [3, 4, 5]
    assert [h.tolist() for h in halves(NS[:3])] == [[0, 1], [1, 2]]
    with pytest.raises(ValueError, match="at least 3"):
        halves(NS[:2])


@pytest.mark.parametrize("c_max", [0.0, 1.0, C_PROOF, 4.0])
def test_allowed_range_from_loglog_slope(c_max):
    V = np.tile(NS**-0.5, (4, 1))
    res = log_or_power(NS, V, c_max)
    ell_l, ell_u = loglog_slope(NS[:3]), loglog_slope(NS[3:])
    assert ell_u < ell_l  # log factors steepen a curve's local slope as n grows
    assert res.ell_lower == pytest.approx(ell_l, rel=1e-12)
    assert res.ell_upper == pytest.approx(ell_u, rel=1e-12)
    assert res.allowed == (pytest.approx(c_max * (ell_u - ell_l), rel=1e-12), 0.0)
    if c_max == 0:
        assert res.allowed == (0.0, 0.0)


@pytest.mark.parametrize("c", [0.0, 2.0, C_PROOF])
def test_exact_curve_changes_by_c_times_the_ell_gap(c):
    """For ``n^e log^c n`` the halves' slopes are exactly ``e + c ell``: the change is
    ``c (ell_u - ell_l)`` and the implied log power is c, whatever e."""
    V = np.tile(3.0 * NS**-0.7 * np.log(NS) ** c, (5, 1))
    res = log_or_power(NS, V, C_PROOF, exponent=-0.7)
    d_ell = loglog_slope(NS[3:]) - loglog_slope(NS[:3])
    assert res.change == pytest.approx(c * d_ell, abs=1e-12)
    assert res.slope_lower == pytest.approx(-0.7 + c * loglog_slope(NS[:3]), abs=1e-12)
    assert res.c_implied == pytest.approx(c, abs=1e-9)
    assert res.log_power_lower == pytest.approx(c, abs=1e-9)
    assert res.log_power_upper == pytest.approx(c, abs=1e-9)
    if c > 0:
        assert res.verdict == "log" and not res.fail and res.c_needed == pytest.approx(c)


def test_c_needed_is_infinite_for_a_flattening():
    V = np.tile(NS**-0.5 + 1e-3, (5, 1))
    res = log_or_power(NS, V, C_PROOF)
    assert res.change > 0 and res.c_needed == math.inf and res.c_implied < 0


def _rates(e, c, R, c_max=C_PROOF):
    """The share of SEEDS synthetic records ``n^e log^c n`` (replicate and per-cell
    lognormal noise, ``tests.factories.synthetic``) with each verdict."""
    verdicts = [
        log_or_power(NS, synthetic(e, c, R, CV, seed, ns=NS), c_max, seed=seed).verdict
        for seed in range(SEEDS)
    ]
    return {v: verdicts.count(v) / SEEDS for v in ("power", "log", "steeper")}


@pytest.mark.parametrize("R", [20, 40])
@pytest.mark.parametrize("c", [0.0, C_PROOF])
def test_log_factors_in_range_are_not_failed(c, R):
    """At c = 0 the change is 0 (the range's upper end: "power" at the one-sided 2.5%);
    at c = c_max it is the lower end ("steeper" at 2.5%); neither verdict may exceed its
    rate by more than the declared tolerance."""
    rates = _rates(-0.5, c, R)
    assert rates["power"] <= TOLERANCE
    assert rates["steeper"] <= TOLERANCE
    assert rates["log"] >= 1 - TOLERANCE


def test_a_pure_power_against_c_max_zero():
    """c_max = 0: the range is the single point 0, so a pure power is tested two-sided,
    each side at 2.5%."""
    rates = _rates(-0.5, 0.0, 20, c_max=0.0)
    assert rates["power"] <= TOLERANCE and rates["steeper"] <= TOLERANCE


@pytest.mark.parametrize(
    "curve",
    [
        pytest.param(lambda n: n**-0.5 + 32000.0**-0.5, id="power-plus-floor-at-32000"),
        pytest.param(lambda n: np.minimum(n, 32000.0) ** -0.5, id="power-then-flat-at-32000"),
    ],
)
def test_a_curve_that_flattens_as_a_power_fails(curve):
    """A floor reached inside the design: failed with power >= 95% at R = 20."""
    fails = 0
    for seed in range(SEEDS):
        rng = np.random.default_rng(seed)
        noise = np.exp(rng.normal(0, CV, (20, 1)) + rng.normal(0, CV, (20, NS.size)))
        fails += log_or_power(NS, curve(NS) * noise, C_PROOF, seed=seed).fail
    assert fails / SEEDS >= 0.95


def _knn_d2(ns, R, cap, seed=0):
    """d^2 (the project's Hellinger, sigma = 1) of k-NN regression on a rough 1-D truth
    (``HolderFunction``, alpha = 0.5: exact smoothness 0.5 down to below the largest n's
    resolution), replicates nested across n (each replicate's first n points), on a grid of
    2,001 test points, for the matched ``k = ceil(n^(2a / (2a + p))) = ceil(n^(1/2))`` and
    for it capped at ``cap`` (``[2, R, len(ns)]``)."""
    from sklearn.neighbors import KNeighborsRegressor

    from simulate.truths.functions import HolderFunction
    from theory.hellinger import hellinger_sq_pointwise

    f0 = HolderFunction(0.5, p=1, n_max=int(ns[-1]), seed=seed)
    Xt = np.linspace(-1, 1, 2001)[:, None]
    ft = f0(Xt)
    out = np.empty((2, R, ns.size))
    for r in range(R):
        rng = np.random.default_rng([seed, r])
        X = rng.uniform(-1, 1, size=(int(ns[-1]), 1))
        y = f0(X) + rng.standard_normal(X.shape[0])
        for j, n in enumerate(ns.astype(int)):
            for i, k in enumerate((math.ceil(n**0.5), min(math.ceil(n**0.5), cap))):
                fit = KNeighborsRegressor(n_neighbors=k).fit(X[:n], y[:n])
                out[i, r, j] = np.mean(hellinger_sq_pointwise(fit.predict(Xt) - ft, 1.0))
    return out


def test_knn_whose_k_stops_growing_fails_and_matched_knn_does_not():
    """k capped at ceil(8000^(1/2)) = 90 from n = 8,000 (the design's middle): its variance
    1/k stops falling and its d^2 flattens -- a power (a floor), failed; the matched k
    contracts as n^(-1/2), a pure power -- not failed (one fixed draw, R = 8)."""
    ns = NS[:5]  # 500 .. 128,000
    matched, capped = _knn_d2(ns, R=8, cap=90)
    res_capped = log_or_power(ns, capped, C_PROOF)
    assert res_capped.fail and res_capped.verdict == "power"
    res_matched = log_or_power(ns, matched, C_PROOF)
    assert not res_matched.fail and res_matched.verdict == "log"
    # the capped member's risk over the matched one's grows as a power over the design
    gap = ratio_slope(ns, capped, matched)
    assert gap.ci_low > 0


def test_ratio_slope_is_the_slope_of_the_ratio_of_means():
    A = synthetic(-0.3, 0.0, 10, CV, 1, ns=NS)
    B = synthetic(-0.5, 0.0, 10, CV, 2, ns=NS)
    res = ratio_slope(NS, A, B, seed=3)
    x = np.log(NS)
    direct = np.polyfit(x, np.log(A.mean(0) / B.mean(0)), 1)[0]
    assert res.diff == pytest.approx(direct, abs=1e-12)
    assert res == paired_slope_diff(NS, A, B, seed=3)
    assert res.ci_low < 0.2 < res.ci_high


def test_one_replicate_shows_nothing_and_bad_input_is_refused():
    res = log_or_power(NS, (NS**-0.5 + 1e-3)[None], C_PROOF)
    assert math.isnan(res.change_se) and res.verdict == "log" and not res.fail
    with pytest.raises(ValueError, match="c_max"):
        log_or_power(NS, np.tile(NS**-0.5, (3, 1)), -1.0)
    with pytest.raises(ValueError, match="positive"):
        log_or_power(NS, np.tile(-(NS**-0.5), (3, 1)), C_PROOF)
