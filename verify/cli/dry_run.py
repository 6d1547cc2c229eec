"""``python -m verify.rates --dry-run``: the protocol, every sweep's design, its power and its
estimated cost, printed before any training; nothing is trained or written."""

from __future__ import annotations

from simulate.sweep import costs
from verify.cli.flag_rules import dry_run_note
from verify.cli.plan import Plan
from verify.cli.runspec import spec_defaults
from verify.reading.design import design_power
from verify.reading.pilot import given_pilot, pilot_line
from verify.report.render import power_lines
from verify.sizing import control_probability
from verify.stats.slopes import expected_slope_se

__all__ = ["dry_run"]


def dry_run(args, plan: Plan, proto) -> int:
    """``--dry-run``: the protocol, the design of every sweep and its power before any
    training; nothing is trained or written (the options given that act only on the run
    itself: one note, ``verify.cli.flag_rules.dry_run_note``)."""
    note = dry_run_note(args, spec_defaults())
    if note:
        print(note)
    print(f"protocol {proto.tag} ({proto.kind})")
    pilots = given_pilot(args)  # checked against the plan (verify.rates.checked_plan)
    if pilots:
        print(pilot_line(pilots))
    for r in plan.runs:
        if r.pilot is not None:
            p = r.pilot.config
            print(f"pilot block of {r.label}: {p.replicates} replicates at n = {list(p.ns)},"
                  f" data seed {p.seed} (its own), trained first; its cv gives the power"
                  f" below once it has run; records {r.pilot.out}")  # fmt: skip
    sweeps = [(r.label, r.sweep.config, r.sweep.out) for r in plan.runs]
    if plan.gp:
        sweeps.append(("known-answer control", plan.gp.config, plan.gp.out))
    for name, cfg, path in sweeps:
        print(
            f"{name}: truths {[t.key for t in cfg.truths]}, n = {list(cfg.ns)}, "
            f"{cfg.replicates} replicates, data seed {cfg.seed}"
            + cfg.kind.words(cfg)
            + f"; records {path}"
        )
        print(power_lines(design_power(cfg, proto, pilots), cfg))
    for r in plan.runs:
        c = r.control and r.control.config
        if c is not None:
            print(f"budget-doubling control{' of ' + r.name if r.name else ''}: n ="
                  f" {list(c.ns)}, replicates 0..{c.replicates - 1}, twice the cap, half the"
                  f" tolerance; margin +-{proto.budget_margin:g};"
                  f" records {r.control.out}")  # fmt: skip
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
    less); the cells no measured row prices named; a named regressor (``--estimator``) not
    priced at all, said so (the table holds no estimator but ASVI and the GP), and no total
    given where nothing is priced."""
    workers = args.workers or plan.workers or 1  # a cluster's: not known here
    sweeps = [(r.label, r.sweep.config) for r in plan.runs]
    sweeps += [(f"control{' of ' + r.name if r.name else ''}", r.control.config)
               for r in plan.runs if r.control]  # fmt: skip
    if plan.gp:
        sweeps.append(("known-answer control", plan.gp.config))
    lines = [f"estimated cost (measured per-cell costs, {costs.TABLE_NAME}):"]
    total, unpriced, unknown = 0.0, [], []
    for name, cfg in sweeps:
        if not cfg.kind.priced:  # the table measures ASVI's and the controls' cells only
            lines.append(f"  {name}: not priced: {cfg.kind.words(cfg)[2:]} is an estimator the"
                         " cost table does not know (its seconds are known only once a cell"
                         " has run: try a small --n first)")  # fmt: skip
            unknown.append(name)
            continue
        e = costs.estimate(cfg)
        total += e.total_s
        unpriced += e.unpriced
        own = {p: p[0].rsplit("-s", 1)[0] + " at" for p in e.priced}  # priced by its own rows
        how = sorted({p[3] for p in e.priced if not p[3].startswith(own[p])})
        lines.append(f"  {name}: {e.total_s / 60:.1f} min of one worker"
                     + (f" ({'; '.join(how)})" if how else ""))  # fmt: skip
    if unknown and len(unknown) == len(sweeps):  # nothing priced: no total to give
        lines.append("  in all: not priced (no sweep the cost table knows)")
        return "\n".join(lines)
    lines.append(f"  in all: {total / 60:.1f} min of one worker, about {total / 60 / workers:.1f}"
                 f" min on {workers} worker{'s' if workers > 1 else ''}"
                 + (f", besides {', '.join(unknown)} (not priced)" if unknown else ""))  # fmt: skip
    if unpriced:
        lines.append(f"  not priced (no measured row): {unpriced}")
    return "\n".join(lines)
