"""How the results set the exit status: which entries decide, the family-wise (Holm)
adjustment of their FAILs, each entry's outcome and the run's status (d^2 decides)."""

from __future__ import annotations

import dataclasses
import math

from verify import protocol as protocols
from verify.reading.design import PRIMARY_METRIC, is_control
from verify.results import MetricResult, TestPValues
from verify.stats.verdict import Verdict, holm

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
    ``verify.stats.verdict.holm`` at the protocol's one-sided level; the family is the records'
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


def _agreement(got: Verdict | None, known: Verdict | None) -> Verdict:
    """One known answer's check: PASS when the verdict is the known answer (or there is
    none at this design); FAIL when a rejection contradicts it (a FAIL where the known
    answer is not one, a PASS where it is a FAIL); INCONCLUSIVE otherwise."""
    if known is None or got == known:
        return Verdict.PASS
    if got == Verdict.FAIL or (known == Verdict.FAIL and got == Verdict.PASS):
        return Verdict.FAIL
    return Verdict.INCONCLUSIVE


def _known(checks: list[Verdict]) -> Verdict:
    for v in (Verdict.FAIL, Verdict.INCONCLUSIVE):
        if v in checks:
            return v
    return Verdict.PASS


def entry_outcome(r: MetricResult) -> Verdict:
    """One primary entry's outcome for the exit status: FAIL, INCONCLUSIVE or PASS.
    ASVI: FAIL when its theorem or attainment test fails *and* the FAIL survives the
    family-wise adjustment (``fail_familywise``; one that does not counts as
    INCONCLUSIVE); INCONCLUSIVE when either is inconclusive or undecidable; else PASS.  A
    known-answer control entry: whether its attainment verdict is the known answer
    (``expected_attainment``): PASS when it is; FAIL when a rejection contradicts it (a
    FAIL where the known answer is PASS or UNDECIDABLE, a PASS where it is FAIL);
    INCONCLUSIVE otherwise; an entry with no known answer at its design
    (``expected_attainment`` None) is reported and counts as PASS.  Under the confirming
    rule the control's test against the truth class's band (``class_theorem``) is
    checked against its own known answer (``expected_theorem``) the same way, and the
    worse of the two checks is the entry's outcome.  The control entries
    are not in the Holm family: each is a check of the harness, at its own level."""
    att = None if r.attainment is None else r.attainment.verdict
    if is_control(r.estimator):
        th = None if r.class_theorem is None else r.class_theorem.verdict
        return _known(
            [_agreement(att, r.decision.expected_attainment),
             _agreement(th, r.decision.expected_theorem)]
        )  # fmt: skip
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
