"""``python -m verify.rates``: does ASVI's posterior contract at the predicted rate, and
at the rate that is achievable on the same data?

Runs (or, with ``--records``, only reads) a growing-n sweep of ASVI (``simulate.sweep``:
every candidate width trained to convergence, candidate widths growing with n, each
replicate its own truth drawn from the class, a class-matched reference fitted on the
same datasets) and, for each truth and metric, prints a convergence table and its tests
(rules in ``verify.slopes``):

* **attainment test** (primary): ASVI's slope minus the slope of the class-matched
  reference (the least-squares continuous linear spline, its mesh chosen by
  cross-validation on the training data) on the same replicates, paired, one-sided
  against an allowance of ``log^c n`` fixed before the run (``--log-power``, default 2:
  the theorem's log factor at its tightest); it reports the implied log power c_hat
  ("attains up to log^c_hat n").  Its negative control is non-adaptive SVI at the
  smallest candidate width, which must FAIL it (otherwise a PASS says INCONCLUSIVE).
  Decided on the top half of the n range when the curve bends;
* **theorem test**, one-sided (the theorems are upper bounds: faster is never a FAIL):
  FAIL when the slope's interval lies above the band ``[e, e + shift]``; UNDECIDABLE when
  the design cannot separate that band from the too-slow control's (e/2) by two interval
  half-widths (the power check, printed before training with the tier's pilot variance
  and decided on the measured one); PASS when the e/2 control is rejected;
* **curvature**: the top-half slope with its interval; *bending* when it differs from
  the global slope beyond its interval;
* **oracle-width SVI**: per cell the candidate with the smallest true error in hindsight;
  the ASVI/oracle risk ratio per n and its slope (Corollary 6.2).

A **budget-doubling control** re-trains the smallest and largest n of each truth (every n
with ``--control-every-n``; the full tier does) with twice the step cap and half the
stopping tolerance (same data, same seeds) and reports the change of each slope with a
paired interval; a slope that moves by more than 0.05 makes its verdicts INCONCLUSIVE
(optimisation-limited).

``--tier gp`` runs the harness's **known-answer control** (``simulate.sweep.gp``): exact
Gaussian-process posteriors with a matched and an over-smooth Matern prior, whose rates
are proven, through the same sweep and verdicts: the matched prior must attain, the
over-smooth one must be found slower.

Metrics: ``d2`` (VB-posterior mean of the squared Hellinger distance, the left side of
Theorems 4.1 and 5.1) decides; ``d`` (posterior mean Hellinger distance) and ``l2sq``
(squared L2 error of the posterior-mean predictor), near-transforms of it, are reported
against their own exponents and not counted again.

Exit status (from the d^2 entries): 1 when a theorem or attainment test FAILs (for the
known-answer control: when an entry contradicts its known answer), 3 when none fails but
some is INCONCLUSIVE or UNDECIDABLE, 0 when all pass; 2 on bad input (nothing is trained
and no record file is touched); 4 on a crash.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

import numpy as np

from simulate.sweep import tiers
from simulate.sweep.records import RecordsError
from simulate.sweep.runner import check_memory, check_native, parse_truths, records_path_for
from simulate.sweep.spec import (
    TRUTH_HELP,
    SweepConfig,
    one_configuration,
    overrides_from_args,
    read_records,
)
from theory._cli import Parser
from theory._paths import check_output_dir, check_output_file
from verify.analysis import (
    EXIT_BAD_INPUT,
    EXIT_CRASH,
    EXIT_FAIL,
    EXIT_INCONCLUSIVE,
    EXIT_PASS,
    analyse,
    check_control,
    control_config,
    control_records_path,
    exit_status,
    reselect,
)
from verify.render import (
    format_results,
    markdown_results,
    plot_results,
    power_lines,
)
from verify.slopes import ATTAIN_LOG_POWER

__all__ = ["main"]


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(
        prog="python -m verify.rates",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=TRUTH_HELP,
    )
    ap.add_argument("--tier", choices=sorted(tiers.RATES), default="quick")
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
        "--control-every-n",
        action="store_true",
        help="run the budget-doubling control at every n, not only the smallest and largest",
    )
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
    ap.add_argument(
        "--accept-code-change",
        action="store_true",
        help="resume the records file although the code that wrote it differs (the"
        " configuration otherwise the same); each new record notes the files that changed",
    )
    ap.add_argument("--n", type=int, nargs="+", help="override the tier's sample sizes")
    ap.add_argument("--replicates", type=int, help="override the tier's replicates")
    ap.add_argument("--depth", type=int, help="override the number of hidden layers (2)")
    ap.add_argument("--l3", choices=("paper", "exact"), help="override the L3 term (paper)")
    ap.add_argument(
        "--start",
        choices=("random", "constructive", "both"),
        help="override the start: random (the core's), constructive (train from the linear"
        " spline or the teacher encoded in the student, with the untrained start and plain"
        " Adam beside it), or both (the constructive tier's; simulate.references.constructive)",
    )
    ap.add_argument(
        "--compile",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run the training step through torch.compile (the full tier does; needs a C++"
        " compiler)",
    )
    ap.add_argument(
        "--mlp",
        choices=("batched", "native"),
        help="the network's pass: batched (default) or native (fused per model in C, the same"
        " numbers to float rounding; 2-2.4x the steps at batch 1024, about the same at the tiers'"
        " batch 128; needs a C compiler)",
    )
    ap.add_argument("--lambda-s-a", type=float, help="override a in lambda_s = a L log n (0.1)")
    ap.add_argument(
        "--lam",
        type=float,
        help="the width prior's lambda (10); with --records the widths are re-selected from"
        " the recorded ELBOs (the prior enters only the selection, eq. (13))",
    )
    ap.add_argument("--json", metavar="PATH", help="write the report as JSON")
    ap.add_argument(
        "--markdown", metavar="PATH", help="write the report's tables and findings as Markdown"
    )
    ap.add_argument("--figures", metavar="DIR", help="figure folder (default results/verify-TIER)")
    ap.add_argument("--delta", type=float, default=1.0, help="log power delta (>= 1)")
    ap.add_argument(
        "--log-power",
        type=float,
        default=ATTAIN_LOG_POWER,
        help="the attainment allowance's log power c (allowance: log^c n; default"
        f" {ATTAIN_LOG_POWER:g}, the theorem's log^(2 delta) n at delta = 1)",
    )
    ap.add_argument("--scheduler", help="Dask scheduler address for the sweep")
    ap.add_argument(
        "--workers",
        type=int,
        help="run the sweeps on N single-threaded worker processes; 0 runs them in this"
        " process (default: the tier's, 2 for quick and full)",
    )
    return ap


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        truths, rest = parse_truths(argv)
        args = build_parser().parse_args(rest)
        tier = tiers.RATES[args.tier]
        overrides = _checked_overrides(args)
        workers = tier.get("workers", 0) if args.workers is None else args.workers
        control_records: list[dict] = []
        cfg = ccfg = records = None
        if args.records:
            records, control_records, source, cpath = _existing_records(args, overrides)
        else:
            cfg, ccfg, source, cpath = _planned_sweep(args, truths, tier, overrides)
    except (ValueError, RecordsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except SystemExit as exc:  # argparse
        return EXIT_BAD_INPUT if exc.code else 0
    except Exception:  # reading the input crashed: a crash, never the FAIL code
        return _crashed()
    try:
        return _run(args, truths, workers, cfg, ccfg, source, cpath, records, control_records)
    except (RecordsError, OSError, TimeoutError) as exc:  # a held lock, an unreachable scheduler
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception:  # a crash is not a verdict: never exit 1 for it
        return _crashed()


def _crashed() -> int:
    """Report the exception being handled as a crash (traceback, then one line); exit 4."""
    traceback.print_exc()
    print("verify.rates: crashed (exit 4): see the traceback above", file=sys.stderr)
    return EXIT_CRASH


def _checked_overrides(args) -> dict:
    """Validate the flags (ValueError on bad input, before anything runs); the sweep
    settings they override."""
    if args.delta < 1:
        raise ValueError(f"--delta must be >= 1, got {args.delta}")
    if not (np.isfinite(args.log_power) and args.log_power >= 0):
        raise ValueError(f"--log-power must be a finite number >= 0, got {args.log_power}")
    if args.n is not None and len(args.n) < 3:
        raise ValueError(f"need at least 3 sample sizes, got {args.n}")
    if args.replicates is not None and args.replicates < 2:
        raise ValueError(
            f"--replicates must be >= 2 (the slopes' intervals are over replicates),"
            f" got {args.replicates}"
        )
    if args.workers is not None and args.workers < 0:
        raise ValueError(f"--workers must be >= 0, got {args.workers}")
    if args.lam is not None and not (np.isfinite(args.lam) and args.lam > 0):
        raise ValueError(f"--lam must be a finite number > 0, got {args.lam}")
    if args.scheduler and args.workers:
        raise ValueError("give either --scheduler or --workers, not both")
    if args.json:
        check_output_file(args.json, "--json")
    if args.markdown:
        check_output_file(args.markdown, "--markdown")
    check_output_dir(args.figures or os.path.join("results", f"verify-{args.tier}"), "--figures")
    if args.fingerprint and not args.records:
        raise ValueError("--fingerprint chooses among the records of --records")
    return overrides_from_args(args)


def _existing_records(args, overrides: dict):
    """``--records``: the records of one configuration (re-selected with ``--lam``) and
    their control's, if any; returns ``(records, control_records, source, control_path)``."""
    if set(overrides) - {"lam"}:
        raise ValueError(
            f"with --records only --lam applies (re-selection); got {sorted(overrides)}"
        )
    if os.path.isdir(args.records) or not os.path.exists(args.records):
        raise ValueError(f"no records file {args.records}")
    records = one_configuration(read_records(args.records), args.fingerprint, args.records)
    if not records:
        raise ValueError(f"{args.records} holds no records")
    reps: dict = {}
    for r in records:
        reps.setdefault(r["cell"]["truth"], set()).add(r["cell"]["replicate"])
    few = sorted(t for t, s in reps.items() if len(s) < 2)
    if few:
        raise ValueError(
            f"{args.records}: one replicate of {', '.join(few)}; the slopes' intervals are"
            " over replicates and need at least 2"
        )
    cpath = args.control_records or control_records_path(args.records)
    if args.control_records and not os.path.isfile(cpath):
        raise ValueError(f"no control records file {cpath}")
    control_records: list[dict] = []
    if not args.no_control and os.path.isfile(cpath):
        control_records = one_configuration(read_records(cpath), source=cpath)
        check_control(records, control_records, args.records, cpath)
    if args.lam is not None:
        records = reselect(records, args.lam)
        control_records = reselect(control_records, args.lam)
    return records, control_records, args.records, cpath


def _planned_sweep(args, truths, tier: dict, overrides: dict):
    """The tier's sweep (with the flags' overrides) and its budget-doubling control, and
    the records files they write; returns ``(cfg, control_cfg, source, control_path)``.
    A foreign, corrupt or other-configuration file stops here, before any training."""
    cfg = SweepConfig(truths=truths or tier["truths"], **{**tier["sweep"], **overrides})
    source = args.out or os.path.join("results", f"records-{args.tier}.jsonl")
    check_output_file(source, "--out")
    cpath = args.control_records or control_records_path(source)
    check_memory(cfg)
    check_native(cfg)
    source = records_path_for(cfg, source, args.new_file, args.accept_code_change)
    ccfg = None
    if not tier.get("control", True):
        args.no_control = True  # the known-answer control trains nothing to re-run
    if not args.no_control:
        check_output_file(cpath, "--control-records")
        every_n = args.control_every_n or tier.get("control_every_n", False)
        ccfg = control_config(cfg, tier["control_replicates"], every_n=every_n)
        cpath = records_path_for(ccfg, cpath, args.new_file, args.accept_code_change)
    return cfg, ccfg, source, cpath


def _run(args, truths, workers, cfg, ccfg, source, cpath, records, control_records) -> int:
    """Train (unless ``--records``), analyse, print, draw and write; returns the status.
    ``cfg``, ``ccfg``: the sweep's and the control's configurations (None with
    ``--records``)."""
    t0 = time.perf_counter()
    if not args.records:
        from simulate._alloc import tune_malloc
        from simulate.sweep.runner import run_sweep

        tune_malloc()
        print(power_lines(cfg, tiers.RATES[args.tier].get("pilot_cv"), args.delta))
        os.makedirs(os.path.dirname(os.path.abspath(source)), exist_ok=True)
        par = {"scheduler": args.scheduler, "workers": None if args.scheduler else workers or None,
               "accept_code_change": args.accept_code_change}  # fmt: skip
        records = run_sweep(cfg, source, **par)
        if not args.no_control:
            print(f"budget-doubling control (n = {ccfg.ns}, 2x cap, tolerance / 2):")
            control_records = run_sweep(ccfg, cpath, **par)
    try:
        results = analyse(records, truths or None, args.delta, control_records, args.log_power)
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
            json.dump([r.to_json() for r in results], fh, indent=2)
    if args.markdown:
        os.makedirs(os.path.dirname(os.path.abspath(args.markdown)), exist_ok=True)
        heading = f"verify.rates: {what} ({os.path.basename(source)})"
        with open(args.markdown, "w") as fh:
            fh.write(markdown_results(results, heading))
    status = exit_status(results)
    words = {
        EXIT_PASS: "every d^2 test PASSES (a known-answer control's: as known)",
        EXIT_FAIL: "some d^2 test FAILS: see above",
        EXIT_INCONCLUSIVE: "no d^2 test fails, but some is INCONCLUSIVE or UNDECIDABLE",
    }
    print(f"\n{words[status]}")
    return status


if __name__ == "__main__":
    sys.exit(main())
