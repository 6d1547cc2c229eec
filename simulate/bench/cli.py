"""``python -m simulate.bench``'s command line: its flags (``--help`` prints
:mod:`simulate.bench.timing`'s account of what is timed), their checks before any work
(exit 2, one line), and the JSON each mode writes; the timings themselves are
:mod:`simulate.bench.timing`'s and :mod:`simulate.bench.sweep_mix`'s."""

from __future__ import annotations

import argparse
import os
import platform
from dataclasses import replace

import torch

from simulate.alloc import tune_malloc
from simulate.bench import timing
from simulate.bench.flops import BATCH, N, P, peak_gflops
from simulate.bench.sweep_mix import sweep_workload
from simulate.bench.timing import (
    WORKLOADS,
    BenchSetup,
    compare_paths,
    network_name,
    run,
    table1_block_rate,
)
from simulate.core import StepOptions, native
from simulate.core.hyper import PAPER_WIDTHS
from simulate.core.steppath import MLP_KINDS, mlp_help, path_of
from simulate.experiments.table1 import METHODS
from simulate.sweep.setup import tiers
from simulate.sweep.store.schema import read_records
from theory.plumbing.cli import Parser, print_error
from theory.plumbing.paths import check_distinct, check_output_file, path_arg, write_json

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    ap = Parser(prog="python -m simulate.bench", description=timing.__doc__)
    ap.add_argument("--json", type=path_arg, metavar="PATH", help="write the results as JSON")
    ap.add_argument("--E", type=int, nargs="+", default=[1, 10, 100])
    ap.add_argument("--steps", type=int, default=20, help="steps per timed repeat")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    ap.add_argument(
        "--compile",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="torch.compile the step (sampler, network, Adam); default: not compiled, but"
        " --workload sweep runs each program as its tier does (--no-compile: eager)",
    )
    ap.add_argument(
        "--loop-max", type=int, help="time the per-model loops only for E <= this (vmap: every E)"
    )
    ap.add_argument(
        "--no-tune-malloc",
        action="store_true",
        help="time under glibc's default allocator (default: simulate.alloc.tune_malloc, never"
        " mmap and a 1 GB trim threshold, as the training command lines run)",
    )
    ap.add_argument(
        "--workload",
        choices=WORKLOADS,
        default="net20",
        help="net20: E models 20-20-20-1 (default); table1: Table 1's students 20-w-w-1, "
        "w = 2..20 in turn; sweep: a rate tier's own programs (--tier, --records; "
        "simulate.bench.sweep_mix)",
    )
    ap.add_argument("--tier", default="full", help="--workload sweep: the rate tier (full)")
    ap.add_argument(
        "--mlp",
        choices=MLP_KINDS,
        help=mlp_help(
            "--workload sweep: forced, default the tier's; --table1-block: the"
            " block's, default batched"
        ),
    )
    ap.add_argument(
        "--records",
        type=path_arg,
        metavar="PATH",
        help="--workload sweep: the tier's sweep records, for the steps each program ran and "
        "the useful fraction (default: every program runs to its step cap)",
    )
    ap.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    ap.add_argument(
        "--table1-block",
        choices=tuple(METHODS),
        help="instead: time one Table 1 block of this method (with --compile, --groups, "
        "--autograd; --steps per program and repeat)",
    )
    ap.add_argument("--groups", type=int, default=1, help="--table1-block's width groups")
    ap.add_argument(
        "--autograd", action="store_true", help="--table1-block on the autograd step path"
    )
    ap.add_argument(
        "--compare-paths",
        action="store_true",
        help="instead: time the step's autograd, hand-written (and with --compile, compiled) "
        "paths at the largest E, interleaved",
    )
    return ap


def _check_native(asked: bool) -> None:
    """ValueError (one line: :mod:`simulate.core.native`'s own reason -- no compiler, its
    error, an unwritable or untrusted cache) where the fused pass cannot run and ``asked``
    for (``--mlp native``), or where its cache is untrusted even though it is only timed
    beside the batched core where it can run: that is for the user to hear about, not to
    drop the variant for without a word."""

    try:
        native.load()
    except native.NativeUnavailable as exc:
        if asked or isinstance(exc, native.NativeUntrusted):
            what = "--mlp native" if asked else "the fused pass (timed where it can run)"
            raise ValueError(f"{what}: {str(exc).splitlines()[0]}") from None


def _check(args) -> None:
    """ValueError on bad flags, before anything runs."""
    if any(e < 1 for e in args.E) or args.steps < 1 or args.repeats < 1:
        raise ValueError("E, steps and repeats must be >= 1")
    if not 1 <= args.groups <= len(PAPER_WIDTHS):
        raise ValueError(f"--groups must be in 1..{len(PAPER_WIDTHS)}, got {args.groups}")
    if args.threads is not None and args.threads < 1:
        raise ValueError(f"--threads must be >= 1, got {args.threads}")
    if args.loop_max is not None and args.loop_max < 0:
        raise ValueError(f"--loop-max must be >= 0, got {args.loop_max}")
    try:
        kind = torch.device(args.device).type
    except RuntimeError:
        raise ValueError(f"--device must be cpu or cuda[:i], got {args.device!r}") from None
    if kind not in ("cpu", "cuda"):
        raise ValueError(f"--device must be cpu or cuda[:i], got {args.device!r}")
    if kind == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda asked for but torch.cuda.is_available() is False")
    if args.json:
        check_output_file(args.json, "--json")
    if args.tier not in tiers.RATES:
        raise ValueError(f"--tier must be one of {tuple(tiers.RATES)}, got {args.tier!r}")
    runs_c = args.mlp is not None and path_of(args.mlp).runs_c
    if args.autograd and runs_c:
        raise ValueError(f"--mlp {args.mlp} runs in the hand-written step, not with --autograd")
    timed_beside = not (args.table1_block or args.compare_paths or args.workload == "sweep")
    if runs_c or kind == "cpu" and timed_beside:
        _check_native(runs_c)
    if args.records is not None and not os.path.isfile(args.records):
        raise ValueError(f"no records file {args.records}")
    if args.records is not None:  # read (and refused if corrupt) before any benchmark runs
        read_records(args.records)
    check_distinct([("--json", args.json)], [("--records", args.records)])


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    try:
        _check(args)
    except ValueError as exc:
        print_error(exc)
        return 2
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    tuned = False if args.no_tune_malloc else tune_malloc()
    if args.threads:
        torch.set_num_threads(args.threads)
    where = platform.processor() or platform.machine()
    if torch.device(args.device).type == "cuda":
        where = torch.cuda.get_device_name(args.device)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"malloc tuned: {tuned}, {where}"
    )
    # how the timed step runs, built once here: every mode's --compile; --table1-block adds
    # its --autograd and --mlp (the other modes time their own variants of it)
    options = StepOptions(compile=bool(args.compile))
    if args.table1_block:
        block = replace(options, autograd=args.autograd, mlp=args.mlp or options.mlp)
        res = table1_block_rate(args.table1_block, block, args.groups, args.steps, args.repeats)
        if args.json:
            write_json(args.json, {"where": where, "torch": torch.__version__, **res})
        return 0
    if args.workload == "sweep":
        _sweep(args, where)
        return 0
    if args.compare_paths:
        res = compare_paths(
            max(args.E), args.steps, args.repeats, BenchSetup(device=args.device), options
        )
        if args.json:
            write_json(args.json, {"E": max(args.E), "device": args.device, "where": where, **res})
        return 0
    res = run(
        args.E,
        args.steps,
        args.repeats,
        BenchSetup(device=args.device),
        options,
        loop_max=args.loop_max,
        workload=args.workload,
    )
    if args.json:
        meta = _meta(args, tuned, where)
        write_json(args.json, {"meta": meta, **{str(k): v for k, v in res.items()}})
    return 0


def _sweep(args, where: str) -> None:
    """``--workload sweep``: the tier's programs timed as the sweep runs them, said in one
    line and, with ``--json``, written with the torch version, threads and hardware."""
    peak = peak_gflops(args.device)
    print(f"sustained float32 GEMM rate (2048^3, the faster library): {peak:.1f} GFLOP/s")
    res = sweep_workload(
        args.tier, args.steps, args.repeats, args.compile, args.records,
        peak, mlp=args.mlp,
    )  # fmt: skip
    print(
        f"{args.tier} tier: {res['model_steps_per_s']:.0f} model-steps/s, "
        f"{res['gflops']:.2f} GFLOP/s ({100 * res['peak_fraction']:.1f}% of peak), "
        f"projected training {res['projected_full_tier_min']:.1f} min on "
        f"{res['workers']} worker(s) (steps from {res['steps_from']}"
        + (
            f"; useful fraction {res['useful_fraction']:.3f})"
            if res["useful_fraction"] is not None
            else ")"
        )
    )
    if args.json:
        meta = {"torch": torch.__version__, "threads": torch.get_num_threads()}
        write_json(args.json, {"meta": meta, "where": where, "sweep": res})


def _meta(args, tuned: bool, where: str) -> dict:
    """The JSON's ``meta`` of the default mode (:func:`simulate.bench.timing.run`): what ran
    where, on which network and data."""
    return {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "malloc_tuned": tuned,
        "device": args.device,
        "hardware": where,
        "workload": args.workload,
        "network": network_name()
        if args.workload == "net20"
        else f"{P}-w-w-1, w = {', '.join(map(str, PAPER_WIDTHS))} in turn",
        "batch_size": BATCH,
        "n": N,
        "steps": args.steps,
        "repeats": args.repeats,
    }
