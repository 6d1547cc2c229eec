"""Three readings of one theorem test (issue 75): the sharp reading the verdict is, what the
bound the proof gives says, and the delta at which the verdict turns -- held alike for every
truth, reported beside the verdict, never deciding it.

A theorem test holds a slope's interval to the band ``[e, e + c ell]`` of a bound
``n^e log^c n`` (``verify.stats.theorem``); which c is the *reading* of the theorem:

* **the sharp reading** (the verdict, under every shipped protocol): delta -> 1 with no
  construction logs: ``log^(2 delta) n`` of eq. (postcon), c = 2 for d^2 (1 for d), for a
  Hoelder truth; for the teacher Corollary 6.4's own expression, eq. (postcon3)
  (:func:`theory.teacher_log_power`), the claim itself ("any delta > 1").  A FAIL here reads
  "slower than n^e log^c n over these n", never "slower than the theorem's bound":
  Corollaries 6.1/6.2 say "for *some* delta > 1" (eq. (postcon)), so delta = 1 is a limit
  of the set they name, not a member of it.
* **delta_flip and delta_pass**: the delta of the corollary's own log factor
  ``log^(2 delta) n`` below which the data FAIL (``c_flip``) and from which they PASS under
  the confirming rule (``c_pass``): ``delta = (c - c_0) / k`` with ``k`` the metric's log
  power per unit delta (2 for d^2 and squared L2, 1 for d) and ``c_0`` the bound's log
  power at delta = 0 (0 for a Hoelder truth, Corollary 6.4's expression's for the teacher).
* **the proved bound** (reported): for a Hoelder truth, Theorem 4.1, eq. (d2bound), at Lemma
  6.1's network, eq. (choices), with Lemma 6.1's approximation bound, delta -> 1, the
  truth's Hoelder norm the median of its replicates' (:func:`theory.proved_slopes`).  It is a
  sum of terms with different powers of n, weighted by constants the theorem only asserts
  to exist (C, C', M; Lemma 6.1's C_N), so its slope over a finite design is not one
  number: it is read at unit constants (``proved_log_power``, c = (slope - e) / ell) and
  over the grid :data:`theory.proved.CONSTANT_GRID` (``proved_range``).  Its verdict holds
  for every constant of the grid or is not given: **FAIL** where the slope's interval lies
  above the bound's largest slope (slower than the bound whatever the constants), **PASS**
  where it lies below the least (within it whatever the constants), **UNDECIDABLE** where for
  some constants the bound does not fall over the design (it constrains nothing there), else
  **INCONCLUSIVE** (the constants decide).  Where the bound is undefined at some n of the
  design at unit constants (small n: Lemma 6.1's s exceeds n L, eps_n's radicand is
  negative -- Lemma 4.2's premise fails) or the records carry no Hoelder norm, it is not
  available (None, said so).  For the teacher it is Corollary 6.4's expression, whose
  constant only scales it: the same as the sharp reading.

Beside them: where the proved bound says nothing at unit constants (:func:`theory.vacuity_n`,
:func:`theory.teacher_vacuity_n`: the n from which it falls below the trivial d^2 <= 1) and
whether the design meets the theorem's premises (Lemma 6.1's depth and width 12pN at the
largest n, Lemma 4.2's ``L s log(pN) = o(n)`` read as the ratio at the largest n,
:func:`theory.premises`).  A verdict on networks outside the premises is labelled so
(``premises``).  Under a protocol before exploratory-v3 (confirm-v4 among them) the
readings are an exploratory re-reading of its records; its verdicts are unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from theory import (
    corollary_6_4_rate,
    log_factor_power,
    log_log_slope,
    premises,
    proved_slopes,
    teacher_log_power,
    teacher_vacuity_n,
    vacuity_n,
)
from verify.stats.slopes import loglog_slope
from verify.stats.theorem import theorem_verdicts
from verify.stats.verdict import Verdict

__all__ = ["Readings", "claim_of", "readings"]

# the teacher's network (the paper's 20-10-10-1: L0 hidden layers, widest layer)
_TEACHER_L0, _TEACHER_W0 = 2, 10


@dataclass(frozen=True)
class Readings:
    """The readings of one theorem test (module docstring): the corollary's claim in words
    (``claim``); the sharp reading's log power and verdict (the test's own); ``delta_flip`` /
    ``delta_pass``; the proved bound's source, its log power at unit constants and its range
    over the constant grid (None where not available), its verdict over that grid, its slope
    over the design at unit constants (``proved_slope``), how many constant choices of the
    grid were left out as undefined at some n (``proved_left_out``: the range and verdict hold
    over the others) and the n from which it falls below
    1 at unit constants (``vacuity_n``; None: not below 1 up to 1e40, or not available); the
    premises in words where the design is outside them (``premises``; None where it is within
    them or they are not evaluated)."""

    claim: str
    sharp_log_power: float
    sharp_verdict: Verdict
    delta_flip: float
    delta_pass: float
    proved_source: str
    proved_log_power: float | None
    proved_range: tuple[float, float] | None
    proved_left_out: int | None
    proved_verdict: Verdict
    proved_slope: float | None
    vacuity_n: float | None
    premises: str | None


def claim_of(spec) -> str:
    """The corollary's claim on delta for the truth, with its equation."""
    if spec.kind == "teacher":
        return "Corollary 6.4, eq. (postcon3): for any delta > 1"
    return "Corollary 6.1, eq. (postcon): for some delta > 1"


def _median(xs) -> float | None:
    """The median Hoelder norm; None where the records carry none (records written by hand
    or before the norm was recorded: the proved reading is then not available)."""
    xs = [float(x) for x in xs if x is not None]
    return float(np.median(xs)) if xs else None


def _per_delta(metric: str) -> float:
    """The log power a unit of delta adds to the metric's bound (2 for d^2, 1 for d)."""
    return float(log_factor_power(metric, 2) - log_factor_power(metric, 1))


def _premises_words(spec, n_top: int, depth, widths) -> str | None:
    """Where a Hoelder design is outside Corollary 6.1's premises at its largest n."""
    if spec.kind != "holder":
        return None
    pr = premises(int(n_top), spec.alpha, spec.p, depth=depth, widths=widths)
    out = []
    if pr.depth_matches is False:
        out.append(f"depth {depth} against Lemma 6.1's L = {pr.L}")
    if widths and max(widths) < pr.width:
        out.append(f"widths up to {max(widths)} against 12pN = {pr.width}")
    if pr.ratio >= 1:
        out.append(f"Lemma 4.2's L s log(pN) / n = {pr.ratio:.3g} (o(1) asked)")
    if not out:
        return None
    return f"outside the premises at n = {int(n_top)}: " + "; ".join(out)


def proved_verdict(lo: float, hi: float, low: float | None, high: float | None) -> Verdict:
    """The proved bound's verdict on a slope interval ``[lo, hi]`` against the bound's least
    and largest slope over the constant grid (module docstring); UNDECIDABLE where it is not
    available (``low`` None).  FAIL is read first: an interval above the largest slope is
    slower than the bound under every constant of the grid, rising or not; a non-finite
    interval (one replicate) is INCONCLUSIVE."""
    if low is None or not (np.isfinite(lo) and np.isfinite(hi)):
        return Verdict.UNDECIDABLE if low is None else Verdict.INCONCLUSIVE
    if lo > high:
        return Verdict.FAIL
    if high >= 0:  # for some constants the bound does not fall here: no constraint
        return Verdict.UNDECIDABLE
    return Verdict.PASS if hi < low else Verdict.INCONCLUSIVE


def _holder_proved(spec, ns, metric: str, norm: float | None, e: float, ell: float) -> dict:
    """The proved reading's fields for a Hoelder truth (module docstring)."""
    none = {"proved_log_power": None, "proved_range": None, "proved_slope": None,
            "proved_left_out": None, "vacuity_n": None, "low": None, "high": None}  # fmt: skip
    if norm is None:
        return none
    ps = proved_slopes(list(ns), spec.alpha, spec.p, norm)
    if ps.unit is None:  # undefined at some n of the design at unit constants
        return none
    scale = _per_delta(metric) / 2  # the metric's bound: d is the square root of d^2
    low, high = ps.low * scale, ps.high * scale
    return {
        "proved_log_power": (ps.unit * scale - e) / ell,
        "proved_range": ((low - e) / ell, (high - e) / ell),
        "proved_slope": ps.unit * scale,
        "proved_left_out": ps.undefined,
        "vacuity_n": float(vacuity_n(spec.alpha, spec.p, norm)),
        "low": low,
        "high": high,
    }


def _teacher_proved(spec, ns, metric: str, s0: int, e: float, ell: float) -> dict:
    """The teacher's proved reading: Corollary 6.4's expression (its constant only scales it)."""
    c = float(teacher_log_power(list(ns), s0, spec.p, delta=1, metric=metric))
    vals = [corollary_6_4_rate(float(n), _TEACHER_L0, s0, spec.p, _TEACHER_W0, 1) for n in ns]
    return {
        "proved_log_power": c,
        "proved_range": (c, c),
        "proved_left_out": 0,
        "proved_slope": log_log_slope(list(ns), vals) * _per_delta(metric) / 2,
        "vacuity_n": float(teacher_vacuity_n(s0, spec.p, _TEACHER_L0, _TEACHER_W0)),
        "low": e + c * ell,
        "high": e + c * ell,
    }


def readings(tc, metric: str, fit, predicted: float, powered, rule: str, delta: float):
    """The :class:`Readings` of one theorem test on the truth's cells ``tc``
    (``verify.reading.records.TruthCells``: its truth, n, replicates' Hoelder norms or teachers'
    edge
    counts, and candidates at the largest n): ``fit`` (its slope interval), the exponent
    ``predicted``, ``powered(c)`` (whether the design has power at band log power c: the
    protocol's prospective rule), the theorem ``rule`` and the sharp reading's ``delta``."""
    spec, ns = tc.spec, list(tc.ns)
    ell, k = float(loglog_slope(ns)), _per_delta(metric)
    if spec.kind == "teacher":
        s0 = int(round(float(np.median(tc.edges))))
        sharp = float(teacher_log_power(ns, s0, spec.p, delta=delta, metric=metric))
        c0 = sharp - k * delta
        proved = _teacher_proved(spec, ns, metric, s0, predicted, ell)
        source = "Corollary 6.4's expression"
    else:
        sharp, c0 = float(log_factor_power(metric, delta)), 0.0
        proved = _holder_proved(spec, ns, metric, _median(tc.norms), predicted, ell)
        source = "Theorem 4.1 at Lemma 6.1's L, N, s"
    top = predicted + sharp * ell
    sharp_verdict = Verdict(theorem_verdicts([fit.ci_low], [fit.ci_high], predicted, top,
                                             powered(sharp), rule)[0])  # fmt: skip
    low, high = proved.pop("low"), proved.pop("high")
    last = tc.first[-1]
    return Readings(
        claim=claim_of(spec),
        sharp_log_power=sharp,
        sharp_verdict=sharp_verdict,
        delta_flip=((fit.ci_low - predicted) / ell - c0) / k,
        delta_pass=((fit.ci_high - predicted) / ell - c0) / k,
        proved_source=source,
        proved_verdict=proved_verdict(fit.ci_low, fit.ci_high, low, high),
        premises=_premises_words(spec, max(ns), last.depth, tc.widths_at(len(ns) - 1) or None),
        **proved,
    )
