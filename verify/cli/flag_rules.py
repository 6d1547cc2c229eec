"""No option of ``python -m verify.rates`` silently ignored (issue 61, item 9): every option
either takes effect in the run it is given to or is refused, before anything is read or
trained, with one line (exit 2) naming what it needs or what to do instead.

The one table: each option is in :data:`TAKES_EFFECT` (it acts wherever it is accepted:
why, for each) or in one or more rows of :data:`RULES` (an option, the runs in which it
has no effect, and the fix); a test walks the parser so that a new option cannot be in
neither (``tests/verify/test_flag_rules.py``).  The rows:

* ``records`` -- ``--records`` re-reads records and trains nothing: what only trains or
  writes records (``--out``, the workers and the cluster, ``--new-file``,
  ``--accept-code-change``, the recipe, the control's training, ``--truth``) is refused
  (the design and step flags already are, ``verify.cli.plan.existing_records``: only ``--lam``
  re-selects);
* ``no-records`` -- ``--partial`` is for a read of existing records;
* ``no-scheduler`` -- the deadlines of a cluster need ``--scheduler``;
* ``no-control`` -- the budget-doubling control's options need a control (not
  ``--no-control``, nor a tier without one: the known-answer tiers ``gp``, ``gp-class``,
  ``knn``);
* ``confirmatory`` -- a confirmatory tier writes one control file beside each sweep's
  records (``--control-records`` names one file of a plain tier), and its budget control
  is its protocol's design (``--control-every-n``), as its sweeps' settings are (refused
  by ``verify.cli.rates_args.checked_overrides``);
* ``gp`` -- a known-answer tier (``estimator = "gp"``, the Gaussian process, or ``"knn"``)
  has no network: the ASVI settings, the recipe and the step's are not its settings.

Where a protocol allows an exploratory copy it is said, not refused: ``--delta`` /
``--log-power`` make ``NAME+delta=...`` (``verify.cli.rates_args.protocol_of``), and ``--mlp``
/ ``--compile`` re-run a confirmatory design at another float rounding, said in a note and
carried in the records' configuration (``verify.cli.plan.planned_sweep``).

A dry run is the plan of the command it is added to (a documented command with
``--json``, ``--markdown`` gets ``--dry-run`` appended): the options that act only on the
run itself (:data:`DRY_RUN_IDLE`) are not refused there, but a line says that they do not
act in the dry run (:func:`dry_run_note`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import NamedTuple

from simulate.sweep.setup.kinds import KINDS

__all__ = [
    "DRY_RUN_IDLE",
    "RULES",
    "TAKES_EFFECT",
    "check_pilot_flags",
    "dry_run_note",
    "refuse_ignored",
]

# option (argparse destination) -> why it acts wherever it is accepted
TAKES_EFFECT = {
    "tier": "names the sweep trained, and the figures' folder and protocol of a re-read",
    "protocol": "the rules the verdicts are decided under",
    "dry_run": "prints the plan and stops (refused with --records: checked_overrides)",
    "records": "the records read",
    "fingerprint": "chooses among --records' configurations (refused without --records)",
    "no_control": "skips the control's training or its reading",
    "n": "a sweep's setting (refused with --records and by a confirmatory tier)",
    "replicates": "a sweep's setting (refused with --records and by a confirmatory tier)",
    "delta": "the verdicts' delta (an exploratory copy of the protocol)",
    "estimator": "trains the named regressor in ASVI's place (refused with --records and under"
    " a confirmatory protocol: verify.cli.rates_args.estimator_overrides)",
    "estimator_param": "a parameter of --estimator (refused without it: estimator_overrides)",
    "pilot": "the named regressor's pilot records, its power's spread (refused without"
    " --estimator or --records: verify.cli.rates_args.check_pilot_flags)",
    "rate": "the band the verdicts hold the rate to (an exploratory copy, NAME+rate=EXPR;"
    " refused under a confirmatory protocol: verify.reading.stated_rate)",
    "log_power": "the verdicts' allowance (an exploratory copy of the protocol)",
    "equivalence_margin": "the equivalence reading's margin, read for every entry (an"
    " exploratory copy of the protocol; verify.stats.equivalence)",
}

_TRAINS = (
    "is for a run that trains (where or how its records are made); --records re-reads"
    " records and trains nothing: drop it"
)
_CONTROL = "shapes the budget-doubling control, which"


def _records(args, ctx) -> str | None:
    return _TRAINS if args.records else None


def _no_records(args, ctx) -> str | None:
    if args.records:
        return None
    return "applies to a read of existing records: give --records FILE, or drop it"


def _no_scheduler(args, ctx) -> str | None:
    if args.scheduler is not None:
        return None
    return "is a deadline of a Dask cluster's: give --scheduler ADDRESS, or drop it"


def _no_control(args, ctx) -> str | None:
    if args.no_control:
        return f"{_CONTROL} --no-control skips: drop one of them"
    if not ctx["control"] and not args.records:
        return f"{_CONTROL} --tier {args.tier} does not have (a known-answer tier): drop it"
    return None


def _confirmatory(args, ctx) -> str | None:
    if not ctx["confirmatory"] or args.records:
        return None
    if args.control_records is not None:  # plan: a named sweep's control is OUT-NAME-double
        return (
            f"names the control file of a plain tier's one sweep; --tier {args.tier} writes"
            " one beside each sweep's records (OUT-NAME-double.jsonl): give --out OUT, or"
            " drop it"
        )
    return (
        f"changes the budget-doubling control of --tier {args.tier}, whose design is its"
        " protocol's: drop it, or run a non-confirmatory tier (--tier quick, full, ...)"
    )


# the known-answer tiers' estimators, as their refusals name them
_CONTROL_WORDS = {"gp": "the Gaussian process", "knn": "k-nearest neighbours"}


def _gp_tier(args, ctx) -> str | None:
    if KINDS[ctx["estimator"]].known_answer and not args.records:
        return (
            f"is a setting of the ASVI network, which --tier {args.tier} does not train (its"
            f" estimator is {_CONTROL_WORDS[ctx['estimator']]}): drop it"
        )
    return None


class Rule(NamedTuple):
    """A row of the table: its ``name``, the ``options`` (argparse destinations) it
    refuses, and ``why``: ``(args, context) -> the reason it has no effect in this run,
    with the fix (None: it acts)``."""

    name: str
    options: tuple[str, ...]
    why: Callable


RULES = (
    Rule(
        "records",
        (
            "out",
            "workers",
            "scheduler",
            "new_file",
            "accept_code_change",
            "recipe",
            "control_every_n",
            "control_from_start",
            "pilot_replicates",
        ),
        _records,
    ),  # fmt: skip
    Rule("no-records", ("partial",), _no_records),
    Rule("no-scheduler", ("scheduler_timeout", "worker_timeout"), _no_scheduler),
    Rule(
        "no-control", ("control_records", "control_every_n", "control_from_start"), _no_control
    ),  # fmt: skip
    Rule("confirmatory", ("control_records", "control_every_n"), _confirmatory),
    Rule(
        "gp", ("recipe", "depth", "l3", "start", "lambda_s_a", "lam", "mlp", "compile"), _gp_tier
    ),  # fmt: skip
)

# the options that act only on the run itself, which a dry run does not make
DRY_RUN_IDLE = ("json", "markdown", "csv", "figures", "explain", "quiet", "new_file",
                "accept_code_change", "scheduler_timeout", "worker_timeout",
                "control_from_start")  # fmt: skip


def context(tier: dict, confirmatory: bool) -> dict:
    """What the rules ask of the run's tier (``verify.cli.rates_args.tier_of``): whether it has
    a budget control, its estimator, and whether it is ``confirmatory``."""
    sweeps = tier.get("sweeps") or [tier]
    return {
        "control": bool(tier.get("control", True)),
        "estimator": sweeps[0].get("sweep", {}).get("estimator", "asvi"),
        "confirmatory": confirmatory,
    }


def refused(args, defaults: dict, ctx: dict) -> tuple[str, str, str] | None:
    """The first option given (its value not the parser's default, ``defaults``) that a
    row of :data:`RULES` refuses in this run: ``(row name, option, the line)``; None."""
    for rule in RULES:
        for dest in rule.options:
            value = getattr(args, dest, None)
            if value == defaults.get(dest):
                continue
            why = rule.why(args, ctx)
            if why:
                return rule.name, dest, f"{_flag(dest, value)} {why}"
    return None


def refuse_ignored(args, defaults: dict, tier: dict, confirmatory: bool, truths=()) -> None:
    """``ValueError`` (one line) for the first option given that the run would not use
    (:func:`refused`), for the run of ``tier`` (``confirmatory``: a pre-registered tier);
    ``truths``: the ``--truth`` groups, which name what to train (refused with
    ``--records``).  The flag is named as it was given (``--no-compile``)."""
    hit = refused(args, defaults, context(tier, confirmatory))
    if hit:
        raise ValueError(hit[2])
    if truths and args.records:
        raise ValueError("--truth names what to train; --records trains nothing: drop it")


def dry_run_note(args, defaults: dict) -> str | None:
    """With ``--dry-run``, the line naming the options given that act only on the run it
    plans (:data:`DRY_RUN_IDLE`), or None."""
    if not args.dry_run:
        return None
    idle = [_flag(d, getattr(args, d)) for d in DRY_RUN_IDLE
            if getattr(args, d, None) != defaults.get(d)]  # fmt: skip
    if not idle:
        return None
    return (
        f"note: {', '.join(idle)} act on the run itself, not on this dry run (it prints the"
        " plan and writes nothing): the same command without --dry-run uses them"
    )


def _flag(dest: str, value) -> str:
    name = "--" + dest.replace("_", "-")
    if value is False:  # a boolean option's negative form (--no-compile)
        return "--no-" + name[2:]
    return name


def check_pilot_flags(args) -> None:
    """``--pilot-replicates K`` trains a pilot of ``--estimator`` (K >= 2, not with
    ``--pilot``); ``--pilot RECORDS`` is read for a run of ``--estimator`` or a read of
    ``--records``: ValueError (one line) otherwise.  ASVI's and the known-answer controls'
    power is the protocol's (``verify.reading.pilot``)."""
    k, path = args.pilot_replicates, args.pilot
    if k is not None:
        if args.estimator is None:
            raise ValueError(
                "--pilot-replicates trains a pilot of --estimator (a named regressor's power"
                " comes from its own pilot, ASVI's from the protocol's): give --estimator"
            )
        if path is not None:
            raise ValueError("give one pilot: --pilot-replicates K or --pilot RECORDS")
        if isinstance(k, bool) or not isinstance(k, int) or k < 2:
            raise ValueError(f"--pilot-replicates must be an integer >= 2, got {k!r}")
    if path is not None:
        if args.estimator is None and not args.records:
            raise ValueError("--pilot powers a named regressor: give --estimator or --records")
        if not os.path.isfile(path):
            raise ValueError(f"no pilot records file {path}")
