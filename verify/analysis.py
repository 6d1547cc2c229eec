"""The analysis behind ``python -m verify.rates``: per truth, estimator and metric, the slope
fit, the theorem and attainment tests with their controls, the oracle-width and fixed-width
references and the budget-doubling control's state, each a frozen record of
``verify.results`` built by the function here that computes it; then the constructive
starts' comparison, Corollary 6.3's input-dimension comparison and the family-wise
adjustment (``verify.status``).  The rules are in ``verify.theorem`` and
``verify.attainment`` (on the fits of ``verify.slopes``); what the design says before the
data (bands, refusals, power) in ``verify.design``; the budget control in
``verify.controls``; every number they depend on in a protocol (``verify.protocol``); the
records are read into typed cells once, by ``verify.records``.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from simulate.sweep.truth_spec import TruthSpec
from theory import METRICS
from verify import protocol as protocols
from verify.attainment import (
    attainment_flip,
    attainment_margin,
    attainment_test,
    attainment_verdicts,
    log_power_of,
)
from verify.controls import BudgetControl, budget_control, budget_shift
from verify.design import (
    PRIMARY_METRIC,
    Prospective,
    band_log_power,
    expected_class_theorem,
    is_control,
    prospective,
    refusal,
)
from verify.findings import finding
from verify.records import (
    ESTIMATOR_ARMS,
    Cell,
    TruthCells,
    cells_of,
    columns,
    estimators_of,
    records_protocol,
    truth_cells,
)
from verify.replication import replicate
from verify.results import (
    AsviSummary,
    Attainment,
    AttainmentControl,
    Curve,
    Decision,
    InputDimension,
    MetricResult,
    ReferenceCurve,
    TheoremTest,
    TopHalfDiff,
)
from verify.slopes import (
    Curvature,
    SlopeFit,
    boot_slopes,
    curvature,
    diff_intervals,
    fit_slope,
    loglog_slope,
    paired_slope_diff,
    slope_intervals,
)
from verify.starts import compare_starts
from verify.status import familywise
from verify.theorem import fail_p_value, theorem_margin, theorem_test, theorem_verdicts
from verify.verdict import Verdict

__all__ = [
    "analyse",
    "asvi_summary",
    "attainment_result",
    "compare_input_dimensions",
    "curve_result",
    "metric_result",
    "theorem_result",
]


def analyse(
    records: list[dict],
    truths: list[TruthSpec] | None = None,
    control: list[dict] | None = None,
    protocol: protocols.Protocol | str | None = None,
) -> list[MetricResult]:
    """Fit and test every (estimator, truth, metric) of the records under ``protocol`` (a
    :class:`verify.protocol.Protocol` or its name; default: the shipped protocol the
    records were written under, ``verify.protocol.of_records``, else
    ``verify.protocol.DEFAULT``);
    returns a list of :class:`verify.results.MetricResult`.  ``control``: the
    budget-doubling records (``verify.controls``), if any.  The FAILs that set the exit
    status are Holm-adjusted over the run's family of tests (``verify.status``).  The
    records are read into cells here, once (``verify.records``)."""
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
            results += _truth_results(tc, own, proto, written)
    results = compare_input_dimensions(results)
    return [dataclasses.replace(r, finding=finding(r)) for r in familywise(results, proto)]


def _truth_results(
    tc: TruthCells, doubled: list[Cell], proto, records_protocol: str | None
) -> list[MetricResult]:
    """Every estimator and metric of one truth; the constructive-start comparison on the
    random start's entries when the records hold both starts.  ``records_protocol``: the
    protocol the records were written under (``verify.records.records_protocol``)."""
    ctrl = budget_control(list(tc.cells_used), doubled)
    first = tc.cells_used[0]
    per_est: dict[str, list[MetricResult]] = {}
    for est in estimators_of(first):
        if est in ESTIMATOR_ARMS:  # ASVI's runs and the arms: fitted as ASVI is
            view = tc.through(est)
            own = est == first.primary_estimator
            role = "primary" if own else "arm"
            per_est[est] = [
                metric_result(view, m, ctrl.get(m) if own else None, "asvi", proto,
                              name=est, arm=ESTIMATOR_ARMS[est], role=role,
                              records_protocol=records_protocol)
                for m in METRICS
            ]  # fmt: skip
        else:
            per_est[est] = [
                metric_result(tc, m, ctrl.get(m), est, proto, records_protocol=records_protocol)
                for m in METRICS
            ]
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


def metric_result(
    tc: TruthCells, metric: str, ctrl: BudgetControl | None, estimator: str,
    proto: protocols.Protocol, name: str | None = None, arm: str | None = None,
    role: str | None = None, records_protocol: str | None = None,
) -> MetricResult:  # fmt: skip
    """The result of one estimator, truth and metric: the slope fit with the prospective
    power check and the one-sided theorem test (:func:`theorem_result`), the curve with
    its curvature (:func:`curve_result`), the attainment test against the class-matched
    reference with its negative control and its own power check
    (:func:`attainment_result`), the budget control's state
    (``verify.controls.budget_shift``), and for ASVI the oracle-width and fixed-width
    curves and the selection and convergence summaries (:func:`asvi_summary`).  A limited
    budget control makes the verdicts INCONCLUSIVE; a refused truth makes them
    UNDECIDABLE.  ``estimator``: what it is fitted as (``"asvi"`` for ASVI's runs and
    the constructive-start arms); ``name``: its name in the results (default
    ``estimator``), with ``arm`` and ``role`` for the arms.  The decision names the
    protocol it is made under (``proto``) and the one the records were written under
    (``records_protocol``)."""
    ns, spec = tc.ns, tc.spec
    asvi = estimator == "asvi"
    V = _values(tc, estimator, metric)
    R = V.shape[0]
    pro = prospective(spec, tc.key, ns, tc.edges, estimator, metric, R, proto)
    fit = fit_slope(ns, V, log_power=pro.band_log_power, level=proto.level)
    curv = curvature(ns, V, level=proto.level)
    refused, att_refused = refusal(spec)
    F = columns(tc.cells, lambda c: c.at_width(metric, tc.w_fixed)) if asvi else None
    has_ref = att_refused is None and all(c.reference is not None for row in tc.cells for c in row)
    control = budget_shift(ctrl, proto.budget_margin) if asvi else None
    theorem = theorem_result(fit, pro, proto.theorem_rule)
    attainment = attainment_result(tc, V, F, metric, curv, pro, proto.level) if has_ref else None
    class_theorem = (
        class_theorem_result(tc, V, metric, proto) if is_control(estimator) and not refused
        else None
    )  # fmt: skip
    override = (
        Verdict.UNDECIDABLE if refused  # the verdicts do not apply to this truth
        else Verdict.INCONCLUSIVE if control is not None and control.state == "limited"
        else None  # twice the budget moves the slope beyond the margin: not decided
    )  # fmt: skip
    if override is not None:
        theorem = dataclasses.replace(theorem, verdict=override)
        if attainment is not None:
            attainment = dataclasses.replace(attainment, verdict=override)
    else:  # what a re-run would give (verify.replication); an overridden verdict is not
        theorem, attainment = replicated(tc, V, F, metric, pro, proto, fit, theorem, attainment)
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
        curve=curve_result(fit, curv),
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
            expected_theorem=None if class_theorem is None else expected_class_theorem(
                spec, estimator, metric, class_theorem.power, class_theorem.band),
        ),
        class_theorem=class_theorem,
    )


def theorem_result(fit: SlopeFit, pro: Prospective, rule: str = "reject-e/2") -> TheoremTest:
    """The slope fit and the one-sided theorem test (``verify.theorem.theorem_test``, under
    the protocol's ``rule``) with the design's prospective power check."""
    th = theorem_test(fit, pro.predicted, pro.theorem_power.separable, rule)
    return TheoremTest(
        predicted=pro.predicted,
        slope=fit.slope,
        ci_low=fit.ci_low,
        ci_high=fit.ci_high,
        corrected_slope=fit.corrected_slope,
        level=fit.level,
        band_log_power=pro.band_log_power,
        band=th.band,
        verdict=th.verdict,
        direction=th.direction,
        control_slow_rejected=th.control_slow_rejected,
        control_exponents=(th.slow_exponent,),
        c_flip=th.c_flip,
        fail_p=th.fail_p,
        power=pro.theorem_power,
        rule=th.rule,
        c_pass=th.c_pass,
    )


def _rows_band(tc: TruthCells, pro: Prospective, metric: str, proto):
    """``band(rows)``: the theorem band's log power on the replicates ``rows`` -- the
    teacher's from its median edge count over them (``verify.design.band_log_power``,
    kept per median), any other truth's the design's own."""
    if tc.spec.kind != "teacher" or pro.band_log_power == 0.0:
        return lambda rows: pro.band_log_power
    edges = np.array([row[0].n_edges for row in tc.cells], dtype=float)
    kept: dict[int, float] = {}

    def band(rows):
        s0 = int(round(float(np.median(edges[rows]))))
        if s0 not in kept:
            kept[s0] = band_log_power(tc.spec, tc.ns, [s0], "asvi", metric, proto.delta, tc.key)
        return kept[s0]

    return band


def replicated(
    tc: TruthCells, V: np.ndarray, F: np.ndarray | None, metric: str, pro: Prospective,
    proto, fit: SlopeFit, theorem: TheoremTest, attainment: Attainment | None,
) -> tuple[TheoremTest, Attainment | None]:  # fmt: skip
    """The theorem and attainment tests with their replication (``verify.replication``):
    each whole decision recomputed on the protocol's bootstrap resamples of the replicates
    and on each leave-one-out set, by the batched forms of the functions that made it
    (``verify.slopes.slope_intervals``, ``diff_intervals``, ``theorem_verdicts``,
    ``attainment_verdicts``: :func:`verify.theorem.theorem_test` and ``attainment_test``
    decide through the same ones); the band on each resample's own replicates (the
    teacher's from their edge counts); the prospective power as designed.  The margins are
    the realised verdict's (``fit``: the slope fit that decided it)."""
    ns, level, R = np.asarray(tc.ns, dtype=float), proto.level, V.shape[0]
    rep = proto.replication
    band, ell = _rows_band(tc, pro, metric, proto), loglog_slope(ns)

    def theorem_on(rows):
        _, lo, hi, _ = slope_intervals(ns, V[rows], level)
        tops = pro.predicted + ell * np.array([band(r) for r in rows])
        return theorem_verdicts(lo, hi, pro.predicted, tops, pro.theorem_power.separable,
                                proto.theorem_rule)  # fmt: skip

    margin = theorem_margin(fit, theorem.verdict, theorem.band, theorem.rule)
    theorem = dataclasses.replace(theorem, replication=replicate(
        theorem_on, R, theorem.verdict, margin,
        rep["resamples"], rep["floor"], rep["seed"],
    ))  # fmt: skip
    if attainment is None:
        return theorem, None
    Ref = columns(tc.cells, lambda c: c.reference.metrics[metric])
    power = pro.attainment_power

    def attain_on(rows):
        ref = boot_slopes(ns, Ref[rows])  # the reference's side, shared by both differences
        _, lo, hi, _ = diff_intervals(ns, V[rows], Ref[rows], level, b_boot=ref)
        v = attainment_verdicts(lo, hi, pro.allowance, power.separable, power.gap)
        passed = v == Verdict.PASS
        if F is not None and passed.any():  # the negative control must FAIL, or a PASS is
            k = np.flatnonzero(passed)      # INCONCLUSIVE
            _, clo, chi, _ = diff_intervals(ns, F[rows[k]], Ref[rows[k]], level, b_boot=ref[k])
            cv = attainment_verdicts(clo, chi, pro.allowance, power.separable, power.gap)
            v[k] = np.where(cv != Verdict.FAIL, Verdict.INCONCLUSIVE, v[k])
        return v

    ctrl = None if attainment.control is None else attainment.control.diff
    margin = attainment_margin(attainment.diff, attainment.allowance, attainment.verdict,
                               ctrl, power.gap)  # fmt: skip
    return theorem, dataclasses.replace(attainment, replication=replicate(
        attain_on, R, attainment.verdict, margin, rep["resamples"], rep["floor"], rep["seed"],
    ))  # fmt: skip


def class_theorem_result(tc: TruthCells, V: np.ndarray, metric: str, proto) -> TheoremTest | None:
    """A known-answer control entry held to the truth class's band as well (the exponent
    and log power an ASVI entry on this truth is held to, :func:`verify.design.prospective`
    as for ``"asvi"``; the power at the control's pilot cv), so that its theorem test has a
    known answer in both directions (:func:`expected_class_theorem`).  Under the confirming
    rule only (None under the earlier protocols: they decide as they did)."""
    if proto.theorem_rule != "confirm":
        return None
    pro = prospective(tc.spec, tc.key, tc.ns, tc.edges, "asvi", metric, V.shape[0], proto,
                      cv_kind="gp")  # fmt: skip
    fit = fit_slope(tc.ns, V, log_power=pro.band_log_power, level=proto.level)
    t = theorem_result(fit, pro, proto.theorem_rule)
    return replicated(tc, V, None, metric, pro, proto, fit, t, None)[0]


def curve_result(fit: SlopeFit, curv: Curvature) -> Curve:
    """The fitted curve per n and its curvature (``verify.slopes.curvature``)."""
    return Curve(
        ns=tuple(int(n) for n in fit.ns),
        mean=tuple(fit.mean.tolist()),
        se=tuple(fit.se.tolist()),
        local_slopes=tuple(fit.local_slopes.tolist()),
        top_half_slope=curv.top_half_slope,
        top_half_ci=curv.top_half_ci,
        top_half_ns=curv.top_ns,
        bend=curv.bend,
        bend_ci=curv.bend_ci,
        bending=curv.bending,
    )


def asvi_summary(tc: TruthCells, metric: str, V: np.ndarray, F: np.ndarray) -> AsviSummary:
    """ASVI's own columns: oracle-width and fixed-width (``F``) curves, selections, steps,
    lambda_s and the converged fraction."""
    ns, cells = tc.ns, tc.cells
    by_n = list(zip(*cells, strict=True))  # [n][replicate]
    O = columns(cells, lambda c: min(c.per_width[metric]))
    oracle = fit_slope(ns, O)
    ratio = paired_slope_diff(ns, V, O)
    conv = [bool(x) for row in cells for c in row for x in c.per_width["converged"]]
    return AsviSummary(
        oracle_mean=tuple(oracle.mean.tolist()),
        oracle_slope=oracle.slope,
        oracle_ratio=tuple((V.mean(0) / oracle.mean).tolist()),
        oracle_ratio_slope=ratio.diff,
        oracle_ratio_ci=ratio.ci,
        fixed_width=tc.w_fixed,
        fixed_mean=tuple(F.mean(0).tolist()),
        fixed_slope=fit_slope(ns, F).slope,
        selected_widths=tuple(tuple(c.selected_width for c in row) for row in cells),
        selected_at_top=tuple(sum(c.selected_at_top for c in col) for col in by_n),
        candidate_widths=tuple(c.widths for c in tc.first),
        steps_max=tuple(max(max(c.per_width["steps"]) for c in col) for col in by_n),
        lambda_s=tuple(c.lambda_s for c in tc.first),
        converged_fraction=float(np.mean(conv)),
    )


def attainment_result(
    tc: TruthCells, V: np.ndarray, F: np.ndarray | None, metric: str, curv: Curvature,
    pro: Prospective, level: float,
) -> Attainment:  # fmt: skip
    """The attainment test against the class-matched reference (``verify.attainment``) over
    the whole design (the range fixed before the run; the top half's difference is
    reported beside it and never decides), with its prospective power against half the
    reference's rate; its negative control (SVI at the smallest candidate width, ``F``;
    None for the known-answer control, whose over-smooth prior is the control) must FAIL
    the same test or a PASS becomes INCONCLUSIVE.  Also the piecewise-polynomial oracle's
    curve, where the records hold it."""
    cells = tc.cells
    power, log_power = pro.attainment_power, pro.allowance_log_power
    ns = np.asarray(tc.ns, dtype=float)
    Ref = columns(cells, lambda c: c.reference.metrics[metric])
    ref = fit_slope(ns, Ref, level=level)
    d = paired_slope_diff(ns, V, Ref, level=level)
    allowance = pro.allowance
    v = attainment_test(d, allowance, power.separable, power.gap)
    top = np.array(curv.top_index)
    dt = paired_slope_diff(ns[top], V[:, top], Ref[:, top], level=level)
    control = None
    if F is not None:
        dc = paired_slope_diff(ns, F, Ref, level=level)
        ctrl_v = attainment_test(dc, allowance, power.separable, power.gap)
        control = AttainmentControl(dc, ctrl_v, ctrl_v == Verdict.FAIL)
        if ctrl_v != Verdict.FAIL and v == Verdict.PASS:
            v = Verdict.INCONCLUSIVE  # the test could not tell a fixed small network from ASVI
    has_oracle = all(c.reference.oracle is not None for row in cells for c in row)
    O = columns(cells, lambda c: c.reference.oracle[metric]) if has_oracle else None
    K = columns(cells, lambda c: np.nan if c.reference.k is None else c.reference.k)
    return Attainment(
        reference=ReferenceCurve(
            slope=ref.slope,
            mean=tuple(ref.mean.tolist()),
            top_half_slope=fit_slope(ns[top], Ref[:, top], min_points=2).slope,
            k=tuple(np.median(K, axis=0).tolist()),
            oracle_mean=None if O is None else tuple(O.mean(0).tolist()),
            oracle_slope=None if O is None else fit_slope(ns, O).slope,
        ),
        diff=d,
        verdict=v,
        control=control,
        log_power=log_power_of(d, ns),
        allowance=allowance,
        allowance_log_power=log_power,
        top_half=TopHalfDiff(
            ns=tuple(ns[top].tolist()),
            diff=dt.diff,
            ci=dt.ci,
            log_power=dt.diff / loglog_slope(ns[top]),
        ),
        power=power,
        c_flip=attainment_flip(d, ns),
        fail_p=fail_p_value(d.diff, allowance, d.se, V.shape[0]),
    )


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
