"""The main job's command line (``python -m verify.rates``): its flags (:func:`build_parser`),
the protocol and tier they name, the overrides they make of a tier's settings, and the checks
of the paths they give, all before anything is read or trained."""

from __future__ import annotations

import argparse
import dataclasses
import os

import numpy as np

from simulate.core.steppath import BATCHED
from simulate.sweep.cli import parse_truths
from simulate.sweep.run.parallel import add_scheduler_flags, check_cluster_flags
from simulate.sweep.setup import tiers
from simulate.sweep.setup.flags import add_sweep_flags, overrides_from_args
from simulate.sweep.setup.recipes import DEFAULT_RECIPE, RECIPES
from simulate.sweep.setup.truth_spec import TRUTH_HELP, with_truth_usage
from theory.plumbing.cli import Parser
from theory.plumbing.paths import (
    check_distinct,
    check_output_dir,
    check_output_file,
    path_arg,
    protect_inputs,
)
from verify import protocol as protocols
from verify.cli.flag_rules import check_pilot_flags, refuse_ignored
from verify.cli.runspec import RunSpec, spec_defaults
from verify.reading import stated_rate
from verify.reading.controls import control_records_path


def build_parser(description: str | None = None) -> argparse.ArgumentParser:
    """``python -m verify.rates``' flags, in the groups ``--help`` shows them;
    ``description``: the command's own (``verify.rates``' docstring)."""
    ap = Parser(
        prog="python -m verify.rates",
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=TRUTH_HELP,
    )
    for title, add in _FLAG_GROUPS:
        add(ap.add_argument_group(title))
    return with_truth_usage(ap)


def parser_defaults() -> dict:
    """``{destination: default}`` of every option of :func:`build_parser` (an option whose
    value differs was given: ``verify.cli.flag_rules.refuse_ignored``)."""
    return {a.dest: a.default for a in build_parser()._actions}


def _what_to_run(g) -> None:
    """The flags of what to run."""
    g.add_argument(
        "--tier",
        choices=sorted(tiers.RATES) + sorted(protocols.CONFIRM_TIERS),
        default="quick",
        help="the sweep to run (confirm, confirm2, ...: the pre-registered runs of protocols"
        " confirm-v1, confirm-v2, ...)",
    )
    g.add_argument(
        "--protocol",
        choices=protocols.names(),
        help=f"the protocol the verdicts are decided under (default {protocols.DEFAULT}; a"
        " confirmatory tier's own protocol for that tier; existing records: the shipped"
        " protocol they were written under)",
    )
    g.add_argument(
        "--dry-run",
        action="store_true",
        help="print the design and its power before training, and stop (nothing is trained"
        " or written)",
    )
    g.add_argument("--records", type=path_arg, help="verify these existing records; train nothing")
    g.add_argument(
        "--fingerprint",
        metavar="PREFIX",
        help="with --records: use the records of this configuration (a file that mixes"
        " configurations is refused without it; the error lists them)",
    )
    g.add_argument(
        "--partial",
        action="store_true",
        help="with --records: verify a file another run is still writing (refused without"
        " it); every output then says the read was partial",
    )


def _estimator(g) -> None:
    """The flags of the estimator trained in ASVI's place (exploratory)."""
    g.add_argument(
        "--estimator",
        metavar="MODULE:CLASS",
        help="train this scikit-learn-style regressor instead of ASVI on every cell of the"
        " tier's design (e.g. sklearn.neighbors:KNeighborsRegressor; simulate.sweep.train.foreign),"
        " its records in results/records-TIER-CLASS.jsonl unless --out; decided by the same"
        " tests (refused for a confirmatory protocol)",
    )
    g.add_argument(
        "--estimator-param",
        action="append",
        metavar="NAME=VALUE",
        help="a parameter of --estimator (repeatable): VALUE a Python literal, or an"
        " expression in n, p and alpha evaluated per cell (e.g."
        " 'n_neighbors=ceil(n**(2*alpha/(2*alpha+p)))'; rounded to int where the"
        " parameter's default is an int)",
    )
    g.add_argument("--pilot-replicates", type=int, metavar="K", help="before the run, train K"
                   " replicates of --estimator on data seeds of their own (OUT-pilot.jsonl):"
                   " its power from their spread, not ASVI's (verify.reading.pilot); without a"
                   " pilot its power is unknown")  # fmt: skip
    g.add_argument("--pilot", type=path_arg, metavar="RECORDS", help="records of a pilot of the"
                   " same regressor (same settings, the run's truths, data of its own): its"
                   " power from their spread (verify.reading.pilot)")  # fmt: skip


def estimator_overrides(args) -> dict:
    """The sweep settings ``--estimator`` and its parameters (``estimator_params``) make
    (empty without them); ValueError (one line) for a parameter without ``--estimator``,
    with ``--records`` or ``--recipe``.  Each value is checked as the sweep's configuration
    is made (``simulate.sweep.train.foreign.check_regressor_data``), the class as the run is
    planned (``simulate.sweep.run.runner.check_kind_run``)."""
    params = dict(args.estimator_params or {})
    if args.estimator is None:
        if params:
            raise ValueError("--estimator-param names a parameter of --estimator; give it")
        return {}
    if args.records:
        raise ValueError("--estimator trains; --records verifies what the records name")
    if args.recipe is not None:
        raise ValueError("--recipe is ASVI's training recipe; it does not go with --estimator")
    return {"estimator": "regressor", "regressor": args.estimator,
            "regressor_params": params or None}  # fmt: skip


def _records_files(g) -> None:
    """The flags of the records files and the budget-doubling control."""
    g.add_argument(
        "--out",
        type=path_arg,
        help="records file to write/resume (default results/records-TIER.jsonl)",
    )
    g.add_argument(
        "--control-records",
        type=path_arg,
        help="budget-doubling records (default: the records path with -double before .jsonl;"
        " with --records, used only if it exists)",
    )
    g.add_argument("--no-control", action="store_true", help="skip the budget-doubling control")
    g.add_argument(
        "--control-every-n",
        action="store_true",
        help="run the budget-doubling control at every n, not only the smallest and largest",
    )
    g.add_argument(
        "--control-from-start",
        action="store_true",
        help="train the budget-doubling control's candidates from the start instead of"
        " continuing the sweep's from their states (the same records; slower)",
    )
    g.add_argument(
        "--new-file",
        action="store_true",
        help="if the records file holds another configuration, write RECORDS-FINGERPRINT.jsonl"
        " beside it instead of stopping",
    )
    g.add_argument(
        "--accept-code-change",
        action="store_true",
        help="resume the records file although the code that wrote it differs (the"
        " configuration otherwise the same); each new record notes the files that changed",
    )


# the tier's settings a flag overrides (their help: simulate.sweep.setup.parts); a
# confirmatory tier's design is its protocol's, and refuses them
DESIGN_FLAGS = ("ns", "replicates", "depth", "l3", "start", "lambda_s_a", "lam")


def _design(g) -> None:
    """The flags of the tier's settings overridden."""
    g.add_argument(
        "--recipe",
        choices=sorted(RECIPES),
        help="the training recipe (simulate.sweep.setup.recipes; default: the tiers' own,"
        f" {DEFAULT_RECIPE}); a confirmatory tier's is its protocol's",
    )
    add_sweep_flags(g, DESIGN_FLAGS, {
        "lam": "with --records the widths are re-selected from the recorded ELBOs (the prior"
        " enters only the selection, eq. (13))",
    })  # fmt: skip


def _step(g) -> None:
    """The flags of how the step runs (float rounding only)."""
    add_sweep_flags(g, ("compile", "mlp"), {
        "compile": "--compile without --mlp means --mlp batched",
        "mlp": "every ASVI tier names native-step; without a C compiler a tier falls back to"
        " batched, with a note",
    })  # fmt: skip


def _verdicts(g) -> None:
    """The flags of the verdicts' numbers overridden (exploratory)."""
    g.add_argument(
        "--delta",
        type=float,
        help="override the protocol's log power delta (>= 1); the verdicts are then"
        " exploratory (refused for a confirmatory protocol)",
    )
    g.add_argument(
        "--equivalence-margin",
        type=float,
        metavar="F",
        help="read the equivalence test (the slope within +- F |e| of e: two one-sided tests,"
        " beside the theorem test, never deciding; verify.stats.equivalence) for every entry;"
        " a stated --rate with no log factor has it by default at F = 0.25 (exploratory;"
        " refused for a confirmatory protocol)",
    )
    g.add_argument(
        "--log-power",
        type=float,
        help="override the protocol's attainment allowance log power c (allowance: log^c"
        " n); the verdicts are then exploratory (refused for a confirmatory protocol)",
    )
    g.add_argument(
        "--rate",
        metavar="EXPR",
        help="a stated rate of d^2 in n, p and alpha (e.g. 'n**(-2*alpha/(2*alpha+p))*log(n)**2';"
        " names n p alpha log exp sqrt Rational) in place of the paper's band, its exponent and"
        " log power derived over each truth's n (verify.reading.stated_rate); the verdicts are then"
        " exploratory (refused for a confirmatory protocol); an EXPR starting with -:"
        " --rate=EXPR",
    )


def _outputs(g) -> None:
    """The flags of the outputs."""
    g.add_argument("--json", type=path_arg, metavar="PATH", help="write the report as JSON")
    g.add_argument(
        "--markdown",
        type=path_arg,
        metavar="PATH",
        help="write the report's tables and findings as Markdown",
    )
    g.add_argument(
        "--csv",
        type=path_arg,
        metavar="PATH",
        help="write the results as a tidy table: one row per cell and estimator, every metric,"
        " the selected width, seeds, timings and the protocol (verify.report.tidy)",
    )
    g.add_argument(
        "--figures",
        type=path_arg,
        metavar="DIR",
        help="figure folder (default results/verify-TIER)",
    )
    g.add_argument(
        "--quiet",
        action="store_true",
        help="print the decision block alone (what each truth's d^2 tests decided, the exit"
        " status); errors still on stderr, the --json/--markdown/figures still written",
    )
    g.add_argument(
        "--explain",
        action="store_true",
        help="after the tables, the key to their columns (what each column is and the rule"
        " behind it)",
    )


def _where(g) -> None:
    """The flags of where the sweeps run."""
    add_scheduler_flags(g)
    g.add_argument(
        "--workers",
        type=int,
        help="run the sweeps on N single-threaded worker processes; 0 runs them in this"
        " process (default: the tier's, 2 for quick and full)",
    )


# --help's groups, in order: (title, the function adding its flags)
_FLAG_GROUPS = (
    ("what to run", _what_to_run),
    ("the estimator trained in ASVI's place (exploratory)", _estimator),
    ("the records files and the budget-doubling control", _records_files),
    ("the tier's settings overridden", _design),
    ("how the step runs (float rounding only)", _step),
    ("the verdicts' numbers overridden (exploratory)", _verdicts),
    ("the outputs", _outputs),
    ("where the sweeps run", _where),
)


def protocol_of(args) -> protocols.Protocol:
    """The protocol of the run: ``--protocol``, a confirmatory tier's own, or the default;
    ``--delta`` / ``--log-power`` make a modified, exploratory copy (refused for a
    confirmatory protocol: its numbers were fixed before its run); so does ``--rate``
    (``verify.reading.stated_rate.with_rate``: ``NAME+rate=EXPR``, its digest over the rate too).
    ``--estimator`` is refused under a confirmatory protocol (its design trains ASVI)."""
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
    if (m := args.equivalence_margin) is not None:
        if not 0 < m < 0.5:
            raise ValueError(f"--equivalence-margin is a fraction of |e| in (0, 0.5), got {m}")
        changes["equivalence_margin"] = float(m)
    if args.rate is not None:
        proto = stated_rate.with_rate(proto, args.rate)
    if args.estimator is not None and proto.kind == "confirmatory":
        raise ValueError(
            f"protocol {proto.name} is confirmatory: its estimator is ASVI; give --protocol"
            f" {protocols.DEFAULT} (or another exploratory tier) to run --estimator"
        )
    if not changes:
        return proto
    if proto.kind == "confirmatory":
        raise ValueError(
            f"protocol {proto.name} is confirmatory: its delta and allowance are fixed; give"
            " --protocol exploratory-v1 to explore other values"
        )
    label = ",".join(f"{k}={v:g}" for k, v in changes.items())
    return dataclasses.replace(proto, name=f"{proto.name}+{label}", **changes)


def tier_of(args, proto: protocols.Protocol) -> dict:
    if args.tier in protocols.CONFIRM_TIERS:
        return protocols.design_tier(proto)
    return tiers.RATES[args.tier]


def checked_overrides(args) -> dict:
    """Validate the flags (ValueError on bad input, before anything runs); the sweep
    settings they override."""
    design = {k: v for k, v in overrides_from_args(args).items() if k in DESIGN_FLAGS}
    if args.tier in protocols.CONFIRM_TIERS and (design or args.recipe is not None):
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
    if args.lam is not None and not (np.isfinite(args.lam) and args.lam > 0):
        raise ValueError(f"--lam must be a finite number > 0, got {args.lam}")
    check_cluster_flags(args)
    if args.json:
        check_output_file(args.json, "--json")
    if args.markdown:
        check_output_file(args.markdown, "--markdown")
    check_output_dir(figures_dir(args), "--figures")
    if args.fingerprint and not args.records:
        raise ValueError("--fingerprint chooses among the records of --records")
    check_pilot_flags(args)  # verify.cli.flag_rules
    overrides = {**overrides_from_args(args), **estimator_overrides(args)}
    if overrides.get("compile") and "mlp" not in overrides:
        # torch.compile compiles the torch step (the C step has none)
        overrides["mlp"] = BATCHED.name
    return overrides


def check_paths(args, plan, truth_keys) -> None:
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
    if args.pilot:
        ins.append(("--pilot", args.pilot))
    figs = [("a figure", os.path.join(figures_dir(args), f"{k}.png")) for k in sorted(truth_keys)]
    check_distinct([("--json", args.json), ("--markdown", args.markdown), *figs], ins)
    protect_inputs(*(p for _, p in ins))


def figures_dir(args) -> str:
    """The figures' folder: ``--figures``, else ``results/verify-TIER``."""
    return args.figures or os.path.join("results", f"verify-{args.tier}")


@dataclasses.dataclass(frozen=True)
class Command:
    """A run of ``verify.rates`` checked (:func:`command_of`): its spec (``spec``, a
    ``verify.cli.runspec.RunSpec``), truths, protocol, tier, the sweep settings its options
    override, and the local workers."""

    spec: RunSpec
    truths: list
    proto: protocols.Protocol
    tier: dict
    overrides: dict
    workers: int


def read_command(argv: list[str], description: str | None = None) -> Command:
    """Parse a ``verify.rates`` command line into its :class:`RunSpec` and check it
    (:func:`command_of`; ``ValueError``, one line; argparse's ``SystemExit``)."""
    truths, rest = parse_truths(list(argv))
    args = build_parser(description).parse_args(rest)
    return command_of(RunSpec.from_namespace(args, truths))


def command_of(spec: RunSpec) -> Command:
    """Check a run before anything is read or trained (``ValueError``, one line): the
    truths, the options, the protocol and tier, the overrides, and every option the run
    would not use refused (``verify.cli.flag_rules``).  The command (``verify.rates.main``,
    through :func:`read_command`) and the notebook entry point (``verify.check_rate``,
    with the spec it builds) check their runs here."""
    truths = list(spec.truths)
    proto = protocol_of(spec)
    tier = tier_of(spec, proto)
    confirmatory = spec.tier in protocols.CONFIRM_TIERS
    if truths and confirmatory:
        raise ValueError("a confirmatory tier's truths are its protocol's; give no --truth")
    overrides = checked_overrides(spec)
    # an option the run would not use: one line (verify.cli.flag_rules' table)
    refuse_ignored(spec, spec_defaults(), tier, confirmatory, truths)
    workers = tier.get("workers", 0) if spec.workers is None else spec.workers
    return Command(spec, truths, proto, tier, overrides, workers)
