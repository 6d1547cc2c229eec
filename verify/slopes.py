"""Log-log slope fitting with replicate-level uncertainty, and the verdict rules.

Data: ``values[r, j]``, the metric of replicate r at sample size ``ns[j]`` (replicates are
nested across n, so each row is one curve).  The fitted quantity is the least-squares
slope of ``log(mean_r values[:, j])`` against ``log ns[j]``, over every n of the design:
the fitted range is fixed before the run.

Confidence interval (``level``, default 95%): the slope is recomputed on ``n_boot``
bootstrap resamples of whole replicates (rows); their standard deviation, multiplied by
``sqrt(R / (R - 1))`` (the bootstrap's plug-in variance is biased low by (R - 1)/R), is the
standard error, and the interval is ``slope +- t_{R-1} * SE``.  A plain percentile interval
from R = 3..10 replicates undercovers badly (there are only 10 distinct resamples of 3); the
t-interval on the bootstrap SE holds its nominal coverage (tested over many seeds).
Differences of slopes (two estimators on the same replicates, two parts of one curve, a
run and its budget-doubled re-run) resample the replicates jointly
(:func:`paired_slope_diff`), so what the two share cancels.  Each one-sided test below is
at level ``(1 - level) / 2`` (2.5%): the interval's end against a bound.

**Log allowances.**  A rate ``n^e log^c n`` has log-log slope ``e + c * ell`` over a design,
``ell = slope(log log n ~ log n)`` (:func:`loglog_slope`; 0.146 over n = 250..4,000, 0.123
over 500..32,000).  Every log factor below is stated as its power c and converted with ell
of the n it is fitted on.  Each verdict also reports ``c_flip``, the log power at which it
would change (:func:`theorem_test`, :func:`attainment_test`).

**Power is a property of the design**, computed before the data from a pilot coefficient
of variation (:func:`expected_slope_se`, the protocol's ``pilot_cv``): it says what a
*non-rejection* means (UNDECIDABLE: the design could not have decided; INCONCLUSIVE: it
could, this run did not); it never withholds a rejection the interval already makes.

**Theorem test** (:func:`theorem_test`), one-sided: the theorems are *upper* bounds,
``d^2 <~ n^e log^c n`` (c per truth: ``verify.design.band_log_power``), so a faster
slope is never a FAIL.

* **FAIL** when the interval lies above the band's top ``e + c ell``: "slower than
  ``n^e log^c n`` over n = a..b" -- a finite-range statement about a bound with an unknown
  constant, never "contradicts the theorem";
* **PASS** when the interval lies below the too-slow control ``e/2`` (rejects it) and not
  above the band -- with ``direction = "faster"`` when it lies wholly below e;
* otherwise **UNDECIDABLE** when the design has no power (:func:`power_check`: the band
  ``[e, e + c ell]`` and the control's ``[e/2, e/2 + c ell]`` are not separated by two
  expected half-widths), else **INCONCLUSIVE** (also with one replicate: no interval).

**The confirming theorem test** (``rule="confirm"``, the protocols from exploratory-v2 and
confirm-v4 on; ``verify.protocol``): confirming an upper bound means rejecting its
violation, so

* **PASS** when the interval's upper end is below the band's top ``e + c ell``
  ("consistent with ``n^e log^c n`` over n = a..b"), with ``direction = "faster"`` when it
  is below e itself; whether e/2 is rejected too is reported beside it
  (``control_slow_rejected``), it no longer decides;
* **FAIL** as above (the lower end above the top);
* otherwise **UNDECIDABLE** where the prospective power -- the probability of a PASS when
  the slope is e, ``Phi(c ell / SE - t)`` at the protocol's pilot cv
  (:func:`confirm_power`) -- is below the protocol's floor, else **INCONCLUSIVE**.

The earlier rule (``rule="reject-e/2"``, every protocol before exploratory-v2) keeps
deciding the records written under it exactly as it did.  ``c_flip`` keeps its meaning
under both rules: the verdict is a FAIL for every band log power below it; ``c_pass``
is the log power from which the confirming test PASSes (``(ci_high - e) / ell``).

**Attainment test** (:func:`attainment_test`): ASVI's slope minus a class-matched
reference's (same replicates, paired), against an allowance stated as a log power,
``allowance = c ell``.  The implied log power ``c_hat = diff / ell`` (with its interval)
says "attains up to log^c_hat n".  c is the protocol's ``attainment_log_power`` (2 in the
shipped protocols, ``verify.protocol``): the reference attains the minimax rate with no
log factor, and Theorem 4.1 with Corollary 6.1 grants
ASVI ``eps_n^2 = n^e log^(2 delta) n`` with delta >= 1 (the paper asks delta > 1); the
further logs of Lemma 6.1's construction (L ~ log n, s ~ N L) are slack of the proof's
network and are not granted.  **FAIL** when the interval's lower end is above the
allowance; **PASS** when its upper end is at most the allowance and the allowance is below
half the reference's exponent (the gap ``|e_ref| / 2 - allowance`` positive: the interval
then rejects an estimator at half the rate as well); where the allowance eats that gap a
PASS could not tell attainment from half the rate and says **UNDECIDABLE**; a
non-rejection is UNDECIDABLE where the design has no power (:func:`attainment_power`: the
gap is not two expected half-widths of the paired difference), else INCONCLUSIVE.

**Curvature** (:func:`curvature`): the slope over the top half of the n range (the n whose
log lies in the upper half of the design's log range, at least two) with its interval, and
the paired difference top-half minus global slope; **bending** when that difference's
interval excludes 0.  A bend is stated beside the verdicts; it never changes which slope
decides (the global one, over the range fixed before the run).

**Budget control** (:func:`budget_state`): an equivalence test with a stated margin m on
the slope's change under twice the budget: **converged** when its interval lies inside
``[-m, m]`` (the verdicts stand), **limited** when it lies wholly outside (the analysis
sets the entry's verdicts INCONCLUSIVE), **undetermined** otherwise (they stand,
labelled).

**Family-wise level** (:func:`holm`): the FAILs that set the exit status are Holm-adjusted
over every test that could set it; a FAIL that does not survive the adjustment is reported
as a FAIL at its own level and counts as INCONCLUSIVE.  The PASS of the whole run needs
every test to pass (an intersection-union test: no adjustment is needed for it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

import numpy as np
from scipy import stats

__all__ = [
    "AttainmentPower",
    "Curvature",
    "Flip",
    "Holm",
    "LogPower",
    "MeanDiffs",
    "Power",
    "SlopeDiff",
    "SlopeFit",
    "TheoremCheck",
    "fit_slope",
    "loglog_slope",
    "log_allowance",
    "power_check",
    "confirm_power",
    "pass_probability",
    "THEOREM_RULES",
    "expected_slope_se",
    "theorem_test",
    "paired_slope_diff",
    "attainment_test",
    "log_power_of",
    "top_half",
    "curvature",
    "attainment_power",
    "budget_state",
    "fail_p_value",
    "holm",
    "theorem_margin",
    "attainment_margin",
    "slope_intervals",
    "diff_intervals",
    "boot_slopes",
    "theorem_verdicts",
    "attainment_verdicts",
]


class Verdict(StrEnum):
    """A test's outcome.  A ``StrEnum``: it equals, prints and serialises as its name, so
    records, JSON reports and comparisons with the plain strings are unchanged."""

    PASS = "PASS"
    FAIL = "FAIL"
    INCONCLUSIVE = "INCONCLUSIVE"  # the design could decide, this run did not
    UNDECIDABLE = "UNDECIDABLE"  # the design cannot decide (no power against e/2)


@dataclass(frozen=True)
class SlopeFit:
    """:func:`fit_slope`'s fit: per n the replicate mean, its SE and the local slopes;
    the slope with its interval and SE, the slope less the band's shift ``c ell``."""

    ns: np.ndarray
    mean: np.ndarray
    se: np.ndarray
    local_slopes: np.ndarray
    slope: float
    ci_low: float
    ci_high: float
    se_slope: float
    corrected_slope: float
    shift: float
    replicates: int
    level: float


@dataclass(frozen=True)
class SlopeDiff:
    """:func:`paired_slope_diff`: slope of A minus slope of B, its bootstrap SE and interval."""

    diff: float
    se: float
    ci_low: float
    ci_high: float

    @property
    def ci(self) -> tuple[float, float]:
        return (self.ci_low, self.ci_high)


@dataclass(frozen=True)
class MeanDiffs:
    """:func:`paired_mean_diff`: per column the mean paired difference and its interval."""

    diff: tuple[float, ...]
    ci_low: tuple[float, ...]
    ci_high: tuple[float, ...]

    @property
    def cis(self) -> tuple[tuple[float, float], ...]:
        """Per column ``(ci_low, ci_high)``."""
        return tuple(zip(self.ci_low, self.ci_high, strict=True))


# the theorem test's rules (module docstring): the earlier one, and the confirming one
THEOREM_RULES = ("reject-e/2", "confirm")


@dataclass(frozen=True)
class Power:
    """:func:`power_check`: whether the design separates the band from the too-slow
    control's (``separable``: the ``gap`` between them exceeds two expected interval
    half-widths, ``half_width``), what would make it separable (``replicates_needed``,
    ``n_needed``; None: nothing within the limits), the prospective ``slope_se`` it
    assumed and the pilot cv that gave it (``pilot_cv``, None when not from a pilot)."""

    separable: bool
    gap: float
    half_width: float
    replicates_needed: int | None
    n_needed: float | None
    slope_se: float
    pilot_cv: float | None = None
    # the confirming rule's power (confirm_power): the probability of a PASS at slope e,
    # and the floor it is held to (None under the earlier rule, whose power is separation)
    probability: float | None = None
    floor: float | None = None


@dataclass(frozen=True)
class AttainmentPower:
    """:func:`attainment_power`: whether the attainment test can tell the allowance from
    half the reference's rate (``separable``), the ``gap`` to it, the expected interval
    ``half_width``, the design's ``ns`` and the pilot cv of the paired difference
    (``pilot_cv_diff``, None when not from a pilot)."""

    separable: bool
    gap: float
    half_width: float
    ns: tuple[float, ...]
    pilot_cv_diff: float | None = None


@dataclass(frozen=True)
class TheoremCheck:
    """:func:`theorem_test`: the verdict, ``direction`` ("slower" on a FAIL, "faster"
    when the interval lies below the exponent), the too-slow control's exponent and
    whether it is rejected, the band ``(e, e + c ell)``, the one-sided FAIL p-value and
    ``c_flip``."""

    verdict: Verdict
    direction: str | None
    slow_exponent: float
    control_slow_rejected: bool
    band: tuple[float, float]
    fail_p: float
    c_flip: float
    c_pass: float = math.nan
    rule: str = "reject-e/2"


@dataclass(frozen=True)
class Flip:
    """:func:`attainment_flip`: a FAIL for every allowance log power below
    ``fail_below``, a PASS (given power) for every one at or above ``pass_from``."""

    fail_below: float
    pass_from: float


@dataclass(frozen=True)
class LogPower:
    """:func:`log_power_of`: the log power ``c_hat`` a slope difference amounts to, and
    its interval."""

    c_hat: float
    ci: tuple[float, float]


@dataclass(frozen=True)
class Curvature:
    """:func:`curvature`: the top half's n (and their indices), its slope with its
    interval, the bend (top-half minus global slope) with its interval, ``bending``."""

    top_ns: tuple[float, ...]
    top_index: tuple[int, ...]
    top_half_slope: float
    top_half_ci: tuple[float, float]
    bend: float
    bend_ci: tuple[float, float]
    bending: bool


@dataclass(frozen=True)
class Holm:
    """:func:`holm`: the adjusted p-values and the rejections, in the input's order."""

    adjusted: tuple[float, ...]
    rejected: tuple[bool, ...]


def _ls_slope(x, Y):
    """Least-squares slopes of each row of Y (..., k) on x (k,): ``Y @ xc / (xc @ xc)``
    with ``xc`` the centred x (Y's own mean drops out: ``xc`` sums to zero; to float
    rounding, the same as centring Y first, at a third of the passes over Y), summed per
    row so that a row's slope is the same bits in a batch of any size."""
    xc = x - x.mean()
    Y = np.asarray(Y, dtype=float)
    acc = Y[..., 0] * xc[0]
    for j in range(1, xc.size):  # a fixed order: a row's slope is the same bits in any batch
        acc = acc + Y[..., j] * xc[j]
    return acc / (xc @ xc)


def _boot_se(boot: np.ndarray, R: int):
    """The bootstrap SE of a statistic over R resampled replicates (the last axis of
    ``boot``: one SE per leading index), inflated by ``sqrt(R / (R - 1))`` (module
    docstring)."""
    return boot.std(axis=-1, ddof=1) * np.sqrt(R / (R - 1))


def _resamples(R: int, n_boot: int, seed: int) -> np.ndarray:
    """``[n_boot, R]`` indices of whole replicates drawn with replacement."""
    return np.random.default_rng(seed).integers(0, R, size=(n_boot, R))


@lru_cache(maxsize=256)
def _resample_counts(R: int, n_boot: int, seed: int) -> np.ndarray:
    """``[n_boot, R]``: how often each replicate is drawn in each of :func:`_resamples`'
    resamples, divided by R (read-only, kept: ``verify.replication`` asks for the same
    ones a thousand times per verdict)."""
    idx = _resamples(R, n_boot, seed)
    counts = np.zeros((n_boot, R))
    np.add.at(counts, (np.arange(n_boot)[:, None], idx), 1.0)
    counts /= R
    counts.setflags(write=False)
    return counts


def _boot_means(V: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """``[n_boot, k]``: the replicate mean of V ``[R, k]`` on each of :func:`_resamples`'
    resamples, as one product with the resamples' counts (the same means as indexing
    ``V[idx].mean(1)``, to float rounding, at a fraction of the cost)."""
    return _resample_counts(V.shape[0], n_boot, seed) @ V


def slope_intervals(ns, Vb, level: float = 0.95, n_boot: int = 2000, seed: int = 0):
    """``(slope, lo, hi, se)``, each ``[B]``: :func:`fit_slope`'s slope and interval for
    each of a batch of replicate sets ``Vb`` ``[B, R, k]`` (R >= 2), computed as
    :func:`fit_slope` computes one (``verify.replication`` decides a thousand resamples
    at once)."""
    x = np.log(np.asarray(ns, dtype=float))
    Vb = np.asarray(Vb, dtype=float)
    R = Vb.shape[1]
    slope = _ls_slope(x, np.log(Vb.mean(1)))
    se = _boot_se(boot_slopes(ns, Vb, n_boot, seed), R)
    h = _t_quantile(level, R - 1) * se
    return slope, slope - h, slope + h, se


def boot_slopes(ns, Vb, n_boot: int = 2000, seed: int = 0) -> np.ndarray:
    """``[B, n_boot]``: the slope of each bootstrap resample of each replicate set of
    ``Vb`` ``[B, R, k]`` (the resamples :func:`fit_slope` draws), for
    :func:`diff_intervals` (``b_boot``: one side's, computed once for several
    differences)."""
    x = np.log(np.asarray(ns, dtype=float))
    Vb = np.asarray(Vb, dtype=float)
    return _ls_slope(x, np.log(np.matmul(_resample_counts(Vb.shape[1], n_boot, seed), Vb)))


def diff_intervals(
    ns, Ab, Bb, level: float = 0.95, n_boot: int = 2000, seed: int = 0, b_boot=None
):  # fmt: skip
    """``(diff, lo, hi, se)``, each ``[B]``: :func:`paired_slope_diff` for each of a batch
    of paired replicate sets ``Ab``, ``Bb`` ``[B, R, k]`` (R >= 2); ``b_boot``: Bb's
    :func:`boot_slopes`, where already computed."""
    x = np.log(np.asarray(ns, dtype=float))
    Ab, Bb = np.asarray(Ab, dtype=float), np.asarray(Bb, dtype=float)
    R = Ab.shape[1]
    diff = _ls_slope(x, np.log(Ab.mean(1))) - _ls_slope(x, np.log(Bb.mean(1)))
    if b_boot is None:
        b_boot = boot_slopes(ns, Bb, n_boot, seed)
    se = _boot_se(boot_slopes(ns, Ab, n_boot, seed) - b_boot, R)
    h = _t_quantile(level, R - 1) * se
    return diff, diff - h, diff + h, se


def theorem_verdicts(lo, hi, predicted: float, top, powered: bool, rule: str) -> np.ndarray:
    """The theorem test's verdict (module docstring) for arrays of interval ends ``lo``,
    ``hi`` against the band's ``top`` (a number or one per interval): what
    :func:`theorem_test` decides, one interval at a time, and ``verify.replication``, a
    thousand at once.  A non-finite interval is INCONCLUSIVE."""
    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    top = np.broadcast_to(np.asarray(top, dtype=float), lo.shape)
    confirms = hi < top if rule == "confirm" else hi < 0.5 * predicted
    undecided = Verdict.INCONCLUSIVE if powered else Verdict.UNDECIDABLE
    out = np.where(lo > top, Verdict.FAIL, np.where(confirms, Verdict.PASS, undecided))
    return np.where(np.isfinite(lo) & np.isfinite(hi), out, Verdict.INCONCLUSIVE).astype(object)


def attainment_verdicts(lo, hi, allowance: float, powered: bool, gap: float) -> np.ndarray:
    """The attainment test's verdict (module docstring) for arrays of interval ends: what
    :func:`attainment_test` decides, one at a time, and ``verify.replication``, at once."""
    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    passing = Verdict.PASS if gap > 0 else Verdict.UNDECIDABLE
    undecided = Verdict.INCONCLUSIVE if powered else Verdict.UNDECIDABLE
    out = np.where(lo > allowance, Verdict.FAIL, np.where(hi <= allowance, passing, undecided))
    return np.where(np.isfinite(lo) & np.isfinite(hi), out, Verdict.INCONCLUSIVE).astype(object)


def loglog_slope(ns) -> float:
    """``slope(log log n ~ log n)`` over the design ``ns``: the log-log slope that one
    power of ``log n`` adds."""
    x = np.log(np.asarray(ns, dtype=float))
    if x.size < 2 or np.any(x <= 0):
        raise ValueError(f"need at least two sample sizes > 1, got {ns}")
    return float(_ls_slope(x, np.log(x)))


def log_allowance(ns, c: float) -> float:
    """The slope allowance of ``log^c n`` over ``ns``: ``c * loglog_slope(ns)``."""
    return float(c) * loglog_slope(ns)


def _check_values(ns, V, min_points):
    if V.ndim != 2 or V.shape[1] != ns.size:
        raise ValueError(f"values must be [replicates, {ns.size}], got {V.shape}")
    if ns.size < min_points:
        raise ValueError(f"need at least {min_points} sample sizes, got {ns.size}")
    if np.any(ns <= 1) or np.any(np.diff(ns) <= 0):
        raise ValueError("sample sizes must be > 1 and increasing")
    if not np.all(np.isfinite(V)) or np.any(V <= 0):
        raise ValueError("values must be finite and positive (log-log fit)")


def fit_slope(
    ns,
    values,
    log_power: float = 0.0,
    level: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
    min_points: int = 3,
) -> SlopeFit:
    """Fit the log-log slope of the replicate mean (module docstring).  ``min_points``: 2
    for a local (top-half) slope."""
    ns = np.asarray(ns, dtype=float)
    V = np.asarray(values, dtype=float)
    _check_values(ns, V, min_points)
    R = V.shape[0]
    x = np.log(ns)
    mean = V.mean(0)
    y = np.log(mean)
    slope = float(_ls_slope(x, y))
    shift = float(log_power * loglog_slope(ns))
    se = V.std(0, ddof=1) / np.sqrt(R) if R > 1 else np.full(ns.size, np.nan)
    if R > 1:  # the batched form verify.replication decides resamples with, for one set
        slope, lo, hi, se_slope = (float(v[0]) for v in slope_intervals(ns, V[None], level,
                                                                        n_boot, seed))  # fmt: skip
    else:
        se_slope, lo, hi = float("nan"), float("nan"), float("nan")
    return SlopeFit(
        ns=ns,
        mean=mean,
        se=se,
        local_slopes=np.diff(y) / np.diff(x),
        slope=slope,
        ci_low=float(lo),
        ci_high=float(hi),
        se_slope=se_slope,
        corrected_slope=slope - shift,
        shift=shift,
        replicates=R,
        level=level,
    )


@lru_cache(maxsize=65536)
def _t_quantile(level: float, df: int):
    """The two-sided ``level`` quantile of Student's t with ``df`` degrees of freedom, kept:
    :func:`power_check` asks for one per replicate count it tries (up to 10,000 per entry,
    ~2.5 s of a full tier's analysis), and every entry of one analysis asks for the same
    ones.  The same float64 as calling scipy each time (a pure function of its arguments)."""
    return stats.t.ppf(0.5 + level / 2, df)


def _half_width(se: float, R: int, level: float) -> float:
    return float(_t_quantile(level, R - 1) * se) if R > 1 else math.inf


def expected_slope_se(ns, replicates: int, cv: float) -> float:
    """The slope SE a design should give when each cell's replicate mean has relative
    standard error ``cv / sqrt(R)`` independently across n: ``cv / sqrt(R Sxx)``, ``Sxx``
    the spread of log n.  For the power check before training (``cv`` from earlier
    records or a pilot); a shared per-replicate level cancels in the slope, so this is
    conservative for nested data."""
    x = np.log(np.asarray(ns, dtype=float))
    sxx = float(((x - x.mean()) ** 2).sum())
    return float(cv) / math.sqrt(max(int(replicates), 1) * sxx)


def power_check(
    ns, predicted: float, log_power: float, slope_se: float, replicates: int,
    level: float = 0.95, n_limit: float = 1e12, r_limit: int = 10_000,
) -> Power:  # fmt: skip
    """Can a slope interval of this design tell the predicted band ``[e, e + c ell]`` from
    the too-slow control's ``[e/2, e/2 + c ell]``?  Separable when the gap between them,
    ``|e|/2 - c ell``, exceeds two interval half-widths (``t_{R-1} * slope_se`` each): then
    no interval meets both.  Also what would make it separable: the replicates at these
    n (the SE shrinking like ``1/sqrt(R)``; None if no R up to ``r_limit`` does: the gap
    is not positive) and the largest n of a geometric grid of the same length from
    ``ns[0]`` (the SE shrinking with the spread of log n; None if none up to ``n_limit``)."""
    ns = np.asarray(ns, dtype=float)
    e = float(predicted)
    gap = abs(e) / 2 - log_power * loglog_slope(ns)
    h = _half_width(slope_se, replicates, level) if math.isfinite(slope_se) else math.inf
    separable = bool(gap > 2 * h)
    r_needed = None
    if gap > 0 and math.isfinite(slope_se) and replicates > 1:
        for R in range(2, r_limit + 1):
            if gap > 2 * _half_width(slope_se * math.sqrt(replicates / R), R, level):
                r_needed = R
                break
    n_needed = None
    sd0 = float(np.log(ns).std())
    for top in np.geomspace(ns[-1], n_limit, 200):
        grid = np.geomspace(ns[0], top, ns.size)
        g = abs(e) / 2 - log_power * loglog_slope(grid)
        se = slope_se * sd0 / float(np.log(grid).std()) if math.isfinite(slope_se) else 0.0
        if g > 2 * _half_width(se, replicates, level):
            n_needed = float(top)
            break
    return Power(separable, gap, h, r_needed, n_needed, float(slope_se))


def pass_probability(margin: float, slope_se: float, replicates: int, level: float = 0.95) -> float:
    """The probability that a ``level`` interval's upper end ``slope + t_{R-1} SE`` lies
    below a bound ``margin`` above the true slope, the slope estimate normal about it with
    standard error ``slope_se``: ``Phi(margin / SE - t_{R-1})`` (the SE taken as known: a
    prospective figure, like every power here).  0 without an interval (one replicate)."""
    if replicates < 2 or not (math.isfinite(slope_se) and slope_se > 0):
        return 0.0
    return float(stats.norm.cdf(margin / slope_se - _t_quantile(level, replicates - 1)))


def confirm_power(
    ns, predicted: float, log_power: float, slope_se: float, replicates: int,
    level: float = 0.95, floor: float = 0.9, n_limit: float = 1e12, r_limit: int = 10_000,
) -> Power:  # fmt: skip
    """The confirming theorem test's prospective power (module docstring): the probability
    of a PASS -- the interval's upper end below the band's top ``e + c ell`` -- when the
    slope is e (:func:`pass_probability` with the margin ``gap = c ell``); powered when it
    is at least ``floor``.  Also what would make it so: the replicates at these n (the SE
    shrinking like ``1/sqrt(R)``; None if none up to ``r_limit``) and the largest n of a
    geometric grid of the same length from ``ns[0]`` (the SE shrinking with the spread of
    log n, the band's top moving with ell; None if none up to ``n_limit``).  A band with no
    log factor (c = 0) has no margin: an estimator exactly at e passes with probability
    ``1 - level`` / 2 at most, and no design reaches the floor."""
    ns = np.asarray(ns, dtype=float)
    gap = float(log_power) * loglog_slope(ns)
    h = _half_width(slope_se, replicates, level) if math.isfinite(slope_se) else math.inf
    prob = pass_probability(gap, slope_se, replicates, level)
    r_needed = None
    if gap > 0 and math.isfinite(slope_se) and replicates > 1:
        for R in range(2, r_limit + 1):
            if pass_probability(gap, slope_se * math.sqrt(replicates / R), R, level) >= floor:
                r_needed = R
                break
    n_needed = None
    if gap > 0 and math.isfinite(slope_se):
        sd0 = float(np.log(ns).std())
        for top in np.geomspace(ns[-1], n_limit, 200):
            grid = np.geomspace(ns[0], top, ns.size)
            se = slope_se * sd0 / float(np.log(grid).std())
            g = float(log_power) * loglog_slope(grid)
            if pass_probability(g, se, replicates, level) >= floor:
                n_needed = float(top)
                break
    return Power(
        separable=bool(prob >= floor), gap=gap, half_width=h, replicates_needed=r_needed,
        n_needed=n_needed, slope_se=float(slope_se), probability=prob, floor=float(floor),
    )  # fmt: skip


def fail_p_value(estimate: float, bound: float, se: float, replicates: int) -> float:
    """One-sided p-value of ``H0: theta <= bound`` for an estimate with standard error
    ``se`` over ``replicates`` (t with R - 1 degrees of freedom): small when the estimate
    lies far above the bound.  ``p < (1 - level) / 2`` exactly when the ``level``
    interval's lower end is above the bound, so it agrees with the interval rules."""
    if replicates < 2 or not (math.isfinite(se) and se > 0):
        return math.nan
    return float(stats.t.sf((estimate - bound) / se, replicates - 1))


def theorem_test(
    fit: SlopeFit, predicted: float, powered: bool = True, rule: str = "reject-e/2"
) -> TheoremCheck:
    """The one-sided theorem test of the module docstring under ``rule`` (``"reject-e/2"``,
    the earlier protocols', or ``"confirm"``).  ``fit``: the slope with its band shift
    (``fit.shift = c ell``); ``powered``: the *prospective* power check's answer
    (:func:`power_check` or :func:`confirm_power` on :func:`expected_slope_se`), which
    only says what a non-rejection means.  ``fail_p``: one-sided p of "the slope is within
    the band" (:func:`fail_p_value`); ``c_flip``: the band's log power at which the FAIL
    would flip (the verdict is a FAIL for every c below it); ``c_pass``: the one from
    which the confirming rule PASSes."""
    if rule not in THEOREM_RULES:
        raise ValueError(f"theorem rule must be one of {THEOREM_RULES}, got {rule!r}")
    slow = 0.5 * predicted
    top = predicted + fit.shift
    ell = loglog_slope(fit.ns)
    band = (predicted, top)
    if not (np.isfinite(fit.ci_low) and np.isfinite(fit.ci_high)):
        return TheoremCheck(Verdict.INCONCLUSIVE, None, slow, False, band, math.nan, math.nan,
                            rule=rule)  # fmt: skip
    slow_rej = bool(fit.ci_high < slow)
    direction = "faster" if fit.ci_high < predicted else None
    v = Verdict(theorem_verdicts([fit.ci_low], [fit.ci_high], predicted, top, powered, rule)[0])
    if v == Verdict.FAIL:
        direction = "slower"
    return TheoremCheck(
        verdict=v,
        direction=direction,
        slow_exponent=slow,
        control_slow_rejected=slow_rej,
        band=band,
        fail_p=fail_p_value(fit.slope, top, fit.se_slope, fit.replicates),
        c_flip=(fit.ci_low - predicted) / ell,
        c_pass=(fit.ci_high - predicted) / ell,
        rule=rule,
    )


def _margin(verdict: Verdict, pass_m: float, fail_m: float) -> float:
    if verdict == Verdict.PASS:
        return pass_m
    if verdict == Verdict.FAIL:
        return fail_m
    return max(pass_m, fail_m)


def theorem_margin(fit: SlopeFit, verdict: Verdict, band: tuple, rule: str) -> float:
    """The theorem verdict's margin to its threshold in SE (``verify.replication``): the
    deciding interval end's distance from the bound it is compared with over the slope's
    SE -- a PASS's ``(top - ci_high) / SE`` under the confirming rule (the smaller of
    ``(e/2 - ci_high)`` and ``(top - ci_low)`` under the earlier one), a FAIL's ``(ci_low
    - top) / SE``; for a verdict that decides nothing the nearer of the two (negative).
    ``band``: ``(e, top)``; ``rule``: the one the verdict was decided under."""
    se, top = fit.se_slope, band[1]
    if not (math.isfinite(se) and se > 0):
        return math.nan
    fail_m = (fit.ci_low - top) / se
    if rule == "confirm":
        pass_m = (top - fit.ci_high) / se
    else:
        pass_m = min(0.5 * band[0] - fit.ci_high, top - fit.ci_low) / se
    return float(_margin(verdict, pass_m, fail_m))


def attainment_margin(
    diff: SlopeDiff, allowance: float, verdict: Verdict, control: SlopeDiff | None = None,
    gap: float = math.inf,
) -> float:  # fmt: skip
    """The attainment verdict's margin to its threshold in SE (:func:`theorem_margin`'s
    sense).  A PASS needs its upper end at most the allowance *and* its negative control's
    (``control``: SVI at the smallest width minus the reference) lower end above it: its
    margin is the smaller of ``(allowance - ci_high) / SE`` and the control's ``(ci_low -
    allowance) / SE``; a FAIL's is ``(ci_low - allowance) / SE``.  A verdict that decides
    nothing: where the interval is within the allowance but the PASS was withheld, the
    control's margin (negative: what it lacks to FAIL), or NaN where the allowance eats
    the gap to half the reference's rate (``gap <= 0``: no interval can PASS); else the
    nearer of the two (negative)."""
    if not (math.isfinite(diff.se) and diff.se > 0):
        return math.nan
    pass_m = (allowance - diff.ci_high) / diff.se
    fail_m = (diff.ci_low - allowance) / diff.se
    ctrl_m = math.inf
    if control is not None and math.isfinite(control.se) and control.se > 0:
        ctrl_m = (control.ci_low - allowance) / control.se
    if verdict == Verdict.PASS:
        return float(min(pass_m, ctrl_m))
    if verdict == Verdict.FAIL:
        return float(fail_m)
    if pass_m >= 0:  # within the allowance, withheld
        return math.nan if gap <= 0 else float(ctrl_m)
    return float(max(pass_m, fail_m))


def paired_slope_diff(
    ns, A, B, level: float = 0.95, n_boot: int = 2000, seed: int = 0
) -> SlopeDiff:
    """Slope of A minus slope of B (each the log-log slope of the replicate mean, as in
    :func:`fit_slope`), with rows of A and B the same replicates.  The interval resamples
    whole replicates jointly and is ``diff +- t_{R-1} SE`` with the bootstrap SE inflated by
    ``sqrt(R / (R - 1))`` (as :func:`fit_slope`; coverage tested).  Two sample sizes are
    enough (a local slope)."""
    ns = np.asarray(ns, dtype=float)
    A, B = np.asarray(A, dtype=float), np.asarray(B, dtype=float)
    if A.shape != B.shape or A.ndim != 2 or A.shape[1] != ns.size:
        raise ValueError(f"A and B must both be [replicates, {ns.size}], got {A.shape}, {B.shape}")
    for V in (A, B):
        _check_values(ns, V, 2)
    x = np.log(ns)
    diff = float(_ls_slope(x, np.log(A.mean(0))) - _ls_slope(x, np.log(B.mean(0))))
    R = A.shape[0]
    if R < 2:
        return SlopeDiff(diff, math.nan, math.nan, math.nan)
    diff, lo, hi, se = (float(v[0]) for v in diff_intervals(ns, A[None], B[None], level,
                                                             n_boot, seed))  # fmt: skip
    return SlopeDiff(diff, se, lo, hi)


def paired_mean_diff(A, B, level: float = 0.95) -> MeanDiffs:
    """Per column, the mean over replicates of ``A - B`` (rows the same replicates) with
    the t interval ``mean +- t_{R-1} sd / sqrt(R)``: ``diff``, ``ci_low``, ``ci_high``
    (lists; NaN intervals for a single replicate)."""
    A, B = np.asarray(A, dtype=float), np.asarray(B, dtype=float)
    if A.shape != B.shape or A.ndim != 2:
        raise ValueError(f"A and B must be [replicates, columns] alike, got {A.shape}, {B.shape}")
    D = A - B
    R = D.shape[0]
    mean = D.mean(0)
    se = D.std(0, ddof=1) / math.sqrt(R) if R > 1 else np.full(D.shape[1], math.nan)
    h = np.array([_half_width(s, R, level) if R > 1 else math.nan for s in se])
    return MeanDiffs(tuple(mean.tolist()), tuple((mean - h).tolist()), tuple((mean + h).tolist()))


def attainment_power(
    ns, reference_exponent: float, allowance: float, diff_se: float, replicates: int,
    level: float = 0.95,
) -> AttainmentPower:  # fmt: skip
    """Can the attainment test tell an estimator within the allowance from one at half the
    reference's rate (a slope difference of ``|e_ref| / 2``)?  ``gap = |e_ref| / 2 -
    allowance``: where it is not positive the allowance eats the half-rate alternative and
    no interval can tell them apart (a PASS is UNDECIDABLE at every replicate count);
    ``separable`` when the gap exceeds two expected half-widths ``t_{R-1} diff_se`` of the
    paired difference's interval (``diff_se``: its prospective SE, :func:`expected_slope_se`
    with the protocol's pilot cv of the paired difference)."""
    gap = abs(float(reference_exponent)) / 2 - float(allowance)
    h = _half_width(diff_se, replicates, level) if math.isfinite(diff_se) else math.inf
    return AttainmentPower(bool(gap > 2 * h), gap, h, tuple(map(float, ns)))


def attainment_test(
    diff: SlopeDiff, allowance: float, powered: bool = True, gap: float = math.inf
) -> Verdict:
    """PASS / FAIL / INCONCLUSIVE / UNDECIDABLE for a :func:`paired_slope_diff` against
    ``allowance`` (slope units, :func:`log_allowance`); ``powered`` and ``gap``: the
    prospective :func:`attainment_power` (module docstring).  A FAIL stands whatever the
    power; a PASS stands where the gap to half the reference's rate is positive (its
    interval then rejects that alternative too) and is UNDECIDABLE where the allowance eats
    it; a non-rejection is UNDECIDABLE without power, else INCONCLUSIVE."""
    return Verdict(attainment_verdicts([diff.ci_low], [diff.ci_high], allowance, powered, gap)[0])


def attainment_flip(diff: SlopeDiff, ns) -> Flip:
    """The allowance's log powers at which the attainment verdict changes: a FAIL for
    every ``c`` below ``fail_below = ci_low / ell``, a PASS (given power) for every ``c``
    at or above ``pass_from = ci_high / ell``."""
    ell = loglog_slope(ns)
    return Flip(diff.ci_low / ell, diff.ci_high / ell)


def budget_state(shift: SlopeDiff | None, margin: float) -> str | None:
    """The budget control as an equivalence test (module docstring): ``"converged"`` when
    the slope change's interval lies inside ``[-margin, margin]``, ``"limited"`` when it
    lies wholly outside, ``"undetermined"`` otherwise; None without a control."""
    if shift is None:
        return None
    lo, hi = shift.ci_low, shift.ci_high
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "undetermined"
    if -margin <= lo and hi <= margin:
        return "converged"
    if lo > margin or hi < -margin:
        return "limited"
    return "undetermined"


def holm(pvalues, alpha: float) -> Holm:
    """Holm's step-down procedure over ``pvalues`` (NaN: not a test, never rejected) at
    family-wise level ``alpha``: ``adjusted`` p-values (``max_{j <= i} min(1, (m - j + 1)
    p_(j))`` in sorted order) and ``rejected`` (``adjusted <= alpha``), in the input's
    order."""
    p = np.asarray(pvalues, dtype=float)
    ok = np.flatnonzero(np.isfinite(p))
    adj = np.full(p.shape, math.nan)
    m = ok.size
    if m:
        order = ok[np.argsort(p[ok], kind="stable")]
        running = 0.0
        for i, k in enumerate(order):
            running = max(running, min(1.0, (m - i) * p[k]))
            adj[k] = running
    rejected = np.where(np.isfinite(adj), adj <= alpha, False)
    return Holm(tuple(adj.tolist()), tuple(bool(x) for x in rejected))


def log_power_of(diff: SlopeDiff, ns) -> LogPower:
    """The log power a slope difference amounts to over ``ns``: ``c_hat = diff / ell`` and
    its interval (:func:`loglog_slope`)."""
    ell = loglog_slope(ns)
    return LogPower(diff.diff / ell, (diff.ci_low / ell, diff.ci_high / ell))


def top_half(ns) -> np.ndarray:
    """Indices of the n in the top half of the design's log range (at least the last two)."""
    x = np.log(np.asarray(ns, dtype=float))
    idx = np.flatnonzero(x >= (x[0] + x[-1]) / 2)
    return idx if idx.size >= 2 else np.arange(x.size - 2, x.size)


def curvature(ns, V, level: float = 0.95, seed: int = 0) -> Curvature:
    """The top-half slope with its interval, the paired difference top-half minus global
    slope with its interval, and ``bending`` (that interval excludes 0)."""
    ns = np.asarray(ns, dtype=float)
    V = np.asarray(V, dtype=float)
    top = top_half(ns)
    fit = fit_slope(ns[top], V[:, top], level=level, seed=seed, min_points=2)
    R = V.shape[0]
    x = np.log(ns)
    glob = float(_ls_slope(x, np.log(V.mean(0))))
    diff = fit.slope - glob
    lo = hi = math.nan
    if R > 1:
        M = np.log(_boot_means(V, 2000, seed))
        se = float(_boot_se(_ls_slope(x[top], M[:, top]) - _ls_slope(x, M), R))
        h = _half_width(se, R, level)
        lo, hi = diff - h, diff + h
    return Curvature(
        top_ns=tuple(ns[top].tolist()),
        top_index=tuple(top.tolist()),
        top_half_slope=fit.slope,
        top_half_ci=(fit.ci_low, fit.ci_high),
        bend=diff,
        bend_ci=(lo, hi),
        bending=bool(np.isfinite(lo) and (lo > 0 or hi < 0)),
    )
