"""The equivalence reading of a stated exact rate: two one-sided tests (TOST) that the
slope lies within ``+- m`` of the exponent e.

Why: the theorem test is one-sided against a band ``[e, e + c ell]``.  A stated rate with no
log factor (``--rate "n**(-1/2)"``) has a band of width 0, so an estimator exactly at its
exponent PASSes with probability ``(1 - level) / 2`` at most and the test is UNDECIDABLE by
construction (``verify.stats.power.confirm_power``).  A user stating an exact rate asks
whether the slope *is* e, up to a margin they can name: the equivalence reading.

**The test** (:func:`equivalence_test`): with the slope's two-sided ``level`` interval
``[lo, hi]`` (``verify.stats.slopes.fit_slope``: replicate bootstrap, ``t_{R-1}``) -- each
end a one-sided test at ``(1 - level) / 2``, the protocol's own one-sided level --

* **PASS** (equivalent) when ``e - m < lo`` and ``hi < e + m``: both one-sided tests reject
  a slope outside the margin;
* **FAIL** (not equivalent) when the interval lies wholly outside ``[e - m, e + m]``;
* **INCONCLUSIVE** otherwise (the interval straddles a bound).

**The margin** (:data:`DEFAULT_RELATIVE_MARGIN`): ``m = 0.25 |e|`` unless the run names
another fraction (``verify.rates --equivalence-margin F``, an exploratory copy of the
protocol).  Why a quarter of the exponent: the theorem test's too-slow alternative is e/2
(``verify.stats.theorem``); a margin below ``|e| / 2`` keeps an estimator at half the rate
from ever passing, and a quarter puts the bound halfway between e and e/2, so a PASS
excludes the too-slow alternative by as wide a gap as it allows around e.  At e = -0.5 it
is 0.125: the k-NN matched to the class (slope -0.5 within its interval) passes it on a
design whose interval half-width is below it, and k-NN with a fixed k (slope near 0) fails.

**What it reads**: the slope against ``e +- m``, the exponent alone.  Asked for under a band
with a log factor (``--equivalence-margin`` with the paper's band), an estimator at the rate
*with* its log factor has a slope near ``e + c ell`` over the design and can fail it: the
reading then says whether the measured exponent is e, not whether the band holds.

**Where it is read** (``verify.reading.analysis``): by default for every entry held to a
stated rate with no log factor (``verify.reading.stated_rate``); on request
(``--equivalence-margin``) for every entry but a known-answer control's.  It is reported
beside the one-sided theorem test (the results' ``theorem.equivalence``, the summary, the
decision block and the tables) and **never sets the exit status**: the family-wise
adjustment and the replication of a verdict are defined on the one-sided test's FAIL
p-value (``verify.report.status``, ``verify.stats.replication``), and an equivalence FAIL
below ``e - m`` (faster than stated) has no such p-value there; the theorem test's verdict
stands as the deciding one.
"""

from __future__ import annotations

from dataclasses import dataclass

from verify.stats.verdict import Verdict

__all__ = ["DEFAULT_RELATIVE_MARGIN", "Equivalence", "equivalence_test"]

DEFAULT_RELATIVE_MARGIN = 0.25


@dataclass(frozen=True)
class Equivalence:
    """The equivalence reading (module docstring): the margin (``relative`` to ``|e|`` and
    in slope units, ``margin``), the bounds ``e +- margin``, the slope's interval it read
    and its ``verdict``."""

    relative: float
    margin: float
    bounds: tuple[float, float]
    ci: tuple[float, float]
    verdict: Verdict


def equivalence_test(
    exponent: float, ci_low: float, ci_high: float, relative: float = DEFAULT_RELATIVE_MARGIN
) -> Equivalence:
    """TOST of the slope's interval ``[ci_low, ci_high]`` against ``exponent +- relative
    |exponent|`` (module docstring); ValueError for a margin outside (0, 0.5) of ``|e|`` (at
    0.5 or more an estimator at half the rate could pass) or an exponent of 0."""
    if not 0 < relative < 0.5:
        raise ValueError(f"the equivalence margin must be in (0, 0.5) of |e|, got {relative}")
    e = float(exponent)
    if e == 0:
        raise ValueError("an equivalence margin relative to |e| needs e != 0")
    m = relative * abs(e)
    lo_b, hi_b = e - m, e + m
    if lo_b < ci_low and ci_high < hi_b:
        v = Verdict.PASS
    elif ci_high < lo_b or ci_low > hi_b:
        v = Verdict.FAIL
    else:
        v = Verdict.INCONCLUSIVE
    return Equivalence(float(relative), m, (lo_b, hi_b), (float(ci_low), float(ci_high)), v)
