"""``python -m simulate.sweep``'s command line (through ``__main__.py``): its flags (the
``--truth`` groups, :func:`parse_truths`; the rest, :func:`build_parser`; ``--help`` prints
:mod:`simulate.sweep.runner`'s account of a sweep), the configuration they make
(:func:`config_from_args`), their checks before any work (exit 2, one line), and the line an
interrupted sweep ends with (:func:`resume_note`); the sweep itself is
:func:`simulate.sweep.runner.run_sweep`'s."""

from __future__ import annotations

import argparse
import json
import os
import sys

from simulate.alloc import tune_malloc
from simulate.progress import end_line
from simulate.sweep import runner
from simulate.sweep.cluster import NoWorkersError
from simulate.sweep.config import SweepConfig
from simulate.sweep.flags import add_sweep_flags, overrides_from_args
from simulate.sweep.parallel import add_scheduler_flags, check_cluster_flags
from simulate.sweep.recipes import DEFAULT_RECIPE, RECIPES, recipe_settings
from simulate.sweep.runner import (
    SweepRunOptions,
    check_compile,
    check_memory,
    check_native,
    records_path_for,
    run_sweep,
)
from simulate.sweep.truth_spec import TRUTH_HELP, TruthSpec
from theory.plumbing.cli import Parser, interrupted
from theory.plumbing.jsonl import RecordsError
from theory.plumbing.paths import check_distinct, check_output_file, path_arg, read_text_bounded

__all__ = ["build_parser", "config_from_args", "main", "parse_truths", "resume_note"]


def resume_note(path) -> str:
    """What an interrupted sweep says of its records file: ``N cells recorded in PATH,
    resume with the same command``, N its whole lines (one record, one cell, each)."""
    try:
        with open(path, "rb") as fh:
            n = sum(1 for line in fh if line.endswith(b"\n") and line.strip())
    except OSError:  # not made yet
        n = 0
    return f"{n} cells recorded in {path}, resume with the same command"


def parse_truths(argv: list[str]):
    """Split ``--truth KIND [--alpha A] [--p P] [--truth-seed S]`` groups (several allowed)
    from the rest of the arguments; returns (truths, rest)."""
    truths, rest, cur = [], [], None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--truth", "--alpha", "--p", "--truth-seed"):
            if i + 1 >= len(argv):
                raise ValueError(f"{a} needs a value")
            v = argv[i + 1]
            if a == "--truth":
                if cur is not None:
                    truths.append(cur)
                cur = {"kind": v}
            else:
                if cur is None:
                    raise ValueError(f"{a} must follow a --truth")
                try:
                    cur[{"--alpha": "alpha", "--p": "p", "--truth-seed": "seed"}[a]] = (
                        float(v) if a == "--alpha" else int(v)
                    )
                except ValueError as exc:
                    raise ValueError(f"{a} {v!r} is not a number") from exc
            i += 2
            continue
        rest.append(a)
        i += 1
    if cur is not None:
        truths.append(cur)
    return [TruthSpec(**t) for t in truths], rest


# the settings this command line sets by flag (any other: --config or --recipe)
SWEEP_FLAGS = ("ns", "replicates", "widths", "max_steps", "n_test", "max_epochs", "stop_tol",
               "batch_size", "lambda_s", "seed", "start", "compile", "mlp")  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(
        prog="python -m simulate.sweep",
        description=runner.__doc__,  # the sweep's design, as --help has always printed it
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=TRUTH_HELP,
    )
    ap.add_argument("--config", type=path_arg, help="JSON file with the SweepConfig fields")
    ap.add_argument(
        "--recipe",
        choices=sorted(RECIPES),
        help=f"the training recipe (simulate.sweep.recipes; default {DEFAULT_RECIPE}, or with"
        " --config the file's own settings); --config and the flags override its settings",
    )
    ap.add_argument(
        "--out", type=path_arg, default="results/records.jsonl", help="records file (JSON lines)"
    )
    # the sweep's settings, their flags and help generated from their declarations
    # (simulate.sweep.parts); unset, a flag leaves the recipe's or --config's value
    add_sweep_flags(ap, SWEEP_FLAGS)
    add_scheduler_flags(ap)
    ap.add_argument(
        "--workers",
        type=int,
        help="run the jobs on N single-threaded worker processes (0: in this process)",
    )
    ap.add_argument(
        "--new-file",
        action="store_true",
        help="if --out holds another configuration's records, write OUT-FINGERPRINT.jsonl"
        " beside it instead of stopping",
    )
    ap.add_argument(
        "--accept-code-change",
        action="store_true",
        help="resume --out although the code that wrote it differs (the configuration"
        " otherwise the same); each new record notes the files that changed",
    )
    return ap


def config_from_args(truths, args) -> SweepConfig:
    # the recipe named, else the default one -- but a --config file is its own settings
    # (an earlier configuration, or the GP control's, resumes as it was written)
    name = getattr(args, "recipe", None) or (None if args.config else DEFAULT_RECIPE)
    base = {} if name is None else recipe_settings(name)
    if args.config:
        try:
            given = json.loads(read_text_bounded(args.config, "--config"))
        except json.JSONDecodeError as exc:
            raise ValueError(f"--config {args.config}: not JSON ({exc})") from None
        if not isinstance(given, dict):
            raise ValueError(
                f"--config {args.config}: the top level must be a JSON object of sweep"
                f" settings, got {type(given).__name__}"
            )
        base.update(given)
        base["truths"] = [TruthSpec(**t) for t in base.get("truths", [])]
    if truths:
        base["truths"] = truths
    base.update(overrides_from_args(args))
    if "ns" not in base:
        raise ValueError("give the sample sizes with --n (or in --config)")
    base.setdefault("truths", [])
    return SweepConfig(**base)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        truths, rest = parse_truths(argv)
        args = build_parser().parse_args(rest)
        cfg = config_from_args(truths, args)  # validated as it is made
        check_cluster_flags(args)
        for flag, given in (("--scheduler-timeout", args.scheduler_timeout),
                            ("--worker-timeout", args.worker_timeout)):  # fmt: skip
            if given is not None and args.scheduler is None:
                raise ValueError(
                    f"{flag} is a deadline of a Dask cluster's: give --scheduler ADDRESS,"
                    " or drop it"
                )
        check_output_file(args.out, "--out", read_only_ok=True)
        check_distinct([("--out", args.out)], [("--config", args.config)])
        check_memory(cfg, 1 if args.scheduler is not None else args.workers)
        check_native(cfg)
        check_compile(cfg, args.scheduler)
        out = records_path_for(cfg, args.out, args.new_file, args.accept_code_change)
    except (ValueError, TypeError, OSError, json.JSONDecodeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    tune_malloc()
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    try:
        recs = run_sweep(cfg, out, SweepRunOptions(
            scheduler=args.scheduler, workers=args.workers,
            accept_code_change=args.accept_code_change,
            scheduler_timeout=args.scheduler_timeout, worker_timeout=args.worker_timeout,
        ))  # fmt: skip
    except NoWorkersError as exc:  # the records so far are whole: say where, and that they resume
        end_line()  # the progress bar, left mid-line
        print(f"error: {exc}; {resume_note(out)}", file=sys.stderr)
        return 2
    except (RecordsError, OSError, TimeoutError) as exc:  # a lock held, an unreachable scheduler
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # the records are whole: say where, and that they resume
        return interrupted(resume_note(out))
    failed = sum(bool(r["failed"]) for r in recs)
    print(f"{len(recs)} records in {out}" + (f" ({failed} failed cells)" if failed else ""))
    return 0
