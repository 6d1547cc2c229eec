"""The attainment test: ASVI's slope against a class-matched reference's, its
prospective power, its margin and the log powers at which it changes.

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
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from verify.stats.slopes import SlopeDiff, _half_width, loglog_slope
from verify.stats.verdict import Verdict

__all__ = [
    "AttainmentPower",
    "Flip",
    "LogPower",
    "attainment_verdicts",
    "attainment_margin",
    "attainment_power",
    "attainment_test",
    "attainment_flip",
    "log_power_of",
]


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


def attainment_verdicts(lo, hi, allowance: float, powered: bool, gap: float) -> np.ndarray:
    """The attainment test's verdict (module docstring) for arrays of interval ends: what
    :func:`attainment_test` decides, one at a time, and ``verify.stats.replication``, at once."""
    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    passing = Verdict.PASS if gap > 0 else Verdict.UNDECIDABLE
    undecided = Verdict.INCONCLUSIVE if powered else Verdict.UNDECIDABLE
    out = np.where(lo > allowance, Verdict.FAIL, np.where(hi <= allowance, passing, undecided))
    return np.where(np.isfinite(lo) & np.isfinite(hi), out, Verdict.INCONCLUSIVE).astype(object)


def attainment_margin(
    diff: SlopeDiff, allowance: float, verdict: Verdict, control: SlopeDiff | None = None,
    gap: float = math.inf,
) -> float:  # fmt: skip
    """The attainment verdict's margin to its threshold in SE
    (:func:`verify.stats.theorem.theorem_margin`'s sense).  A PASS needs its upper end at most the
    allowance *and* its negative control's (``control``: SVI at the smallest width minus the
    reference) lower end above it: its margin is the smaller of ``(allowance - ci_high) /
    SE`` and the control's ``(ci_low - allowance) / SE``; a FAIL's is ``(ci_low - allowance)
    / SE``.  A verdict that decides nothing: where the interval is within the allowance but
    the PASS was withheld, the control's margin (negative: what it lacks to FAIL), or NaN
    where the allowance eats the gap to half the reference's rate (``gap <= 0``: no interval
    can PASS); else the nearer of the two (negative)."""
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


def attainment_power(
    ns, reference_exponent: float, allowance: float, diff_se: float, replicates: int,
    level: float = 0.95,
) -> AttainmentPower:  # fmt: skip
    """Can the attainment test tell an estimator within the allowance from one at half the
    reference's rate (a slope difference of ``|e_ref| / 2``)?  ``gap = |e_ref| / 2 -
    allowance``: where it is not positive the allowance eats the half-rate alternative and
    no interval can tell them apart (a PASS is UNDECIDABLE at every replicate count);
    ``separable`` when the gap exceeds two expected half-widths ``t_{R-1} diff_se`` of the
    paired difference's interval (``diff_se``: its prospective SE,
    :func:`verify.stats.slopes.expected_slope_se` with the protocol's pilot cv of the paired
    difference)."""
    gap = abs(float(reference_exponent)) / 2 - float(allowance)
    h = _half_width(diff_se, replicates, level) if math.isfinite(diff_se) else math.inf
    return AttainmentPower(bool(gap > 2 * h), gap, h, tuple(map(float, ns)))


def attainment_test(
    diff: SlopeDiff, allowance: float, powered: bool = True, gap: float = math.inf
) -> Verdict:
    """PASS / FAIL / INCONCLUSIVE / UNDECIDABLE for a
    :func:`verify.stats.slopes.paired_slope_diff` against ``allowance`` (slope units,
    :func:`verify.stats.slopes.log_allowance`); ``powered`` and ``gap``: the prospective
    :func:`attainment_power` (module docstring).  A FAIL stands whatever the power; a PASS
    stands where the gap to half the reference's rate is positive (its interval then rejects
    that alternative too) and is UNDECIDABLE where the allowance eats it; a non-rejection is
    UNDECIDABLE without power, else INCONCLUSIVE."""
    return Verdict(attainment_verdicts([diff.ci_low], [diff.ci_high], allowance, powered, gap)[0])


def attainment_flip(diff: SlopeDiff, ns) -> Flip:
    """The allowance's log powers at which the attainment verdict changes: a FAIL for
    every ``c`` below ``fail_below = ci_low / ell``, a PASS (given power) for every ``c``
    at or above ``pass_from = ci_high / ell``."""
    ell = loglog_slope(ns)
    return Flip(diff.ci_low / ell, diff.ci_high / ell)


def log_power_of(diff: SlopeDiff, ns) -> LogPower:
    """The log power a slope difference amounts to over ``ns``: ``c_hat = diff / ell`` and
    its interval (:func:`verify.stats.slopes.loglog_slope`)."""
    ell = loglog_slope(ns)
    return LogPower(diff.diff / ell, (diff.ci_low / ell, diff.ci_high / ell))
