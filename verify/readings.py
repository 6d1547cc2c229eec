"""Three readings of one theorem test (issue 75): what the proved bound says, what the sharp
reading says, and the delta at which the verdict turns -- held alike for every truth.

A theorem test holds a slope's interval to the band ``[e, e + c ell]`` of a bound
``n^e log^c n`` (``verify.theorem``); which c is the *reading* of the theorem:

* **the proved bound** (``"proved"``): the corollary's bound with the proof's own
  construction substituted.  A Hoelder truth: Theorem 4.1, eq. (d2bound), at Lemma 6.1's
  network, eq. (choices) (L ~ log n, N ~ n^(p/(2a+p)) / log n, s ~ N L) and Lemma 6.1's
  approximation bound -- :func:`theory.proved_log_power`, unit constants, delta -> 1, the
  truth's Hoelder norm the median of its replicates'.  The teacher: Corollary 6.4's own
  expression, eq. (postcon3) (:func:`theory.teacher_log_power`), as the teacher has been held
  since its band was defined.  Its log power is the least-squares local log slope of the
  bound over the design's n, the teacher's rule for both (``theory.design_log_power``).
  At small n (about n < 100 at p = 1) Lemma 6.1's s exceeds n L and the bound is undefined
  (eps_n's radicand is negative: Lemma 4.2's premise fails); the fit is over the n where it
  is defined, and where fewer than two are, the proved reading is not available and the
  sharp reading decides, said so (``deciding``); so too where the records carry no Hoelder
  norm.
* **the sharp reading** (``"sharp"``): delta -> 1 with no construction logs: ``log^(2 delta)
  n`` of eq. (postcon), c = 2 for d^2 (1 for d), for a Hoelder truth; for the teacher the
  corollary's expression itself (its "any delta > 1" makes delta -> 1 the claim itself).
  A FAIL here reads "slower than n^e log^c n over these n", never "slower than the theorem's
  bound": Corollaries 6.1/6.2 say "for *some* delta > 1" (eq. (postcon)), so delta = 1 is a
  limit of the set they name, not a member of it.
* **delta_flip and delta_pass**: the delta of the corollary's own log factor
  ``log^(2 delta) n`` (no construction logs) below which the data FAIL (``c_flip``) and from
  which they PASS under the confirming rule (``c_pass``): ``delta = (c - c_0) / k`` with
  ``k`` the metric's log power per unit delta (2 for d^2 and squared L2, 1 for d) and
  ``c_0`` the bound's log power at delta = 0 (0 for a Hoelder truth, Corollary 6.4's
  expression's for the teacher).

Beside them: where the proved bound says nothing (:func:`theory.vacuity_n`: the n from
which it falls below the trivial d^2 <= 1; at unit constants) and whether it decreases over
the design at all (its least-squares slope); and whether the design meets the theorem's
premises (Lemma 6.1's depth and width 12pN at the largest n, Lemma 4.2's ``L s log(pN) =
o(n)`` read as the ratio at the largest n, :func:`theory.premises`).  A verdict on networks
outside the premises is labelled so (``premises``).

Which reading decides an entry's verdict is the protocol's (``[rules.band_log_power]
holder``: ``"proved"`` from exploratory-v3 on, ``"2*delta"`` -- the sharp reading -- in
every protocol before, which keep deciding their records as registered); the others are
reported beside it.  Under a protocol that did not register the readings they are an
exploratory re-reading (``registered`` False).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulate.sweep.truth_spec import TruthSpec
from theory import (
    corollary_6_4_rate,
    decreases_over,
    log_factor_power,
    log_log_slope,
    premises,
    proved_bound,
    proved_log_power,
    teacher_log_power,
    teacher_vacuity_n,
    vacuity_n,
)
from verify.slopes import loglog_slope
from verify.theorem import theorem_verdicts
from verify.verdict import Verdict

__all__ = ["READINGS", "Readings", "claim_of", "proved_band", "readings"]

# the readings a protocol's Hoelder band rule may name: the sharp one (every protocol
# before exploratory-v3) and the proved bound
READINGS = {"2*delta": "sharp", "proved": "proved"}

# the teacher's network (the paper's 20-10-10-1: L0 hidden layers, widest layer)
_TEACHER_L0, _TEACHER_W0 = 2, 10


@dataclass(frozen=True)
class Readings:
    """The readings of one theorem test (module docstring): which decides (``deciding``,
    ``"proved"`` or ``"sharp"``) and whether its protocol registered them (``registered``);
    the corollary's claim in words (``claim``); the proved bound's source, log power and
    verdict; the sharp reading's; ``delta_flip`` / ``delta_pass``; the n from which the
    proved bound falls below 1 at unit constants (``vacuity_n``; None: not below 1 up to
    1e40) and its least-squares slope over the design (``proved_slope``; both None, and the
    proved log power, where the proved bound is not available); the premises in
    words where the design is outside them (``premises``; None where it is within them or
    they are not evaluated)."""

    deciding: str
    registered: bool
    claim: str
    proved_source: str
    proved_log_power: float | None
    proved_verdict: Verdict
    sharp_log_power: float
    sharp_verdict: Verdict
    delta_flip: float
    delta_pass: float
    vacuity_n: float | None
    proved_slope: float | None
    premises: str | None


def claim_of(spec: TruthSpec) -> str:
    """The corollary's claim on delta for the truth, with its equation."""
    if spec.kind == "teacher":
        return "Corollary 6.4, eq. (postcon3): for any delta > 1"
    return "Corollary 6.1, eq. (postcon): for some delta > 1"


def _median(xs) -> float:
    """The median Hoelder norm; NaN where the records carry none (records written by hand
    or before the norm was recorded: the proved reading is then not available)."""
    xs = [float(x) for x in xs if x is not None]
    return float(np.median(xs)) if xs else float("nan")


def defined_ns(spec: TruthSpec, ns, norms=()) -> list:
    """The n of ``ns`` where a Hoelder truth's proved bound is defined: at small n Lemma
    6.1's s exceeds n L with N = 1, and eps_n's radicand ``s log(nL/s) + L s log(pN)`` is
    negative (Lemma 4.2's premise fails: the theorem says nothing there)."""
    out = []
    if not np.isfinite(_median(norms)):
        return out
    for n in ns:
        try:
            proved_bound(int(n), spec.alpha, spec.p, _median(norms), 1)
        except ValueError:
            continue
        out.append(n)
    return out


def proved_band(spec: TruthSpec, ns, metric: str, norms=(), edges=()) -> float:
    """The proved bound's log power over ``ns`` (module docstring): Theorem 4.1 at Lemma
    6.1 for a Hoelder truth (``norms``: its replicates' Hoelder norms, the median taken),
    over the n where it is defined (:func:`defined_ns`; NaN where fewer than two are: the
    proved reading is then not available and the sharp reading decides, said so);
    Corollary 6.4's expression for the teacher (``edges``: its replicates' non-zero edges,
    the median taken)."""
    if spec.kind == "teacher":
        s0 = int(round(float(np.median(list(edges)))))
        return float(teacher_log_power(list(ns), s0, spec.p, delta=1, metric=metric))
    ok = defined_ns(spec, ns, norms)
    if len(ok) < 2:
        return float("nan")
    return float(proved_log_power(list(ok), spec.alpha, spec.p, _median(norms), 1, metric=metric))


def _sharp_band(spec: TruthSpec, ns, metric: str, delta: float, edges=()) -> tuple[float, float]:
    """``(c, c_0)``: the sharp reading's log power at ``delta`` and at delta = 0 (the
    expression is ``log^(2 delta) n`` times a factor free of delta, so c is ``c_0 + k
    delta``: c_0 from c at ``delta``, no bound being evaluated at a delta below 1)."""
    k = _per_delta(metric)
    if spec.kind == "teacher":
        s0 = int(round(float(np.median(list(edges)))))
        c = float(teacher_log_power(list(ns), s0, spec.p, delta=delta, metric=metric))
        return c, c - k * delta
    return float(log_factor_power(metric, delta)), 0.0


def _per_delta(metric: str) -> float:
    """The log power a unit of delta adds to the metric's bound (2 for d^2, 1 for d)."""
    return float(log_factor_power(metric, 2) - log_factor_power(metric, 1))


def _premises_words(spec: TruthSpec, n_top: int, depth, widths) -> str | None:
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


def readings(
    spec: TruthSpec, ns, metric: str, fit, predicted: float, powered, rule: str,
    protocol, norms=(), edges=(), depth=None, widths=None,
) -> Readings:  # fmt: skip
    """The :class:`Readings` of one theorem test: ``fit`` (its slope interval), the
    exponent ``predicted``, ``powered(c)`` (whether the design has power at band log power
    c: the protocol's prospective rule), the theorem ``rule``, the ``protocol`` (its Hoelder
    band rule says which reading decides, its ``delta`` the sharp reading's);
    ``norms``/``edges``: the replicates' Hoelder norms or teachers' edge counts; ``depth``
    and ``widths``: the candidates' (None: not evaluated)."""
    rule_name = protocol.band_log_power.get("holder", "2*delta")
    # the teacher's band is its corollary's own expression under every protocol: the
    # proved bound's (and, its corollary saying "any delta > 1", the sharp reading's too)
    deciding = "proved" if spec.kind == "teacher" else READINGS[rule_name]
    ell = float(loglog_slope(ns))
    k = _per_delta(metric)
    proved = proved_band(spec, ns, metric, norms, edges)
    if not np.isfinite(proved):  # the proved bound is undefined over this design
        deciding, proved = "sharp", None
    sharp, c0 = _sharp_band(spec, ns, metric, protocol.delta, edges)

    def verdict(c: float) -> Verdict:
        if c is None:
            return Verdict.UNDECIDABLE
        top = predicted + c * ell
        return Verdict(theorem_verdicts([fit.ci_low], [fit.ci_high], predicted, top,
                                        powered(c), rule)[0])  # fmt: skip

    c_flip = (fit.ci_low - predicted) / ell
    c_pass = (fit.ci_high - predicted) / ell
    if spec.kind == "holder":
        ok = defined_ns(spec, ns, norms)
        vac = vacuity_n(spec.alpha, spec.p, _median(norms)) if ok else None
        slope = (decreases_over(ok, spec.alpha, spec.p, _median(norms)).slope
                 if len(ok) >= 2 else None)  # fmt: skip
        source = "Theorem 4.1 at Lemma 6.1's L, N, s (unit constants)"
    else:  # the teacher: Corollary 6.4's expression's vacuity n and slope
        s0 = int(round(float(np.median(list(edges)))))
        vals = [corollary_6_4_rate(float(n), _TEACHER_L0, s0, spec.p, _TEACHER_W0, 1) for n in ns]
        vac = teacher_vacuity_n(s0, spec.p, _TEACHER_L0, _TEACHER_W0)
        slope = log_log_slope(list(ns), vals)
        source = "Corollary 6.4's expression (unit constants)"
    return Readings(
        deciding=deciding,
        registered=rule_name == "proved" or spec.kind == "teacher",
        claim=claim_of(spec),
        proved_source=source,
        proved_log_power=proved,
        proved_verdict=verdict(proved),
        sharp_log_power=sharp,
        sharp_verdict=verdict(sharp),
        delta_flip=(c_flip - c0) / k,
        delta_pass=(c_pass - c0) / k,
        vacuity_n=None if vac is None else float(vac),
        proved_slope=None if slope is None else float(slope),
        premises=_premises_words(spec, max(ns), depth, widths),
    )
