"""Growing-n sweeps: ``python -m simulate.sweep`` (flags or ``--config FILE.json``).

The grid is truth x n x replicate, and each cell trains ASVI over the candidate widths.
Design (every choice recorded in each record's ``config``):

* **Nested data** (common random numbers): replicate r of a truth draws one dataset of the
  largest n from its own seed; the cell at n uses its first n points.  Slopes across n are
  then not blurred by independent datasets, and the bootstrap resamples whole replicates.
* **Converged training** (``simulate.core.stopping``): every candidate trains until its own
  objective stops improving and its KL stops changing (``StopRule``: over 500-step window
  means, relative improvement below ``stop_tol`` and KL change below
  ``max(stop_tol KL, stop_kl_abs)``, and with ``stop_risk_tol`` the held-out risk's
  relative change below it, twice in a row) or until ``max_steps``; a stopped model is
  frozen.  The held-out risk is computed from the data alone: each replicate's last
  ``stop_val_fraction`` of its points are held out of ASVI's training and the rule watches
  the posterior mean's squared error on their y (the record's ``config.n_train``: the
  points trained on); the truth is used for evaluation only.  The ELBO of eq. (pelbo) is a
  maximum, so widths are compared at (near) their optima, not at a fixed budget that
  leaves wide networks unpruned.  Each record carries, per candidate, the steps used,
  converged or capped, and the last relative change of the objective, change of the KL
  and relative change of the held-out risk.
* **Candidate widths that grow with n** (``candidate_widths``): powers of two from
  ``width_min`` up to the first power of two >= ``width_scale * sqrt(n)`` (capped at
  ``width_max``), so the selection can be interior at every n; ``sqrt(n)`` is the predicted
  growth ``n^(p/(2 alpha + p))`` of the width at alpha = p/2 and above it for smoother
  truths.  A selection at the largest candidate is flagged in the record
  (``selected_at_top``).  An explicit ``widths`` list fixes the set at every n.
* **Truths drawn from the class**: replicate r of a truth spec uses its own function
  (``TruthSpec.build(r)``, seeded by ``TruthSpec.truth_seed``), so intervals over
  replicates cover the class, not one draw; Hoelder truths are truncated for one fixed
  n (``spec.HOLDER_N_REF``), so every tier draws from the same functions.
* **A class-matched reference on the same data** (``simulate.references.classical``): each cell also
  fits the least-squares continuous linear spline, its mesh chosen by 5-fold
  cross-validation on the training data (Hoelder truths with p <= 3), and the
  piecewise-polynomial oracle (bins by true error) as a second, labelled curve; their
  metrics go into the record's ``reference`` (the oracle's under ``oracle``).
* **The known-answer control** (``estimator="gp"``, ``simulate.sweep.train.gp``): the same jobs,
  data
  and reference, with exact Gaussian-process posteriors under Matern priors instead of
  ASVI (records with ``per_estimator``).
* **Any regressor** (``estimator="regressor"``, ``simulate.sweep.train.foreign``): the same jobs,
  data and reference, with a named scikit-learn-style regressor's point prediction.
* **The k-NN known-answer control** (``estimator="knn"``, ``simulate.sweep.train.knn``): the same
  jobs, data and reference, with k-nearest-neighbour estimates at a matched and a fixed k.
* **Theory-tied quantities**: ``lambda_s = a (L + 1) log n`` (``theory.lambda_s_rule``; L
  hidden layers) unless fixed by ``--lambda-s``; the width prior ``pi(N)`` with ``lam``.  The depth
  is fixed (two hidden layers by default) rather than Lemma 6.1's ``L ~ log n`` (22 hidden
  layers at n = 500 for p = 1), which cannot be trained at these sizes: a stated deviation.
* **Jobs**: the cells of one (truth, n) and one block of ``replicate_block`` replicates are
  trained together (E = replicates in the block x widths, one batched program).  Jobs are
  fixed by the configuration, not by what is already done, so a resumed sweep repeats
  exactly the computations of an uninterrupted one and writes identical records (the core's
  noise depends only on each model's seed, see ``simulate.core.rng``).
* **Records**: one JSON line per cell, appended with a single ``write`` on an ``O_APPEND``
  descriptor and flushed to disk; a re-run skips the cells already recorded.  A final line
  without its newline (a crash inside a write) is ignored on reading and cut off before the
  next append; any other unreadable line, or a record of another schema, stops the sweep
  with an error that names the line, and nothing is written.
* **Scale-out**: ``--scheduler ADDRESS`` sends jobs to an existing Dask cluster
  (``distributed.Client``); results come back to this process, which alone writes records.
  The address is checked with the flags; the connection gives up after
  ``--scheduler-timeout`` seconds (30).
* **Ctrl-C** stops the sweep with one line, ``interrupted; N cells recorded in PATH,
  resume with the same command``, and exit 130: the records are whole (single appends)
  and a re-run skips them.
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING

from simulate.core import sizes
from simulate.core.steppath import path_of
from simulate.core.training_step import compile_unavailable
from simulate.progress import Progress
from simulate.sweep import costs
from simulate.sweep.run.parallel import check_workers, map_unordered
from simulate.sweep.setup.config import SweepConfig
from simulate.sweep.store.audit import audit_records
from simulate.sweep.store.fingerprint import fingerprint_fields
from simulate.sweep.store.records import RecordStore, code_digest, fields_differing, versions
from simulate.sweep.store.schema import RECORD_KEYS, SCHEMA, record_problem
from simulate.sweep.train.asvi_job import run_asvi_job
from simulate.sweep.train.foreign import run_regressor_job
from simulate.sweep.train.gp import run_gp_job
from simulate.sweep.train.jobs import jobs_for
from simulate.sweep.train.knn import run_knn_job
from theory.plumbing.jsonl import RecordsError

if TYPE_CHECKING:
    from simulate.sweep.train.budget import BudgetLink

__all__ = [
    "RUNNERS",
    "SweepRunOptions",
    "check_compile",
    "check_memory",
    "check_native",
    "check_kind_run",
    "records_path_for",
    "run_job",
    "run_sweep",
    "warm_worker",
]


# Each estimator kind's job runner (simulate.sweep.setup.kinds, by the same names): each takes a
# job and returns its records (pure, picklable for workers).  The kinds own the rest.
RUNNERS = {
    "asvi": run_asvi_job,
    "gp": run_gp_job,
    "regressor": run_regressor_job,
    "knn": run_knn_job,
}


def warm_worker() -> None:
    """What a pool process runs first (``simulate.sweep.run.parallel.shared_pool``'s ``warm``):
    nothing but the import of this module (torch, the core, the estimators), done while
    the caller prepares the sweep."""


def run_job(job) -> list[dict]:
    """One job's records, by its config's estimator kind (:data:`RUNNERS`, or the kind's
    own ``run``: ``simulate.sweep.setup.kinds``)."""
    kind = job.config.kind
    return (kind.run or RUNNERS[kind.name])(job)


def _cell_key(r: dict) -> tuple:
    return (r["cell"]["truth"], r["cell"]["n"], r["cell"]["replicate"])


_NEW_FILE_HINT = (
    "give another --out, or --new-file to write beside it (if only the code differs:"
    " --accept-code-change resumes it, each new record noting the change)"
)


def _store(cfg: SweepConfig, path, accept_code_change: bool = False) -> RecordStore:
    return RecordStore(
        path, SCHEMA, _cell_key, RECORD_KEYS, fingerprint_fields(cfg), _NEW_FILE_HINT,
        record_problem, accept_code_change,
    )  # fmt: skip


def check_memory(cfg: SweepConfig, at_once: int = 1) -> None:
    """``ValueError`` (one line, before anything is locked or written) when the sweep of
    ``cfg`` needs more memory than this process may hold (``simulate.core.sizes.
    available_bytes``: the machine's memory, or ``ulimit -v``), the estimate printed:

    * its records, every one held at once by the sweep (its store and its result) and by
      ``verify.rates`` and ``figures`` after it: ``truths x n x replicates`` records of at
      least ``sizes.RECORD_BYTES`` each (``--replicates 100000000`` built its job list for
      minutes and gigabytes, and its ``--dry-run`` said nothing); that refusal prints the
      training time the measured costs give too (``simulate.sweep.costs``: 76 years);
    * ``at_once`` jobs (the local workers: each holds one; ``SweepConfig.job_parts``: for
      ASVI a lower bound, for the GP control the measured peak): ``--n 10**8`` (the
      truth's values), a width of 10^6 or a GP control at 200,000 test points would
      otherwise fail with a MemoryError deep in a worker, or swap for hours; each
      process's own interpreter with torch counts too (``sizes.WORKER_BYTES``).

    :func:`run_sweep` checks as well, for the callers without a command line of their own
    (the figures, the optimiser study)."""
    at_once = max(1, int(at_once or 1))
    count = len(cfg.truths) * len(cfg.ns) * int(cfg.replicates)
    plural = "s" if len(cfg.truths) > 1 else ""
    have = sizes.available_bytes()
    over = have is not None and count * sizes.RECORD_BYTES > have
    sizes.refuse(
        count * sizes.RECORD_BYTES,
        f"this sweep's {count:,} records ({len(cfg.truths)} truth{plural} x {len(cfg.ns)} n x"
        f" {cfg.replicates} replicates, at least {sizes.RECORD_BYTES} bytes each, held at"
        f" once by the sweep and by verify.rates{_training_time(cfg) if over else ''})",
        [(0, "", "use fewer --replicates (or fewer --n or truths)")], verb="need",
    )  # fmt: skip
    jobs = "one job" if at_once == 1 else f"{at_once} jobs at once (one per worker)"
    verb = "needs" if at_once == 1 else "need"
    kind = cfg.kind.label
    workers = " (or fewer --workers)" if at_once > 1 else ""
    parts = [(at_once * b, what, fix + workers) for b, what, fix in cfg.job_parts()]
    # each job runs in an interpreter of its own (a worker, or this one)
    parts.append(
        (at_once * sizes.WORKER_BYTES, "the processes' own (torch)", "use fewer --workers")
    )
    bound = "about" if cfg.kind.measured_memory else "at least"  # the GP's: a measured peak
    sizes.refuse(sum(b for b, _, _ in parts), f"{jobs} of this {kind}", parts, verb, bound)


def _training_time(cfg: SweepConfig) -> str:
    """The sweep's training time from the measured per-cell costs (``simulate.sweep.costs``,
    what ``verify.rates --dry-run`` prints), as a clause of a refusal; empty where nothing
    prices it."""
    try:
        s = costs.estimate(cfg).total_s
    except (ValueError, OSError, KeyError):
        return ""
    if not s > 0:
        return ""
    years = s / (365.25 * 86400)
    when = f"{years:,.0f} years" if years >= 1 else f"{s / 3600:.3g} hours"
    return f"; its training, from the measured costs, about {when} of one worker"


def check_native(cfg: SweepConfig) -> None:
    """``ValueError`` (one line, before anything is locked or written) when ``cfg`` asks for
    C code (its step path's ``runs_c``: ``simulate.core.steppath.StepPath.require``) and it
    cannot be built or loaded here: no C
    compiler, the compiler's first error, an unwritable cache, or a cache someone else could
    write (``simulate.core.native.NativeUntrusted``: refused, never loaded).  Every job
    would otherwise fail in its worker -- or run code planted in the cache."""
    if cfg.kind.trains_network:
        path_of(cfg.mlp).require("--mlp")


def check_kind_run(cfg: SweepConfig) -> None:
    """What the estimator kind checks before a run trains (``simulate.sweep.setup.kinds``:
    ``EstimatorKind.check_run``; ``ValueError``, one line, before anything is locked or
    written): a named regressor whose class does not import, lacks the estimator interface,
    or refuses one of its parameters at some cell
    (``simulate.sweep.setup.regressor_class.check_regressor``).  The import of the user's class is a
    run's check, from the user's own command: a configuration is checked as data when it
    is made, so reading records runs none of the code they name.  :func:`run_sweep` and
    :func:`records_path_for` check too."""
    cfg.kind.check_run(cfg)


def check_compile(cfg: SweepConfig, scheduler: str | None = None) -> None:
    """``ValueError`` (one line, before anything is locked or written) when ``cfg``
    compiles its step (``compile``: the quick, full and constructive tiers do) and
    ``torch.compile`` has no C++ compiler here
    (:func:`simulate.core.training_step.compile_unavailable`): every job would otherwise fail at
    its first step, inside a worker.  The way out is named: eager steps (``--no-compile``
    of ``verify.rates`` and ``simulate.sweep``; the same numbers to float rounding,
    slower).  With a ``scheduler`` the cluster's workers compile, not this machine: not
    checked here.  :func:`run_sweep` checks too, for the callers without a command line
    of their own (the figures, the optimiser study)."""
    if not cfg.compile or not cfg.kind.trains_network or scheduler:
        return
    why = compile_unavailable()
    if why is not None:
        raise ValueError(
            f"{why}: train with eager steps (--no-compile of verify.rates and simulate.sweep)"
        )


def records_path_for(
    cfg: SweepConfig, path: str, new_file: bool = False, accept_code_change: bool = False
) -> str:
    """The records file a sweep of ``cfg`` writes: ``path`` if it holds nothing or only
    this configuration's records; with ``new_file``, otherwise ``STEM-FINGERPRINT.jsonl``
    beside it (resumed if it exists).  Without ``new_file`` a file of another
    configuration is a :class:`RecordsError` naming the fields that differ;
    ``accept_code_change`` takes a file that differs in the code alone as this
    configuration's (:class:`~simulate.sweep.store.records.RecordStore`)."""
    check_kind_run(cfg)  # before the fingerprint imports the class
    store = _store(cfg, path, accept_code_change)
    other = store.foreign(store.read())
    if other is None:
        return path
    if new_file:
        stem, ext = os.path.splitext(path)
        alt = f"{stem}-{store.fp}{ext or '.jsonl'}"
        return records_path_for(cfg, alt, False, accept_code_change) if alt != path else path
    raise store.mismatch(other)


@dataclasses.dataclass(frozen=True)
class SweepRunOptions:
    """Where and how :func:`run_sweep` runs its jobs (none of it changes a record):
    ``scheduler``: address of an existing Dask cluster; ``workers``: a pool of that many
    single-threaded worker processes for this sweep
    (:func:`simulate.sweep.run.parallel.map_unordered`; two such processes beat one two-threaded
    process on the 2-core machine); ``scheduler_timeout``: seconds to reach the scheduler
    (:data:`simulate.sweep.run.parallel.SCHEDULER_TIMEOUT_S` if None); ``worker_timeout``:
    seconds without a worker on the cluster before the sweep gives up
    (:data:`simulate.sweep.run.cluster.WORKER_TIMEOUT_S` if None); ``accept_code_change``:
    the records file may be of this configuration with other code, the change noted in
    each new record as ``code_change_accepted``; ``budget``: a
    :class:`simulate.sweep.train.budget.BudgetLink` the jobs share their capped models' states
    through (the sweep's, ``"save"``, or the budget-doubling control's, ``"load"``), or
    None; a cache that changes no record."""

    scheduler: str | None = None
    workers: int | None = None
    scheduler_timeout: float | None = None
    worker_timeout: float | None = None
    accept_code_change: bool = False
    budget: BudgetLink | None = None


def run_sweep(
    cfg: SweepConfig,
    out_path,
    options: SweepRunOptions | None = None,
    progress=True,
    log=print,
    max_jobs: int | None = None,
    discard: bool = False,
) -> list[dict]:
    """Run every unfinished job of ``cfg`` and append its records to ``out_path``; returns
    all records of the sweep's cells.  ``options``: where and how the jobs run
    (:class:`SweepRunOptions`; None: here, in this process).  Jobs are handed out
    costliest first (``Job.cost``); ``max_jobs`` stops after that many of them in that
    order (tests simulate a killed sweep).  The records file is a
    :class:`simulate.sweep.store.records.RecordStore`: locked while the sweep runs, of this
    configuration only (or of it with other code: ``options.accept_code_change``).
    ``discard``: the file's records are cut once its lock is held (``--recompute``), never
    before: a sweep writing it refuses the discard instead of losing its cells."""
    opt = SweepRunOptions() if options is None else options
    scheduler, workers, budget = opt.scheduler, opt.workers, opt.budget
    accept_code_change, scheduler_timeout = opt.accept_code_change, opt.scheduler_timeout
    check_workers(workers, scheduler)
    check_kind_run(cfg)
    check_memory(cfg, 1 if scheduler else workers)  # the figures' and the studies' sweeps
    check_compile(cfg, scheduler)
    store = _store(cfg, out_path, accept_code_change)
    store.discard = bool(discard)
    with store.writing() as st:  # one sweep per records file, or exit 2
        _audit_resumed(out_path, st.records)
        todo = [dataclasses.replace(j, budget=budget)
                for j in jobs_for(cfg) if not all(c in st.done for c in j.cells())]  # fmt: skip
        # the costliest first (Job.cost; at equal cost the larger n, whose references and
        # data cost more): on a pool the largest n's jobs no longer start last and run
        # alone at the end (the full tier's teacher p = 200 at n = 32,000 ran alone on one
        # core for ~10 min of its sweep and of its control)
        todo.sort(key=lambda j: (j.cost(), j.n), reverse=True)
        if max_jobs is not None:
            todo = todo[:max_jobs]
        log(f"sweep: {len(st.done)} cells recorded, {len(todo)} jobs to run -> {out_path}")
        if todo and not st.writable:
            raise RecordsError(f"{out_path}: cannot write there ({len(todo)} jobs to run)")
        if todo:
            timeouts = (scheduler_timeout, opt.worker_timeout)
            _run_jobs(todo, st, scheduler, workers, progress, timeouts)
    keys = {c for j in jobs_for(cfg) for c in j.cells()}
    return [r for r in store.read() if _cell_key(r) in keys]


def _audit_resumed(path, records) -> None:
    """The records a sweep resumes from, audited (``simulate.sweep.store.audit``: their
    configs re-derived from their fingerprint fields; the readers check them as data only):
    a writer holds the configuration machinery anyway, and a cell is skipped only when its
    record is the one its configuration writes."""
    problems = audit_records(records)
    if problems:
        k, text = problems[0]
        raise RecordsError(
            f"{path}: record {k} is not the one its configuration writes ({text}); restore"
            " the file, or run the sweep into a new file"
        )


def _run_jobs(todo, store: RecordStore, scheduler, workers, progress, timeouts=(None, None)):
    """Train ``todo`` (here, on a pool of ``workers`` processes, or on ``scheduler``:
    :func:`simulate.sweep.run.parallel.map_unordered`, with ``timeouts`` its
    ``(scheduler_timeout, worker_timeout)``) and append each job's records to ``store`` as
    they arrive."""
    total = len(todo)
    bar = Progress("sweep") if progress else None
    here, code = versions(), code_digest()
    for i, recs in enumerate(map_unordered(run_job, todo, workers, scheduler, *timeouts), 1):
        for r in recs:  # a remote worker with other versions or code computes other numbers
            if r.get("versions") != here:
                theirs = fields_differing(here, r.get("versions") or {})
                raise RecordsError(
                    f"a worker computed {r['cell']} with other versions ({theirs}: this"
                    " process's -> the worker's); install the same versions on every worker"
                )
            if r.get("code") != code:
                raise RecordsError(
                    f"a worker computed {r['cell']} with other code (digest {r.get('code')},"
                    f" this process's {code}); give every worker this checkout of the toolkit"
                )
        store.append(recs)
        if bar:
            bar(i, total)
