"""Log-log slope fitting with replicate-level uncertainty: the slope and its interval,
paired slope differences, the log allowances and the curvature of a curve.

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
would change (:func:`verify.stats.theorem.theorem_test`,
:func:`verify.stats.attainment.attainment_test`).

**Curvature** (:func:`curvature`): the slope over the top half of the n range (the n whose
log lies in the upper half of the design's log range, at least two) with its interval, and
the paired difference top-half minus global slope; **bending** when that difference's
interval excludes 0.  A bend is stated beside the verdicts; it never changes which slope
decides (the global one, over the range fixed before the run).

The rules deciding on these fits: ``verify.stats.theorem`` (the theorem test),
``verify.stats.attainment`` (the attainment test), ``verify.stats.power`` (the theorem test's
prospective power), ``verify.stats.verdict`` (the outcomes and the family-wise level) and
``verify.reading.controls`` (the budget control's equivalence test).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import stats

__all__ = [
    "SlopeFit",
    "SlopeDiff",
    "MeanDiffs",
    "Curvature",
    "slope_intervals",
    "boot_slopes",
    "diff_intervals",
    "loglog_slope",
    "log_allowance",
    "fit_slope",
    "expected_slope_se",
    "paired_slope_diff",
    "paired_mean_diff",
    "top_half",
    "curvature",
]


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
    resamples, divided by R (read-only, kept: ``verify.stats.replication`` asks for the same
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
    :func:`fit_slope` computes one (``verify.stats.replication`` decides a thousand resamples
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
    if R > 1:  # the batched form verify.stats.replication decides resamples with, for one set
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
    :func:`verify.stats.power.power_check` asks for one per replicate count it tries (up to 10,000
    per entry, ~2.5 s of a full tier's analysis), and every entry of one analysis asks for
    the same ones.  The same float64 as calling scipy each time (a pure function of its
    arguments)."""
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
