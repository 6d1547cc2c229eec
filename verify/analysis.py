"""The analysis behind ``python -m verify.rates``: per truth and metric, the slope fit,
the theorem and attainment tests with their controls, oracle-width and fixed-width
references, the budget-doubling control, failed cells, and the exit status (rules in
``verify.slopes``; every number they depend on in a protocol, ``verify.protocol``; the CLI
and its documentation in ``verify.rates``).

Which truths the verdicts apply to:

* **the theorem band's log power per truth** (:func:`band_log_power`): Hoelder truths are
  held to Corollaries 6.1/6.2's ``log^(2 delta) n``; the teacher to Corollary 6.4's own
  expression over the design's n (``theory.teacher_log_power``, its s0 the median of the
  records' teachers' non-zero edges, L0 = 2, widest layer 10); the Gaussian-process
  control to its proven rate, which carries no log;
* **integer alpha is refused** (:func:`refusal`): ``simulate.truths.functions.
  HolderFunction`` multiplies an integer alpha's coefficients by ``(1 + k)^-2``, so its
  truths are smoother than named (an ideal projection estimator's slope is -0.79 at
  alpha = 1 against e = -0.667): their verdicts are UNDECIDABLE with the reason stated;
* **alpha > 2 is refused for attainment**: the linear-spline reference saturates at
  ``n^(-4/(4+p))``, so beyond alpha = 2 it no longer attains the class's rate.
"""

from __future__ import annotations

import dataclasses
import math
import os

import numpy as np

from simulate.core.stopping import StopRule
from simulate.sweep.records import RecordsError, fields_differing
from simulate.sweep.spec import SweepConfig, TruthSpec, cell_selection
from theory import METRICS, gp_matern_exponent, log_factor_power, teacher_log_power
from verify import protocol as protocols
from verify.results import MetricResult
from verify.slopes import (
    Verdict,
    attainment_flip,
    attainment_power,
    attainment_test,
    budget_state,
    curvature,
    expected_slope_se,
    fail_p_value,
    finding,
    fit_slope,
    holm,
    log_allowance,
    log_power_of,
    loglog_slope,
    paired_slope_diff,
    power_check,
    theorem_test,
)
from verify.starts import (
    ARM_ESTIMATORS,
    ESTIMATOR_ARMS,
    arm_view,
    compare_starts,
    primary_estimator,
)

__all__ = [
    "control_records_path",
    "PRIMARY_METRIC",
    "analyse",
    "estimators_of",
    "expected_attainment",
    "gp_nu",
    "budget_control",
    "compare_input_dimensions",
    "exit_status",
    "reselect",
    "control_config",
    "band_log_power",
    "refusal",
    "records_protocol",
]

# The exit status is decided by d^2 alone (the left side of Theorems 4.1 and 5.1); d and
# squared L2 are near-transforms of it, reported beside it and not counted again.
PRIMARY_METRIC = "d2"
EXIT_PASS, EXIT_FAIL, EXIT_BAD_INPUT, EXIT_INCONCLUSIVE, EXIT_CRASH = 0, 1, 2, 3, 4


def _truth_of(rec: dict) -> TruthSpec:
    t = rec["truth"]
    return TruthSpec(kind=t["kind"], p=int(t["p"]), alpha=t.get("alpha"), seed=int(t["seed"]))


def _cell_table(recs: list[dict]):
    ns = sorted({r["cell"]["n"] for r in recs})
    table = {(r["cell"]["replicate"], r["cell"]["n"]): r for r in recs}
    reps = sorted({r["cell"]["replicate"] for r in recs})
    complete = [q for q in reps if all((q, n) in table for n in ns)]
    return ns, table, complete, sorted(set(reps) - set(complete))


def _smallest_common_width(recs: list[dict]) -> int:
    common = set.intersection(*(set(r["config"]["widths"]) for r in recs))
    if not common:
        raise ValueError("the cells share no candidate width (no non-adaptive control)")
    return min(common)


def _per_width(rec: dict, metric: str, width: int) -> float:
    return rec["per_width"][metric][rec["config"]["widths"].index(width)]


def estimators_of(rec: dict) -> list[str]:
    """The estimators a record holds: ``["asvi"]`` for a sweep record (``"asvi"`` is the
    random start; ``"asvi-constructive"`` when only the constructive start ran), its arms'
    (``verify.starts.ARM_ESTIMATORS``) after it when the record has them, the names in
    ``per_estimator`` for the known-answer control's (``"gp-matern-NU"``)."""
    if rec.get("per_estimator"):
        return sorted(rec["per_estimator"])
    return [primary_estimator(rec)] + [ARM_ESTIMATORS[a] for a in sorted(rec.get("arms", {}))]


def is_arm(rec: dict, estimator: str) -> bool:
    """Whether ``estimator`` is one of the record's constructive-start arms, reported
    beside the record's own ASVI run but not deciding the exit status."""
    return estimator in ESTIMATOR_ARMS and estimator != primary_estimator(rec)


def analyse(
    records: list[dict],
    truths: list[TruthSpec] | None = None,
    control: list[dict] | None = None,
    protocol: protocols.Protocol | str | None = None,
):
    """Fit and test every (estimator, truth, metric) of the records under ``protocol`` (a
    :class:`verify.protocol.Protocol` or its name; default ``verify.protocol.DEFAULT``);
    returns a list of :class:`verify.results.MetricResult`.  ``control``: the
    budget-doubling records (:func:`budget_control`), if any.  The FAILs that set the exit
    status are Holm-adjusted over the run's family of tests (:func:`_familywise`)."""
    proto = (
        protocol
        if isinstance(protocol, protocols.Protocol)
        else protocols.load(protocol or protocols.DEFAULT)
    )
    by_truth: dict[str, list[dict]] = {}
    for r in records:
        by_truth.setdefault(r["cell"]["truth"], []).append(r)
    wanted = None if not truths else {t.key for t in truths}
    if wanted is not None:
        missing = wanted - set(by_truth)
        if missing:
            raise ValueError(f"no records for truth(s) {sorted(missing)}")
    results = []
    for key in sorted(by_truth):
        if wanted is None or key in wanted:
            cells = _truth_cells(key, by_truth[key])
            ctrl = budget_control(cells["recs"], control or [])
            first = by_truth[key][0]
            per_est = {}
            for est in estimators_of(first):
                if est in ESTIMATOR_ARMS:  # ASVI's runs and the arms: fitted as ASVI is
                    view = _arm_cells(cells, est)
                    c = ctrl if est == primary_estimator(first) else {}
                    rs = [_metric_result(view, m, c, "asvi", proto) for m in METRICS]
                    for r in rs:
                        r.estimator = est
                        r.arm = ESTIMATOR_ARMS[est]
                        r.role = "arm" if is_arm(first, est) else "primary"
                else:
                    rs = [_metric_result(cells, m, ctrl, est, proto) for m in METRICS]
                per_est[est] = rs
                results += rs
            if {"asvi", "asvi-constructive", "constructive-start"} <= set(per_est):
                for i, metric in enumerate(METRICS):
                    cmp = compare_starts(
                        cells["cells"], cells["ns"], metric,
                        {e: rs[i] for e, rs in per_est.items()}, proto.starts_arm,
                    )  # fmt: skip
                    per_est["asvi"][i].update({"starts": cmp, **{k: cmp[k] for k in START_KEYS}})
    compare_input_dimensions(results)
    theirs = records_protocol(records)
    for r in results:
        r.protocol, r.records_protocol = proto.tag, theirs
    _familywise(results, proto)
    for r in results:
        r.finding = finding(r.to_json())
    return results


def records_protocol(records: list[dict]) -> str | None:
    """The protocol the records were written under (``"NAME@DIGEST"``, the sweep's
    ``protocol`` setting), ``"mixed: A, B"`` when they differ, None when none carries one
    (records written before protocols, or outside one)."""
    tags = sorted({str(r.get("config", {}).get("protocol")) for r in records} - {"None"})
    if not tags:
        return None
    return tags[0] if len(tags) == 1 else "mixed: " + ", ".join(tags)


def is_control(estimator: str) -> bool:
    """Whether an estimator is the known-answer control's (``gp-matern-NU``)."""
    return estimator.startswith("gp-matern-")


def _deciding(r: MetricResult) -> bool:
    """Whether an entry's tests set the exit status through their own verdicts: the
    primary metric of an ASVI run (not an arm; not a known-answer control entry, whose
    outcome is its agreement with the known answer, :func:`entry_outcome`)."""
    return r.metric == PRIMARY_METRIC and r.role != "arm" and not is_control(r.estimator)


def _familywise(results: list[MetricResult], proto: protocols.Protocol) -> None:
    """Holm over the one-sided FAIL p-values of every test that can set the exit status
    (each deciding entry's theorem and attainment tests, less entries refused or made
    INCONCLUSIVE by an optimisation-limited budget control; ``verify.slopes.holm`` at the
    protocol's one-sided level; the family is the records' truths, or ``--truth``'s);
    ``fail_p_holm`` and ``fail_familywise`` (None where the entry has no FAIL) on every
    deciding entry.  Protocol ``familywise = "none"``: no
    adjustment."""
    tests = [
        (r, name)
        for r in results
        if _deciding(r) and r.refused is None and r.budget_state != "limited"
        for name in ("theorem", "attainment")
        if r.fail_p is not None and r.fail_p.get(name) is not None
        and math.isfinite(r.fail_p[name])
    ]  # fmt: skip
    ps = [r.fail_p[name] for r, name in tests]
    if proto.familywise == "holm":
        adj = holm(ps, proto.alpha_one_sided)["adjusted"]
    else:
        adj = ps
    for (r, name), a in zip(tests, adj, strict=True):
        r.fail_p_holm = {**(r.fail_p_holm or {}), name: a}
    for r in results:
        if not _deciding(r):
            continue
        fails = [
            n for n, v in (("theorem", r.verdict), ("attainment", r.attainment_verdict))
            if v == Verdict.FAIL
        ]  # fmt: skip
        if not fails:
            r.fail_familywise = None
            continue
        held = r.fail_p_holm or {}
        r.fail_familywise = any(
            held.get(n) is not None and held[n] <= proto.alpha_one_sided for n in fails
        )


# the comparison's keys copied into the random start's entry (verify.starts): the fields of
# MetricResult's "starts" group
START_KEYS = tuple(
    f.name
    for f in dataclasses.fields(MetricResult)
    if f.metadata["group"] == "starts" and f.name != "starts"
)


def _arm_cells(tc: dict, estimator: str) -> dict:
    """``tc`` with every record seen through ``estimator``'s arm (``verify.starts``)."""
    return {
        **tc,
        "recs": [arm_view(r, estimator) for r in tc["recs"]],
        "first": [arm_view(r, estimator) for r in tc["first"]],
        "cells": [[arm_view(c, estimator) for c in row] for row in tc["cells"]],
    }


def _truth_cells(key: str, records: list[dict]) -> dict:
    """One truth's cells as the fits need them: ``cells[replicate][n]`` over the replicates
    complete at every n, less any replicate with a failed cell (every candidate diverged:
    no metric; slopes pair replicates across n, so it leaves every fit of this truth and
    the report says so)."""
    failed = sorted((r["cell"]["n"], r["cell"]["replicate"]) for r in records if r["failed"])
    excluded = sorted({q for _, q in failed})
    recs = [r for r in records if r["cell"]["replicate"] not in excluded]
    if not recs:
        raise ValueError(f"{key}: every replicate has a failed cell (n, replicate) {failed}")
    ns, table, complete, dropped = _cell_table(recs)
    if len(ns) < 3:
        raise ValueError(f"{key}: need at least 3 sample sizes, the records have {ns}")
    if not complete:
        raise ValueError(f"{key}: no replicate has records at every n {ns}")
    asvi = "per_width" in recs[0]
    return {
        "key": key,
        "spec": _truth_of(records[0]),
        "recs": recs,
        "ns": ns,
        "complete": complete,
        "dropped": dropped,
        "failed": failed,
        "excluded": excluded,
        "first": [table[(complete[0], n)] for n in ns],  # one record per n (its config)
        "cells": [[table[(q, n)] for n in ns] for q in complete],  # [replicate][n]
        "w_fixed": _smallest_common_width(recs) if asvi else None,
    }


def _predicted(spec: TruthSpec, estimator: str, metric: str) -> float:
    """The exponent an estimator's entry is tested against: the paper's (ASVI), or the
    Gaussian-process prior's proven one (``theory.gp_matern_exponent``)."""
    if estimator == "asvi":
        return spec.predicted(metric)
    return float(gp_matern_exponent(spec.alpha, gp_nu(estimator), spec.p, metric))


def gp_nu(estimator: str) -> float:
    """The Matern smoothness of a ``"gp-matern-NU"`` estimator name."""
    if not estimator.startswith("gp-matern-"):
        raise ValueError(f"not a Gaussian-process estimator: {estimator!r}")
    return float(estimator.removeprefix("gp-matern-"))


def expected_attainment(
    spec: TruthSpec, estimator: str, metric: str, allowance: float, power: dict
) -> Verdict | None:
    """The known answer of a control entry's attainment test, derived from the proven
    exponent gap ``g = e_nu - e`` (``theory.gp_matern_exponent`` against the class's
    exponent) against the allowance, with ``h`` the design's prospective half-width of the
    paired difference and ``gap = |e| / 2 - allowance`` (``power``:
    :func:`verify.slopes.attainment_power`):

    * FAIL when ``g > allowance + 2 h`` (the design shows the prior slower);
    * when ``g <= allowance - 2 h`` (the design shows it within the allowance): PASS where
      ``gap > 0``, UNDECIDABLE where the allowance eats half the rate (a pass is withheld);
    * None otherwise: ``g`` lies within two half-widths of the allowance, so this design
      has no known answer (the entry is reported, not counted).

    None for ASVI (no known answer)."""
    if not is_control(estimator):
        return None
    g = _predicted(spec, estimator, metric) - spec.predicted(metric)
    h = power["half_width"]
    if g > allowance + 2 * h:
        return Verdict.FAIL
    if g <= allowance - 2 * h:
        return Verdict.PASS if power["gap"] > 0 else Verdict.UNDECIDABLE
    return None


def band_log_power(tc: dict, estimator: str, metric: str, delta: float) -> float:
    """The log power c of the theorem band ``[e, e + c ell]`` for one truth (module
    docstring): ``2 delta`` (Hoelder, Corollaries 6.1/6.2; delta for d), Corollary 6.4's
    own expression over the design's n (the teacher), 0 (the Gaussian-process control)."""
    spec = tc["spec"]
    if is_control(estimator):
        return 0.0
    if spec.kind == "teacher":
        edges = [
            r["truth"].get("function", {}).get("n_edges") for r in tc["recs"]
        ]  # each replicate its own teacher
        edges = [e for e in edges if e]
        if not edges:
            raise ValueError(f"{tc['key']}: the records do not carry the teacher's edge count")
        s0 = int(round(float(np.median(edges))))
        return float(teacher_log_power(tc["ns"], s0, spec.p, delta=delta, metric=metric))
    return float(log_factor_power(metric, delta))


# the linear spline's approximation order: the reference attains n^(-2a/(2a+p)) up to a = 2
REFERENCE_SATURATION_ALPHA = 2.0


def refusal(spec: TruthSpec) -> tuple[str | None, str | None]:
    """``(verdicts, attainment)``: why a truth's verdicts, or its attainment test alone,
    are refused (module docstring); None where they apply."""
    if spec.kind != "holder":
        return None, None
    a = float(spec.alpha)
    if a.is_integer():
        return (
            f"integer alpha = {a:g}: the construction is smoother than named (its"
            " coefficients carry (1 + k)^-2); use a non-integer alpha",
            None,
        )
    if a > REFERENCE_SATURATION_ALPHA:
        return None, (f"alpha = {a:g} > 2: the linear-spline reference saturates at n^(-4/(4+p))")
    return None, None


def _values(cells, estimator: str, metric: str) -> np.ndarray:
    if estimator == "asvi":
        return np.array([[c["metrics"][metric] for c in row] for row in cells])
    return np.array([[c["per_estimator"][estimator][metric] for c in row] for row in cells])


def _metric_result(
    tc: dict, metric: str, ctrl: dict, estimator: str, proto: protocols.Protocol
) -> MetricResult:
    """The result of one estimator, truth and metric: the slope fit, the prospective
    power check and the one-sided theorem test, curvature, the attainment test against
    the class-matched reference (with its negative control and its own power check), the
    budget control's state, and for ASVI the oracle-width and fixed-width curves and the
    selection and convergence summaries."""
    ns, cells, spec = tc["ns"], tc["cells"], tc["spec"]
    asvi = estimator == "asvi"
    V = _values(cells, estimator, metric)
    R = V.shape[0]
    pro = _prospective(tc, estimator, metric, R, proto)
    lp, pred, power = pro["band_log_power"], pro["predicted"], pro["theorem_power"]
    fit = fit_slope(ns, V, log_power=lp, level=proto.level)
    th = theorem_test(fit, pred, power["separable"])
    curv = curvature(ns, V, level=proto.level)
    refused, att_refused = refusal(spec)
    res = {
        "estimator": estimator,
        "truth": tc["key"],
        "kind": spec.kind,
        "alpha": spec.alpha,
        "p": spec.p,
        "metric": metric,
        "primary": metric == PRIMARY_METRIC,
        "predicted": pred,
        "slope": fit.slope,
        "ci_low": fit.ci_low,
        "ci_high": fit.ci_high,
        "corrected_slope": fit.corrected_slope,
        "verdict": th["verdict"],
        "direction": th["direction"],
        "control_slow_rejected": th["control_slow_rejected"],
        "control_exponents": [th["slow_exponent"]],
        "band": th["band"],
        "band_log_power": lp,
        "c_flip": th["c_flip"],
        "power_separable": power["separable"],
        "power": power,
        "level": fit.level,
        "ns": ns,
        "mean": fit.mean.tolist(),
        "se": fit.se.tolist(),
        "local_slopes": fit.local_slopes.tolist(),
        "top_half_slope": curv["top_half_slope"],
        "top_half_ci": curv["top_half_ci"],
        "top_half_ns": curv["top_ns"],
        "bend": curv["bend"],
        "bend_ci": curv["bend_ci"],
        "bending": curv["bending"],
        "replicates": tc["complete"],
        "dropped_replicates": tc["dropped"],
        "failed_cells": [list(c) for c in tc["failed"]],
        "excluded_replicates": tc["excluded"],
        "refused": refused,
    }
    F = _fixed(tc, cells, metric) if asvi else None
    res.update(_asvi_summaries(tc, cells, metric, V, F) if asvi else _no_asvi_summaries())
    has_ref = att_refused is None and all(c.get("reference") for row in cells for c in row)
    c, a_power = pro["allowance_log_power"], pro["attainment_power"]
    res.update(_attainment(ns, V, F, cells, metric, has_ref, curv, c, a_power, proto.level))
    res["attainment_refused"] = att_refused
    res["expected_attainment"] = pro["expected_attainment"]
    res["fail_p"] = {
        "theorem": th["fail_p"],
        "attainment": res.pop("attainment_fail_p"),
    }
    res.update(_control_shift(ctrl, metric, estimator, proto.budget_margin))
    if res["budget_state"] == "limited":  # twice the budget moves the slope: not decided
        res["verdict"] = Verdict.INCONCLUSIVE
        if res["attainment_verdict"] is not None:
            res["attainment_verdict"] = Verdict.INCONCLUSIVE
    if refused:  # the verdicts do not apply to this truth
        res["verdict"] = Verdict.UNDECIDABLE
        if res["attainment_verdict"] is not None:
            res["attainment_verdict"] = Verdict.UNDECIDABLE
    res["finding"] = finding(res)
    return MetricResult(**res)


def _prospective(tc: dict, estimator: str, metric: str, R: int, proto) -> dict:
    """Everything an entry's verdicts take from the design before its data, for
    ``_metric_result`` and :func:`design_power` alike: the predicted exponent, the band's
    log power, the pilot cvs and the slope SE they imply, the theorem test's power, the
    attainment allowance (its log power in the metric's own scale: d is the square root of
    d^2) with its power against half the reference's rate, and a control's known
    answer.  ``tc``: the truth's ``spec``, ``key``, ``ns`` and ``recs`` (teachers' edges)."""
    spec, ns = tc["spec"], list(tc["ns"])
    lp = band_log_power(tc, estimator, metric, proto.delta)
    pred = _predicted(spec, estimator, metric)
    cv, cv_diff = _pilot_cvs(proto, tc["key"], spec, estimator, metric)
    se = expected_slope_se(ns, R, cv)
    power = {**power_check(ns, pred, lp, se, R, proto.level), "pilot_cv": cv, "slope_se": se}
    c = (
        proto.attainment_log_power
        * log_factor_power(metric, 1)
        / log_factor_power(PRIMARY_METRIC, 1)
    )
    allowance = log_allowance(ns, c)
    a_power = attainment_power(ns, spec.predicted(metric), allowance,
                               expected_slope_se(ns, R, cv_diff), R, proto.level)  # fmt: skip
    a_power["pilot_cv_diff"] = cv_diff
    return {
        "predicted": pred, "band_log_power": lp, "pilot_cv": cv, "slope_se": se,
        "theorem_power": power, "allowance_log_power": c, "allowance": allowance,
        "attainment_power": a_power,
        "expected_attainment": expected_attainment(spec, estimator, metric, allowance, a_power),
    }  # fmt: skip


def _pilot_cvs(proto, key: str, spec: TruthSpec, estimator: str, metric: str):
    """The protocol's pilot cvs (a cell's d^2, and the paired difference with the
    reference) for one entry, in the metric's own scale: d, the square root of d^2, has
    half the relative spread (delta method); squared L2 is taken as d^2's."""
    kind = "gp" if is_control(estimator) else spec.kind
    scale = log_factor_power(metric, 1) / log_factor_power(PRIMARY_METRIC, 1)
    return (scale * proto.cv_for(key, kind), scale * proto.cv_for(key, kind, diff=True))


def _fixed(tc, cells, metric):
    return np.array([[_per_width(c, metric, tc["w_fixed"]) for c in row] for row in cells])


def _asvi_summaries(tc, cells, metric, V, F) -> dict:
    """ASVI's own columns: oracle-width and fixed-width (``F``) curves, selections, steps,
    lambda_s and the converged fraction."""
    ns = tc["ns"]
    by_n = list(zip(*cells, strict=True))  # [n][replicate]
    O = np.array([[min(c["per_width"][metric]) for c in row] for row in cells])
    oracle = fit_slope(ns, O)
    ratio = paired_slope_diff(ns, V, O)
    conv = [bool(x) for row in cells for c in row for x in c["per_width"]["converged"]]
    return {
        "oracle_mean": oracle.mean.tolist(),
        "oracle_slope": oracle.slope,
        "oracle_ratio": (V.mean(0) / oracle.mean).tolist(),
        "oracle_ratio_slope": ratio["diff"],
        "oracle_ratio_ci": [ratio["ci_low"], ratio["ci_high"]],
        "fixed_width": tc["w_fixed"],
        "fixed_mean": F.mean(0).tolist(),
        "fixed_slope": fit_slope(ns, F).slope,
        "selected_widths": [[c["selected_width"] for c in row] for row in cells],
        "selected_at_top": [sum(bool(c.get("selected_at_top")) for c in col) for col in by_n],
        "candidate_widths": [r["config"]["widths"] for r in tc["first"]],
        "steps_max": [max(max(c["per_width"]["steps"]) for c in col) for col in by_n],
        "lambda_s": [r["config"]["lambda_s"] for r in tc["first"]],
        "converged_fraction": float(np.mean(conv)),
    }


def _no_asvi_summaries() -> dict:
    keys = (
        "oracle_mean", "oracle_slope", "oracle_ratio", "oracle_ratio_slope", "oracle_ratio_ci",
        "fixed_width", "fixed_mean", "fixed_slope", "selected_widths", "selected_at_top",
        "candidate_widths", "steps_max", "lambda_s", "converged_fraction",
    )  # fmt: skip
    return dict.fromkeys(keys)


def _control_shift(ctrl: dict, metric: str, estimator: str, margin: float) -> dict:
    """The budget control's change of the slope (doubled minus base, paired over the
    replicates both have at every control n) and its state as an equivalence test against
    ``margin`` (``verify.slopes.budget_state``): converged, undetermined or limited; only
    limited makes the verdicts INCONCLUSIVE."""
    sh = ctrl.get("slope_shift", {}).get(metric) if estimator == "asvi" else None
    state = budget_state(sh, margin)
    return {
        "budget_control": ctrl.get(metric) if estimator == "asvi" else None,
        "control_slope_shift": None if sh is None else sh["diff"],
        "control_slope_shift_ci": None if sh is None else [sh["ci_low"], sh["ci_high"]],
        "control_ns": None if sh is None else sh["ns"],
        "optimisation_limited": None if sh is None else state == "limited",
        "budget_state": state,
        "budget_margin": None if sh is None else margin,
    }


def compare_input_dimensions(results: list[MetricResult]) -> list[dict]:
    """Corollary 6.3: for the teacher the input dimension enters the rate only through log
    factors.  For every pair of teacher truths that differ only in p (same seed), per
    metric: both slopes and the ratio of their mean at the largest n both have.  The
    comparison is also stored in each result (``input_dimension``)."""
    out = []
    teach = [r for r in results if r.kind == "teacher"]
    for a in teach:
        for b in teach:
            if a.metric != b.metric or a.p >= b.p:
                continue
            if a.truth.split("-s")[-1] != b.truth.split("-s")[-1]:
                continue  # another teacher seed
            common = sorted(set(a.ns) & set(b.ns))
            if not common:
                continue
            n = common[-1]
            ratio = b.mean[b.ns.index(n)] / a.mean[a.ns.index(n)]
            row = {
                "metric": a.metric,
                "p_small": a.p,
                "p_large": b.p,
                "slope_small": a.slope,
                "slope_large": b.slope,
                "n": n,
                "ratio_large_to_small": ratio,
            }
            out.append(row)
            for r in (a, b):
                r.input_dimension = [*(r.input_dimension or []), row]
    return out


def _attainment(ns, V, F, cells, metric, has_ref, curv, log_power, power, level) -> dict:
    """The attainment test against the class-matched reference (``verify.slopes``) over
    the whole design (the range fixed before the run; the top half's difference is
    reported beside it and never decides), with its prospective power against half the
    reference's rate; its negative control (SVI at the smallest candidate width, ``F``;
    None for the known-answer control, whose over-smooth prior is the control) must FAIL
    the same test or a PASS becomes INCONCLUSIVE.  Also the piecewise-polynomial oracle's
    curve, where the records hold it."""
    keys = (
        "reference_slope", "reference_mean", "reference_top_half_slope", "reference_k",
        "reference_oracle_mean", "reference_oracle_slope", "attainment_diff",
        "attainment_ci_low", "attainment_ci_high", "attainment_verdict", "attainment_control",
        "attainment_log_power", "attainment_log_power_ci", "log_allowance",
        "log_power_allowed", "attainment_top_half", "attainment_power", "attainment_c_flip",
    )  # fmt: skip
    if not has_ref:
        return {**dict.fromkeys(keys), "attainment_fail_p": None}
    ns = np.asarray(ns, dtype=float)
    Ref = np.array([[c["reference"][metric] for c in row] for row in cells])
    ref = fit_slope(ns, Ref, level=level)
    d = paired_slope_diff(ns, V, Ref, level=level)
    allowance = log_allowance(ns, log_power)
    v = attainment_test(d, allowance, power["separable"], power["gap"])
    top = np.array(curv["top_index"])
    dt = paired_slope_diff(ns[top], V[:, top], Ref[:, top], level=level)
    control = None
    if F is not None:
        dc = paired_slope_diff(ns, F, Ref, level=level)
        ctrl_v = attainment_test(dc, allowance, power["separable"], power["gap"])
        control = {**dc, "verdict": ctrl_v, "rejected": ctrl_v == Verdict.FAIL}
        if ctrl_v != Verdict.FAIL and v == Verdict.PASS:
            v = Verdict.INCONCLUSIVE  # the test could not tell a fixed small network from ASVI
    lpw = log_power_of(d, ns)
    oracle = [[c["reference"].get("oracle") for c in row] for row in cells]
    has_oracle = all(o is not None for row in oracle for o in row)
    O = np.array([[o[metric] for o in row] for row in oracle]) if has_oracle else None
    return {
        "reference_slope": ref.slope,
        "reference_mean": ref.mean.tolist(),
        "reference_top_half_slope": fit_slope(ns[top], Ref[:, top], min_points=2).slope,
        "reference_k": np.median(
            np.array([[c["reference"].get("k", np.nan) for c in row] for row in cells]), axis=0
        ).tolist(),
        "reference_oracle_mean": None if O is None else O.mean(0).tolist(),
        "reference_oracle_slope": None if O is None else fit_slope(ns, O).slope,
        "attainment_diff": d["diff"],
        "attainment_ci_low": d["ci_low"],
        "attainment_ci_high": d["ci_high"],
        "attainment_verdict": v,
        "attainment_control": control,
        "attainment_log_power": lpw["c_hat"],
        "attainment_log_power_ci": lpw["ci"],
        "log_allowance": allowance,
        "log_power_allowed": log_power,
        "attainment_top_half": {
            "ns": ns[top].tolist(),
            "diff": dt["diff"],
            "ci": [dt["ci_low"], dt["ci_high"]],
            "log_power": dt["diff"] / loglog_slope(ns[top]),
        },  # fmt: skip
        "attainment_power": power,
        "attainment_c_flip": attainment_flip(d, ns),
        "attainment_fail_p": fail_p_value(d["diff"], allowance, d["se"], V.shape[0]),
    }


def budget_control(records: list[dict], doubled: list[dict]) -> dict:
    """Per metric, per n present in ``doubled``: the change of the selected metric when the
    same cells are re-trained with twice the cap and half the tolerance, paired over the
    replicates both have.  ``moved`` when the mean moves by more than the cell's
    standard error (between-replicate SE of the base mean; descriptive, per n: the slope's
    equivalence test, ``verify.slopes.budget_state``, is what enters the verdicts); also
    the paired SE of the change and the fraction of replicates whose selected width
    changed."""
    base = {(r["cell"]["truth"], r["cell"]["n"], r["cell"]["replicate"]): r for r in records}
    out: dict[str, list] = {}
    pairs: dict[int, list] = {}
    for r in doubled:
        k = (r["cell"]["truth"], r["cell"]["n"], r["cell"]["replicate"])
        if k in base and not (base[k]["failed"] or r["failed"]):  # failed cells: no metric
            pairs.setdefault(k[1], []).append((base[k], r))
    for metric in METRICS:
        rows = []
        for n in sorted(pairs):
            a = np.array([b["metrics"][metric] for b, _ in pairs[n]])
            b = np.array([d["metrics"][metric] for _, d in pairs[n]])
            R = len(a)
            cell_se = float(a.std(ddof=1) / np.sqrt(R)) if R > 1 else float("nan")
            ch = b - a
            ch_se = float(ch.std(ddof=1) / np.sqrt(R)) if R > 1 else float("nan")
            change = float(ch.mean())
            rows.append(
                {
                    "n": n,
                    "replicates": R,
                    "base_mean": float(a.mean()),
                    "doubled_mean": float(b.mean()),
                    "change": change,
                    "change_se": ch_se,
                    "cell_se": cell_se,
                    "selection_changed": float(
                        np.mean([x["selected_width"] != y["selected_width"] for x, y in pairs[n]])
                    ),
                    "moved": bool(np.isfinite(cell_se) and abs(change) > cell_se),
                }
            )
        if rows:
            out[metric] = rows
    shift = _slope_shifts(pairs)
    if shift:
        out["slope_shift"] = shift
    return out


def _slope_shifts(pairs: dict) -> dict:
    """Per metric, the slope of the doubled run minus the slope of the base run over the
    control's n (at least two), paired over the replicates present at every one of them:
    the budget control in slope units (``verify.slopes.paired_slope_diff``)."""
    ns = sorted(pairs)
    if len(ns) < 2:
        return {}
    reps = set.intersection(*({b["cell"]["replicate"] for b, _ in pairs[n]} for n in ns))
    if not reps:
        return {}
    reps = sorted(reps)
    out = {}
    for metric in METRICS:
        base = {n: {b["cell"]["replicate"]: b["metrics"][metric] for b, _ in pairs[n]} for n in ns}
        dbl = {n: {b["cell"]["replicate"]: d["metrics"][metric] for b, d in pairs[n]} for n in ns}
        B = np.array([[base[n][q] for n in ns] for q in reps])
        D = np.array([[dbl[n][q] for n in ns] for q in reps])
        out[metric] = {"ns": ns, "replicates": reps, **paired_slope_diff(ns, D, B)}
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
    att = r.attainment_verdict
    if is_control(r.estimator):
        exp = r.expected_attainment
        if exp is None or att == exp:
            return Verdict.PASS
        if (att == Verdict.FAIL) or (exp == Verdict.FAIL and att == Verdict.PASS):
            return Verdict.FAIL  # a rejection against the known answer
        return Verdict.INCONCLUSIVE
    verdicts = [r.verdict] + ([att] if att is not None else [])
    if Verdict.FAIL in verdicts:
        return Verdict.FAIL if r.fail_familywise is not False else Verdict.INCONCLUSIVE
    if any(v in (Verdict.INCONCLUSIVE, Verdict.UNDECIDABLE) for v in verdicts):
        return Verdict.INCONCLUSIVE
    return Verdict.PASS


def control_fields(fields: dict) -> dict:
    """The fingerprint fields (``simulate.sweep.spec.fingerprint_fields``) of the
    budget-doubling control of a sweep with ``fields``: :func:`control_config`'s changes
    applied to the fields themselves (tested equal to the fields of :func:`control_config`),
    so a control file can be checked against the records it controls without rebuilding
    their configuration."""
    out = dict(fields)
    rule = StopRule(
        out["max_steps"], out["stop_window"], out["stop_tol"], out["stop_patience"],
        out["stop_kl_abs"], out.get("stop_risk_tol"),
    ).doubled()  # fmt: skip
    out.update(max_steps=rule.max_steps, stop_tol=rule.tol, stop_kl_abs=rule.kl_abs)
    if rule.risk_tol is not None:
        out["stop_risk_tol"] = rule.risk_tol
    if out.get("max_epochs") is not None:
        out["max_epochs"] = 2 * out["max_epochs"]
    if out.get("start") == "both":  # the control re-trains the random start's run
        out.pop("start")
    return out


def check_control(records: list[dict], control: list[dict], source: str, cpath: str) -> None:
    """Raise :class:`~simulate.sweep.records.RecordsError` unless the control records
    ``control`` (file ``cpath``) are the budget-doubling control of ``records`` (file
    ``source``): their fingerprint fields must be :func:`control_fields` of the records'
    (the same data, seeds, truths and code settings; twice the cap, half the tolerance)."""
    if not records or not control:
        return
    main_fields = records[0].get("fingerprint_fields")
    got = control[0].get("fingerprint_fields")
    if not isinstance(main_fields, dict) or not isinstance(got, dict) or not main_fields:
        raise RecordsError(
            f"{source} or {cpath} carries no fingerprint_fields, so the control cannot be"
            " checked against its records; give --no-control"
        )
    try:
        want = control_fields(main_fields)
    except (KeyError, TypeError) as exc:
        raise RecordsError(f"{source}: fingerprint_fields lack {exc}; give --no-control") from None
    if got != want:
        raise RecordsError(
            f"{cpath} is not the budget-doubling control of {source} ("
            f"{fields_differing(want, got)}); give the control file of those records"
            " (--control-records) or --no-control"
        )


def control_records_path(path: str) -> str:
    """Where a sweep's budget-doubling control writes beside it: ``RECORDS-double.jsonl``
    (of a compressed ``RECORDS.jsonl.gz``, ``RECORDS-double.jsonl.gz``)."""
    gz = path.endswith(".gz")
    root, ext = os.path.splitext(path[:-3] if gz else path)
    return f"{root}-double{ext or '.jsonl'}" + (".gz" if gz else "")


def exit_status(results: list[MetricResult]) -> int:
    """0 / 1 / 3 from the primary metric's entries (:func:`entry_outcome`)."""
    outcomes = [entry_outcome(r) for r in results if r.metric == PRIMARY_METRIC and r.role != "arm"]
    if Verdict.FAIL in outcomes:
        return EXIT_FAIL
    if Verdict.INCONCLUSIVE in outcomes:
        return EXIT_INCONCLUSIVE
    return EXIT_PASS


def reselect(records: list[dict], lam: float) -> list[dict]:
    """The records with the width re-selected under the width prior's ``lam`` from their
    recorded ELBOs (``simulate.sweep.runner.cell_selection``, eq. (13)); ``lam`` enters nothing
    else, so this equals a sweep run with it."""
    out = []
    for r in records:
        W = r["config"]["widths"]
        out.append({**r, "config": {**r["config"], "lam": lam}, **_reselected(r, W, lam)})
        if r.get("arms"):  # the arms that select by the ELBO (the plain arm does not)
            out[-1]["arms"] = {
                a: arm if "val_mse" in arm["per_width"] else {**arm, **_reselected(arm, W, lam)}
                for a, arm in r["arms"].items()
            }
    return out


def _reselected(r: dict, widths, lam: float) -> dict:
    sel = cell_selection(r["per_width"], widths, lam)
    return {
        **{k: sel[k] for k in ("selected_width", "selected_at_top", "metrics")},
        "per_width": {**r["per_width"], "penalized_elbo": sel["penalized_elbo"]},
    }


def control_config(cfg: SweepConfig, replicates: int, every_n: bool = False) -> SweepConfig:
    """The budget-doubling control's sweep: the smallest and largest n (every n with
    ``every_n``), the first ``replicates`` replicates, twice the step cap (``max_steps`` and
    ``max_epochs`` both doubled, so the cap doubles at every n), half the tolerance; same
    seeds and the same largest n, so the same data."""
    rule = cfg.stop_rule.doubled()
    return dataclasses.replace(
        cfg,
        # the control re-trains the record's own ASVI run: with both starts, the random one
        start="random" if cfg.start == "both" else cfg.start,
        ns=list(cfg.ns) if every_n else [min(cfg.ns), max(cfg.ns)],
        replicates=min(replicates, cfg.replicates),
        max_steps=rule.max_steps,
        max_epochs=None if cfg.max_epochs is None else 2 * cfg.max_epochs,
        stop_tol=rule.tol,
        stop_kl_abs=rule.kl_abs,
        stop_risk_tol=rule.risk_tol,
    )


def design_power(cfg: SweepConfig, proto: protocols.Protocol) -> list[dict]:
    """The prospective power of a sweep's design before any training, per truth and
    estimator (d^2): the band's log power, the pilot cv and the slope SE it implies
    (``verify.slopes.expected_slope_se``), the theorem test's power against e/2
    (``power_check``), the attainment test's against half the reference's rate
    (``attainment_power``) and, for the known-answer control, the answer the design
    implies (:func:`expected_attainment`); a refusal where the verdicts do not apply.
    The teacher's s0 is the median of the design's replicate teachers' edge counts."""
    ests = ["asvi"] if cfg.estimator == "asvi" else [
        f"gp-matern-{float(nu):g}" for nu in cfg.gp_nus
    ]  # fmt: skip
    m, R, ns = PRIMARY_METRIC, cfg.replicates, list(cfg.ns)
    rows = []
    for t in cfg.truths:
        recs = []
        if t.kind == "teacher":
            recs = [{"truth": {"function": {"n_edges": t.build(q).n_edges}}} for q in range(R)]
        tc = {"spec": t, "ns": ns, "key": t.key, "recs": recs}
        refused, att_refused = refusal(t)
        for est in ests:
            pro = _prospective(tc, est, m, R, proto)
            row = {
                "truth": t.key, "estimator": est, "refused": refused,
                "attainment_refused": att_refused,
                **{k: pro[k] for k in ("predicted", "band_log_power", "pilot_cv", "slope_se",
                                       "theorem_power")},
                "attainment_power": None, "allowance": None, "expected_attainment": None,
            }  # fmt: skip
            if t.kind == "holder" and att_refused is None:
                row.update({k: pro[k] for k in ("attainment_power", "allowance",
                                                "expected_attainment")})  # fmt: skip
            rows.append(row)
    return rows
