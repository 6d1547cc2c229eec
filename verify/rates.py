"""``python -m verify.rates``: does ASVI's posterior contract at the predicted rate, and
at the rate that is achievable on the same data?

Runs (or, with ``--records``, only reads) a growing-n sweep of ASVI (``simulate.sweep``:
every candidate width trained to convergence, candidate widths growing with n, each
replicate its own truth drawn from the class, a class-matched reference fitted on the
same datasets) and, for each truth and metric, prints a convergence table and its tests
(rules in ``verify.slopes``):

Every number a verdict depends on is in a **protocol** (``verify.protocol``; ``--protocol
NAME``, default ``exploratory-v2``; ``--records`` are decided under the shipped protocol
they were written under, where there is one), whose digest every record written under it
and every JSON entry carries; a report on records of another protocol says so.

* **attainment test**: ASVI's slope minus the slope of the class-matched reference (the
  least-squares continuous linear spline, its mesh chosen by cross-validation on the
  training data) on the same replicates, paired, over the whole design, one-sided
  against an allowance of ``log^c n`` (the protocol's ``attainment_log_power``, 2: the
  theorem's log factor at its tightest); it reports the implied log power c_hat
  ("attains up to log^c_hat n").  Its negative control is non-adaptive SVI at the
  smallest candidate width, which must FAIL it (otherwise a PASS says INCONCLUSIVE); a
  PASS also needs the design's power against half the reference's rate (else
  UNDECIDABLE);
* **theorem test**, one-sided (the theorems are upper bounds: faster is never a FAIL):
  FAIL ("slower than n^e log^c n over n = a..b") when the slope's interval lies above the
  band ``[e, e + c ell]``, c the log power of the result covering the truth; PASS
  ("consistent with ...") when its upper end lies below the band's top (the confirming
  rule of exploratory-v2 on; whether e/2 is rejected is reported beside it; the earlier
  protocols pass when the e/2 control is rejected); otherwise UNDECIDABLE where the
  design, computed before the data from the protocol's pilot cv, has too little power
  (the probability of a PASS at e below the protocol's floor; earlier: the band not
  separable from e/2's), else INCONCLUSIVE;
* **replication** (``verify.replication``): every verdict recomputed on the protocol's
  bootstrap resamples of replicates and on each leave-one-out set -- the share that give
  it, the leave-one-out flips and its margin in SE; a decided verdict below the
  protocol's stability floor is printed and written "fragile";
* a known-answer control (the Gaussian-process priors) is held to its own proven rate
  and, under the confirming rule, to the truth class's band, each with its known answer;
* **curvature**: the top-half slope with its interval; *bending* when it differs from
  the global slope beyond its interval -- stated, never deciding;
* **oracle-width SVI**: per cell the candidate with the smallest true error in hindsight;
  the ASVI/oracle risk ratio per n and its slope (Corollary 6.2).

A **budget-doubling control** re-trains the smallest and largest n of each truth (every n
with ``--control-every-n``; the full tier does) with twice the step cap and half the
stopping tolerance (same data, same seeds) and reports the change of each slope with a
paired interval, an equivalence test against the protocol's margin: converged (the
verdicts stand), undetermined (they stand, labelled) or limited (they become
INCONCLUSIVE).  It continues the sweep's candidates from their states at the sweep's cap
(those with no plateau) or at their first plateau (the same run up to that step:
``simulate.sweep.budget``; the same records bit for bit, fewer training seconds), or with
``--control-from-start`` trains every one again from the start.

``--tier confirm`` is the pre-registered confirmatory run: its design (truths with a fresh
truth seed, n, replicates, the control, the known-answer control at three priors) is the
``[design]`` of the protocol ``confirm-v1``, committed before the run; ``--dry-run`` prints
the design and its power without training.

``--tier gp`` runs the harness's **known-answer control** (``simulate.sweep.gp``): exact
Gaussian-process posteriors with a matched and an over-smooth Matern prior, whose rates
are proven, through the same sweep and verdicts: the matched prior must attain, the
over-smooth one must be found slower.

Metrics: ``d2`` (VB-posterior mean of the squared Hellinger distance, the left side of
Theorems 4.1 and 5.1) decides; ``d`` (posterior mean Hellinger distance) and ``l2sq``
(squared L2 error of the posterior-mean predictor), near-transforms of it, are reported
against their own exponents and not counted again.

Exit status (from the d^2 entries): 1 when a theorem or attainment test FAILs at the
family-wise level (Holm over every test that sets the status; for the known-answer
control: when an entry contradicts its known answer), 3 when none fails but some is
INCONCLUSIVE or UNDECIDABLE, 0 when all pass; 2 on bad input (nothing is trained and no
record file is touched); 4 on a crash; 130 on Ctrl-C, with one line saying how many cells
the records file being written holds (whole: the same command resumes it).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
import traceback

import numpy as np

from simulate.alloc import tune_malloc
from simulate.core.steppath import BATCHED, MLP_KINDS, mlp_help, path_of
from simulate.sweep import costs, tiers
from simulate.sweep.budget import BudgetLink, linkable
from simulate.sweep.cli import parse_truths, resume_note
from simulate.sweep.config import SweepConfig
from simulate.sweep.flags import overrides_from_args
from simulate.sweep.parallel import (
    add_scheduler_flags,
    check_scheduler,
    check_scheduler_timeout,
    shared_pool,
)
from simulate.sweep.recipes import DEFAULT_RECIPE, RECIPES, recipe_settings
from simulate.sweep.runner import (
    check_compile,
    check_memory,
    check_native,
    records_path_for,
    run_sweep,
    warm_worker,
)
from simulate.sweep.schema import one_configuration, read_records
from simulate.sweep.truth_spec import TRUTH_HELP
from theory.plumbing.cli import Parser, interrupted, run_main
from theory.plumbing.jsonl import RecordsError, being_written
from theory.plumbing.paths import (
    check_distinct,
    check_output_dir,
    check_output_file,
    protect_inputs,
    write_atomic,
    write_json,
)
from verify import protocol as protocols
from verify.analysis import analyse
from verify.controls import check_control, control_config, control_records_path
from verify.decided import summary_lines
from verify.design import design_power, refusal
from verify.records import cells_of, records_protocol, reselect
from verify.render import (
    format_results,
    markdown_results,
    plot_results,
    power_lines,
)
from verify.results import results_document
from verify.sizing import control_probability
from verify.slopes import expected_slope_se
from verify.status import (
    EXIT_BAD_INPUT,
    EXIT_CRASH,
    EXIT_FAIL,
    EXIT_INCONCLUSIVE,
    EXIT_PASS,
    exit_status,
)

__all__ = ["main"]


# what every output of a ``--partial`` read says
PARTIAL_NOTE = "partial read: records still being written"


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(
        prog="python -m verify.rates",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=TRUTH_HELP,
    )
    ap.add_argument(
        "--tier",
        choices=sorted(tiers.RATES) + sorted(protocols.CONFIRM_TIERS),
        default="quick",
        help="the sweep to run (confirm: the pre-registered run of protocol confirm-v1)",
    )
    ap.add_argument(
        "--protocol",
        choices=protocols.names(),
        help="the protocol the verdicts are decided under (default exploratory-v1; a"
        " confirmatory tier's own protocol for that tier)",
    )
    ap.add_argument(
        "--dry-run",
        action="store_true",
        help="print the design and its power before training, and stop (nothing is trained"
        " or written)",
    )
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
        "--control-from-start",
        action="store_true",
        help="train the budget-doubling control's candidates from the start instead of"
        " continuing the sweep's from their states (the same records; slower)",
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
    ap.add_argument(
        "--recipe",
        choices=sorted(RECIPES),
        help="the training recipe (simulate.sweep.recipes; default: the tiers' own,"
        f" {DEFAULT_RECIPE}); a confirmatory tier's is its protocol's",
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
        help="run the training step through torch.compile (the batched torch step; --compile"
        " without --mlp means --mlp batched; needs a C++ compiler); --no-compile: eager"
        " steps, the same numbers to float rounding",
    )
    ap.add_argument(
        "--mlp",
        choices=MLP_KINDS,
        help=mlp_help(
            "default: the tier's, native-step on every ASVI tier; without a C compiler a tier"
            " falls back to batched, with a note"
        ),
    )
    ap.add_argument(
        "--lambda-s-a", type=float,
        help="override a in lambda_s = a (L + 1) log n, L hidden layers (0.1)",
    )  # fmt: skip
    ap.add_argument(
        "--lam",
        type=float,
        help="the width prior's lambda (10); with --records the widths are re-selected from"
        " the recorded ELBOs (the prior enters only the selection, eq. (13))",
    )
    ap.add_argument(
        "--partial",
        action="store_true",
        help="with --records: verify a file another run is still writing (refused without"
        " it); every output then says the read was partial",
    )
    ap.add_argument("--json", metavar="PATH", help="write the report as JSON")
    ap.add_argument(
        "--markdown", metavar="PATH", help="write the report's tables and findings as Markdown"
    )
    ap.add_argument("--figures", metavar="DIR", help="figure folder (default results/verify-TIER)")
    ap.add_argument(
        "--delta",
        type=float,
        help="override the protocol's log power delta (>= 1); the verdicts are then"
        " exploratory (refused for a confirmatory protocol)",
    )
    ap.add_argument(
        "--log-power",
        type=float,
        help="override the protocol's attainment allowance log power c (allowance: log^c"
        " n); the verdicts are then exploratory (refused for a confirmatory protocol)",
    )
    add_scheduler_flags(ap)
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
        proto = _protocol(args)
        tier = _tier(args, proto)
        if truths and args.tier in protocols.CONFIRM_TIERS:
            raise ValueError("a confirmatory tier's truths are its protocol's; give no --truth")
        overrides = _checked_overrides(args)
        workers = tier.get("workers", 0) if args.workers is None else args.workers
        control_records: list[dict] = []
        plan = records = None
        if args.records:
            records, control_records, source, partial = _existing_records(args, overrides)
            if args.protocol is None and args.delta is None and args.log_power is None:
                # records are decided by the rules they were written under, where shipped
                proto = protocols.of_records(records_protocol(cells_of(records))) or proto
            # the edge: the file is checked before its records are read into cells
            _check_paths(args, None, {r["cell"]["truth"] for r in records})
        else:
            plan = _planned_sweep(args, truths, tier, overrides, proto)
            _check_paths(args, plan, plan.truth_keys())
            source, partial = plan.source, False
    except (ValueError, RecordsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except SystemExit as exc:  # argparse
        return EXIT_BAD_INPUT if exc.code else 0
    except Exception:  # reading the input crashed: a crash, never the FAIL code
        return _crashed()
    if args.dry_run:
        return _dry_run(args, plan, proto)
    writing: list[str] = []  # the records file being written, for a Ctrl-C's line
    read = (source, records, control_records, partial)
    try:
        return _run(args, truths, workers, plan, read, proto, writing)
    except (RecordsError, OSError, TimeoutError) as exc:  # a held lock, an unreachable scheduler
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:  # the file being written (_run sets it) is whole and resumes
        return interrupted(resume_note(writing[-1]) if writing else None)
    except Exception:  # a crash is not a verdict: never exit 1 for it
        return _crashed()


def _protocol(args) -> protocols.Protocol:
    """The protocol of the run: ``--protocol``, a confirmatory tier's own, or the default;
    ``--delta`` / ``--log-power`` make a modified, exploratory copy (refused for a
    confirmatory protocol: its numbers were fixed before its run)."""
    own = protocols.CONFIRM_TIERS.get(args.tier)
    if own and args.protocol and args.protocol != own:
        raise ValueError(f"--tier {args.tier} runs under its protocol {own}, not {args.protocol}")
    proto = protocols.load(args.protocol or own or protocols.DEFAULT)
    changes = {}
    if args.delta is not None:
        if not args.delta >= 1:
            raise ValueError(f"--delta must be >= 1, got {args.delta}")
        changes["delta"] = float(args.delta)
    if args.log_power is not None:
        if not (np.isfinite(args.log_power) and args.log_power >= 0):
            raise ValueError(f"--log-power must be a finite number >= 0, got {args.log_power}")
        changes["attainment_log_power"] = float(args.log_power)
    if not changes:
        return proto
    if proto.kind == "confirmatory":
        raise ValueError(
            f"protocol {proto.name} is confirmatory: its delta and allowance are fixed; give"
            " --protocol exploratory-v1 to explore other values"
        )
    label = ",".join(f"{k}={v:g}" for k, v in changes.items())
    return dataclasses.replace(proto, name=f"{proto.name}+{label}", **changes)


def _tier(args, proto: protocols.Protocol) -> dict:
    if args.tier in protocols.CONFIRM_TIERS:
        return protocols.design_tier(proto)
    return tiers.RATES[args.tier]


def _crashed() -> int:
    """Report the exception being handled as a crash (traceback, then one line); exit 4."""
    traceback.print_exc()
    print("verify.rates: crashed (exit 4): see the traceback above", file=sys.stderr)
    return EXIT_CRASH


def _checked_overrides(args) -> dict:
    """Validate the flags (ValueError on bad input, before anything runs); the sweep
    settings they override."""
    if args.tier in protocols.CONFIRM_TIERS and any(
        getattr(args, k, None) is not None
        for k in ("n", "replicates", "depth", "l3", "start", "lambda_s_a", "lam", "recipe")
    ):
        raise ValueError(
            f"--tier {args.tier} is pre-registered: its design is its protocol's; no overrides"
        )
    if args.dry_run and args.records:
        raise ValueError("--dry-run plans a sweep; it does not go with --records")
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
    if args.scheduler is not None and args.workers:
        raise ValueError("give either --scheduler or --workers, not both")
    check_scheduler(args.scheduler)
    check_scheduler_timeout(args.scheduler_timeout)
    if args.json:
        check_output_file(args.json, "--json")
    if args.markdown:
        check_output_file(args.markdown, "--markdown")
    check_output_dir(_figures_dir(args), "--figures")
    if args.fingerprint and not args.records:
        raise ValueError("--fingerprint chooses among the records of --records")
    overrides = overrides_from_args(args)
    if overrides.get("compile") and "mlp" not in overrides:
        # torch.compile compiles the torch step (the C step has none)
        overrides["mlp"] = BATCHED.name
    return overrides


def _existing_records(args, overrides: dict):
    """``--records``: the records of one configuration (re-selected with ``--lam``) and
    their control's, if any; returns ``(records, control_records, source, partial)``,
    ``partial`` whether either file was read while another run still wrote it."""
    if set(overrides) - {"lam"}:
        raise ValueError(
            f"with --records only --lam applies (re-selection); got {sorted(overrides)}"
        )
    if os.path.isdir(args.records) or not os.path.exists(args.records):
        raise ValueError(f"no records file {args.records}")
    partial = _refuse_growing(args, args.records)
    records = one_configuration(read_records(args.records), args.fingerprint, args.records)
    if not records:
        raise ValueError(f"{args.records} holds no records")
    reps: dict = {}
    for r in records:  # the edge: checking the file, before its records are read into cells
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
        partial = _refuse_growing(args, cpath) or partial
        control_records = one_configuration(read_records(cpath), source=cpath)
        check_control(records, control_records, args.records, cpath)
    if args.lam is not None:
        records = reselect(records, args.lam)
        control_records = reselect(control_records, args.lam)
    return records, control_records, args.records, partial


def _refuse_growing(args, path) -> bool:
    """A records file another run still writes (its lock held) is not verified as if it
    were finished: a ``ValueError`` (exit 2), unless ``--partial`` asks for it, in which
    case every output says the read was partial (returns True; False: the file is
    finished)."""
    if not being_written(path):
        return False
    if not args.partial:
        raise ValueError(
            f"{path} is being written by another run (its lock is held): its verdicts would"
            " be on the records so far; wait for it to end, or give --partial for a read"
            " every output labels partial"
        )
    return True


def _check_paths(args, plan, truth_keys) -> None:
    """No output names an input, by any name (``theory.plumbing.paths.check_distinct``): the
    report's ``--json`` and ``--markdown`` and the figures (``FIGURES/TRUTH.png``, one per
    key of ``truth_keys``) against the records read or written, and each other; every
    input is protected against any other write of this process too."""
    if plan is None:
        ins = [("--records", args.records), ("--control-records", args.control_records)]
        if not args.no_control:
            ins.append(("the control records", control_records_path(args.records)))
    else:
        ins = plan.inputs()
    figs = [("a figure", os.path.join(_figures_dir(args), f"{k}.png")) for k in sorted(truth_keys)]
    check_distinct([("--json", args.json), ("--markdown", args.markdown), *figs], ins)
    protect_inputs(*(p for _, p in ins))


# the settings of how the step runs: float rounding alone (simulate.core.options.StepOptions)
STEP_FIELDS = ("mlp", "compile")


@dataclasses.dataclass(frozen=True)
class SweepRun:
    """One sweep of a plan: its ``name`` (None: a plain tier's one sweep), configuration
    and records file, and its budget-doubling control's configuration (None: no
    control) and records file."""

    name: str | None
    cfg: SweepConfig
    path: str
    control: SweepConfig | None
    control_path: str

    @property
    def label(self) -> str:
        return self.name or "sweep"


@dataclasses.dataclass(frozen=True)
class KnownAnswerRun:
    """A confirmatory tier's known-answer control (the GP sweep) and its records file."""

    cfg: SweepConfig
    path: str


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a training run of the main job does, built and checked before anything is
    touched (:func:`_planned_sweep`): its sweeps with their controls, the known-answer
    control, the records file the report names (``source``), the jobs held at once here
    (``workers``: one per local worker, 1 on a cluster); the figures' folder is
    :func:`_figures_dir`'s, the same with ``--records``."""

    runs: tuple[SweepRun, ...]
    gp: KnownAnswerRun | None
    source: str
    workers: int

    def truth_keys(self) -> set[str]:
        keys = {t.key for r in self.runs for t in r.cfg.truths}
        return keys | ({t.key for t in self.gp.cfg.truths} if self.gp else set())

    def inputs(self) -> list[tuple[str, str]]:
        """The records files it writes, named as the options that set them."""
        ins = [("--out", r.path) for r in self.runs]
        ins += [("--control-records", r.control_path) for r in self.runs if r.control]
        if self.gp is not None:
            ins.append(("the known-answer control's records", self.gp.path))
        return ins


def _figures_dir(args) -> str:
    """The figures' folder: ``--figures``, else ``results/verify-TIER``."""
    return args.figures or os.path.join("results", f"verify-{args.tier}")


def _planned_sweep(args, truths, tier: dict, overrides: dict, proto) -> Plan:
    """The tier's sweeps (with the flags' overrides), each with its budget-doubling
    control, and a confirmatory tier's known-answer control, with the records files they
    write (:class:`Plan`).  A plain tier is one sweep (``--out``); a
    confirmatory tier writes one file per sweep beside ``--out`` (``RECORDS-NAME.jsonl``).
    A foreign, corrupt or other-configuration file stops here, before any training."""
    source = args.out or os.path.join("results", f"records-{args.tier}.jsonl")
    check_output_file(source, "--out", read_only_ok=True)
    root, ext = os.path.splitext(source)
    ext = ext or ".jsonl"
    if "sweeps" in tier:  # a confirmatory tier: its protocol's sweeps
        # how the step runs (--mlp, --compile) is float rounding, not a number a verdict
        # depends on: it moves a confirmatory tier's sweeps too, and its records say so
        step = {k: v for k, v in overrides.items() if k in STEP_FIELDS}
        specs = [(s["name"], s["truths"], {**s["sweep"], **step}, s["control_replicates"])
                 for s in tier["sweeps"]]  # fmt: skip
        moved = {k: v for k, v in step.items()
                 if any(s["sweep"].get(k) != v for s in tier["sweeps"])}  # fmt: skip
        if moved:
            print(f"note: the step differs from protocol {proto.name}'s design ({moved}): a"
                  " re-run of the design at another float rounding, exploratory; its records"
                  " carry the step in their configuration")  # fmt: skip
    else:
        recipe = {}  # the tier's own (simulate.sweep.tiers.TRAINING) unless one is named
        if args.recipe and tier["sweep"].get("estimator", "asvi") == "asvi":
            recipe = recipe_settings(args.recipe)
        specs = [(None, truths or tier["truths"], {**tier["sweep"], **recipe, **overrides},
                  tier.get("control_replicates"))]  # fmt: skip
    # the known-answer control's tier trains nothing to re-run
    no_control = args.no_control or not tier.get("control", True)
    every_n = args.control_every_n or tier.get("control_every_n", False)
    # jobs held at once here: one per local worker (a cluster's are not in this machine)
    at_once = 1 if args.scheduler else (tier.get("workers", 0) if args.workers is None
                                        else args.workers)  # fmt: skip
    runs = []
    for name, ts, settings, crep in specs:
        cfg = SweepConfig(truths=ts, **settings)
        for t in cfg.truths:
            why = refusal(t)[0]
            if why:
                raise ValueError(f"{t.key}: verdicts refused: {why}")
        if cfg.protocol is None and proto.kind == "confirmatory":
            raise ValueError(f"protocol {proto.name} is confirmatory: run it as its tier")
        path = source if name is None else f"{root}-{name}{ext}"
        check_output_file(path, "--out", read_only_ok=True)
        cpath = args.control_records if name is None and args.control_records else (
            control_records_path(path)
        )  # fmt: skip
        check_memory(cfg, at_once)
        if name is None and "mlp" not in overrides:
            cfg = _c_step_or_fallback(cfg)
        check_native(cfg)
        check_compile(cfg, args.scheduler)
        ccfg = None
        if not no_control:
            check_output_file(cpath, "--control-records")
            ccfg = control_config(cfg, crep, every_n=every_n)
        if not args.dry_run:
            path = records_path_for(cfg, path, args.new_file, args.accept_code_change)
            if ccfg is not None:
                cpath = records_path_for(ccfg, cpath, args.new_file, args.accept_code_change)
        runs.append(SweepRun(name, cfg, path, ccfg, cpath))
    gp = None
    if tier.get("gp"):
        gcfg = SweepConfig(truths=tier["gp"]["truths"], **tier["gp"]["sweep"])
        gpath = f"{root}-gp{ext}"
        check_output_file(gpath, "--out")
        check_memory(gcfg, at_once)
        if not args.dry_run:
            gpath = records_path_for(gcfg, gpath, args.new_file, args.accept_code_change)
        gp = KnownAnswerRun(gcfg, gpath)
    return Plan(
        runs=tuple(runs), gp=gp, source=runs[0].path if len(runs) == 1 else source,
        workers=at_once,
    )  # fmt: skip


EXIT_WORDS = {
    EXIT_PASS: "every d^2 test PASSES (a known-answer control's: as known)",
    EXIT_FAIL: "some d^2 test FAILS at the family-wise level: see above",
    EXIT_INCONCLUSIVE: "no d^2 test fails family-wise, but some is INCONCLUSIVE or UNDECIDABLE",
}


def _c_step_or_fallback(cfg: SweepConfig) -> SweepConfig:
    """A tier's default step where it can run: the whole step in C (every ASVI tier's
    default) needs a C compiler; without one the tier trains with the batched torch step,
    eager (no compiler for torch.compile either), with one line saying so.  An explicit
    ``--mlp native-step`` is refused instead (``simulate.sweep.runner.check_native``)."""
    if cfg.estimator != "asvi" or path_of(cfg.mlp).available():
        return cfg
    print(
        "note: the whole step in C could not be built here (no working C compiler:"
        " simulate.core.native); training with the batched torch step, eager (--mlp batched"
        " says so and silences this)"
    )
    return dataclasses.replace(cfg, mlp=BATCHED.name, compile=False)


def _dry_run(args, plan: Plan, proto) -> int:
    """``--dry-run``: the protocol, the design of every sweep and its power before any
    training; nothing is trained or written."""
    print(f"protocol {proto.tag} ({proto.kind})")
    sweeps = [(r.label, r.cfg, r.path) for r in plan.runs]
    if plan.gp:
        sweeps.append(("known-answer control", plan.gp.cfg, plan.gp.path))
    for name, cfg, path in sweeps:
        print(
            f"{name}: truths {[t.key for t in cfg.truths]}, n = {list(cfg.ns)}, "
            f"{cfg.replicates} replicates, data seed {cfg.seed}"
            + (f", priors nu = {cfg.gp_nus}" if cfg.estimator == "gp" else "")
            + f"; records {path}"
        )
        print(power_lines(design_power(cfg, proto), cfg))
    for r in plan.runs:
        c = r.control
        if c is not None:
            print(f"budget-doubling control{' of ' + r.name if r.name else ''}: n ="
                  f" {list(c.ns)}, replicates 0..{c.replicates - 1}, twice the cap, half the"
                  f" tolerance; margin +-{proto.budget_margin:g};"
                  f" records {r.control_path}")  # fmt: skip
            for line in _control_power_lines(c, proto):
                print(line)
    print(_cost_lines(args, plan))
    return 0


def _control_power_lines(c, proto) -> list[str]:
    """Per truth of a budget control ``c`` with a pilot cv of its slope change
    (``[pilot_cv_control]``), the prospective probability that it says "converged" when
    twice the budget changes nothing (``verify.sizing.control_probability``: its interval
    inside the margin)."""
    out = []
    for t in c.truths:
        cv = proto.cv_for(t.key, t.kind, control=True)
        if cv is None:
            continue
        se = expected_slope_se(list(c.ns), c.replicates, cv)
        p = control_probability(proto.budget_margin, se, c.replicates, proto.level)
        out.append(f"  {t.key}: pilot cv of the change {cv:.2g}, slope SE {se:.3f};"
                   f" P(converged | no change) {p:.2f}")  # fmt: skip
    return out


def _cost_lines(args, plan: Plan) -> str:
    """The design's estimated cost from the measured per-cell costs the toolkit ships
    (``simulate.sweep.costs``): per sweep and in all, on the run's workers; each control
    priced as a sweep of its own cells (it continues the sweep's states, so it costs
    less); the cells no measured row prices named."""
    workers = args.workers or plan.workers or 1  # a cluster's: not known here
    sweeps = [(r.label, r.cfg) for r in plan.runs]
    sweeps += [(f"control{' of ' + r.name if r.name else ''}", r.control)
               for r in plan.runs if r.control]  # fmt: skip
    if plan.gp:
        sweeps.append(("known-answer control", plan.gp.cfg))
    lines = [f"estimated cost (measured per-cell costs, {costs.TABLE_NAME}):"]
    total, unpriced = 0.0, []
    for name, cfg in sweeps:
        e = costs.estimate(cfg)
        total += e.total_s
        unpriced += e.unpriced
        own = {p: p[0].rsplit("-s", 1)[0] + " at" for p in e.priced}  # priced by its own rows
        how = sorted({p[3] for p in e.priced if not p[3].startswith(own[p])})
        lines.append(f"  {name}: {e.total_s / 60:.1f} min of one worker"
                     + (f" ({'; '.join(how)})" if how else ""))  # fmt: skip
    lines.append(f"  in all: {total / 60:.1f} min of one worker, about {total / 60 / workers:.1f}"
                 f" min on {workers} worker{'s' if workers > 1 else ''}")  # fmt: skip
    if unpriced:
        lines.append(f"  not priced (no measured row): {unpriced}")
    return "\n".join(lines)


def _budget_link(args, cfg, path, ccfg):
    """The sweep's and the control's :class:`BudgetLink` (``simulate.sweep.budget``: the
    sweep keeps its capped candidates' states in a folder beside the records, removed once
    the control's records are written), or None: no control, ``--control-from-start``, a
    cluster (its workers need not share this machine's files), or a configuration it does
    not apply to (said)."""
    if ccfg is None or args.control_from_start or args.scheduler:
        return None
    why = linkable(cfg, ccfg)
    if why is not None:
        print(f"the control trains from the start: {why}")
        return None
    folder = f"{os.path.splitext(path)[0]}-states"
    return BudgetLink(folder, "save", ccfg), BudgetLink(folder, "load", cfg)


def _run(args, truths, workers, plan: Plan | None, read, proto, writing: list[str]) -> int:
    """Train (unless ``--records``), analyse, print, draw and write; returns the status.
    ``plan``: :func:`_planned_sweep`'s (None with ``--records``); ``read``: ``(source,
    records, control_records, partial)`` (the records read with ``--records``; empty
    lists to train); ``writing``: each records file as it is written (a Ctrl-C's line
    names the last)."""
    source, records, control_records, partial = read
    t0 = time.perf_counter()
    if not args.records:
        tune_malloc()
        print(f"protocol {proto.tag} ({proto.kind})")
        os.makedirs(os.path.dirname(os.path.abspath(source)), exist_ok=True)
        par = {"scheduler": args.scheduler, "workers": None if args.scheduler else workers or None,
               "accept_code_change": args.accept_code_change,
               "scheduler_timeout": args.scheduler_timeout}  # fmt: skip

        def sweep(c, path, budget=None):  # noting the file being written, for a Ctrl-C's line
            writing.append(path)
            return run_sweep(c, path, **par, budget=budget)

        records = []
        # one pool of workers for every sweep below, started before the design's power
        # check (its processes import while this one derives the exponents)
        with shared_pool(par["workers"], warm=warm_worker):
            for run in plan.runs:
                cfg, ccfg, own = run.cfg, run.control, f" {run.name}" if run.name else ""
                print(power_lines(design_power(cfg, proto), cfg))
                t1 = time.perf_counter()
                link = _budget_link(args, cfg, run.path, ccfg)
                records += sweep(cfg, run.path, link and link[0])
                print(f"sweep{own}: {time.perf_counter() - t1:.0f} s")
                if ccfg is None:
                    continue
                print(f"budget-doubling control (n = {ccfg.ns}, 2x cap, tolerance / 2):")
                if link:
                    print(f"  {link[0].kept(cfg)} candidates' states kept by the sweep (at its"
                          " cap with no plateau, or at their first plateau): the control"
                          " continues its own from there")  # fmt: skip
                t1 = time.perf_counter()
                control_records += sweep(ccfg, run.control_path, link and link[1])
                print(f"control{own}: {time.perf_counter() - t1:.0f} s")
                if link:  # a cache: the control's records are written
                    link[0].clear(cfg)
            if plan.gp is not None:
                print(power_lines(design_power(plan.gp.cfg, proto), plan.gp.cfg))
                t1 = time.perf_counter()
                records += sweep(plan.gp.cfg, plan.gp.path)
                print(f"known-answer control: {time.perf_counter() - t1:.0f} s")
    try:
        results = analyse(records, truths or None, control_records, proto)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    what = "recorded sweeps" if args.records else f"tier {args.tier}"
    print(f"verify.rates: {what}, records {source}, {time.perf_counter() - t0:.0f} s")
    theirs = results[0].decision.records_protocol if results else None
    print(f"protocol: {proto.tag} ({proto.kind})")
    if theirs is None and not args.records:
        # a fresh run of an exploratory tier: its sweeps write no protocol tag (tagging
        # them would change every exploratory record's fingerprint)
        print(f"note: this tier's records carry no protocol tag; decided under {proto.tag}")
    elif theirs != proto.tag:
        print(
            f"note: the records were written under {theirs or 'no protocol'}; these verdicts"
            f" are under {proto.tag}"
        )
    if partial:
        print(f"WARNING: {PARTIAL_NOTE}: {source} was still being written when it was read")
        results = [  # in every entry of the JSON report
            dataclasses.replace(
                r, decision=dataclasses.replace(r.decision, partial_read=PARTIAL_NOTE)
            )
            for r in results
        ]
    status = exit_status(results)
    summary = summary_lines(results)
    if summary:
        print("\n".join(["", *summary, f"  exit status {status}: {EXIT_WORDS[status]}", ""]))
    print(format_results(results))
    paths = plot_results(results, _figures_dir(args), PARTIAL_NOTE if partial else None)
    print(f"\nfigures: {', '.join(paths)}")
    if args.json:
        write_json(args.json, results_document(results))
    if args.markdown:
        heading = f"verify.rates: {what} ({os.path.basename(source)}; protocol {proto.tag})"
        if partial:
            heading += f" -- {PARTIAL_NOTE.upper()}"
        write_atomic(args.markdown, markdown_results(results, heading))
    print(f"\n{EXIT_WORDS[status]}")
    return status


if __name__ == "__main__":
    sys.exit(run_main(main))
