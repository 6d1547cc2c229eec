"""The analysis behind ``python -m verify.rates``: per truth and metric, the slope fit,
the theorem and attainment tests with their controls, oracle-width and fixed-width
references, the budget-doubling control, failed cells, and the exit status (rules in
``verify.slopes``; the CLI and its documentation in ``verify.rates``)."""

from __future__ import annotations

import dataclasses

import numpy as np

from simulate.sweep import SweepConfig, TruthSpec, cell_selection
from theory import log_factor_power

from .slopes import (
    attainment_test,
    finding,
    fit_slope,
    paired_slope_diff,
    theorem_test,
)

__all__ = [
    "METRICS",
    "analyse",
    "budget_control",
    "compare_input_dimensions",
    "exit_status",
    "reselect",
    "control_config",
]

METRICS = ("d2", "d", "l2sq")
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


def analyse(
    records: list[dict],
    truths: list[TruthSpec] | None = None,
    delta: float = 1.0,
    control: list[dict] | None = None,
):
    """Fit and test every (truth, metric) of the records; returns a list of result dicts.
    ``control``: the budget-doubling records (:func:`budget_control`), if any."""
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
            results += [_metric_result(cells, metric, delta, ctrl) for metric in METRICS]
    compare_input_dimensions(results)
    return results


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
        "w_fixed": _smallest_common_width(recs),
    }


def _metric_result(tc: dict, metric: str, delta: float, ctrl: dict) -> dict:
    """The result dict of one truth and metric: the slope fit, the theorem test with its
    controls, the oracle-width and fixed-width curves, the attainment test, the selection
    and convergence summaries and the budget control's verdict."""
    ns, cells, spec = tc["ns"], tc["cells"], tc["spec"]
    by_n = list(zip(*cells, strict=True))  # [n][replicate]
    V = np.array([[c["metrics"][metric] for c in row] for row in cells])
    fit = fit_slope(ns, V, log_power=log_factor_power(metric, delta))
    pred = spec.predicted(metric)
    th = theorem_test(fit, pred)
    O = np.array([[min(c["per_width"][metric]) for c in row] for row in cells])
    F = np.array([[_per_width(c, metric, tc["w_fixed"]) for c in row] for row in cells])
    oracle = fit_slope(ns, O)
    ratio = paired_slope_diff(ns, V, O)
    conv = [bool(x) for row in cells for c in row for x in c["per_width"]["converged"]]
    res = {
        "truth": tc["key"],
        "kind": spec.kind,
        "alpha": spec.alpha,
        "p": spec.p,
        "metric": metric,
        "predicted": pred,
        "slope": fit.slope,
        "ci_low": fit.ci_low,
        "ci_high": fit.ci_high,
        "corrected_slope": fit.corrected_slope,
        "verdict": th["verdict"],
        "direction": th["direction"],
        "control_slow_rejected": th["control_slow_rejected"],
        "control_fast_rejected": th["control_fast_rejected"],
        "control_exponents": [th["slow_exponent"], th["fast_exponent"]],
        "band": [pred, pred + fit.shift],
        "level": fit.level,
        "ns": ns,
        "mean": fit.mean.tolist(),
        "se": fit.se.tolist(),
        "local_slopes": fit.local_slopes.tolist(),
        "oracle_mean": oracle.mean.tolist(),
        "oracle_slope": oracle.slope,
        "oracle_ratio": (fit.mean / oracle.mean).tolist(),
        "oracle_ratio_slope": ratio["diff"],
        "oracle_ratio_ci": [ratio["ci_low"], ratio["ci_high"]],
        "fixed_width": tc["w_fixed"],
        "fixed_mean": F.mean(0).tolist(),
        "fixed_slope": fit_slope(ns, F).slope,
        "replicates": tc["complete"],
        "dropped_replicates": tc["dropped"],
        "failed_cells": [list(c) for c in tc["failed"]],
        "excluded_replicates": tc["excluded"],
        "selected_widths": [[c["selected_width"] for c in row] for row in cells],
        "selected_at_top": [sum(bool(c.get("selected_at_top")) for c in col) for col in by_n],
        "candidate_widths": [r["config"]["widths"] for r in tc["first"]],
        "steps_max": [max(max(c["per_width"]["steps"]) for c in col) for col in by_n],
        "lambda_s": [r["config"]["lambda_s"] for r in tc["first"]],
        "converged_fraction": float(np.mean(conv)),
        "budget_control": ctrl.get(metric),
        "optimisation_limited": (
            None if metric not in ctrl else any(c["limited"] for c in ctrl[metric])
        ),
    }
    has_ref = all(c.get("reference") for row in cells for c in row)
    res.update(_attainment(ns, V, F, cells, metric, has_ref))
    res["finding"] = finding(res["verdict"], res["attainment_verdict"], res["direction"])
    return res


def compare_input_dimensions(results: list[dict]) -> list[dict]:
    """Corollary 6.3: for the teacher the input dimension enters the rate only through log
    factors.  For every pair of teacher truths that differ only in p (same seed), per
    metric: both slopes and the ratio of their mean at the largest n both have.  The
    comparison is also stored in each result (``input_dimension``)."""
    out = []
    teach = [r for r in results if r["kind"] == "teacher"]
    for a in teach:
        for b in teach:
            if a["metric"] != b["metric"] or a["p"] >= b["p"]:
                continue
            if a["truth"].split("-s")[-1] != b["truth"].split("-s")[-1]:
                continue  # another teacher seed
            common = sorted(set(a["ns"]) & set(b["ns"]))
            if not common:
                continue
            n = common[-1]
            ratio = b["mean"][b["ns"].index(n)] / a["mean"][a["ns"].index(n)]
            row = {
                "metric": a["metric"],
                "p_small": a["p"],
                "p_large": b["p"],
                "slope_small": a["slope"],
                "slope_large": b["slope"],
                "n": n,
                "ratio_large_to_small": ratio,
            }
            out.append(row)
            for r in (a, b):
                r.setdefault("input_dimension", []).append(row)
    return out


def _attainment(ns, V, F, cells, metric: str, has_ref: bool) -> dict:
    """The attainment test against the classical reference, with its negative control."""
    if not has_ref:
        return {
            "reference_slope": None,
            "reference_mean": None,
            "reference_bins": None,
            "attainment_diff": None,
            "attainment_ci_low": None,
            "attainment_ci_high": None,
            "attainment_verdict": None,
            "attainment_control": None,
        }
    Ref = np.array([[c["reference"][metric] for c in row] for row in cells])
    ref = fit_slope(ns, Ref)
    d = paired_slope_diff(ns, V, Ref)
    dc = paired_slope_diff(ns, F, Ref)
    ctrl_v = attainment_test(dc)
    v = attainment_test(d)
    if ctrl_v != "FAIL" and v == "PASS":
        v = "INCONCLUSIVE"  # the test could not tell a fixed small network from ASVI
    bins = [[c["reference"]["bins"][metric] for c in row] for row in cells]
    return {
        "reference_slope": ref.slope,
        "reference_mean": ref.mean.tolist(),
        "reference_bins": np.median(np.array(bins), axis=0).tolist(),
        "attainment_diff": d["diff"],
        "attainment_ci_low": d["ci_low"],
        "attainment_ci_high": d["ci_high"],
        "attainment_verdict": v,
        "attainment_control": {
            "diff": dc["diff"],
            "ci_low": dc["ci_low"],
            "ci_high": dc["ci_high"],
            "verdict": ctrl_v,
            "rejected": ctrl_v == "FAIL",
        },
    }


def budget_control(records: list[dict], doubled: list[dict]) -> dict:
    """Per metric, per n present in ``doubled``: the change of the selected metric when the
    same cells are re-trained with twice the cap and half the tolerance, paired over the
    replicates both have.  ``limited`` when the mean moves by more than the cell's
    standard error (between-replicate SE of the base mean); also the paired SE of the change
    and the fraction of replicates whose selected width changed."""
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
                    "limited": bool(np.isfinite(cell_se) and abs(change) > cell_se),
                }
            )
        if rows:
            out[metric] = rows
    return out


def exit_status(results: list[dict], strict: bool = False) -> int:
    """0 / 1 / 3 from the theorem verdicts (and the attainment verdicts with ``strict``)."""
    verdicts = [r["verdict"] for r in results]
    if strict:
        verdicts += [r["attainment_verdict"] for r in results if r["attainment_verdict"]]
    if "FAIL" in verdicts:
        return EXIT_FAIL
    if "INCONCLUSIVE" in verdicts:
        return EXIT_INCONCLUSIVE
    return EXIT_PASS


def reselect(records: list[dict], lam: float) -> list[dict]:
    """The records with the width re-selected under the width prior's ``lam`` from their
    recorded ELBOs (``simulate.sweep.cell_selection``, eq. (13)); ``lam`` enters nothing
    else, so this equals a sweep run with it."""
    out = []
    for r in records:
        sel = cell_selection(r["per_width"], r["config"]["widths"], lam)
        out.append(
            {
                **r,
                "config": {**r["config"], "lam": lam},
                **{k: sel[k] for k in ("selected_width", "selected_at_top", "metrics")},
                "per_width": {**r["per_width"], "penalized_elbo": sel["penalized_elbo"]},
            }
        )
    return out


def control_config(cfg: SweepConfig, replicates: int, every_n: bool = False) -> SweepConfig:
    """The budget-doubling control's sweep: the smallest and largest n (every n with
    ``every_n``), the first ``replicates`` replicates, twice the step cap (``max_steps`` and
    ``max_epochs`` both doubled, so the cap doubles at every n), half the tolerance; same
    seeds and the same largest n, so the same data."""
    rule = cfg.stop_rule.doubled()
    return dataclasses.replace(
        cfg,
        ns=list(cfg.ns) if every_n else [min(cfg.ns), max(cfg.ns)],
        replicates=min(replicates, cfg.replicates),
        max_steps=rule.max_steps,
        max_epochs=None if cfg.max_epochs is None else 2 * cfg.max_epochs,
        stop_tol=rule.tol,
        stop_kl_abs=rule.kl_abs,
    )
