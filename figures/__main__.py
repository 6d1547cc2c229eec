"""``python -m figures [--tier quick|paper|tiny] [--only NAME] [--recompute]``.

Regenerates every figure and table from records, training only what is missing:

* ``table1``  -- the paper's Table 1 (teacher network: SVI, HS-BNN, Dense-BNN per width, and
  ASVI), text, CSV and LaTeX, the paper's values beside ours;
* ``fig1b``   -- Figure 1(b): frequency of ASVI's selected width, for lambda = 1, 3, 10, 30;
* ``rates``   -- log-log VB-posterior d^2 against n per truth, fit, interval, prediction;
* ``tradeoff``-- Theorem 4.1's three terms against width beside measured d^2 per width;
* ``uci``     -- the UCI protocol on Concrete and Boston (SVI, Dense-BNN, HS-BNN; 20 splits,
  drawn here or with ``--splits standard`` the protocol's own); RMSE, log-likelihood and the
  90% predictive interval's coverage and width;
* ``mnist1d`` -- MNIST-1D test accuracy against epoch (ASVI, SVI, Dense-BNN) and edges kept,
  at each training-set size of the tier, and against n;
* ``mnist1d-controls`` -- why ASVI's MNIST-1D accuracy falls while it prunes: SVI at one
  width with one setting changed at a time (lambda_s, optimiser, lr, initial slab sd) and
  Dense-BNN, accuracy and edges kept against epoch, the ELBO's parts, the edge budget;
* ``split``   -- the risk split (``verify.split``) of the shipped constructive-start pilot:
  the class floor's, the objective's and the optimiser's shares of ASVI's d^2 against n and
  the levels (exploratory), figure and CSV;
* ``results`` -- the generated blocks (every table of measured numbers) of the results files,
  ``RESULTS.md``, its pages ``docs/results/*.md`` and ``HISTORY.md`` (``RESULTS_FILES``),
  rewritten from the records they name (``figures.results_md``; a block whose records are
  missing is kept and reported).

Tiers: ``quick`` (teacher: 3 replications x 100 epochs; rates from the quick verify tier),
``medium`` and ``long`` (teacher: 3 x 1000 and 10 x 3000 epochs; otherwise as quick),
``paper`` (50 replications x
7000 epochs, as printed; rates from the full verify tier) and ``tiny`` (smoke test).
Outputs (PNG, PDF, CSV, LaTeX, text) go to ``results/figures``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from figures._io import ONE_CONFIG_HINT
from figures.rate_figure import rate_figure
from figures.realdata_figures import (
    mnist_controls_figure,
    mnist_controls_table,
    mnist_figure,
    mnist_table,
    uci_table,
)
from figures.results_md import regenerate
from figures.split_figure import split_figure
from figures.teacher_figures import figure_1b, table1
from figures.tradeoff import tradeoff_figure
from simulate.alloc import tune_malloc
from simulate.core.options import DEFAULT_OPTIONS
from simulate.core.sizes import check_workers
from simulate.core.steppath import BATCHED, NATIVE
from simulate.experiments.class_floor import floors as floor_table
from simulate.experiments.class_floor import read_rows
from simulate.experiments.mnist import run_mnist1d, run_mnist1d_controls
from simulate.experiments.table1 import TeacherVariant, run_teacher
from simulate.experiments.uci import run_uci
from simulate.sweep.run.spec import SweepSpec
from simulate.sweep.setup import tiers
from simulate.sweep.setup.config import SweepConfig
from simulate.sweep.store.schema import one_configuration, read_records
from theory.plumbing.cli import Parser, interrupted, print_error, run_main
from theory.plumbing.jsonl import RecordsError, being_written
from theory.plumbing.paths import (
    check_distinct,
    check_output_dir,
    check_output_file,
    path_arg,
    protect_inputs,
    read_text_bounded,
)
from verify.split import risk_split, truth_grids

NAMES = ("table1", "fig1b", "rates", "tradeoff", "uci", "mnist1d", "mnist1d-controls", "results",
         "split")  # fmt: skip
# the risk split's shipped inputs (figures/reference): the constructive-start pilot on
# confirm-v4's alpha = 0.5 truth (n = 2,000..128,000, and 500 and 512,000 where shipped) and
# the class floors of its replicates' selected classes
SPLIT_RECORDS = ("records-starts-a05-s20261203.jsonl.gz",
                 "records-starts-a05-s20261203-ends.jsonl.gz")  # fmt: skip
SPLIT_FLOORS = ("class-floor-holder-a05.jsonl.gz", "class-floor-holder-a05-reps.jsonl.gz")
# the files whose generated blocks ``--only results`` rewrites (figures.results_md), paths
# from the repository root: RESULTS.md (the summary, required) first, then its pages, one per
# section, in its contents' order, and the history (a page added to docs/results/ is added
# here: tests/figures/test_docs_links.py holds the folder and this list equal)
RESULTS_FILES = (
    "RESULTS.md",
    "docs/results/confirm-v4.md",
    "docs/results/rough-end.md",
    "docs/results/confirm-v3.md",
    "docs/results/confirm-v2.md",
    "docs/results/confirm-v1.md",
    "docs/results/optimiser.md",
    "docs/results/earlier-tiers.md",
    "docs/results/table1-mnist-uci.md",
    "docs/results/estimator-defaults.md",
    "HISTORY.md",
)
VERIFY_TIER = tiers.FIGURES_RATES


def _sweep_records(tier: str, path: str | None, recompute: bool):
    """The rate figures' sweep records: ``path`` as it is, else the verify tier's file
    (trained where empty; with ``recompute`` its records are discarded under its lock, so
    a sweep writing it makes this an error instead of a loss).  A file another run is
    still writing is refused (its records are not the finished sweep's)."""

    vt = tiers.RATES[VERIFY_TIER[tier]]
    if path is not None:  # records given: use them as they are (one configuration)
        _refuse_growing(path)
        return one_configuration(read_records(path), None, path, ONE_CONFIG_HINT), path
    path = os.path.join("results", f"records-{VERIFY_TIER[tier]}.jsonl")
    _refuse_growing(path)
    cfg = SweepConfig(truths=vt["truths"], **vt["sweep"])
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    if not recompute:
        recs = read_records(path)
        if recs:  # the tier's file already holds records: use them as they are
            return one_configuration(recs, None, path, ONE_CONFIG_HINT), path
    return SweepSpec(cfg, path, discard=recompute).checked().run(), path


def _refuse_growing(path: str) -> None:
    """A records file another run is still writing is not drawn from: its records are not
    the finished sweep's (``theory.plumbing.jsonl.being_written``)."""

    if being_written(path):
        raise RecordsError(
            f"{path} is being written by another run (its lock is held); wait for it to end"
        )


def _teacher(args, names) -> None:
    """Table 1 and Figure 1(b) from the teacher records (trained if missing)."""

    t0 = time.perf_counter()
    recs = run_teacher(
        args.tier, args.out, args.recompute,
        variant=TeacherVariant(bias=args.teacher_bias, mlp=args.teacher_mlp),
        workers=args.workers, methods=args.teacher_methods,
    )  # fmt: skip
    cfg = tiers.TEACHER[args.tier]
    name = args.tier if args.teacher_bias == "subtract" else f"{args.tier}-{args.teacher_bias}"
    if args.teacher_mlp != DEFAULT_OPTIONS.mlp:
        name = f"{name}-{args.teacher_mlp}"
    print(
        f"teacher records: {len(recs)} ({cfg['replicates']} replications x "
        f"{cfg['epochs']} epochs), {time.perf_counter() - t0:.0f} s"
    )
    if "table1" in names:
        print(table1(recs, args.out, name)["text"])
    if "fig1b" in names:
        res = figure_1b(recs, args.out, name)
        for lam, f in res["frequencies"].items():
            print(f"fig1b lambda = {lam}: selected-width counts {f}")


def _rates(args, names) -> None:
    """The rate plots and the trade-off figure from the sweep records."""
    t0 = time.perf_counter()
    srecs, spath = _sweep_records(args.tier, args.records, args.recompute)
    print(f"sweep records: {spath} ({len(srecs)}), {time.perf_counter() - t0:.0f} s")
    if "rates" in names:
        res = rate_figure(srecs, args.out, args.tier)
        for r in res["results"]:
            t = r.theorem
            print(
                f"rates {r.truth} {r.metric}: slope {t.slope:.3f} "
                f"[{t.ci_low:.3f}, {t.ci_high:.3f}], predicted "
                f"{t.predicted:.3f}, {t.verdict}; {r.finding}"
            )
    if "tradeoff" in names:
        res = tradeoff_figure(srecs, args.out, args.tier)
        print(
            f"tradeoff: theory's best width {res['theory_argmin_width']:.0f}; measured"
            " d^2 per width: "
            + "; ".join(
                f"n={n} {res['widths'][n]}: {[round(x, 4) for x in v]}"
                for n, v in res["measured"].items()
            )
        )


def _split(args) -> None:
    """The risk split of the shipped constructive-start pilot (exploratory)."""
    ref = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference")
    records = [r for f in SPLIT_RECORDS if os.path.isfile(os.path.join(ref, f))
               for r in read_records(os.path.join(ref, f))]  # fmt: skip
    floors = floor_table([r for f in SPLIT_FLOORS for r in read_rows(os.path.join(ref, f))])
    for grid in truth_grids(records).values():
        sp = risk_split(grid, floors)
        res = split_figure(sp, args.out, "pilot")
        last = {t: f"{sp.term_share[t][-1]:.0%}" for t in sp.term_share}
        print(f"split {sp.truth} (exploratory): n = {sp.ns[0]:,}..{sp.ns[-1]:,}, shares at the"
              f" largest n {last}; {res['csv']}")  # fmt: skip


def _uci(args) -> None:

    t0 = time.perf_counter()
    recs = run_uci(args.tier, args.out, args.recompute, splits=args.splits, workers=args.workers)
    print(uci_table(recs, args.out, args.tier, args.splits)["text"])
    print(f"uci: {time.perf_counter() - t0:.0f} s")


def _mnist1d(args) -> None:

    recs = run_mnist1d(args.tier, args.out, args.recompute)
    mnist_figure(recs, args.out, args.tier)
    print(mnist_table(recs, args.out, args.tier)["text"])


def _mnist1d_controls(args) -> None:

    recs = run_mnist1d_controls(args.tier, args.out, args.recompute)
    mnist_controls_figure(recs, args.out, args.tier)
    print(mnist_controls_table(recs, args.out, args.tier)["text"])


def build_parser() -> argparse.ArgumentParser:
    """``python -m figures``' flags."""
    ap = Parser(
        prog="python -m figures",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--tier", choices=["tiny", "quick", "medium", "long", "paper"], default="quick")
    ap.add_argument("--only", choices=NAMES, action="append", help="one figure (repeatable)")
    ap.add_argument("--recompute", action="store_true", help="discard records and retrain")
    ap.add_argument(
        "--teacher-bias",
        choices=["subtract", "add"],
        default="subtract",
        help="Table 1's teacher: eq. (eqmod2)'s relu(h W - b) (default; it reproduces the"
        " paper's selected widths, simulate.truths.functions.TeacherNetwork) or relu(h W + b);"
        " separate records and outputs (TIER-add)",
    )
    ap.add_argument(
        "--teacher-methods",
        choices=["SVI", "HS-BNN", "Dense-BNN"],
        action="append",
        help="train only these Table 1 methods (repeatable; default all; Figure 1(b) and the"
        " ASVI row need SVI alone); the table shows every method recorded",
    )
    ap.add_argument(
        "--teacher-mlp",
        choices=[BATCHED.name, NATIVE.name],
        default=BATCHED.name,
        help="Table 1's network pass: batched (default) or native (fused per model in C, one"
        " program per block: ~2.6x faster blocks at float-rounding differences; needs a C"
        " compiler); separate records and outputs (TIER-native)",
    )
    ap.add_argument(
        "--workers",
        type=int,
        default=0,
        help="train Table 1's blocks, or UCI's (dataset, method) units, on N single-threaded"
        " worker processes (default: here; at most as many as this machine's memory holds at"
        " 200 MiB each, simulate.core.sizes.WORKER_BYTES)",
    )
    ap.add_argument(
        "--splits",
        choices=["random", "standard"],
        default="random",
        help="UCI: splits drawn here (default) or the protocol's standard 20 splits, on which"
        " the published rows were computed (regenerated: simulate.truths.data."
        "uci_standard_splits); separate records and outputs (uci-standard-TIER)",
    )
    ap.add_argument("--out", type=path_arg, default=os.path.join("results", "figures"))
    ap.add_argument(
        "--results-md",
        type=path_arg,
        action="append",
        help="a results file whose generated blocks --only results rewrites from the records"
        " (repeatable; default RESULTS.md, and those of its pages docs/results/*.md and"
        " HISTORY.md that exist)",
    )
    ap.add_argument(
        "--records",
        type=path_arg,
        help="sweep records for rates/tradeoff (default: the verify tier's records file)",
    )
    return ap


def _check(args, names) -> None:
    """``ValueError`` (one line) for a bad flag or path, before any work: the output folder,
    the workers, the records, the results files (read bounded, writable) and that no output
    names an input."""
    check_output_dir(args.out, "--out")
    if args.workers < 0:
        raise ValueError(f"--workers must be >= 0, got {args.workers}")
    check_workers(args.workers)  # each a process with torch (simulate.core.sizes)
    if args.records is not None and not os.path.isfile(args.records):
        raise ValueError(f"no records file {args.records}")
    if "results" in names:  # read (bounded, a regular file) before any work
        for doc in args.results_md:
            read_text_bounded(doc, "--results-md")
            check_output_file(doc, "--results-md")
    outputs = [("--results-md", d) for d in args.results_md] if "results" in names else []
    check_distinct(outputs, [("--records", args.records)])
    protect_inputs(args.records)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    names = args.only or list(NAMES)
    # by default RESULTS.md (required) and the other results files that exist here
    results_md = args.results_md or [
        f for f in RESULTS_FILES if f == RESULTS_FILES[0] or os.path.lexists(f)
    ]
    args = argparse.Namespace(**{**vars(args), "results_md": results_md})
    try:
        _check(args, names)
    except ValueError as exc:
        print_error(exc)
        return 2
    os.makedirs(args.out, exist_ok=True)

    tune_malloc()
    try:
        if {"table1", "fig1b"} & set(names):
            _teacher(args, names)
        if {"rates", "tradeoff"} & set(names):
            _rates(args, names)
        if "uci" in names:
            _uci(args)
        if "mnist1d" in names:
            _mnist1d(args)
        if "mnist1d-controls" in names:
            _mnist1d_controls(args)
        if "results" in names:
            for doc in args.results_md:
                regenerate(doc)
        if "split" in names:
            _split(args)
    except (RecordsError, ValueError, OSError) as exc:  # a full disk or a file-size limit too
        print_error(exc)
        return 2
    except KeyboardInterrupt:  # records are appended whole; figures are drawn from them
        return interrupted("the records written so far are whole, resume with the same command")
    print(f"outputs in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
