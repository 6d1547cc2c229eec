"""``python -m verify.rates``: does ASVI's posterior contract at the predicted rate, and
at the rate that is achievable on the same data?

Runs (or, with ``--records``, only reads) a growing-n sweep of ASVI (``simulate.sweep``:
every candidate width trained to convergence, candidate widths growing with n, a classical
reference fitted on the same datasets) and, for each truth and metric, prints a
convergence table and three tests (rules in ``verify.slopes``):

* **theorem test**: the log-log slope's 95% interval against the band ``[e, e + shift]``
  of the exponent e predicted by ``theory`` (shift: the theorem's log factor), with two
  negative controls, *too slow* (e/2) and *too fast* (2e): PASS needs both rejected by the
  same rule, otherwise INCONCLUSIVE; FAIL when the band is missed;
* **attainment test**: ASVI's slope minus the slope of the classical reference
  (piecewise polynomials, bins chosen by true error) on the same replicates, paired; its
  negative control is non-adaptive SVI at the smallest candidate width, which must FAIL it
  (otherwise the test had no power and says INCONCLUSIVE);
* **oracle-width SVI**: per cell the candidate with the smallest true error in hindsight;
  the ASVI/oracle risk ratio per n and its slope (Corollary 6.2: adaptation may cost at
  most a log factor).

A **budget-doubling control** re-trains the smallest and largest n of each truth with twice
the step cap and half the stopping tolerance (same data, same seeds); a cell whose selected
metric moves by more than its standard error is marked *optimisation-limited*.  Cells whose
selection sits at the largest candidate width are counted in the table.

Metrics: ``d2`` (VB-posterior mean of the squared Hellinger distance, the left side of
Theorems 4.1 and 5.1; primary), ``d`` (posterior mean Hellinger distance) and ``l2sq``
(squared L2 error of the posterior-mean predictor), each against its own exponent.

Exit status (from the theorem tests): 0 when every one passes, 1 when any fails, 3 when
none fails but some is inconclusive, 2 on bad input (nothing is trained and no record
file is touched).  ``--strict`` adds the attainment tests to that rule.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
import traceback

import numpy as np

from simulate import tiers
from simulate.records import check_output_dir, check_output_file
from simulate.sweep import (
    TRUTH_HELP,
    RecordsError,
    SweepConfig,
    TruthSpec,
    cell_selection,
    one_configuration,
    parse_truths,
    read_records,
    records_path_for,
)
from theory import log_factor_power

from .slopes import (
    ATTAIN_TOL,
    attainment_test,
    finding,
    fit_slope,
    paired_slope_diff,
    theorem_test,
)

__all__ = ["TIERS", "main", "analyse", "budget_control", "exit_status"]

METRICS = ("d2", "d", "l2sq")
EXIT_PASS, EXIT_FAIL, EXIT_BAD_INPUT, EXIT_INCONCLUSIVE, EXIT_CRASH = 0, 1, 2, 3, 4

TIERS = tiers.RATES  # one tiers module: simulate.tiers


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
        if wanted is not None and key not in wanted:
            continue
        spec = _truth_of(by_truth[key][0])
        # a failed cell (every candidate diverged) has no metric: its replicate leaves
        # every fit of this truth (slopes pair replicates across n), and the report says so
        failed = sorted(
            (r["cell"]["n"], r["cell"]["replicate"]) for r in by_truth[key] if r["failed"]
        )
        excluded = sorted({q for _, q in failed})
        recs = [r for r in by_truth[key] if r["cell"]["replicate"] not in excluded]
        if not recs:
            raise ValueError(f"{key}: every replicate has a failed cell (n, replicate) {failed}")
        ns, table, complete, dropped = _cell_table(recs)
        if len(ns) < 3:
            raise ValueError(f"{key}: need at least 3 sample sizes, the records have {ns}")
        if not complete:
            raise ValueError(f"{key}: no replicate has records at every n {ns}")
        cells = [[table[(q, n)] for n in ns] for q in complete]  # [replicate][n]
        by_n = [[table[(q, n)] for q in complete] for n in ns]  # [n][replicate]
        widths = np.array([[c["selected_width"] for c in row] for row in cells])
        at_top = [sum(bool(row[j].get("selected_at_top")) for row in cells) for j in range(len(ns))]
        conv = [bool(x) for row in cells for c in row for x in c["per_width"]["converged"]]
        w_fixed = _smallest_common_width(recs)
        has_ref = all(c.get("reference") for row in cells for c in row)
        ctrl = budget_control(recs, control or [])
        for metric in METRICS:
            V = np.array([[c["metrics"][metric] for c in row] for row in cells])
            fit = fit_slope(ns, V, log_power=log_factor_power(metric, delta))
            pred = spec.predicted(metric)
            th = theorem_test(fit, pred)
            O = np.array([[min(c["per_width"][metric]) for c in row] for row in cells])
            F = np.array([[_per_width(c, metric, w_fixed) for c in row] for row in cells])
            oracle = fit_slope(ns, O)
            ratio = paired_slope_diff(ns, V, O)
            res = {
                "truth": key,
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
                "fixed_width": w_fixed,
                "fixed_mean": F.mean(0).tolist(),
                "fixed_slope": fit_slope(ns, F).slope,
                "replicates": complete,
                "dropped_replicates": dropped,
                "failed_cells": [list(c) for c in failed],
                "excluded_replicates": excluded,
                "selected_widths": widths.tolist(),
                "selected_at_top": at_top,
                "candidate_widths": [table[(complete[0], n)]["config"]["widths"] for n in ns],
                "steps_max": [max(max(c["per_width"]["steps"]) for c in col) for col in by_n],
                "lambda_s": [table[(complete[0], n)]["config"]["lambda_s"] for n in ns],
                "converged_fraction": float(np.mean(conv)),
                "budget_control": ctrl.get(metric),
                "optimisation_limited": (
                    None if metric not in ctrl else any(c["limited"] for c in ctrl[metric])
                ),
            }
            res.update(_attainment(ns, V, F, cells, metric, has_ref))
            res["finding"] = finding(res["verdict"], res["attainment_verdict"], res["direction"])
            results.append(res)
    compare_input_dimensions(results)
    return results


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


def _f(x, fmt="7.3f") -> str:
    return f"{'n/a':>{fmt.split('.')[0]}s}" if x is None else format(x, fmt)


def format_results(results: list[dict]) -> str:
    lines = []
    for key in dict.fromkeys(r["truth"] for r in results):
        rows = [r for r in results if r["truth"] == key]
        r0 = rows[0]
        lines += [
            "",
            f"== {key}  ({len(r0['replicates'])} replicates"
            + (
                f"; dropped incomplete {r0['dropped_replicates']}"
                if r0["dropped_replicates"]
                else ""
            )
            + f"; {100 * r0['converged_fraction']:.0f}% of candidate models converged)",
        ]
        if r0["failed_cells"]:
            lines.append(
                f"   FAILED cells (every candidate diverged), (n, replicate): "
                f"{', '.join(f'({n}, {q})' for n, q in r0['failed_cells'])};"
                f" replicates {r0['excluded_replicates']} excluded from every fit"
            )
        limited = {c["n"] for c in (r0["budget_control"] or []) if c["limited"]}
        lines.append(
            f"{'n':>7s} {'steps':>6s} {'cands':>9s} {'top':>3s} {'widths (selected)':>18s}  "
            + "  ".join(f"{m + ' mean':>10s} {'se':>8s} {'local':>6s}" for m in METRICS)
        )
        for j, n in enumerate(r0["ns"]):
            ws = ",".join(str(w[j]) for w in r0["selected_widths"])
            cands = f"{r0['candidate_widths'][j][0]}..{r0['candidate_widths'][j][-1]}"
            cols = []
            for r in rows:
                loc = f"{r['local_slopes'][j - 1]:6.3f}" if j else f"{'':6s}"
                cols.append(f"{r['mean'][j]:10.4g} {r['se'][j]:8.2g} {loc}")
            mark = "*" if n in limited else " "
            lines.append(
                f"{n:6d}{mark} {r0['steps_max'][j]:6d} {cands:>9s} {r0['selected_at_top'][j]:3d}"
                f" {ws:>18s}  " + "  ".join(cols)
            )
        if limited:
            lines.append(
                "  * optimisation-limited (moved by more than its SE with twice the budget)"
            )
        lines.append(
            f"{'metric':>6s} {'pred':>7s} {'slope':>7s} {'95% CI':>17s} {'band':>17s}"
            f" {'slow/fast ctl':>13s} {'theorem':>12s}   {'ref':>7s} {'ASVI-ref':>7s}"
            f" {'95% CI':>17s} {'attain':>12s} {'w-min ctl':>9s}  {'oracle':>7s} {'ratio':>6s}"
        )
        for r in rows:
            ctl = (
                ("rej" if r["control_slow_rejected"] else "NOT")
                + "/"
                + ("rej" if r["control_fast_rejected"] else "NOT")
            )
            ac = r["attainment_control"]
            lines.append(
                f"{r['metric']:>6s} {r['predicted']:7.3f} {r['slope']:7.3f} "
                f"[{r['ci_low']:7.3f},{r['ci_high']:7.3f}] "
                f"[{r['band'][0]:7.3f},{r['band'][1]:7.3f}] {ctl:>13s} {r['verdict']:>12s}   "
                f"{_f(r['reference_slope'])} {_f(r['attainment_diff'])} "
                + (
                    f"[{r['attainment_ci_low']:7.3f},{r['attainment_ci_high']:7.3f}]"
                    if r["attainment_diff"] is not None
                    else f"{'':17s}"
                )
                + f" {r['attainment_verdict'] or 'n/a':>12s} "
                + f"{(ac['verdict'] if ac else 'n/a'):>9s}  "
                + f"{r['oracle_slope']:7.3f} {r['oracle_ratio_slope']:6.3f}"
            )
        for r in rows:
            lines.append(f"  {r['metric']}: {r['finding']}")
        for r in rows:
            for c in r["budget_control"] or []:
                lines.append(
                    f"  budget x2 {r['metric']:>4s} n={c['n']}: {c['base_mean']:.4g} -> "
                    f"{c['doubled_mean']:.4g} (change {c['change']:+.3g} +- {c['change_se']:.2g}"
                    f", cell SE {c['cell_se']:.2g}; selection changed in "
                    f"{100 * c['selection_changed']:.0f}%)"
                    + ("  OPTIMISATION-LIMITED" if c["limited"] else "")
                )
    seen = set()
    for r in results:
        for c in r.get("input_dimension", []):
            k = (c["metric"], c["p_small"], c["p_large"])
            if k in seen:
                continue
            seen.add(k)
            lines.append(
                f"teacher p = {c['p_large']} vs p = {c['p_small']} ({c['metric']}): slopes "
                f"{c['slope_large']:.3f} vs {c['slope_small']:.3f}; ratio of means at "
                f"n = {c['n']}: {c['ratio_large_to_small']:.2f} (Corollary 6.3: the input "
                "dimension enters only through log factors)"
            )
    lines += [
        "",
        "columns: steps = most steps any candidate used; cands = candidate widths; top = "
        "selections at the largest candidate; slow/fast ctl = the e/2 and 2e controls "
        "rejected?; ref = classical reference slope (oracle bins); ASVI-ref = paired slope "
        f"difference (attains when its CI is below {ATTAIN_TOL}); w-min ctl = the same test "
        "for SVI at the smallest candidate width (must FAIL); oracle = oracle-width SVI's "
        "slope; ratio = slope of ASVI/oracle risk.",
    ]
    return "\n".join(lines)


def loglog_axes(ax) -> None:
    """Log-log axes against n without the cluttered minor tick labels."""
    import matplotlib.ticker

    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("n")


def draw_rate_panel(ax, r: dict) -> None:
    """One metric of one truth on log-log axes: ASVI (mean +- SE, fitted line), oracle-width
    SVI, SVI at the smallest candidate width, the classical reference, and the predicted
    slope with the theorem's log band, drawn through ASVI's centre."""
    ns, mean, se = np.array(r["ns"]), np.array(r["mean"]), np.array(r["se"])
    x0, y0 = np.exp(np.log(ns).mean()), np.exp(np.log(mean).mean())
    grid = np.geomspace(ns[0], ns[-1], 50)
    ax.errorbar(
        ns,
        mean,
        yerr=se,
        fmt="o-",
        color="k",
        capsize=3,
        label=f"ASVI {r['slope']:.3f} [{r['ci_low']:.2f}, {r['ci_high']:.2f}]",
    )
    curves = [
        ("oracle_mean", "s--", "C2", f"oracle-width SVI {r['oracle_slope']:.3f}"),
        ("fixed_mean", "v:", "C1", f"SVI width {r['fixed_width']} {r['fixed_slope']:.3f}"),
    ]
    if r["reference_mean"] is not None:
        curves.append(
            ("reference_mean", "D-", "C0", f"classical (oracle bins) {r['reference_slope']:.3f}")
        )
    for key, fmt, color, label in curves:
        ax.plot(ns, r[key], fmt, color=color, ms=4, label=label)
    band = y0 * (grid / x0) ** r["band"][0], y0 * (grid / x0) ** r["band"][1]
    ax.plot(grid, band[0], "C3--", label=f"predicted {r['predicted']:.3f}")
    ax.fill_between(
        grid,
        np.minimum(*band),
        np.maximum(*band),
        color="C3",
        alpha=0.12,
        label="theorem band (log factor)",
    )
    loglog_axes(ax)
    att = r["attainment_verdict"] or "n/a"
    ax.set_title(f"{r['metric']}: theorem {r['verdict']}, attainment {att}", fontsize=8)
    ax.legend(fontsize=6)


def draw_width_panel(ax, r: dict) -> None:
    """Selected widths against n (each replicate a dot, the median a line), the candidate
    range, and the predicted growth ``n^(p/(2 alpha + p))`` (Lemma 6.1's N) through the
    median at the middle n, where the truth has an alpha."""
    ns = np.array(r["ns"])
    W = np.array(r["selected_widths"], dtype=float)
    for row in W:
        ax.plot(ns, row, "o", color="k", alpha=0.35, ms=3)
    med = np.median(W, axis=0)
    ax.plot(ns, med, "k-", label="selected (median)")
    lo = [c[0] for c in r["candidate_widths"]]
    hi = [c[-1] for c in r["candidate_widths"]]
    ax.fill_between(ns, lo, hi, color="C7", alpha=0.15, label="candidates")
    if r["alpha"] is not None:
        g = r["p"] / (2 * r["alpha"] + r["p"])
        j = len(ns) // 2
        ax.plot(ns, med[j] * (ns / ns[j]) ** g, "C3--", label=f"n^{g:.2f} (predicted growth)")
    loglog_axes(ax)
    ax.set_ylabel("width")
    ax.set_title("selected width", fontsize=8)
    ax.legend(fontsize=6)


def plot_results(results: list[dict], out_dir: str) -> list[str]:
    """One figure per truth: a rate panel per metric and the selected-width panel."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    os.makedirs(out_dir, exist_ok=True)
    for key in dict.fromkeys(r["truth"] for r in results):
        rows = [r for r in results if r["truth"] == key]
        fig, axes = plt.subplots(1, len(rows) + 1, figsize=(4.4 * (len(rows) + 1), 3.8))
        axes = np.atleast_1d(axes)
        for ax, r in zip(axes[:-1], rows, strict=True):
            draw_rate_panel(ax, r)
        draw_width_panel(axes[-1], rows[0])
        fig.suptitle(key)
        fig.tight_layout()
        path = os.path.join(out_dir, f"{key}.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m verify.rates",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=TRUTH_HELP,
    )
    ap.add_argument("--tier", choices=sorted(TIERS), default="quick")
    ap.add_argument("--records", help="verify these existing records; train nothing")
    ap.add_argument(
        "--out", help="records file to write/resume (default results/records-TIER.jsonl)"
    )
    ap.add_argument(
        "--control-records",
        help="budget-doubling records (default: the records path with -double before .jsonl;"
        " with --records, used only if it exists)",
    )
    ap.add_argument("--no-control", action="store_true", help="skip the budget-doubling control")
    ap.add_argument(
        "--fingerprint",
        metavar="PREFIX",
        help="with --records: use the records of this configuration (a file that mixes"
        " configurations is refused without it; the error lists them)",
    )
    ap.add_argument(
        "--new-file",
        action="store_true",
        help="if the records file holds another configuration, write RECORDS-FINGERPRINT.jsonl"
        " beside it instead of stopping",
    )
    ap.add_argument("--n", type=int, nargs="+", help="override the tier's sample sizes")
    ap.add_argument("--replicates", type=int, help="override the tier's replicates")
    ap.add_argument("--depth", type=int, help="override the number of hidden layers (2)")
    ap.add_argument("--l3", choices=("paper", "exact"), help="override the L3 term (paper)")
    ap.add_argument(
        "--compile",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run the training step through torch.compile (the full tier does; needs a C++"
        " compiler)",
    )
    ap.add_argument("--lambda-s-a", type=float, help="override a in lambda_s = a L log n (0.1)")
    ap.add_argument(
        "--lam",
        type=float,
        help="the width prior's lambda (10); with --records the widths are re-selected from"
        " the recorded ELBOs (the prior enters only the selection, eq. (13))",
    )
    ap.add_argument("--json", metavar="PATH", help="write the report as JSON")
    ap.add_argument("--figures", metavar="DIR", help="figure folder (default results/verify-TIER)")
    ap.add_argument("--delta", type=float, default=1.0, help="log power delta (>= 1)")
    ap.add_argument(
        "--strict", action="store_true", help="the attainment tests count for the exit status"
    )
    ap.add_argument("--scheduler", help="Dask scheduler address for the sweep")
    ap.add_argument(
        "--workers",
        type=int,
        help="run the sweeps on a local Dask cluster of N single-threaded workers; 0 runs"
        " them in this process (default: the tier's, 2 for quick and full)",
    )
    return ap


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


def control_config(cfg: SweepConfig, replicates: int) -> SweepConfig:
    """The budget-doubling control's sweep: the smallest and largest n, the first
    ``replicates`` replicates, twice the step cap, half the tolerance; same seeds."""
    rule = cfg.stop_rule.doubled()
    return dataclasses.replace(
        cfg,
        ns=[min(cfg.ns), max(cfg.ns)],
        replicates=min(replicates, cfg.replicates),
        max_steps=rule.max_steps,
        stop_tol=rule.tol,
        stop_kl_abs=rule.kl_abs,
    )


def _control_path(path: str) -> str:
    root, ext = os.path.splitext(path)
    return f"{root}-double{ext or '.jsonl'}"


REPORT_KEYS = (
    "truth",
    "alpha",
    "p",
    "metric",
    "predicted",
    "slope",
    "ci_low",
    "ci_high",
    "corrected_slope",
    "verdict",
    "reference_slope",
    "attainment_diff",
    "attainment_ci_low",
    "attainment_ci_high",
    "attainment_verdict",
    "control_slow_rejected",
    "control_fast_rejected",
    "converged_fraction",
    "optimisation_limited",
    "finding",
    "direction",
    "band",
    "ns",
    "mean",
    "se",
    "oracle_mean",
    "oracle_slope",
    "oracle_ratio",
    "oracle_ratio_slope",
    "oracle_ratio_ci",
    "fixed_width",
    "fixed_mean",
    "fixed_slope",
    "attainment_control",
    "reference_mean",
    "reference_bins",
    "selected_widths",
    "selected_at_top",
    "candidate_widths",
    "steps_max",
    "budget_control",
    "input_dimension",
)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        truths, rest = parse_truths(argv)
        args = build_parser().parse_args(rest)
        if args.delta < 1:
            raise ValueError(f"--delta must be >= 1, got {args.delta}")
        tier = TIERS[args.tier]
        if args.n is not None and len(args.n) < 3:
            raise ValueError(f"need at least 3 sample sizes, got {args.n}")
        if args.replicates is not None and args.replicates < 1:
            raise ValueError(f"--replicates must be >= 1, got {args.replicates}")
        if args.workers is not None and args.workers < 0:
            raise ValueError(f"--workers must be >= 0, got {args.workers}")
        if args.lam is not None and not (np.isfinite(args.lam) and args.lam > 0):
            raise ValueError(f"--lam must be a finite number > 0, got {args.lam}")
        overrides = {
            k: v
            for k, v in (
                ("ns", args.n),
                ("replicates", args.replicates),
                ("depth", args.depth),
                ("l3", args.l3),
                ("compile", args.compile),
                ("lambda_s_a", args.lambda_s_a),
                ("lam", args.lam),
            )
            if v is not None
        }
        workers = tier.get("workers", 0) if args.workers is None else args.workers
        if args.scheduler and args.workers:
            raise ValueError("give either --scheduler or --workers, not both")
        if args.json:
            check_output_file(args.json, "--json")
        check_output_dir(
            args.figures or os.path.join("results", f"verify-{args.tier}"), "--figures"
        )
        if args.fingerprint and not args.records:
            raise ValueError("--fingerprint chooses among the records of --records")
        control_records: list[dict] = []
        cfg = ccfg = records = None
        if args.records:
            if set(overrides) - {"lam"}:
                raise ValueError(
                    f"with --records only --lam applies (re-selection); got {sorted(overrides)}"
                )
            if os.path.isdir(args.records) or not os.path.exists(args.records):
                raise ValueError(f"no records file {args.records}")
            records = one_configuration(read_records(args.records), args.fingerprint, args.records)
            if not records:
                raise ValueError(f"{args.records} holds no records")
            source = args.records
            cpath = args.control_records or _control_path(source)
            if args.control_records and not os.path.isfile(cpath):
                raise ValueError(f"no control records file {cpath}")
            if not args.no_control and os.path.isfile(cpath):
                control_records = one_configuration(read_records(cpath), source=cpath)
            if args.lam is not None:
                records = reselect(records, args.lam)
                control_records = reselect(control_records, args.lam)
        else:
            cfg = SweepConfig(truths=truths or tier["truths"], **{**tier["sweep"], **overrides})
            cfg.validate()
            source = args.out or os.path.join("results", f"records-{args.tier}.jsonl")
            check_output_file(source, "--out")
            cpath = args.control_records or _control_path(source)
            # a foreign, corrupt or other-configuration file stops us before any training
            source = records_path_for(cfg, source, new_file=args.new_file)
            if not args.no_control:
                check_output_file(cpath, "--control-records")
                ccfg = control_config(cfg, tier["control_replicates"])
                cpath = records_path_for(ccfg, cpath, new_file=args.new_file)
    except (ValueError, RecordsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except SystemExit as exc:  # argparse
        return EXIT_BAD_INPUT if exc.code else 0
    try:
        return _run(args, truths, workers, (cfg, ccfg), source, cpath, records, control_records)
    except (RecordsError, OSError, TimeoutError) as exc:  # a held lock, an unreachable scheduler
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception:  # a crash is not a verdict: never exit 1 for it
        traceback.print_exc()
        print("verify.rates: crashed (exit 4): see the traceback above", file=sys.stderr)
        return EXIT_CRASH


def _run(args, truths, workers, cfg, source, cpath, records, control_records) -> int:
    """Train (unless ``--records``), analyse, print, draw and write; returns the status.
    ``cfg``: the sweep's and the control's configurations (None with ``--records``)."""
    cfg, ccfg = cfg
    t0 = time.perf_counter()
    if not args.records:
        from simulate._alloc import tune_malloc
        from simulate.sweep import run_sweep

        tune_malloc()
        os.makedirs(os.path.dirname(os.path.abspath(source)), exist_ok=True)
        if workers and not args.scheduler:
            try:
                import distributed  # noqa: F401
            except ImportError:
                print("note: dask.distributed is not installed; running in this process")
                workers = 0
        par = {"scheduler": args.scheduler, "workers": None if args.scheduler else workers or None}
        records = run_sweep(cfg, source, **par)
        if not args.no_control:
            print("budget-doubling control (smallest and largest n, 2x cap, tolerance / 2):")
            control_records = run_sweep(ccfg, cpath, **par)
    try:
        results = analyse(records, truths or None, args.delta, control_records)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    what = "recorded sweeps" if args.records else f"tier {args.tier}"
    print(f"verify.rates: {what}, records {source}, {time.perf_counter() - t0:.0f} s")
    print(format_results(results))
    fig_dir = args.figures or os.path.join("results", f"verify-{args.tier}")
    paths = plot_results(results, fig_dir)
    print(f"\nfigures: {', '.join(paths)}")
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as fh:
            json.dump([{k: r.get(k) for k in REPORT_KEYS} for r in results], fh, indent=2)
    status = exit_status(results, args.strict)
    words = {
        EXIT_PASS: "every theorem test PASSES with power",
        EXIT_FAIL: "some test FAILS: see above",
        EXIT_INCONCLUSIVE: "no test fails, but some is INCONCLUSIVE (no power to decide)",
    }
    print(f"\n{words[status]}" + (" (attainment tests included: --strict)" if args.strict else ""))
    return status


if __name__ == "__main__":
    sys.exit(main())
