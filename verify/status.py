"""How the results set the exit status: which entries decide, the family-wise (Holm)
adjustment of their FAILs, each entry's outcome and the run's status (d^2 decides)."""

from __future__ import annotations

import dataclasses
import math

from verify import protocol as protocols
from verify.design import PRIMARY_METRIC, is_control
from verify.results import MetricResult, TestPValues
from verify.slopes import Verdict, holm

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_CRASH",
    "EXIT_FAIL",
    "EXIT_INCONCLUSIVE",
    "EXIT_PASS",
    "deciding",
    "entry_outcome",
    "exit_status",
    "familywise",
]

EXIT_PASS, EXIT_FAIL, EXIT_BAD_INPUT, EXIT_INCONCLUSIVE, EXIT_CRASH = 0, 1, 2, 3, 4


def deciding(r: MetricResult) -> bool:
    """Whether an entry's tests set the exit status through their own verdicts: the
    primary metric of an ASVI run (not an arm; not a known-answer control entry, whose
    outcome is its agreement with the known answer, :func:`entry_outcome`)."""
    return r.metric == PRIMARY_METRIC and r.role != "arm" and not is_control(r.estimator)


def _fail_ps(r: MetricResult) -> dict[str, float]:
    """The entry's one-sided FAIL p-values that can enter the family (finite ones)."""
    ps = {"theorem": r.theorem.fail_p}
    if r.attainment is not None:
        ps["attainment"] = r.attainment.fail_p
    return {k: p for k, p in ps.items() if p is not None and math.isfinite(p)}


def familywise(results: list[MetricResult], proto: protocols.Protocol) -> list[MetricResult]:
    """The results with ``decision.fail_p_holm`` and ``decision.fail_familywise`` set on
    every deciding entry: Holm over the one-sided FAIL p-values of every test that can set
    the exit status (each deciding entry's theorem and attainment tests, less entries
    refused or made INCONCLUSIVE by an optimisation-limited budget control;
    ``verify.slopes.holm`` at the protocol's one-sided level; the family is the records'
    truths, or ``--truth``'s); ``fail_familywise`` None where the entry has no FAIL.
    Protocol ``familywise = "none"``: no adjustment."""
    tests = [
        (i, name, p)
        for i, r in enumerate(results)
        if deciding(r) and r.decision.refused is None
        and (r.control is None or r.control.state != "limited")
        for name, p in _fail_ps(r).items()
    ]  # fmt: skip
    ps = [p for _, _, p in tests]
    adj = holm(ps, proto.alpha_one_sided).adjusted if proto.familywise == "holm" else ps
    held: dict[int, dict] = {}
    for (i, name, _), a in zip(tests, adj, strict=True):
        held.setdefault(i, {})[name] = a
    out = []
    for i, r in enumerate(results):
        if not deciding(r):
            out.append(r)
            continue
        h = held.get(i)
        pv = None if h is None else TestPValues(h.get("theorem"), h.get("attainment"))
        verdicts = (
            ("theorem", r.theorem.verdict),
            ("attainment", None if r.attainment is None else r.attainment.verdict),
        )
        fails = [n for n, v in verdicts if v == Verdict.FAIL]  # fmt: skip
        survives = None
        if fails:
            h = h or {}
            survives = any(h.get(n) is not None and h[n] <= proto.alpha_one_sided for n in fails)
        decision = dataclasses.replace(r.decision, fail_p_holm=pv, fail_familywise=survives)
        out.append(dataclasses.replace(r, decision=decision))
    return out


def entry_outcome(r: MetricResult) -> Verdict:
    """One primary entry's outcome for the exit status: FAIL, INCONCLUSIVE or PASS.
    ASVI: FAIL when its theorem or attainment test fails *and* the FAIL survives the
    family-wise adjustment (``fail_familywise``; one that does not counts as
    INCONCLUSIVE); INCONCLUSIVE when either is inconclusive or undecidable; else PASS.  A
    known-answer control entry: whether its attainment verdict is the known answer
    (``expected_attainment``): PASS when it is; FAIL when a rejection contradicts it (a
    FAIL where the known answer is PASS or UNDECIDABLE, a PASS where it is FAIL);
    INCONCLUSIVE otherwise; an entry with no known answer at its design
    (``expected_attainment`` None) is reported and counts as PASS.  The control entries
    are not in the Holm family: each is a check of the harness, at its own level."""
    att = None if r.attainment is None else r.attainment.verdict
    if is_control(r.estimator):
        exp = r.decision.expected_attainment
        if exp is None or att == exp:
            return Verdict.PASS
        if (att == Verdict.FAIL) or (exp == Verdict.FAIL and att == Verdict.PASS):
            return Verdict.FAIL  # a rejection against the known answer
        return Verdict.INCONCLUSIVE
    verdicts = [r.theorem.verdict] + ([att] if att is not None else [])
    if Verdict.FAIL in verdicts:
        return Verdict.FAIL if r.decision.fail_familywise is not False else Verdict.INCONCLUSIVE
    if any(v in (Verdict.INCONCLUSIVE, Verdict.UNDECIDABLE) for v in verdicts):
        return Verdict.INCONCLUSIVE
    return Verdict.PASS


def exit_status(results: list[MetricResult]) -> int:
    """0 / 1 / 3 from the primary metric's entries (:func:`entry_outcome`)."""
    outcomes = [entry_outcome(r) for r in results if r.metric == PRIMARY_METRIC and r.role != "arm"]
    if Verdict.FAIL in outcomes:
        return EXIT_FAIL
    if Verdict.INCONCLUSIVE in outcomes:
        return EXIT_INCONCLUSIVE
    return EXIT_PASS
