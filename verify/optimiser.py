"""The optimiser benchmark: how far ASVI's training recipe stops from its own objective's
optimum, per recipe (``python -m verify.optimiser``).

The theorems speak of the ELBO's maximiser; a sweep measures what the optimiser finds from
a random start.  Where the truth is (nearly) in the network class, a constructive
posterior (``simulate.references.constructive``: the teacher embedded, or the
validation-chosen linear spline encoded) is a point of the same objective that the random
start should reach.  This benchmark trains, for each *recipe*
(``simulate.sweep.setup.recipes.RECIPES``: a set of training settings of the sweep), the random
start R
and the constructive arms (``start="both"``: W0, W0s, W trained from W0, and plain Adam P)
on the same cells, and reports per truth and n:

* ``gap``: ELBO(best constructive) - ELBO(R), paired over replicates with its t interval
  (nats; the best constructive arm per replicate is the one of W0, W0s, W0f (the network
  held, its sds and inclusions trained), W of highest ELBO,
  each at its own selected width; P, a plain network with the core's initial sds, is
  reported beside but never best in practice and is left out of it);
* ``gap_W0s``: ELBO(W0s) - ELBO(R): against the untrained start with its sds fitted, the
  same posterior under every recipe (it does not depend on the training settings);
* ``W_minus_W0s``: what training from the constructive start does to its ELBO (negative:
  the step drifts off a good point);
* R's d^2, its selected candidate's steps and the share of R's candidates that hit the
  step cap, and the recipe's training seconds (the jobs' ``job_train_s``, all arms).

The ELBO is the only criterion: a recipe is better when its gap is smaller.  Nothing about
the truth reaches training, stopping or selection (the sweep's rule); d^2 is reported,
never used.  A recipe is *chosen* on some truths and *judged* on others (:data:`TRUTH_SETS`:
``choose`` is the teacher p = 20; ``judge`` the teachers p = 10 and 200 and the Hoelder
truths alpha = 0.5 and 1.5 at p = 1), so that the choice is a recipe and not a fit to one
truth.  Records go to ``results/optimiser/records-RECIPE.jsonl`` (resumable, one
configuration each); the report to ``--json`` and ``--markdown``.
"""

from __future__ import annotations

import json
import math
import os
import time

import numpy as np

from simulate.sweep.run.runner import SweepRunOptions
from simulate.sweep.run.spec import SweepSpec
from simulate.sweep.setup import tiers
from simulate.sweep.setup.config import SweepConfig
from simulate.sweep.setup.recipes import RECIPE_DEFAULTS, RECIPES, recipe_settings
from simulate.sweep.setup.truth_spec import TruthSpec
from simulate.sweep.store.schema import read_records
from theory.plumbing.cli import Parser, interrupted, print_error, run_main
from theory.plumbing.jsonl import RecordsError
from theory.plumbing.paths import check_distinct, check_output_file, protect_inputs, write_atomic
from theory.plumbing.paths import path_arg as _path
from verify.reading.records import Cell, cells_of
from verify.starts import arm_columns
from verify.stats.slopes import MeanDiffs, paired_mean_diff

__all__ = ["BASE", "TRUTH_SETS", "benchmark", "gap_table", "main", "recipe_difference"]

# The benchmark's sweep settings: the constructive tier's (simulate.sweep.setup.tiers), less
# its sizes (the benchmark's own) and its recipe (each recipe's settings replace it).
BASE = {
    k: v
    for k, v in tiers.RATES["constructive"]["sweep"].items()
    if k not in ("ns", "replicates", *RECIPE_DEFAULTS)
}

TRUTH_SETS = {
    "choose": [("teacher", 20, None)],
    "judge": [
        ("teacher", 10, None),
        ("teacher", 200, None),
        ("holder", 1, 0.5),
        ("holder", 1, 1.5),
    ],
    "judge-teachers": [("teacher", 10, None), ("teacher", 200, None)],
    "holder": [("holder", 1, 0.5), ("holder", 1, 1.5)],
}

ARMS_C = ("W0", "W0s", "W0f", "W")  # the constructive arms the best is taken over


def _cells(records, truth: str, ns) -> list[list[Cell]]:
    """``cells[replicate][n]`` of one truth (replicates present at every n), the records
    read into cells (``verify.reading.records``)."""
    by: dict = {}
    for c in cells_of(records):
        if c.truth == truth and not c.failed:
            by.setdefault(c.replicate, {})[c.n] = c
    reps = sorted(k for k, v in by.items() if all(n in v for n in ns))
    return [[by[k][n] for n in ns] for k in reps]


def _ci(d: MeanDiffs, j: int) -> list:
    return [d.ci_low[j], d.ci_high[j]]


def gap_table(records, truths, ns) -> list[dict]:
    """One row per (truth, n) of the module docstring's quantities."""
    rows = []
    for t in truths:
        cells = _cells(records, t, ns)
        if not cells:
            continue
        arms_c = [a for a in ARMS_C if a in cells[0][0].arms]  # W0f: records since it
        elbo = {a: arm_columns(cells, a, "elbo") for a in ("R", *arms_c)}
        best = np.max(np.stack([elbo[a] for a in arms_c]), axis=0)
        gap = paired_mean_diff(best, elbo["R"])
        gap_s = paired_mean_diff(elbo["W0s"], elbo["R"])
        drift = paired_mean_diff(elbo["W"], elbo["W0s"])
        d2 = arm_columns(cells, "R", "d2")
        # the d^2 of each replicate's best constructive arm (by ELBO, as the gap's)
        d2_all = np.stack([arm_columns(cells, a, "d2") for a in arms_c])
        pick = np.argmax(np.stack([elbo[a] for a in arms_c]), axis=0)
        d2_c = np.take_along_axis(d2_all, pick[None], axis=0)[0]
        steps = arm_columns(cells, "R", "steps")
        for j, n in enumerate(ns):
            caps = [c[j].max_steps for c in cells]
            st = [s for c in cells for s in c[j].per_width["steps"]]
            capped = float(np.mean([s >= caps[0] for s in st]))
            rows.append(
                {
                    "truth": t, "n": int(n), "replicates": len(cells),
                    "gap": gap.diff[j], "gap_ci": _ci(gap, j),
                    "gap_W0s": gap_s.diff[j], "gap_W0s_ci": _ci(gap_s, j),
                    "W_minus_W0s": drift.diff[j], "W_minus_W0s_ci": _ci(drift, j),
                    "elbo_R": float(elbo["R"][:, j].mean()),
                    "d2_R": float(d2[:, j].mean()), "d2_constructive": float(d2_c[:, j].mean()),
                    "steps_R": float(steps[:, j].mean()), "capped_R": capped,
                    "width_R": float(np.mean([c[j].selected_width for c in cells])),
                }
            )  # fmt: skip
    return rows


def recipe_difference(records, against, truths, ns) -> list[dict]:
    """ELBO(R) under one recipe minus ELBO(R) under another, paired per replicate on the
    same cells (truth, n, replicate and data seed alike; cells only one side has are left
    out): one row per (truth, n) with the difference, its t interval and both sides' d^2.
    How a recipe is judged against the baseline: a default may lower the ELBO on no truth
    (an interval wholly below 0 is a recipe that stops worse by its own objective)."""
    rows = []
    for t in truths:
        sides = []
        for recs in (records, against):
            by = {}
            for c in cells_of(recs):
                if c.truth == t and not c.failed and c.n in ns:
                    by.setdefault((c.replicate, c.seed), {})[c.n] = c
            sides.append({k: v for k, v in by.items() if all(int(n) in v for n in ns)})
        common = sorted(set(sides[0]) & set(sides[1]))
        if not common:
            continue
        cells = [[[side[k][int(n)] for n in ns] for k in common] for side in sides]
        elbo = [arm_columns(c, "R", "elbo") for c in cells]
        d2 = [arm_columns(c, "R", "d2") for c in cells]
        diff = paired_mean_diff(elbo[0], elbo[1])
        for j, n in enumerate(ns):
            rows.append({"truth": t, "n": int(n), "replicates": len(common),
                         "diff": diff.diff[j], "ci": _ci(diff, j),
                         "d2": float(d2[0][:, j].mean()),
                         "d2_against": float(d2[1][:, j].mean())})  # fmt: skip
    return rows


def _train_seconds(records) -> float:
    """The jobs' training seconds, each job counted once (its records share the value)."""
    seen = {}
    for c in cells_of(records):
        seen[(c.truth, c.n, c.job_train_s, c.job_eval_s)] = float(c.job_train_s or 0.0)
    return sum(seen.values())


def benchmark(recipes, truths, ns, replicates: int, out_dir, workers=None, log=print,
              tabulate: bool = False) -> dict:  # fmt: skip
    """Run every recipe's sweep (resuming what its records file holds) and tabulate it:
    ``{recipe: {"describe", "overrides", "rows", "train_s", "wall_s", "records"}}``.  ``tabulate``:
    train nothing, only read each recipe's records file (whatever code wrote it; ``wall_s``
    None)."""

    out = {}
    for name in recipes:
        describe, over = RECIPES[name].summary, recipe_settings(name)
        path = records_path(out_dir, name)
        t0 = time.perf_counter()
        if tabulate:
            recs, wall = read_records(path), None
        else:
            cfg = SweepConfig(truths=list(truths), ns=list(ns), replicates=replicates,
                              **{**BASE, **over})  # fmt: skip
            recs = SweepSpec(cfg, path, SweepRunOptions(workers=workers)).run(log=log)
            wall = time.perf_counter() - t0
        rows = gap_table(recs, [t.key for t in truths], ns)
        out[name] = {"describe": describe, "overrides": dict(RECIPES[name].changes), "rows": rows,
                     "train_s": _train_seconds(recs), "wall_s": wall,
                     "records": recs}  # fmt: skip
        for row in rows:
            log(_line(name, row))
    return out


# alpha = 0.5: which limits it, the objective or the optimiser?  Depth x the candidates'
# width cap (width_scale 2 with the cap 256, so that 128 and 256 are candidates at both n;
# the CV spline uses 142-194 knots at n = 32,000), 8 replicates at n = 8,000 and 32,000
ALPHA_HALF = {
    "truth": ("holder", 1, 0.5),
    "ns": [8000, 32000],
    "replicates": 8,
    "designs": [
        {"depth": 1, "width_max": 64, "width_scale": 0.5},
        {"depth": 2, "width_max": 64, "width_scale": 0.5},
        {"depth": 1, "width_max": 256, "width_scale": 2.0},
        {"depth": 2, "width_max": 256, "width_scale": 2.0},
    ],
}


def rate_rows(records, truth: str, ns) -> dict:
    """The rates across n (not one n's levels): per arm (R and the constructive arms), the
    slope of log d^2 between the ns (its mean over replicates with a t interval), and the
    paired difference slope(R) - slope(best C), C the constructive arm of highest ELBO at
    the largest n per replicate."""
    cells = _cells(records, truth, ns)
    if not cells:
        raise ValueError(f"no replicate of {truth} has a record at every n of {list(ns)}")
    arms = ["R", *[a for a in ARMS_C if a in cells[0][0].arms]]
    x = np.log(np.asarray(ns, dtype=float))
    sx = x - x.mean()

    def slopes(arm):
        y = np.log(arm_columns(cells, arm, "d2"))
        return (y - y.mean(1, keepdims=True)) @ sx / (sx @ sx)  # [replicates]

    s = {a: slopes(a) for a in arms}
    elbo = np.stack([arm_columns(cells, a, "elbo")[:, -1] for a in arms[1:]])
    best = np.array([s[arms[1 + k]][i] for i, k in enumerate(np.argmax(elbo, axis=0))])
    out = {a: paired_mean_diff(s[a][:, None], np.zeros((len(cells), 1))) for a in arms}
    out = {a: {"slope": d.diff[0], "ci": _ci(d, 0)} for a, d in out.items()}
    diff = paired_mean_diff(s["R"][:, None], best[:, None])
    out["R_minus_best_C"] = {"slope": diff.diff[0], "ci": _ci(diff, 0)}
    return out


def limits(rows: list[dict], rates: dict) -> str:
    """Which limits a design at its largest n, from the ELBO alone: ``optimiser`` when the
    best constructive posterior's ELBO is above R's (interval above 0), ``objective`` when
    R's is above every constructive posterior's while R's risk is the larger (the ELBO ranks
    the better fit lower), ``neither shown`` otherwise; the rates across n beside it."""
    if not rows:
        raise ValueError("no rows: the design's records hold no complete replicate")
    last = rows[-1]
    lo, hi = last["gap_ci"]
    worse = last["d2_R"] > last["d2_constructive"]
    if lo > 0:
        key = "optimiser"
    elif hi < 0 and worse:
        key = "objective"
    else:
        key = "neither shown"
    d = rates["R_minus_best_C"]
    return (
        f"{key}: at n = {last['n']} ELBO(best C) - ELBO(R) = {last['gap']:+.0f} [{lo:+.0f},"
        f" {hi:+.0f}], d2 R {last['d2_R']:.4f} against C {last['d2_constructive']:.4f};"
        f" d2 slope R {rates['R']['slope']:+.3f} [{rates['R']['ci'][0]:+.3f},"
        f" {rates['R']['ci'][1]:+.3f}], R - best C {d['slope']:+.3f} [{d['ci'][0]:+.3f},"
        f" {d['ci'][1]:+.3f}]"
    )


def design_tag(d: dict) -> str:
    """``dDEPTH-wCAP``: an :data:`ALPHA_HALF` design's name."""
    return f"d{d['depth']}-w{d['width_max']}"


def records_path(out_dir, recipe: str, design: str | None = None) -> str:
    """The records file of ``recipe`` in ``out_dir`` (of an alpha = 0.5 ``design`` tag,
    :func:`design_tag`, where given): where the benchmark trains, and what its reports may
    never be written over."""
    if design is None:
        return os.path.join(out_dir, f"records-{recipe}.jsonl")
    return os.path.join(out_dir, f"records-alpha-half-{recipe}-{design}.jsonl")


def alpha_half(recipe: str, out_dir, workers=None, seed: int = 0, replicates=None,
               log=print, designs=None) -> list[dict]:  # fmt: skip
    """Run :data:`ALPHA_HALF` under ``recipe`` and report each design (gap rows, rates and
    :func:`limits`); ``designs``: the tags (:func:`design_tag`) to run, default all."""

    k, p, a = ALPHA_HALF["truth"]
    truth = TruthSpec(k, p=p, alpha=a, seed=seed)
    ns = ALPHA_HALF["ns"]
    out = []
    chosen = [d for d in ALPHA_HALF["designs"] if designs is None or design_tag(d) in designs]
    for d in chosen:
        cfg = SweepConfig(truths=[truth], ns=ns, replicates=replicates or ALPHA_HALF["replicates"],
                          **{**BASE, **recipe_settings(recipe), **d})  # fmt: skip
        tag = design_tag(d)
        t0 = time.perf_counter()
        opts = SweepRunOptions(workers=workers)
        recs = SweepSpec(cfg, records_path(out_dir, recipe, tag), opts).run(log=log)
        rows = gap_table(recs, [truth.key], ns)
        rates = rate_rows(recs, truth.key, ns)
        res = {"design": d, "recipe": recipe, "rows": rows, "rates": rates,
               "answer": limits(rows, rates), "wall_s": time.perf_counter() - t0,
               "train_s": _train_seconds(recs)}  # fmt: skip
        log(f"alpha-half {tag}: {res['answer']}")
        out.append(res)
    return out


def _line(name: str, r: dict) -> str:
    lo, hi = r["gap_ci"]
    return (
        f"{name:>14s} {r['truth']:>18s} n={r['n']:>6d} gap {r['gap']:+9.1f} [{lo:+.1f},"
        f" {hi:+.1f}]  W0s-R {r['gap_W0s']:+9.1f}  W-W0s {r['W_minus_W0s']:+8.1f}"
        f"  d2 R {r['d2_R']:.4f} (C {r['d2_constructive']:.4f})  steps {r['steps_R']:7.0f}"
        f"  capped {r['capped_R']:.2f}"
    )


def markdown(res: dict) -> str:
    """The benchmark as one markdown table (a row per recipe, truth and n)."""
    head = (
        "| recipe | truth | n | ELBO(best C) - ELBO(R) [95%] | ELBO(W0s) - ELBO(R) |"
        " ELBO(W) - ELBO(W0s) | d2 R | d2 C | steps R | capped | train s |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for name, r in res.items():
        for row in r["rows"]:
            lo, hi = row["gap_ci"]
            lines.append(
                f"| {name} | {row['truth']} | {row['n']} | {row['gap']:+.0f} [{lo:+.0f},"
                f" {hi:+.0f}] | {row['gap_W0s']:+.0f} | {row['W_minus_W0s']:+.0f} |"
                f" {row['d2_R']:.4f} | {row['d2_constructive']:.4f} | {row['steps_R']:.0f} |"
                f" {row['capped_R']:.2f} | {r['train_s']:.0f} |"
            )
    return head + "\n".join(lines) + "\n"


def _parser() -> Parser:
    """``python -m verify.optimiser``'s command line (:func:`main`)."""
    ap = Parser(prog="python -m verify.optimiser", description=__doc__.split("\n\n")[0])
    ap.add_argument("--recipes", nargs="+", default=["baseline"], choices=sorted(RECIPES))
    ap.add_argument(
        "--designs",
        nargs="+",
        choices=[design_tag(d) for d in ALPHA_HALF["designs"]],
        help="with --alpha-half: the designs to run (default all)",
    )
    ap.add_argument(
        "--tabulate",
        action="store_true",
        help="train nothing: tabulate the recipes' records files in --out-dir as they are",
    )
    ap.add_argument(
        "--alpha-half",
        action="store_true",
        help="instead: which limits alpha = 0.5 (depth {1, 2} x width cap {64, 256} at"
        " n = 8,000 and 32,000), under the first --recipes",
    )
    ap.add_argument("--truths", choices=sorted(TRUTH_SETS), default="choose")
    ap.add_argument("--truth-seed", type=int, default=0)
    ap.add_argument("--n", type=int, nargs="+", default=[2000, 8000, 32000])
    ap.add_argument(
        "--replicates", type=int, help="replicates per cell (default 4; --alpha-half: 8)"
    )
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out-dir", type=_path, default="results/optimiser")
    ap.add_argument("--json", type=_path, default=None)
    ap.add_argument("--markdown", type=_path, default=None)
    ap.add_argument(
        "--against",
        nargs="+",
        type=_path,
        metavar="RECORDS",
        help="also: each recipe's ELBO(R) minus ELBO(R) in these records files (the same"
        " cells, paired per replicate; recipe_difference)",
    )
    return ap


def main(argv=None) -> int:
    """``python -m verify.optimiser``: the benchmark (module docstring)."""

    args = _parser().parse_args(argv)
    try:
        truths = [TruthSpec(k, p=p, alpha=a, seed=args.truth_seed)
                  for k, p, a in TRUTH_SETS[args.truths]]  # fmt: skip
        outs = [("--json", args.json), ("--markdown", args.markdown)]
        for what, path in outs:
            if path:
                check_output_file(path, what)
        ins = [("--against", p) for p in args.against or []]
        if args.alpha_half:  # the records the run trains (made or resumed)
            tags = args.designs or [design_tag(d) for d in ALPHA_HALF["designs"]]
            planned = [records_path(args.out_dir, args.recipes[0], t) for t in tags]
        else:
            planned = [records_path(args.out_dir, r) for r in args.recipes]
        ins += [("the records it trains", p) for p in planned]
        check_distinct(outs, ins)
        protect_inputs(*(p for _, p in ins))
        other = [r for path in args.against or [] for r in read_records(path)]  # read first
        os.makedirs(args.out_dir, exist_ok=True)
        if args.alpha_half:
            res = alpha_half(args.recipes[0], args.out_dir, args.workers or None,
                             args.truth_seed, args.replicates, designs=args.designs)  # fmt: skip
        else:
            res = benchmark(args.recipes, truths, args.n, args.replicates or 4, args.out_dir,
                            workers=args.workers or None, tabulate=args.tabulate)  # fmt: skip
    except (ValueError, OSError, RecordsError) as exc:
        print_error(exc)
        return 2
    except KeyboardInterrupt:  # each records file is whole (run_sweep's single appends)
        return interrupted(
            f"the records files in {args.out_dir} are whole, resume with the same command"
        )
    if args.alpha_half:
        if args.json:
            write_atomic(args.json, json.dumps(res, indent=1, allow_nan=True))
        for r in res:
            print(f"depth {r['design']['depth']}, cap {r['design']['width_max']}: {r['answer']}")
        return 0
    md = markdown(res)
    if args.against:
        keys = [t.key for t in truths]
        md += "\nELBO(R) minus ELBO(R) of " + ", ".join(args.against) + ":\n\n"
        md += "| recipe | truth | n | R | difference [95%] | d2 | d2 against |\n"
        md += "|---|---|---|---|---|---|---|\n"
        for name, v in res.items():
            v["against"] = recipe_difference(v["records"], other, keys, args.n)
            for r in v["against"]:
                md += (f"| {name} | {r['truth']} | {r['n']} | {r['replicates']} |"
                       f" {r['diff']:+.0f} [{r['ci'][0]:+.0f}, {r['ci'][1]:+.0f}] |"
                       f" {r['d2']:.4f} | {r['d2_against']:.4f} |\n")  # fmt: skip
    for v in res.values():
        v.pop("records", None)
    print(md)
    if args.json:
        write_atomic(args.json, json.dumps(res, indent=1, allow_nan=True))
    if args.markdown:
        write_atomic(args.markdown, md)
    return 0 if all(math.isfinite(r["gap"]) for v in res.values() for r in v["rows"]) else 3


if __name__ == "__main__":
    raise SystemExit(run_main(main))
