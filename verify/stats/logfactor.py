"""Log factor or power: does a curve's local slope change more over the design than any
``n^e log^c n`` with ``0 <= c <= c_max`` can make it change?

Data as in :mod:`verify.stats.slopes`: ``V[r, j]``, the metric of replicate r at ``ns[j]``; a
slope is the least-squares slope of ``log(mean_r V[:, j])`` on ``log ns[j]``.

**Halves** (:func:`halves`).  The design's n, in increasing order (so in order of log n),
split by index: the lower half is the first ``ceil(k / 2)`` n, the upper half the last
``ceil(k / 2)``.  With an odd count k the middle n belongs to both halves (shared: neither
half is favoured, and each keeps as many points as the other); k >= 3, so each half has at
least two n.  On a geometric grid (every design the sweeps run) this is the split by log n
at the middle of the log range.

**The change** of the local slope, ``slope(upper) - slope(lower)``, with its interval by
the machinery of :mod:`verify.stats.slopes`: both halves' slopes recomputed on the same
bootstrap resamples of whole replicates (so what a replicate shares across n cancels), the
SE the resamples' standard deviation inflated by ``sqrt(R / (R - 1))``, the interval
``change +- t_{R-1} SE``.

**The log range.**  For ``n^e log^c n`` the LS slope over a set S of n is exactly ``e + c
ell(S)``, ``ell = loglog_slope(S)`` (log log n is a function of log n; its LS slope is
ell).  So the change such a curve makes is ``c (ell_upper - ell_lower)``, whatever e; since
log log n is concave in log n, ``ell_upper < ell_lower`` and the change is <= 0: a log
factor *steepens* a curve's local slope as n grows.  Over ``c in [0, c_max]`` the allowed
changes are ``[c_max (ell_u - ell_l), 0]``.

**Verdict** (two one-sided tests, each at ``(1 - level) / 2``, 2.5% at the default):

* ``"power"`` -- the interval's lower end is above 0: the curve flattens as n grows, which
  no single ``n^e log^c n`` with c >= 0 can do: a power (a floor, a rate that stops) and not
  a log factor.  This is the FAIL of the log-factor explanation (``fail``); its one-sided
  p-value is ``p_power``.  It is not a FAIL of the theorem's bound: that bound is a sum of
  terms with different powers of n, weighted by constants the theorem leaves open, and can
  itself flatten over a finite design (``theory.proved_slopes``).
* ``"steeper"`` -- the interval's upper end is below ``c_max (ell_u - ell_l)``: the curve
  steepens beyond ``log^c_max``.  Not a failure of a bound (the risk falls faster than the
  band allows), but not explained by log factors in range either; said, not failed.
* ``"log"`` -- otherwise: not rejected; the change is consistent with log factors of power
  in ``[0, c_max]``, which is not the same as shown to be one.

The null of the explanation, ``change <= 0``, does not depend on c_max: c_max only decides
``"steeper"``.  At a pure power (c = 0) the change is 0, the upper end of the range, and
``"power"`` is reported with probability 2.5%; at ``c = c_max`` the change is the lower end
and ``"steeper"`` with probability 2.5% (``tests/verify/test_logfactor.py``).

``c_implied = change / (ell_u - ell_l)``: the log power whose change equals the measured
one (negative for a flattening), with the interval its ends map to; ``c_needed``: the
smallest c >= 0 that explains the point estimate (``c_implied`` where the change is <= 0,
``inf`` where it is positive: no c >= 0 explains a flattening).  Given the exponent e
(``exponent``), each half's local log power ``(slope_half - e) / ell_half``.

:func:`ratio_slope`: the slope of the estimator-to-reference risk ratio, paired over
replicates (:func:`verify.stats.slopes.paired_slope_diff`, which is exactly that).
:func:`records_log_or_power`: both per truth of a sweep's records.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from verify.stats.slopes import (
    SlopeDiff,
    _boot_means,
    _boot_se,
    _check_values,
    _half_width,
    _ls_slope,
    loglog_slope,
    paired_slope_diff,
)

__all__ = [
    "LogOrPower",
    "TruthLogOrPower",
    "halves",
    "log_or_power",
    "ratio_slope",
    "records_log_or_power",
]

VERDICTS = ("power", "log", "steeper")


@dataclass(frozen=True)
class LogOrPower:
    """:func:`log_or_power`: the halves' n and slopes, the change of the local slope with
    its SE, interval and one-sided p-value (``p_power``: of ``change <= 0``), each half's
    ell, the allowed range ``[c_max (ell_u - ell_l), 0]``, the verdict (``"power"``,
    ``"log"`` or ``"steeper"``) and ``fail`` (``"power"``), the implied log power with its
    interval and ``c_needed``; each half's local log power given ``exponent`` (else None)."""

    lower_ns: tuple[float, ...]
    upper_ns: tuple[float, ...]
    slope_lower: float
    slope_upper: float
    change: float
    change_se: float
    change_ci: tuple[float, float]
    p_power: float
    ell_lower: float
    ell_upper: float
    c_max: float
    allowed: tuple[float, float]
    verdict: str
    fail: bool
    c_implied: float
    c_implied_ci: tuple[float, float]
    c_needed: float
    exponent: float | None
    log_power_lower: float | None
    log_power_upper: float | None
    replicates: int
    level: float

    @property
    def message(self) -> str:
        """The verdict in one line."""
        lo, hi = self.change_ci
        head = (f"local slope {self.slope_lower:+.3f} -> {self.slope_upper:+.3f}: change"
                f" {self.change:+.3f} [{lo:+.3f}, {hi:+.3f}], log^c range"
                f" [{self.allowed[0]:+.3f}, 0] (c <= {self.c_max:.2f})")  # fmt: skip
        tail = {
            "power": "flattens, which no n^e log^c n with c >= 0 can: a power (FAIL)",
            "steeper": f"steepens beyond log^{self.c_max:.2f} n",
            "log": "not shown beyond log factors (no rejection)",
        }[self.verdict]
        return f"{head}: {tail}"


@dataclass(frozen=True)
class TruthLogOrPower:
    """:func:`records_log_or_power`, one truth: its key and n, the estimator and metric,
    :func:`log_or_power` per c_max (in the order asked) and the estimator-to-reference
    ratio slope (None where the records hold no reference)."""

    truth: str
    ns: tuple[int, ...]
    estimator: str
    metric: str
    tests: tuple[LogOrPower, ...]
    ratio: SlopeDiff | None


def halves(ns) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the lower and the upper half of the design's n (module docstring: the
    first and the last ``ceil(k / 2)``, the middle n in both for an odd k; k >= 3)."""
    k = np.asarray(ns).size
    if k < 3:
        raise ValueError(f"need at least 3 sample sizes to split into halves, got {k}")
    h = (k + 1) // 2
    return np.arange(h), np.arange(k - h, k)


def _verdict(lo: float, hi: float, low_end: float) -> str:
    """``"power"`` where the interval lies above 0, ``"steeper"`` where it lies below the
    range's lower end ``low_end``, else ``"log"`` (module docstring)."""
    if lo > 0:
        return "power"
    if hi < low_end:
        return "steeper"
    return "log"


def _change(x, V, lo_idx, up_idx, n_boot, seed):
    """``(slope_lower, slope_upper, change_se)``: the halves' slopes of the replicate mean
    and the bootstrap SE of their difference (the same resamples for both halves)."""
    y = np.log(V.mean(0))
    s_lo = float(_ls_slope(x[lo_idx], y[lo_idx]))
    s_up = float(_ls_slope(x[up_idx], y[up_idx]))
    R = V.shape[0]
    if R < 2:
        return s_lo, s_up, math.nan
    M = np.log(_boot_means(V, n_boot, seed))
    boot = _ls_slope(x[up_idx], M[:, up_idx]) - _ls_slope(x[lo_idx], M[:, lo_idx])
    return s_lo, s_up, float(_boot_se(boot, R))


def log_or_power(
    ns,
    V,
    c_max: float,
    level: float = 0.95,
    seed: int = 0,
    n_boot: int = 2000,
    exponent: float | None = None,
) -> LogOrPower:
    """The change of the local slope over the design against the changes ``n^e log^c n``
    can make for ``0 <= c <= c_max``, and the verdict (module docstring).  ``V``:
    ``[replicates, len(ns)]``, positive; R >= 2 for an interval (R = 1: NaN interval,
    verdict ``"log"``: nothing is shown)."""
    ns = np.asarray(ns, dtype=float)
    V = np.asarray(V, dtype=float)
    if not (c_max >= 0 and math.isfinite(c_max)):
        raise ValueError(f"c_max must be finite and >= 0, got {c_max}")
    _check_values(ns, V, 3)
    lo_idx, up_idx = halves(ns)
    x = np.log(ns)
    s_lo, s_up, se = _change(x, V, lo_idx, up_idx, n_boot, seed)
    R = V.shape[0]
    change = s_up - s_lo
    h = _half_width(se, R, level) if R > 1 else math.nan
    lo, hi = change - h, change + h
    ell_l, ell_u = loglog_slope(ns[lo_idx]), loglog_slope(ns[up_idx])
    d_ell = ell_u - ell_l  # < 0: log log n is concave in log n
    low_end = float(c_max) * d_ell
    p = float(stats.t.sf(change / se, R - 1)) if R > 1 and se > 0 else math.nan
    c_implied = change / d_ell
    verdict = _verdict(lo, hi, low_end) if R > 1 else "log"
    lp_lo = lp_up = None
    if exponent is not None:
        lp_lo, lp_up = (s_lo - exponent) / ell_l, (s_up - exponent) / ell_u
    return LogOrPower(
        lower_ns=tuple(ns[lo_idx].tolist()),
        upper_ns=tuple(ns[up_idx].tolist()),
        slope_lower=s_lo,
        slope_upper=s_up,
        change=change,
        change_se=se,
        change_ci=(lo, hi),
        p_power=p,
        ell_lower=ell_l,
        ell_upper=ell_u,
        c_max=float(c_max),
        allowed=(low_end, 0.0),
        verdict=verdict,
        fail=verdict == "power",
        c_implied=c_implied,
        c_implied_ci=(hi / d_ell, lo / d_ell),
        c_needed=c_implied if change <= 0 else math.inf,
        exponent=exponent,
        log_power_lower=lp_lo,
        log_power_upper=lp_up,
        replicates=R,
        level=level,
    )


def ratio_slope(
    ns, V_est, V_ref, level: float = 0.95, seed: int = 0, n_boot: int = 2000
) -> SlopeDiff:
    """The log-log slope of the risk ratio ``mean_r V_est / mean_r V_ref`` over the design,
    paired over replicates (rows of both the same replicates), with its t interval: a
    positive slope whose interval excludes 0 says the gap grows as a power of n.  The log
    of a ratio of means is the difference of the logs of the means, and the LS slope is
    linear, so this is exactly :func:`verify.stats.slopes.paired_slope_diff` (A the estimator, B
    the reference), returned as is."""
    return paired_slope_diff(ns, V_est, V_ref, level=level, n_boot=n_boot, seed=seed)


def records_log_or_power(
    records: list[dict],
    c_maxes: tuple[float, ...] = (3.77, 4.0),
    estimator: str = "asvi",
    metric: str = "d2",
    level: float = 0.95,
    seed: int = 0,
) -> list[TruthLogOrPower]:
    """Per truth of sweep records (``simulate.sweep.store.schema.read_records``; the ASVI sweep's
    cells, ``verify.reading.records``' ``Cell.source == "asvi"``, over the replicates complete at
    every n, as ``verify.reading.analysis`` fits them): :func:`log_or_power` of ``estimator``'s
    ``metric`` for each ``c_max``, and :func:`ratio_slope` of it against the cells'
    class-matched reference (the linear spline) where every cell holds one.  Reads records
    only; decides nothing in the report.  ``verify.reading.records`` is imported here, not at the
    top: it imports the sweep's modules (torch), which the statistics above do not need."""
    from verify.reading.records import cells_of, columns, truth_cells  # noqa: PLC0415

    by_truth: dict[str, list] = {}
    for c in cells_of(records):
        if c.source == "asvi":
            by_truth.setdefault(c.truth, []).append(c)
    out = []
    for key in sorted(by_truth):
        tc = truth_cells(key, by_truth[key])
        V = columns(tc.cells, lambda c: c.value(estimator, metric))
        tests = tuple(log_or_power(tc.ns, V, c, level=level, seed=seed) for c in c_maxes)
        ratio = None
        if all(c.reference is not None for c in tc.cells_used):
            ref = columns(tc.cells, lambda c: c.reference.metrics[metric])
            ratio = ratio_slope(tc.ns, V, ref, level=level, seed=seed)
        out.append(TruthLogOrPower(key, tc.ns, estimator, metric, tests, ratio))
    return out
