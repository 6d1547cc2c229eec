"""The theorem test: a slope fit (``verify.stats.slopes``) against the band ``[e, e + c ell]``,
under the earlier rule and the confirming one, with its margin to the threshold.

**Theorem test** (:func:`theorem_test`), one-sided: the theorems are *upper* bounds,
``d^2 <~ n^e log^c n`` (c per truth: ``verify.reading.design.band_log_power``), so a faster
slope is never a FAIL.

* **FAIL** when the interval lies above the band's top ``e + c ell``: "slower than
  ``n^e log^c n`` over n = a..b" -- a finite-range statement about a bound with an unknown
  constant, never "contradicts the theorem";
* **PASS** when the interval lies below the too-slow control ``e/2`` (rejects it) and not
  above the band -- with ``direction = "faster"`` when it lies wholly below e;
* otherwise **UNDECIDABLE** when the design has no power (:func:`verify.stats.power.power_check`:
  the band
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
  (:func:`verify.stats.power.confirm_power`) -- is below the protocol's floor, else
  **INCONCLUSIVE**.

The earlier rule (``rule="reject-e/2"``, every protocol before exploratory-v2) keeps
deciding the records written under it exactly as it did.  ``c_flip`` keeps its meaning
under both rules: the verdict is a FAIL for every band log power below it; ``c_pass``
is the log power from which the confirming test PASSes (``(ci_high - e) / ell``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from verify.stats.slopes import SlopeFit, loglog_slope
from verify.stats.verdict import Verdict

__all__ = [
    "THEOREM_RULES",
    "TheoremCheck",
    "theorem_verdicts",
    "fail_p_value",
    "theorem_test",
    "theorem_margin",
]


# the theorem test's rules (module docstring): the earlier one, and the confirming one
THEOREM_RULES = ("reject-e/2", "confirm")


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


def theorem_verdicts(lo, hi, predicted: float, top, powered: bool, rule: str) -> np.ndarray:
    """The theorem test's verdict (module docstring) for arrays of interval ends ``lo``,
    ``hi`` against the band's ``top`` (a number or one per interval): what
    :func:`theorem_test` decides, one interval at a time, and ``verify.stats.replication``, a
    thousand at once.  A non-finite interval is INCONCLUSIVE."""
    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    top = np.broadcast_to(np.asarray(top, dtype=float), lo.shape)
    confirms = hi < top if rule == "confirm" else hi < 0.5 * predicted
    undecided = Verdict.INCONCLUSIVE if powered else Verdict.UNDECIDABLE
    out = np.where(lo > top, Verdict.FAIL, np.where(confirms, Verdict.PASS, undecided))
    return np.where(np.isfinite(lo) & np.isfinite(hi), out, Verdict.INCONCLUSIVE).astype(object)


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
    (:func:`verify.stats.power.power_check` or :func:`verify.stats.power.confirm_power` on
    :func:`verify.stats.slopes.expected_slope_se`), which only says what a non-rejection means.
    ``fail_p``: one-sided p of "the slope is within the band" (:func:`fail_p_value`);
    ``c_flip``: the band's log power at which the FAIL would flip (the verdict is a FAIL for
    every c below it); ``c_pass``: the one from which the confirming rule PASSes."""
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
    """The theorem verdict's margin to its threshold in SE (``verify.stats.replication``): the
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
