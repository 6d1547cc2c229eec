"""``python -m verify.rates``: does ASVI's posterior contract at the predicted rate, and
at the rate that is achievable on the same data?

Runs (or, with ``--records``, only reads) a growing-n sweep of ASVI (``simulate.sweep``:
every candidate width trained to convergence, candidate widths growing with n, each
replicate its own truth drawn from the class, a class-matched reference fitted on the
same datasets) and, for each truth and metric, prints a convergence table and its tests
(rules in ``verify.stats.theorem`` and ``verify.stats.attainment``, on the fits of
``verify.stats.slopes``):

Every number a verdict depends on is in a **protocol** (``verify.protocol``; ``--protocol
NAME``, default ``exploratory-v3``, which reports the theorem's readings beside each
verdict, ``verify.stats.readings``; ``--records`` are decided under the shipped protocol
they were written under, where there is one), whose digest every record written under it
and every JSON entry carries; a report on records of another protocol says so.  ``--rate
EXPR`` (a rate of d^2 in n, p and alpha) replaces the paper's band in an exploratory copy of
the protocol (``verify.reading.stated_rate``).  ``--estimator MODULE:CLASS [--estimator-param
NAME=VALUE ...]`` trains any scikit-learn-style regressor in ASVI's place on the tier's design
(``simulate.sweep.train.foreign``) and decides its rate by the same tests (exploratory).

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
* **replication** (``verify.stats.replication``): every verdict recomputed on the protocol's
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
``simulate.sweep.train.budget``; the same records bit for bit, fewer training seconds), or with
``--control-from-start`` trains every one again from the start.

``--tier confirm`` is the pre-registered confirmatory run: its design (truths with a fresh
truth seed, n, replicates, the control, the known-answer control at three priors) is the
``[design]`` of the protocol ``confirm-v1``, committed before the run; ``--dry-run`` prints
the design and its power without training.

``--tier gp`` runs the harness's **known-answer control** (``simulate.sweep.train.gp``): exact
Gaussian-process posteriors with a matched and an over-smooth Matern prior, whose rates
are proven, through the same sweep and verdicts: the matched prior must attain, the
over-smooth one must be found slower; ``--tier knn`` the second (``simulate.sweep.train.knn``):
k-NN regression, k matched to the class (a known PASS) and k fixed (a known FAIL).

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

import dataclasses
import os
import sys
import time
import traceback

from simulate.alloc import tune_malloc
from simulate.progress import end_line
from simulate.sweep.cli import capped_note, resume_note
from simulate.sweep.run.cluster import NoWorkersError
from simulate.sweep.run.parallel import (
    WorkerDied,
    shared_pool,
)
from simulate.sweep.run.runner import (
    warm_worker,
)
from simulate.sweep.train.budget import BudgetLink, linkable
from simulate.sweep.train.foreign import RegressorFailed
from theory.plumbing.cli import interrupted, print_error, run_main
from theory.plumbing.jsonl import RecordsError
from theory.plumbing.paths import (
    write_atomic,
    write_json,
)
from verify import protocol as protocols
from verify.cli.dry_run import dry_run
from verify.cli.plan import Plan, existing_records, planned_sweep, resolved
from verify.cli.rates_args import (
    check_paths,
    figures_dir,
    read_command,
)
from verify.decided import WIDTH, decision_block, opening_line
from verify.reading import stated_rate
from verify.reading.analysis import analyse
from verify.reading.design import design_power
from verify.reading.pilot import NO_PILOT, given_pilot, pilot_cvs, pilot_line
from verify.reading.records import cells_of, records_protocol
from verify.report.findings import on_screen
from verify.report.render import (
    format_results,
    markdown_results,
    plot_results,
    power_brief,
    power_lines,
)
from verify.report.status import (
    EXIT_BAD_INPUT,
    EXIT_CRASH,
    EXIT_FAIL,
    EXIT_INCONCLUSIVE,
    EXIT_PASS,
    exit_status,
)
from verify.report.tidy import csv_text, tidy_rows
from verify.results import results_document

__all__ = ["main"]


# what every output of a ``--partial`` read says
PARTIAL_NOTE = "partial read: records still being written"


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        cmd = read_command(argv, __doc__)
        args, truths, proto, overrides, workers = (cmd.spec, cmd.truths, cmd.proto,
                                                   cmd.overrides, cmd.workers)  # fmt: skip
        control_records: list[dict] = []
        plan = records = None
        if args.records:
            records, control_records, source, partial = existing_records(args, overrides)
            exploring = (args.delta, args.log_power, args.rate, args.equivalence_margin)
            if args.protocol is None and all(v is None for v in exploring):
                # records are decided by the rules they were written under, where shipped
                proto = protocols.of_records(records_protocol(cells_of(records))) or proto
            # the edge: the file is checked before its records are read into cells
            check_paths(args, None, {r["cell"]["truth"] for r in records})
        else:
            plan = checked_plan(cmd)
            source, partial = plan.source, False
            for note in () if args.quiet else plan.notes:
                print(note)
    except (ValueError, RecordsError) as exc:
        print_error(exc)
        return EXIT_BAD_INPUT
    except SystemExit as exc:  # argparse
        return EXIT_BAD_INPUT if exc.code else 0
    except Exception:  # reading the input crashed: a crash, never the FAIL code
        return _crashed()
    if args.dry_run:
        return dry_run(args, plan, proto)
    writing: list[str] = []  # the records file being written, for a Ctrl-C's line
    read = (source, records, control_records, partial)
    try:
        return _run(args, truths, workers, plan, read, proto, writing)
    # a cluster without workers, a pool worker killed (the out-of-memory killer's SIGKILL):
    # what was recorded resumes
    except (NoWorkersError, WorkerDied) as exc:
        note = f"; {resume_note(writing[-1])}" if writing else ""
        end_line()  # the progress bar, left mid-line
        print_error(f"{exc}{note}")
        return EXIT_BAD_INPUT
    # a held lock, an unreachable scheduler, a named regressor failing on a cell's data
    except (RecordsError, OSError, TimeoutError, RegressorFailed) as exc:
        print_error(exc)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:  # the file being written (_run sets it) is whole and resumes
        return interrupted(resume_note(writing[-1]) if writing else None)
    except Exception:  # a crash is not a verdict: never exit 1 for it
        return _crashed()


def checked_plan(cmd) -> Plan:
    """A training run's plan (``verify.cli.plan.planned_sweep``, pure), its stated rate
    checked, its records files resolved against what is there (``plan.resolved``: the
    one step that opens them; not for a dry run) and its paths checked, all before any
    training (``ValueError`` or ``RecordsError``, one line)."""
    spec = cmd.spec
    plan = planned_sweep(spec, cmd.truths, cmd.tier, cmd.overrides, cmd.proto)
    stated_rate.check_plan(cmd.proto, plan)  # a refused --rate: before any training
    if spec.pilot:  # a pilot of another configuration, or with no cvs: before any training
        cfg = plan.runs[0].sweep.config
        given_pilot(spec, cfg.kind.cell_config(cfg, cfg.ns[0]), {t.key for t in cfg.truths})
    if not spec.dry_run:
        plan = resolved(plan)
    check_paths(cmd.spec, plan, plan.truth_keys())
    return plan


def _crashed() -> int:
    """Report the exception being handled as a crash (traceback, then one line); exit 4."""
    traceback.print_exc()
    print("verify.rates: crashed (exit 4): see the traceback above", file=sys.stderr)
    return EXIT_CRASH


EXIT_WORDS = {
    EXIT_PASS: "every d^2 test PASSES (a known-answer control's: as known)",
    EXIT_FAIL: "some d^2 test FAILS at the family-wise level: see above",
    EXIT_INCONCLUSIVE: "no d^2 test fails family-wise, but some is INCONCLUSIVE or UNDECIDABLE",
}


def _budget_link(args, cfg, path, ccfg, say=print):
    """The sweep's and the control's :class:`BudgetLink` (``simulate.sweep.train.budget``: the
    sweep keeps its capped candidates' states in a folder beside the records, removed once
    the control's records are written), or None: no control, ``--control-from-start``, a
    cluster (its workers need not share this machine's files), or a configuration it does
    not apply to (said)."""
    if ccfg is None or args.control_from_start or args.scheduler:
        return None
    why = linkable(cfg, ccfg)
    if why is not None:
        say(f"the control trains from the start: {why}")
        return None
    folder = f"{os.path.splitext(path)[0]}-states"
    return BudgetLink(folder, "save", ccfg), BudgetLink(folder, "load", cfg)


# what raises a tier's step cap here (verify.rates has no cap flag: the tier's is its own;
# simulate.sweep.setup.recipes' "epochs" doubles its growth with n, "budget" its floor); a
# confirmatory tier's cap is its protocol's design, which refuses --recipe
CAP_REMEDY = "raise it with --recipe epochs or --recipe budget (simulate.sweep.setup.recipes)"
CONFIRM_CAP = "the cap is the protocol's pre-registered design"
CONTROL_WORDS = "the budget-doubling control measures what twice the cap changes"


def capped_notes(records, control_records, control: bool, confirm: bool = False) -> list[str]:
    """The notes of the candidates the sweeps and their budget controls left at the step
    cap unconverged (``simulate.sweep.cli.capped_note``: a capped candidate's numbers are a
    budget's, not the ELBO's optimum); ``control``: the run has a budget-doubling control,
    whose measure of the cap the note names; ``confirm``: a confirmatory tier's run, whose
    cap no flag changes."""
    remedy = CONFIRM_CAP if confirm else CAP_REMEDY
    notes = [capped_note(records, remedy + (f"; {CONTROL_WORDS}" if control else ""))]
    notes.append(capped_note(control_records, remedy, "budget-doubling control"))
    return [n for n in notes if n]


def _confirmatory(args) -> bool:
    """A training run of a pre-registered tier (``--tier confirm...``)."""
    return not args.records and args.tier in protocols.CONFIRM_TIERS


def _run(args, truths, workers, plan: Plan | None, read, proto, writing: list[str]) -> int:
    """Train (unless ``--records``), analyse, print, draw and write; returns the status.
    ``plan``: :func:`planned_sweep`'s (None with ``--records``); ``read``: ``(source,
    records, control_records, partial)`` (the records read with ``--records``; empty
    lists to train); ``writing``: each records file as it is written (a Ctrl-C's line
    names the last)."""
    source, records, control_records, partial = read
    t0 = time.perf_counter()
    if not args.records:
        say = (lambda line: None) if args.quiet else print
        records, control_records, pilots, power = execute(args, plan, proto, workers, writing,
                                                          source, say)  # fmt: skip
    try:
        if args.records:  # a pilot of the records' own configuration, on data of its own
            pilots = given_pilot(args, records[0]["config"], {r["cell"]["truth"] for r in records})
        results = analyse(records, truths or None, control_records, proto, pilots)
    except ValueError as exc:
        print_error(exc)
        return EXIT_BAD_INPUT
    notes = capped_notes(records, control_records, bool(control_records), _confirmatory(args))
    notes = [*([] if args.records else power), *notes]
    if args.csv:  # the tidy table: the records' cells, as the verdicts read them
        write_atomic(args.csv, csv_text(tidy_rows(records, control_records, proto.tag)))
    return _report(args, results, read, proto, t0, notes)


def _pilot_block(run, sweep, say) -> dict:
    """Train a sweep's pilot block (``--pilot-replicates``) and read its cvs; a pilot that
    gives none (fewer than 2 complete replicates, a cv of 0) leaves the power unknown, said
    in a note: a property of the data, not a crash."""
    t1 = time.perf_counter()
    say(f"pilot block ({run.pilot.config.replicates} replicates, data seeds of its own,"
        f" records {run.pilot.out}):")  # fmt: skip
    recs = sweep(run.pilot)
    say(f"pilot: {time.perf_counter() - t1:.0f} s")
    try:
        cvs = pilot_cvs(recs, run.pilot.out)
    except ValueError as exc:
        say(f"note: {exc}; {NO_PILOT}")
        return {}
    say(on_screen(pilot_line(cvs)))
    return cvs


def execute(args, plan: Plan, proto, workers, writing: list[str], source: str, say=print):
    """Run the plan's sweeps, each after its pilot block (a named regressor's, where asked)
    and followed by its budget control, then the known-answer run, on one pool of workers;
    returns ``(records, control_records, pilots, power)``, ``pilots`` the entries' own pilot
    cvs (``verify.reading.pilot``: the pilot blocks' or ``--pilot``'s), ``power`` each sweep's
    power check (one line of it is said before the sweep trains; the report prints it
    whole after the decision block).  ``say``: where its lines
    go (the power check, the timings, the notes; ``verify.check_rate`` gives a no-op when
    quiet; the progress bar, on stderr, is the sweep's own)."""
    control_records: list[dict] = []
    power: list[str] = []  # each sweep's power check, printed in full after the decision block
    pilots = given_pilot(args)  # checked against the plan before (checked_plan)
    if pilots:
        say(on_screen(pilot_line(pilots)))
    tune_malloc()
    say(f"protocol {proto.tag} ({proto.kind})")
    os.makedirs(os.path.dirname(os.path.abspath(source)), exist_ok=True)

    def sweep(spec, budget=None):  # noting the file being written, for a Ctrl-C's line
        writing.append(spec.out)
        return spec.run(log=say, budget=budget)

    records = []
    # one pool of workers for every sweep below, started before the design's power
    # check (its processes import while this one derives the exponents)
    with shared_pool(None if args.scheduler else workers or None, warm=warm_worker):
        for run in plan.runs:
            cfg, own = run.sweep.config, f" {run.name}" if run.name else ""
            ccfg = run.control and run.control.config
            if run.pilot is not None:
                pilots.update(_pilot_block(run, sweep, say))
            rows = design_power(cfg, proto, pilots)
            power.append(power_lines(rows, cfg))
            say(power_brief(rows))
            t1 = time.perf_counter()
            link = _budget_link(args, cfg, run.sweep.out, ccfg, say)
            recs = sweep(run.sweep, link and link[0])
            records += recs
            say(f"sweep{own}: {time.perf_counter() - t1:.0f} s")  # its notes: after the answer
            if ccfg is None:
                continue
            say(f"budget-doubling control (n = {ccfg.ns}, 2x cap, tolerance / 2):")
            if link:  # kept: at the sweep's cap with no plateau, or at their first plateau
                say(f"  it continues {link[0].kept(cfg)} candidates' states kept by the sweep")
            t1 = time.perf_counter()
            crecs = sweep(run.control, link and link[1])
            control_records += crecs
            say(f"control{own}: {time.perf_counter() - t1:.0f} s")
            if link:  # a cache: the control's records are written
                link[0].clear(cfg)
        if plan.gp is not None:
            rows = design_power(plan.gp.config, proto)
            power.append(power_lines(rows, plan.gp.config))
            say(power_brief(rows))
            t1 = time.perf_counter()
            records += sweep(plan.gp)
            say(f"known-answer control: {time.perf_counter() - t1:.0f} s")
    return records, control_records, pilots, power


def _report(args, results, read, proto, t0: float, notes=()) -> int:
    """Print the results, draw them and write the reports; returns the exit status.  The
    decision block (``verify.decided.decision_block``: what the run is, one sentence per
    truth, the exit status; lines of at most 100 characters) opens the report and ends the
    run; between them the run's notes, the tables and findings, the column key with
    ``--explain``; ``--quiet`` prints the decision block alone.  ``notes``: lines printed
    with the report's own notes (the candidates left at the step cap,
    :func:`capped_notes`; printed only: the JSON report's document, ``verify.results``,
    holds no field for them)."""
    source, _, _, partial = read
    what = "recorded sweeps" if args.records else f"tier {args.tier}"
    if partial:
        results = [  # in every entry of the JSON report
            dataclasses.replace(
                r, decision=dataclasses.replace(r.decision, partial_read=PARTIAL_NOTE)
            )
            for r in results
        ]
    status = exit_status(results)
    opening = opening_line(args, results, proto)
    if partial:
        opening += f" WARNING: {PARTIAL_NOTE}: {source} was still being written when read."
    block = decision_block(results, opening, f"Exit status {status}: {EXIT_WORDS[status]}.")
    rule = "=" * WIDTH
    say = (lambda line="": None) if args.quiet else print
    say("\n".join([rule, *block, rule]))
    say(f"verify.rates: {what}, records {source}, {time.perf_counter() - t0:.0f} s")
    theirs = results[0].decision.records_protocol if results else None
    say(f"protocol: {proto.tag} ({proto.kind})")
    if args.records and theirs != proto.tag:
        say(
            f"note: the records were written under {theirs or 'no protocol'}; these verdicts"
            f" are under {proto.tag}"
        )
    for line in notes:
        say(line)
    for line in stated_rate.opening_lines(proto, results):
        say(line)
    say(format_results(results, explain=args.explain))
    paths = plot_results(results, figures_dir(args), PARTIAL_NOTE if partial else None)
    say(f"\nfigures: {', '.join(paths)}")
    if args.json:
        doc, stated = results_document(results), stated_rate.document_entry(proto, results)
        write_json(args.json, doc if stated is None else {**doc, "stated_rate": stated})
    if args.markdown:
        heading = f"verify.rates: {what} ({os.path.basename(source)}; protocol {proto.tag})"
        if partial:
            heading += f" -- {PARTIAL_NOTE.upper()}"
        write_atomic(args.markdown, markdown_results(results, heading))
    print("\n".join(["", rule, *block, rule]) if not args.quiet else "\n".join(block))
    return status


if __name__ == "__main__":
    sys.exit(run_main(main))
