"""The main job's plan (:class:`Plan`): the sweep runs, their budget controls and the
known-answer run, built and validated by :func:`planned_sweep` -- a function of the run's
specification alone: it opens no records file and prints nothing -- and their records files
resolved by :func:`resolved` (each existing file opened once, before anything trains:
another configuration's file stops the run, or with ``--new-file`` moves it beside);
frozen, ``verify.rates`` executes it."""

from __future__ import annotations

import dataclasses
import os

from simulate.core.steppath import BATCHED, path_of
from simulate.sweep.run.runner import (
    SweepRunOptions,
)
from simulate.sweep.run.spec import SweepSpec
from simulate.sweep.setup.config import SweepConfig
from simulate.sweep.setup.kinds import KINDS
from simulate.sweep.setup.recipes import recipe_settings
from simulate.sweep.setup.truth_spec import stable_seed
from simulate.sweep.store.schema import one_configuration, read_records
from simulate.sweep.train.foreign import regressor_name
from theory.plumbing.jsonl import being_written
from theory.plumbing.paths import (
    check_output_file,
)
from verify.reading.controls import check_control, control_config, control_records_path
from verify.reading.design import refusal
from verify.reading.records import reselect

# the settings of how the step runs: float rounding alone (simulate.core.options.StepOptions)
STEP_FIELDS = ("mlp", "compile")


@dataclasses.dataclass(frozen=True)
class SweepRun:
    """One sweep of a plan: its ``name`` (None: a plain tier's one sweep), the sweep and its
    budget-doubling control (None: no control), each a
    :class:`~simulate.sweep.run.spec.SweepSpec` (configuration, records file, how it runs),
    the value every entry point that trains builds."""

    name: str | None
    sweep: SweepSpec
    control: SweepSpec | None
    # a named regressor's pilot block, trained first (--pilot-replicates): its records give
    # the sweep's power (verify.reading.pilot); None: none
    pilot: SweepSpec | None = None

    @property
    def label(self) -> str:
        return self.name or "sweep"


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a training run of the main job does, built and checked before anything is
    touched (:func:`planned_sweep`): its sweeps with their controls, the known-answer
    control, the records file the report names (``source``), the jobs held at once here
    (``workers``: one per local worker, 1 on a cluster), and the notes planning made (a
    step moved from a protocol's design, a fallback from the C step), which the caller
    prints -- planning prints nothing; the figures' folder is ``figures_dir``'s, the same
    with ``--records``."""

    runs: tuple[SweepRun, ...]
    gp: SweepSpec | None
    source: str
    workers: int
    notes: tuple[str, ...] = ()

    def truth_keys(self) -> set[str]:
        keys = {t.key for r in self.runs for t in r.sweep.config.truths}
        return keys | ({t.key for t in self.gp.config.truths} if self.gp else set())

    def inputs(self) -> list[tuple[str, str]]:
        """The records files it writes, named as the options that set them."""
        ins = [("--out", r.sweep.out) for r in self.runs]
        ins += [("--control-records", r.control.out) for r in self.runs if r.control]
        ins += [("the pilot's records", r.pilot.out) for r in self.runs if r.pilot]
        if self.gp is not None:
            ins.append(("the known-answer control's records", self.gp.out))
        return ins


def existing_records(args, overrides: dict):
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


def _sweep_specs(args, truths, tier: dict, overrides: dict, proto, notes: list) -> list[tuple]:
    """``(name, truths, settings, control replicates)`` of each sweep :func:`planned_sweep`
    plans: a confirmatory tier's protocol sweeps (the step's overrides only, with a note,
    appended to ``notes``, where they move its design), or a plain tier's one sweep with
    every override."""
    if "sweeps" in tier:  # a confirmatory tier: its protocol's sweeps
        # how the step runs (--mlp, --compile) is float rounding, not a number a verdict
        # depends on: it moves a confirmatory tier's sweeps too, and its records say so
        step = {k: v for k, v in overrides.items() if k in STEP_FIELDS}
        specs = [(s["name"], s["truths"], {**s["sweep"], **step}, s["control_replicates"])
                 for s in tier["sweeps"]]  # fmt: skip
        moved = {k: v for k, v in step.items()
                 if any(s["sweep"].get(k) != v for s in tier["sweeps"])}  # fmt: skip
        if moved:
            notes.append(f"note: the step differs from protocol {proto.name}'s design ({moved}):"
                         " a re-run of the design at another float rounding, exploratory; its"
                         " records carry the step in their configuration")  # fmt: skip
        return specs
    recipe = {}  # the tier's own (simulate.sweep.setup.tiers.TRAINING) unless one is named
    if args.recipe and KINDS[tier["sweep"].get("estimator", "asvi")].trains_network:
        recipe = recipe_settings(args.recipe)
    return [(None, truths or tier["truths"], {**tier["sweep"], **recipe, **overrides},
             tier.get("control_replicates"))]  # fmt: skip


def planned_sweep(args, truths, tier: dict, overrides: dict, proto) -> Plan:
    """The tier's sweeps (with the flags' overrides), each with its budget-doubling
    control, and a confirmatory tier's known-answer control, with the records files they
    write (:class:`Plan`).  A plain tier is one sweep (``--out``); a
    confirmatory tier writes one file per sweep beside ``--out`` (``RECORDS-NAME.jsonl``).
    A named regressor (``--estimator``) is the tier's one sweep with the regressor in
    ASVI's place, its records ``results/records-TIER-CLASS.jsonl`` unless ``--out``, with
    no budget-doubling control.  Pure: the records files are named, not opened
    (:func:`resolved` opens them)."""
    named = overrides.get("regressor")  # --estimator: its records beside the tier's own
    own = f"records-{args.tier}" + (f"-{regressor_name(named)}" if named else "") + ".jsonl"
    source = args.out or os.path.join("results", own)
    check_output_file(source, "--out", read_only_ok=True)
    root, ext = os.path.splitext(source)
    ext = ext or ".jsonl"
    notes: list[str] = []
    specs = _sweep_specs(args, truths, tier, overrides, proto, notes)
    # nothing to re-run for the known-answer control or a named regressor (ASVI's step cap)
    no_control = args.no_control or not tier.get("control", True) or bool(named)
    every_n = args.control_every_n or tier.get("control_every_n", False)
    # jobs held at once here: one per local worker (a cluster's are not in this machine)
    at_once = 1 if args.scheduler else (tier.get("workers", 0) if args.workers is None
                                        else args.workers)  # fmt: skip
    options = SweepRunOptions(
        scheduler=args.scheduler, workers=None if args.scheduler else at_once or None,
        accept_code_change=args.accept_code_change,
        scheduler_timeout=args.scheduler_timeout, worker_timeout=args.worker_timeout,
    )  # fmt: skip

    def spec(cfg, path):
        return SweepSpec(cfg, path, options, new_file=args.new_file)

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
        if name is None and "mlp" not in overrides:
            cfg, note = c_step_or_fallback(cfg)
            notes += [note] if note else []
        # memory, the user's class (imported by the run that trains it), the C step, compile
        sweep = spec(cfg, path).checked(at_once)
        ccfg = None
        if not no_control:
            check_output_file(cpath, "--control-records")
            ccfg = control_config(cfg, crep, every_n=every_n)
        pilot = None
        if args.pilot_replicates and name is None:
            pilot = spec(pilot_config(cfg, args.pilot_replicates), f"{root}-pilot{ext}")
            check_output_file(pilot.out, "--out")
        runs.append(SweepRun(name, sweep, ccfg and spec(ccfg, cpath), pilot))
    gp = None
    if tier.get("gp"):
        gcfg = SweepConfig(truths=tier["gp"]["truths"], **tier["gp"]["sweep"])
        gpath = f"{root}-gp{ext}"
        check_output_file(gpath, "--out")
        gp = spec(gcfg, gpath).checked(at_once)
    return Plan(
        runs=tuple(runs), gp=gp, source=runs[0].sweep.out if len(runs) == 1 else source,
        workers=at_once, notes=tuple(notes),
    )  # fmt: skip


def resolved(plan: Plan) -> Plan:
    """``plan`` with each records file it writes resolved against what is there
    (``SweepSpec.resolved``): a file of another configuration stops the run here, before
    any training (``RecordsError``), or with ``--new-file`` is left alone and
    ``OUT-FINGERPRINT.jsonl`` written beside it; a foreign or corrupt file stops it too."""
    runs = tuple(
        dataclasses.replace(r, sweep=r.sweep.resolved(), control=r.control and r.control.resolved(),
                            pilot=r.pilot and r.pilot.resolved())
        for r in plan.runs
    )  # fmt: skip
    gp = plan.gp and plan.gp.resolved()
    source = runs[0].sweep.out if len(runs) == 1 else plan.source
    return dataclasses.replace(plan, runs=runs, gp=gp, source=source)


def pilot_config(cfg: SweepConfig, replicates: int) -> SweepConfig:
    """The pilot block of a named regressor's sweep (``--pilot-replicates``): the same
    configuration with ``replicates`` replicates and a seed of its own
    (``stable_seed(seed, "pilot")``), so that its data are not the replicates the verdicts
    are decided on (a pilot read off the decided data would be post-hoc power)."""
    return dataclasses.replace(
        cfg, replicates=int(replicates), seed=stable_seed(cfg.seed, "pilot") % 2**62
    )


def c_step_or_fallback(cfg: SweepConfig) -> tuple[SweepConfig, str | None]:
    """A tier's default step where it can run, and the line saying why not (None): the
    whole step in C (every ASVI tier's default) needs a C compiler; without one the tier
    trains with the batched torch step, eager (no compiler for torch.compile either).  An
    explicit ``--mlp native-step`` is refused instead
    (``simulate.sweep.run.runner.check_native``)."""
    if not cfg.kind.trains_network or path_of(cfg.mlp).available():
        return cfg, None
    return dataclasses.replace(cfg, mlp=BATCHED.name, compile=False), (
        "note: the whole step in C could not be built here (no working C compiler:"
        " simulate.core.native); training with the batched torch step, eager (--mlp batched"
        " says so and silences this)"
    )
