"""``python -m verify.rates``: does the VB posterior contract at the predicted rate?

Runs (or, with ``--records``, only reads) a growing-n sweep of ASVI (``simulate.sweep``)
and, for each truth and metric, prints a convergence table: n, the mean over replicates and
its standard error, local slopes between neighbouring n, the least-squares log-log slope
with its confidence interval over replicates, the slope after removing the theorem's log
factor, the exponent predicted by ``theory``, a verdict, and a negative control (the same
verdict rule applied to a deliberately wrong exponent, which must be rejected).  The
fitting and the verdict rule are documented in ``verify.slopes``.

Metrics: ``d2`` (VB-posterior mean of the squared Hellinger distance, the left side of
Theorems 4.1 and 5.1; primary), ``d`` (posterior mean Hellinger distance) and ``l2sq``
(squared L2 error of the posterior-mean predictor), each against its own exponent.

Exit status: 0 when every verdict passes and every negative control is rejected, 1
otherwise, 2 on bad input (nothing is trained and no record file is touched).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from simulate.sweep import (
    TRUTH_HELP,
    RecordsError,
    SweepConfig,
    TruthSpec,
    parse_truths,
    read_records,
)
from theory import log_factor_power

from .slopes import fit_slope, negative_control_exponent, verdict

__all__ = ["TIERS", "main", "analyse"]

METRICS = ("d2", "d", "l2sq")

# Each tier: sweep settings and default truths.  Measured on the 2-core machine: quick
# about 2 minutes (within the 10-minute budget); full about 40 minutes with ``--workers 2``
# (a local Dask cluster of two single-threaded workers); ``tiny`` is the smoke test.
TIERS = {
    "tiny": {
        "truths": [TruthSpec("holder", p=1, alpha=0.5)],
        "sweep": {
            "ns": [128, 256, 512],
            "replicates": 2,
            "widths": [4, 8],
            "epochs": 10,
            "batch_size": 64,
            "n_test": 2000,
            "draws": 10,
            "replicate_block": 2,
        },
    },
    "quick": {
        "truths": [TruthSpec("holder", p=1, alpha=0.5), TruthSpec("holder", p=1, alpha=1.5)],
        "sweep": {
            "ns": [250, 500, 1000, 2000, 4000, 8000],
            "replicates": 4,
            "widths": [4, 8, 16, 32],
            "epochs": 100,
            "batch_size": 128,
            "replicate_block": 4,
        },
    },
    "full": {
        "truths": [
            TruthSpec("holder", p=1, alpha=0.5),
            TruthSpec("holder", p=1, alpha=1.5),
            TruthSpec("holder", p=2, alpha=1.0),
            TruthSpec("teacher", p=20),
        ],
        "sweep": {
            "ns": [250, 500, 1000, 2000, 4000, 8000, 16000],
            "replicates": 6,
            "widths": [4, 8, 16, 32, 64],
            "epochs": 200,
            "batch_size": 128,
            "replicate_block": 3,
        },
    },
}


def _truth_of(rec: dict) -> TruthSpec:
    t = rec["truth"]
    return TruthSpec(kind=t["kind"], p=int(t["p"]), alpha=t.get("alpha"), seed=int(t["seed"]))


def analyse(records: list[dict], truths: list[TruthSpec] | None = None, delta: float = 1.0):
    """Fit every (truth, metric) of the records; returns a list of result dicts."""
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
        recs = by_truth[key]
        spec = _truth_of(recs[0])
        ns = sorted({r["cell"]["n"] for r in recs})
        if len(ns) < 3:
            raise ValueError(f"{key}: need at least 3 sample sizes, the records have {ns}")
        table = {(r["cell"]["replicate"], r["cell"]["n"]): r for r in recs}
        reps = sorted({r["cell"]["replicate"] for r in recs})
        complete = [q for q in reps if all((q, n) in table for n in ns)]
        dropped = sorted(set(reps) - set(complete))
        if not complete:
            raise ValueError(f"{key}: no replicate has records at every n {ns}")
        widths = np.array([[table[(q, n)]["selected_width"] for n in ns] for q in complete])
        for metric in METRICS:
            V = np.array([[table[(q, n)]["metrics"][metric] for n in ns] for q in complete])
            fit = fit_slope(ns, V, log_power=log_factor_power(metric, delta))
            pred = spec.predicted(metric)
            wrong = negative_control_exponent(pred)
            results.append(
                {
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
                    "verdict": verdict(fit, pred),
                    "band": [pred, pred + fit.shift],
                    "level": fit.level,
                    "negative_control": {
                        "exponent": wrong,
                        "rejected": verdict(fit, wrong) == "FAIL",
                    },
                    "ns": ns,
                    "mean": fit.mean.tolist(),
                    "se": fit.se.tolist(),
                    "local_slopes": fit.local_slopes.tolist(),
                    "replicates": complete,
                    "dropped_replicates": dropped,
                    "selected_widths": widths.tolist(),
                    "steps": [table[(complete[0], n)]["config"]["steps"] for n in ns],
                    "lambda_s": [table[(complete[0], n)]["config"]["lambda_s"] for n in ns],
                }
            )
    return results


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
            + ")",
        ]
        lines.append(
            f"{'n':>7s} {'steps':>7s} {'lam_s':>6s} {'widths (selected)':>22s}  "
            + "  ".join(f"{m + ' mean':>10s} {'se':>9s} {'local':>7s}" for m in METRICS)
        )
        for j, n in enumerate(r0["ns"]):
            ws = ",".join(str(w[j]) for w in r0["selected_widths"])
            cols = []
            for r in rows:
                loc = f"{r['local_slopes'][j - 1]:7.3f}" if j else f"{'':7s}"
                cols.append(f"{r['mean'][j]:10.4g} {r['se'][j]:9.2g} {loc}")
            lines.append(
                f"{n:7d} {r0['steps'][j]:7d} {r0['lambda_s'][j]:6.2f} {ws:>22s}  " + "  ".join(cols)
            )
        lines.append(
            f"{'metric':>6s} {'predicted':>10s} {'slope':>8s} "
            f"{'95% CI':>18s} {'log-corrected':>13s} {'band':>18s} {'verdict':>7s}"
            f"  negative control"
        )
        for r in rows:
            nc = r["negative_control"]
            lines.append(
                f"{r['metric']:>6s} {r['predicted']:10.4f} {r['slope']:8.4f} "
                f"[{r['ci_low']:7.4f},{r['ci_high']:7.4f}] {r['corrected_slope']:13.4f} "
                f"[{r['band'][0]:7.4f},{r['band'][1]:7.4f}] {r['verdict']:>7s}"
                f"  exponent {nc['exponent']:.3f}: "
                + ("rejected" if nc["rejected"] else "NOT rejected (no power)")
            )
    return "\n".join(lines)


def loglog_axes(ax) -> None:
    """Log-log axes against n without the cluttered minor tick labels."""
    import matplotlib.ticker

    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("n")


def plot_results(results: list[dict], out_dir: str) -> list[str]:
    """One log-log figure per truth: data with SE bars, fitted line, predicted slope."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    os.makedirs(out_dir, exist_ok=True)
    for key in dict.fromkeys(r["truth"] for r in results):
        rows = [r for r in results if r["truth"] == key]
        fig, axes = plt.subplots(1, len(rows), figsize=(4.2 * len(rows), 3.6))
        for ax, r in zip(np.atleast_1d(axes), rows, strict=True):
            ns, mean, se = np.array(r["ns"]), np.array(r["mean"]), np.array(r["se"])
            ax.errorbar(ns, mean, yerr=se, fmt="o", color="k", capsize=3, label="measured")
            x0, y0 = np.exp(np.log(ns).mean()), np.exp(np.log(mean).mean())
            grid = np.geomspace(ns[0], ns[-1], 50)
            ax.plot(
                grid,
                y0 * (grid / x0) ** r["slope"],
                "C0-",
                label=f"fit {r['slope']:.3f} [{r['ci_low']:.2f}, {r['ci_high']:.2f}]",
            )
            ax.plot(
                grid,
                y0 * (grid / x0) ** r["predicted"],
                "C3--",
                label=f"predicted {r['predicted']:.3f}",
            )
            band = y0 * (grid / x0) ** r["band"][0], y0 * (grid / x0) ** r["band"][1]
            ax.fill_between(
                grid,
                np.minimum(*band),
                np.maximum(*band),
                color="C3",
                alpha=0.12,
                label="theorem band (log factor)",
            )
            loglog_axes(ax)
            ax.set_title(f"{r['metric']}: {r['verdict']}")
            ax.legend(fontsize=7)
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
    ap.add_argument("--n", type=int, nargs="+", help="override the tier's sample sizes")
    ap.add_argument("--replicates", type=int, help="override the tier's replicates")
    ap.add_argument("--json", metavar="PATH", help="write the report as JSON")
    ap.add_argument("--figures", metavar="DIR", help="figure folder (default results/verify-TIER)")
    ap.add_argument("--delta", type=float, default=1.0, help="log power delta (>= 1)")
    ap.add_argument("--scheduler", help="Dask scheduler address for the sweep")
    ap.add_argument(
        "--workers",
        type=int,
        help="run the sweep on a local Dask cluster of N single-threaded workers",
    )
    return ap


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
        if args.records:
            if not os.path.exists(args.records):
                raise ValueError(f"no records file {args.records}")
            records = read_records(args.records)
            if not records:
                raise ValueError(f"{args.records} holds no records")
            source = args.records
        else:
            cfg = SweepConfig(
                truths=truths or tier["truths"],
                **{
                    **tier["sweep"],
                    **({"ns": args.n} if args.n else {}),
                    **({"replicates": args.replicates} if args.replicates else {}),
                },
            )
            cfg.validate()
            source = args.out or os.path.join("results", f"records-{args.tier}.jsonl")
            read_records(source)  # a foreign or corrupt file stops us before any training
    except (ValueError, RecordsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except SystemExit as exc:  # argparse
        return 2 if exc.code else 0
    t0 = time.perf_counter()
    if not args.records:
        from simulate._alloc import tune_malloc
        from simulate.sweep import run_sweep

        tune_malloc()
        os.makedirs(os.path.dirname(os.path.abspath(source)), exist_ok=True)
        records = run_sweep(cfg, source, scheduler=args.scheduler, workers=args.workers)
    try:
        results = analyse(records, truths or None, args.delta)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"verify.rates: tier {args.tier}, records {source}, {time.perf_counter() - t0:.0f} s")
    print(format_results(results))
    fig_dir = args.figures or os.path.join("results", f"verify-{args.tier}")
    paths = plot_results(results, fig_dir)
    print(f"\nfigures: {', '.join(paths)}")
    if args.json:
        keys = (
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
        )
        report = [
            {
                **{k: r[k] for k in keys},
                "negative_control": r["negative_control"],
                "band": r["band"],
                "ns": r["ns"],
                "mean": r["mean"],
                "se": r["se"],
            }
            for r in results
        ]
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=2)
    ok = all(r["verdict"] == "PASS" and r["negative_control"]["rejected"] for r in results)
    print(
        "\nall verdicts PASS and every negative control rejected"
        if ok
        else "\nNOT all verdicts pass (or a negative control was not rejected): see above"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
