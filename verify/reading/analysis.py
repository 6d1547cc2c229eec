"""The analysis behind ``python -m verify.rates``: per truth, estimator and metric, the slope
fit, the theorem and attainment tests with their controls, the oracle-width and fixed-width
references and the budget-doubling control's state, each a frozen record of
``verify.results`` built by the function of ``verify.reading.entry_records`` that computes it; then
the constructive starts' comparison, Corollary 6.3's input-dimension comparison and the
family-wise adjustment (``verify.report.status``).  The rules are in ``verify.stats.theorem`` and
``verify.stats.attainment`` (on the fits of ``verify.stats.slopes``); what the design says before
the
data (bands, refusals, power) in ``verify.reading.design``; the budget control in
``verify.reading.controls``; every number they depend on in a protocol (``verify.protocol``); the
records are read into typed cells once, by ``verify.reading.records``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from simulate.sweep.setup.kinds import ASVI, is_asvi
from simulate.sweep.setup.truth_spec import TruthSpec
from theory import METRICS
from verify import protocol as protocols
from verify.reading.controls import BudgetControl, budget_control, budget_shift
from verify.reading.design import (
    PRIMARY_METRIC,
    TruthDesign,
    expected_class_theorem,
    is_control,
    prospective,
    refusal,
)
from verify.reading.entry_records import (
    Measured,
    asvi_summary,
    attainment_result,
    beside,
    class_theorem_result,
    curve_result,
    replicated,
    theorem_result,
)
from verify.reading.pilot import PilotCv
from verify.reading.records import (
    ESTIMATOR_ARMS,
    Cell,
    TruthCells,
    cells_of,
    columns,
    estimators_of,
    records_protocol,
    truth_cells,
)
from verify.report.findings import finding
from verify.report.status import familywise
from verify.results import Decision, InputDimension, MetricResult
from verify.starts import compare_starts
from verify.stats.equivalence import DEFAULT_RELATIVE_MARGIN, Equivalence, equivalence_test
from verify.stats.slopes import curvature, fit_slope
from verify.stats.verdict import Verdict

__all__ = ["Naming", "analyse", "compare_input_dimensions", "metric_result"]


def analyse(
    records: list[dict],
    truths: list[TruthSpec] | None = None,
    control: list[dict] | None = None,
    protocol: protocols.Protocol | str | None = None,
    pilots: Mapping | None = None,
) -> list[MetricResult]:
    """Fit and test every (estimator, truth, metric) of the records under ``protocol`` (a
    :class:`verify.protocol.Protocol` or its name; default: the shipped protocol the
    records were written under, ``verify.protocol.of_records``, else
    ``verify.protocol.DEFAULT``);
    returns a list of :class:`verify.results.MetricResult`.  ``control``: the
    budget-doubling records (``verify.reading.controls``), if any.  The FAILs that set the exit
    status are Holm-adjusted over the run's family of tests (``verify.report.status``).  The
    records are read into cells here, once (``verify.reading.records``).  ``pilots``: the
    pilot cvs of the entries whose power comes from their own pilot (a named regressor's:
    ``verify.reading.pilot.pilot_cvs``); without one such an entry's power is unknown."""
    cells = cells_of(records)
    proto = (
        protocol
        if isinstance(protocol, protocols.Protocol)
        else protocols.load(protocol) if protocol
        else protocols.of_records(records_protocol(cells)) or protocols.load(protocols.DEFAULT)
    )  # fmt: skip
    doubled = cells_of(control or [])
    # one truth's cells per source (Cell.source): an ASVI sweep and the known-answer
    # control on the same truth are separate designs (their own n and replicates), and
    # the budget control (ASVI's) pairs with the ASVI cells only
    by_truth: dict[tuple[str, str], list[Cell]] = {}
    for c in cells:
        by_truth.setdefault((c.truth, c.source), []).append(c)
    wanted = None if not truths else {t.key for t in truths}
    if wanted is not None:
        missing = wanted - {key for key, _ in by_truth}
        if missing:
            raise ValueError(f"no records for truth(s) {sorted(missing)}")
    written = records_protocol(cells)
    results = []
    for key, source in sorted(by_truth):
        if wanted is None or key in wanted:
            own = [d for d in doubled if d.source == source]
            tc = truth_cells(key, by_truth[key, source])
            results += _truth_results(tc, own, proto, written, pilots or {})
    results = compare_input_dimensions(results)
    return [dataclasses.replace(r, finding=finding(r)) for r in familywise(results, proto)]


def _truth_results(
    tc: TruthCells, doubled: list[Cell], proto, records_protocol: str | None,
    pilots: Mapping,
) -> list[MetricResult]:  # fmt: skip
    """Every estimator and metric of one truth; the constructive-start comparison on the
    random start's entries when the records hold both starts.  ``records_protocol``: the
    protocol the records were written under (``verify.reading.records.records_protocol``)."""
    ctrl = budget_control(list(tc.cells_used), doubled)
    first = tc.cells_used[0]
    per_est: dict[str, list[MetricResult]] = {}
    for est in estimators_of(first):
        if ASVI.owns(est):  # ASVI's runs and the arms: fitted as ASVI is
            view = tc.through(est)
            own = est == first.primary_estimator
            role = "primary" if own else "arm"
            per_est[est] = [
                metric_result(view, m, ctrl.get(m) if own else None, "asvi", proto,
                              naming=Naming(est, ESTIMATOR_ARMS[est], role),
                              records_protocol=records_protocol)
                for m in METRICS
            ]  # fmt: skip
        else:
            per_est[est] = [
                metric_result(tc, m, ctrl.get(m), est, proto, records_protocol=records_protocol,
                              pilot=pilots.get((est, tc.key, m)))
                for m in METRICS
            ]  # fmt: skip
    if {"asvi", "asvi-constructive", "constructive-start"} <= set(per_est):
        for i, metric in enumerate(METRICS):
            cmp = compare_starts(
                tc.cells, tc.ns, metric, {e: rs[i] for e, rs in per_est.items()},
                proto.starts_arm,
            )  # fmt: skip
            per_est["asvi"][i] = dataclasses.replace(per_est["asvi"][i], starts=cmp)
    return [r for rs in per_est.values() for r in rs]


def _values(tc: TruthCells, estimator: str, metric: str) -> np.ndarray:
    return columns(tc.cells, lambda c: c.value(estimator, metric))


@dataclass(frozen=True)
class Naming:
    """How :func:`metric_result` names an entry in the results: ``name`` (None: the
    estimator it is fitted as), with ``arm`` and ``role`` for the constructive-start arms."""

    name: str | None = None
    arm: str | None = None
    role: str | None = None


def metric_result(
    tc: TruthCells, metric: str, ctrl: BudgetControl | None, estimator: str,
    proto: protocols.Protocol, naming: Naming | None = None,
    records_protocol: str | None = None, pilot: PilotCv | None = None,
) -> MetricResult:  # fmt: skip
    """The result of one estimator, truth and metric: the slope fit with the prospective
    power check and the one-sided theorem test
    (:func:`verify.reading.entry_records.theorem_result`), the curve with its curvature
    (:func:`verify.reading.entry_records.curve_result`), the attainment test against the
    class-matched reference with its negative control and its own power check
    (:func:`verify.reading.entry_records.attainment_result`), the budget control's state
    (``verify.reading.controls.budget_shift``), and for ASVI the oracle-width and fixed-width curves
    and the selection and convergence summaries (:func:`verify.reading.entry_records.asvi_summary`).
    A limited budget control makes the verdicts INCONCLUSIVE; a refused truth makes them
    UNDECIDABLE.  ``estimator``: what it is fitted as (``"asvi"`` for ASVI's runs and the
    constructive-start arms); ``naming``: its name in the results (default ``estimator``),
    with ``arm`` and ``role`` for the arms (:class:`Naming`).  The decision names the
    protocol it is made under (``proto``) and the one the records were written under
    (``records_protocol``).  ``pilot``: the entry's own pilot cvs, where its power comes
    from its own pilot (``verify.reading.design.prospective``)."""
    ns, spec = tc.ns, tc.spec
    name, arm, role = (naming.name, naming.arm, naming.role) if naming else (None, None, None)
    asvi, V = is_asvi(estimator), _values(tc, estimator, metric)
    design = TruthDesign(spec, tc.key, ns, tc.edges, V.shape[0])
    pro = prospective(design, estimator, metric, proto, pilot=pilot)
    fit = fit_slope(ns, V, log_power=pro.band_log_power, level=proto.level)
    curv = curvature(ns, V, level=proto.level)
    refused, att_refused = refusal(spec)
    F = columns(tc.cells, lambda c: c.at_width(metric, tc.w_fixed)) if asvi else None
    m = Measured(tc, metric, V, F)
    has_ref = att_refused is None and all(c.reference is not None for row in tc.cells for c in row)
    control = budget_shift(ctrl, proto.budget_margin) if asvi else None
    theorem = theorem_result(fit, pro, proto.theorem_rule)
    attainment = attainment_result(tc, V, F, metric, curv, pro, proto.level) if has_ref else None
    class_theorem = (class_theorem_result(tc, V, metric, proto, estimator)
                     if is_control(estimator) and not refused else None)  # fmt: skip
    override = (
        Verdict.UNDECIDABLE if refused  # the verdicts do not apply to this truth
        else Verdict.INCONCLUSIVE if control is not None and control.state == "limited"
        else None  # twice the budget moves the slope beyond the margin: not decided
    )  # fmt: skip
    if override is not None:
        theorem = dataclasses.replace(theorem, verdict=override)
        if attainment is not None:
            attainment = dataclasses.replace(attainment, verdict=override)
    else:  # what a re-run would give (verify.stats.replication); an overridden verdict is not
        theorem, attainment = replicated(m, pro, proto, fit, theorem, attainment)
    readable = not (is_control(estimator) or refused or proto.stated_rate)
    # verify.stats.readings, .logfactor
    theorem, lop = beside(m, fit, pro, proto, theorem, readable)
    equivalent = equivalence_reading(theorem, pro, proto, estimator, refused)  # never decides
    theorem = dataclasses.replace(theorem, equivalence=equivalent)
    return MetricResult(
        estimator=name or estimator,
        truth=tc.key,
        kind=spec.kind,
        alpha=spec.alpha,
        p=spec.p,
        metric=metric,
        primary=metric == PRIMARY_METRIC,
        arm=arm,
        role=role,
        theorem=theorem,
        curve=curve_result(fit, curv, V),
        replicates=tc.replicates,
        asvi=asvi_summary(tc, metric, V, F) if asvi else None,
        attainment=attainment,
        control=control,
        decision=Decision(
            protocol=proto.tag,
            records_protocol=records_protocol,
            refused=refused,
            attainment_refused=att_refused,
            expected_attainment=None if att_refused else pro.expected_attainment,
            expected_theorem=_expected_theorem(spec, estimator, metric, class_theorem),
        ),
        class_theorem=class_theorem,
        log_or_power=lop,
    )


def equivalence_reading(theorem, pro, proto, estimator: str, refused) -> Equivalence | None:
    """The equivalence reading of an entry's slope (``verify.stats.equivalence``): read where
    it is held to a stated rate with no log factor (its band of width 0, where the one-sided
    test cannot PASS an estimator at the rate) at the protocol's margin or the toolkit's
    default, and for every entry where the run names a margin (``--equivalence-margin``);
    never for a known-answer control (its own proven rate is its test) or a refused truth."""
    if is_control(estimator) or refused:
        return None
    exact = proto.stated_rate is not None and abs(pro.band_log_power) < 1e-12
    if not exact and proto.equivalence_margin is None:
        return None
    relative = proto.equivalence_margin or DEFAULT_RELATIVE_MARGIN
    return equivalence_test(theorem.predicted, theorem.ci_low, theorem.ci_high, relative)


def _expected_theorem(spec, estimator: str, metric: str, class_theorem):
    """A known-answer control's known verdict against the class band (None for others)."""
    if class_theorem is None:
        return None
    return expected_class_theorem(spec, estimator, metric, class_theorem.power, class_theorem.band)


def compare_input_dimensions(results: list[MetricResult]) -> list[MetricResult]:
    """Corollary 6.3: for the teacher the input dimension enters the rate only through log
    factors.  For every pair of teacher truths that differ only in p (same seed), per
    metric: both slopes and the ratio of their mean at the largest n both have
    (:class:`verify.results.InputDimension`), added to both results' ``input_dimension``;
    returns the results."""
    rows: dict[int, list[InputDimension]] = {}
    teach = [(i, r) for i, r in enumerate(results) if r.kind == "teacher"]
    for i, a in teach:
        for j, b in teach:
            if a.metric != b.metric or a.p >= b.p:
                continue
            if a.truth.split("-s")[-1] != b.truth.split("-s")[-1]:
                continue  # another teacher seed
            common = sorted(set(a.curve.ns) & set(b.curve.ns))
            if not common:
                continue
            n = common[-1]
            ratio = b.curve.mean[b.curve.ns.index(n)] / a.curve.mean[a.curve.ns.index(n)]
            row = InputDimension(
                metric=a.metric,
                p_small=a.p,
                p_large=b.p,
                slope_small=a.theorem.slope,
                slope_large=b.theorem.slope,
                n=n,
                ratio_large_to_small=ratio,
            )
            for k in (i, j):
                rows.setdefault(k, []).append(row)
    return [
        dataclasses.replace(r, input_dimension=r.input_dimension + tuple(rows[k]))
        if k in rows else r
        for k, r in enumerate(results)
    ]  # fmt: skip
