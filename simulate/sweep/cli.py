"""``python -m simulate.sweep``'s command line (through ``__main__.py``): its flags (the
``--truth`` groups, :func:`parse_truths`; the rest, :func:`build_parser`; ``--help`` prints
:mod:`simulate.sweep.run.runner`'s account of a sweep), the configuration they make
(:func:`config_from_args`), their checks before any work (exit 2, one line), the line an
interrupted sweep ends with (:func:`resume_note`; a pool worker killed under it, as the
out-of-memory killer does, ends the same way, exit 2), and the note of the candidates a
sweep left at its step cap (:func:`capped_note`); the sweep itself is
:func:`simulate.sweep.run.runner.run_sweep`'s."""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap

from simulate.alloc import tune_malloc
from simulate.progress import end_line
from simulate.sweep.run import runner
from simulate.sweep.run.cluster import NoWorkersError
from simulate.sweep.run.parallel import WorkerDied, add_scheduler_flags, check_cluster_flags
from simulate.sweep.run.runner import SweepRunOptions
from simulate.sweep.run.spec import SweepSpec
from simulate.sweep.setup.config import SweepConfig
from simulate.sweep.setup.flags import add_sweep_flags, overrides_from_args
from simulate.sweep.setup.recipes import DEFAULT_RECIPE, RECIPES, recipe_settings
from simulate.sweep.setup.truth_spec import TRUTH_HELP, TruthSpec, with_truth_usage
from theory.plumbing.cli import Parser, interrupted, print_error
from theory.plumbing.jsonl import RecordsError
from theory.plumbing.parse import NUMBER_LIMIT, BoundsError, parse_line
from theory.plumbing.paths import check_distinct, check_output_file, path_arg, read_text_bounded

__all__ = [
    "DEFAULT_MAX_EPOCHS",
    "build_parser",
    "capped_note",
    "config_from_args",
    "read_command",
    "main",
    "parse_truths",
    "resume_note",
]

# the step cap's growth with n where no --config file is given: the confirmatory tiers' cap
# (simulate.sweep.setup.tiers: "full", "constructive" and the confirm tiers set max_epochs = 160),
# max(max_steps, ceil(160 n / batch)) steps.  Why not SweepConfig's own default (None: a
# fixed max_steps at every n): a fixed cap is fewer passes over the data as n grows (20,000
# steps of 128 are 80 epochs at n = 32,000 and 5 at n = 512,000), so the large n of a sweep
# stopped at the cap, unconverged (5 of 8 candidates at n = 512,000 did), its numbers those
# of a budget, not of the ELBO's optimum.  SweepConfig's default stays None: shipped records
# are rebuilt from their fingerprints with the declared defaults, and the quick and tiny
# tiers rely on it.
DEFAULT_MAX_EPOCHS = 160

# what the command line says of the step cap (the flags' help is generated from their
# declarations, simulate.sweep.setup.parts: said here, in --help's epilog)
CAP_HELP = (
    f"The step cap: without --config, --max-epochs is {DEFAULT_MAX_EPOCHS} unless given (the"
    f" confirmatory tiers' cap, max(--max-steps, ceil({DEFAULT_MAX_EPOCHS} n / batch)) steps: a"
    " fixed cap is fewer passes over the data as n grows); with --config, the file's own"
    " max_epochs (absent or null: --max-steps at every n).  A sweep that leaves candidates"
    " at the cap unconverged says so in one note on stderr."
)


def resume_note(path) -> str:
    """What an interrupted sweep says of its records file: ``N cells recorded in PATH,
    resume with the same command``, N its whole lines (one record, one cell, each)."""
    try:
        with open(path, "rb") as fh:
            n = sum(1 for line in fh if line.endswith(b"\n") and line.strip())
    except OSError:  # not made yet
        n = 0
    return f"{n} cells recorded in {path}, resume with the same command"


def capped_note(
    records, remedy: str = "raise it with --max-steps or --max-epochs", label: str = ""
) -> str | None:
    """One line on the ASVI candidates of ``records`` that stopped at the step cap
    unconverged, or None where none did: ``note: K of M candidates (C of D cells) stopped at
    the step cap unconverged, at n = ... (cap ... steps); REMEDY``.

    Why: a capped candidate's numbers are those of a budget, not of the ELBO's optimum
    (the width selection and the rates read them as optima), and the records say so only
    in their ``per_width.converged`` columns, which nobody reads unprompted (a sweep at
    n = 512,000 left 5 of its 8 candidates at the cap and printed nothing).  The rule: a
    candidate is capped where its ``converged`` is false and it did not fail (a diverged
    candidate, ``per_width.failed``, is a failure, not a budget; its cell says so);
    records without ``per_width`` (the GP and k-NN controls', a named regressor's) are
    not counted.  The cap named is the cell's (``config.stop_rule.max_steps``: with
    ``max_epochs`` it grows with n), else the most steps a capped candidate took.
    ``remedy``: what raises the cap on the calling command line (``verify.rates`` has
    no cap flag of its own); ``label``: whose records, said after ``note`` (``note
    (LABEL): ...``)."""
    candidates = capped = cells = capped_cells = 0
    caps: dict[int, int] = {}  # n -> the cap of its capped cells
    for r in records:
        pw = r.get("per_width") if isinstance(r, dict) else None
        if not isinstance(pw, dict) or not isinstance(pw.get("converged"), list):
            continue
        conv, failed = pw["converged"], pw.get("failed")
        failed = failed if isinstance(failed, list) and len(failed) == len(conv) else []
        steps = pw.get("steps") if isinstance(pw.get("steps"), list) else []
        cells += 1
        candidates += len(conv)
        at_cap = [i for i, c in enumerate(conv) if not c and not (failed and failed[i])]
        if not at_cap:
            continue
        capped += len(at_cap)
        capped_cells += 1
        rule = (r.get("config") or {}).get("stop_rule") or {}
        cap = rule.get("max_steps") if isinstance(rule, dict) else None
        if not isinstance(cap, int):
            cap = max((steps[i] for i in at_cap if i < len(steps)), default=0)
        n = (r.get("cell") or {}).get("n")
        caps[n] = max(caps.get(n, 0), int(cap))
    if not capped:
        return None
    ns = sorted(caps, key=lambda n: (n is None, n or 0))
    if len(set(caps.values())) == 1:
        where = f"n = {', '.join(map(str, ns))} (cap {caps[ns[0]]} steps)"
    else:
        where = "n = " + ", ".join(f"{n} (cap {caps[n]} steps)" for n in ns)
    whose = f" ({label})" if label else ""
    return (
        f"note{whose}: {capped} of {candidates} candidates ({capped_cells} of {cells} cells)"
        f" stopped at the step cap unconverged, at {where}; {remedy}"
    )


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
               "batch_size", "lambda_s", "seed", "start", "plain_arm", "compile", "mlp",
               "width_edge_max")  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(
        prog="python -m simulate.sweep",
        description=runner.__doc__,  # the sweep's design, as --help has always printed it
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"{TRUTH_HELP}\n\n{textwrap.fill(CAP_HELP, 79)}",  # raw: wrapped here
    )
    ap.add_argument("--config", type=path_arg, help="JSON file with the SweepConfig fields")
    ap.add_argument(
        "--recipe",
        choices=sorted(RECIPES),
        help=f"the training recipe (simulate.sweep.setup.recipes; default {DEFAULT_RECIPE}, or with"
        " --config the file's own settings); --config and the flags override its settings",
    )
    ap.add_argument(
        "--out", type=path_arg, default="results/records.jsonl", help="records file (JSON lines)"
    )
    # the sweep's settings, their flags and help generated from their declarations
    # (simulate.sweep.setup.parts); unset, a flag leaves the recipe's or --config's value
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
    return with_truth_usage(ap)


def config_from_args(truths, args) -> SweepConfig:
    """The sweep the parsed flags ``args`` and the ``--truth`` groups ``truths`` make.

    The base: the recipe named (``--recipe``), else the default one
    (:data:`~simulate.sweep.setup.recipes.DEFAULT_RECIPE`) -- but a ``--config`` file is its own
    settings (an earlier configuration, or the GP control's, resumes as it was written).
    Without ``--config`` the cap grows with n, ``max_epochs`` :data:`DEFAULT_MAX_EPOCHS`
    (the confirmatory tiers'; a recipe's own, ``epochs``'s 320, kept), unless
    ``--max-epochs`` is given.  Then the file's settings, then the flags.  The file is
    read within bounds (:func:`_read_config`)."""
    name = getattr(args, "recipe", None) or (None if args.config else DEFAULT_RECIPE)
    base = {} if name is None else recipe_settings(name)
    if args.config:
        given = _read_config(args.config)
        if not isinstance(given, dict):
            raise ValueError(
                f"--config {args.config}: the top level must be a JSON object of sweep"
                f" settings, got {type(given).__name__}"
            )
        base.update(given)
        base["truths"] = [TruthSpec(**t) for t in base.get("truths", [])]
    else:
        base.setdefault("max_epochs", DEFAULT_MAX_EPOCHS)
    if truths:
        base["truths"] = truths
    base.update(overrides_from_args(args))
    if "ns" not in base:
        raise ValueError("give the sample sizes with --n (or in --config)")
    base.setdefault("truths", [])
    return SweepConfig(**base)


def _read_config(path):
    """The parsed ``--config`` file: its text read within the size bound
    (``theory.plumbing.paths.read_text_bounded``) and parsed within the nesting and
    number bounds of every records line (``theory.plumbing.parse.parse_line``), so that a
    file of 5,000 nested ``[`` is one line, not Python's ``RecursionError`` (exit 1, a
    traceback): ``ValueError`` naming the file and the bound (a sweep's settings nest a few
    levels, their numbers are seeds and floats), or that it is not JSON."""
    raw = read_text_bounded(path, "--config").encode("utf-8")
    try:
        return parse_line(raw)
    except BoundsError as exc:
        what = str(exc).split(" (", 1)[0]  # "nested deeper than 64 levels", "a number N ..."
        why = (
            "a sweep's settings nest a few"
            if what.startswith("nested")
            else f"at most {NUMBER_LIMIT}: a sweep's numbers are sizes, seeds and floats"
        )
        raise ValueError(f"--config {path}: {what} ({why}); is it the right file?") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"--config {path}: not JSON ({exc})") from None


def read_command(argv) -> SweepSpec:
    """The sweep the command line ``argv`` asks for (:class:`~simulate.sweep.run.spec.
    SweepSpec`), checked before anything is opened or written (``ValueError``, one line):
    the flags a thin parser into it."""
    truths, rest = parse_truths(list(argv))
    args = build_parser().parse_args(rest)
    cfg = config_from_args(truths, args)  # validated as it is made
    check_cluster_flags(args)
    for flag, given in (("--scheduler-timeout", args.scheduler_timeout),
                        ("--worker-timeout", args.worker_timeout)):  # fmt: skip
        if given is not None and args.scheduler is None:
            raise ValueError(
                f"{flag} is a deadline of a Dask cluster's: give --scheduler ADDRESS, or drop it"
            )
    check_output_file(args.out, "--out", read_only_ok=True)
    check_distinct([("--out", args.out)], [("--config", args.config)])
    options = SweepRunOptions(
        scheduler=args.scheduler, workers=args.workers,
        accept_code_change=args.accept_code_change,
        scheduler_timeout=args.scheduler_timeout, worker_timeout=args.worker_timeout,
    )  # fmt: skip
    return SweepSpec(cfg, args.out, options, new_file=args.new_file).checked()


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        spec = read_command(argv).resolved()  # the records file opened: once, here
    except (ValueError, TypeError, OSError, json.JSONDecodeError) as exc:
        print_error(exc)
        return 2
    out = spec.out
    tune_malloc()
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    try:
        recs = spec.run()
    # no worker on the cluster, or a pool worker killed (the out-of-memory killer's SIGKILL):
    # the records so far are whole, say where, and that they resume
    except (NoWorkersError, WorkerDied) as exc:
        end_line()  # the progress bar, left mid-line
        print_error(f"{exc}; {resume_note(out)}")
        return 2
    except (RecordsError, OSError, TimeoutError) as exc:  # a lock held, an unreachable scheduler
        print_error(exc)
        return 2
    except KeyboardInterrupt:  # the records are whole: say where, and that they resume
        return interrupted(resume_note(out))
    failed = sum(bool(r["failed"]) for r in recs)
    print(f"{len(recs)} records in {out}" + (f" ({failed} failed cells)" if failed else ""))
    note = capped_note(recs)
    if note:  # a warning on the records' numbers: stderr, where a redirected stdout keeps it
        print(note, file=sys.stderr)
    return 0
