"""Growing-n sweeps: ``python -m simulate.sweep`` (flags or ``--config FILE.json``).

The grid is truth x n x replicate, and each cell trains ASVI over the candidate widths.
Design (every choice recorded in each record's ``config``):

* **Nested data** (common random numbers): replicate r of a truth draws one dataset of the
  largest n from its own seed; the cell at n uses its first n points.  Slopes across n are
  then not blurred by independent datasets, and the bootstrap resamples whole replicates.
* **Converged training** (``simulate.stopping``): every candidate trains until its own
  objective stops improving and its KL stops changing (``StopRule``: over 500-step window
  means, relative improvement below ``stop_tol`` and KL change below
  ``max(stop_tol KL, stop_kl_abs)``, twice in a row) or until ``max_steps``; a stopped
  model is frozen.  The ELBO of eq. (pelbo) is a maximum, so widths are compared at (near)
  their optima, not at a fixed budget that leaves wide networks unpruned.  Each record
  carries, per candidate, the steps used, converged or capped, and the last relative
  change of the objective and change of the KL.
* **Candidate widths that grow with n** (``candidate_widths``): powers of two from
  ``width_min`` up to the first power of two >= ``width_scale * sqrt(n)`` (capped at
  ``width_max``), so the selection can be interior at every n; ``sqrt(n)`` is the predicted
  growth ``n^(p/(2 alpha + p))`` of the width at alpha = p/2 and above it for smoother
  truths.  A selection at the largest candidate is flagged in the record
  (``selected_at_top``).  An explicit ``widths`` list fixes the set at every n.
* **A classical reference on the same data** (``simulate.classical``): each cell also
  fits piecewise polynomials with the bin count chosen by true error (Hoelder truths with
  p <= 3); its metrics go into the record's ``reference``.
* **Theory-tied quantities**: ``lambda_s = a L log n`` (``theory.lambda_s_rule``; L = weight
  layers) unless fixed by ``--lambda-s``; the width prior ``pi(N)`` with ``lam``.  The depth
  is fixed (two hidden layers by default) rather than Lemma 6.1's ``L ~ log n`` (22 hidden
  layers at n = 500 for p = 1), which cannot be trained at these sizes: a stated deviation.
* **Jobs**: the cells of one (truth, n) and one block of ``replicate_block`` replicates are
  trained together (E = replicates in the block x widths, one batched program).  Jobs are
  fixed by the configuration, not by what is already done, so a resumed sweep repeats
  exactly the computations of an uninterrupted one and writes identical records (the core's
  noise depends only on each model's seed, see ``simulate.rng``).
* **Records**: one JSON line per cell, appended with a single ``write`` on an ``O_APPEND``
  descriptor and flushed to disk; a re-run skips the cells already recorded.  A final line
  without its newline (a crash inside a write) is ignored on reading and cut off before the
  next append; any other unreadable line, or a record of another schema, stops the sweep
  with an error that names the line, and nothing is written.
* **Scale-out**: ``--scheduler ADDRESS`` sends jobs to an existing Dask cluster
  (``distributed.Client``); results come back to this process, which alone writes records.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict

import numpy as np
import torch

from ._alloc import tune_malloc
from .classical import oracle_piecewise
from .core import Batch, Hyper, failed_term_names
from .progress import Progress
from .recipe import train_models
from .records import (
    RecordsError,
    RecordStore,
    check_output_file,
    fingerprint,
    versions,
)
from .spec import (
    RECORD_KEYS,
    SCHEMA,
    TRUTH_HELP,
    Job,
    SweepConfig,
    TruthSpec,
    candidate_widths,
    cell_lambda_s,
    cell_selection,
    fingerprint_fields,
    group_widths,
    jobs_for,
    one_configuration,
    read_records,
    stable_seed,
)

__all__ = [
    "TruthSpec",
    "SweepConfig",
    "run_sweep",
    "read_records",
    "RecordsError",
    "SCHEMA",
    "TRUTH_HELP",
    "group_widths",
    "candidate_widths",
    "cell_selection",
    "fingerprint",
    "fingerprint_fields",
    "one_configuration",
    "records_path_for",
    "parse_truths",
    "main",
]

SCHEDULER_TIMEOUT_S = 30  # an unreachable --scheduler is an error after this, not a hang
REFERENCE_MAX_P = 3  # the classical reference is fitted for Hoelder truths up to this p


_COLUMNS = (
    "d2", "d", "l2sq", "elbo", "L1", "L2", "L3", "edges", "failed", "failed_step",
    "failed_terms", "steps", "converged", "rel_change", "kl_change",
)  # fmt: skip


def _job_data(job: Job, cfg: SweepConfig, f0):
    """Each replicate's first n points of its dataset drawn for the largest n (nested data):
    ``X [R, n, p]``, ``y [R, n]`` and the data seeds."""
    n_max, p = max(cfg.ns), job.truth.p
    X_all, y_all, seeds = [], [], []
    for r in job.replicates:
        ds = stable_seed(cfg.seed, job.truth.key, "data", r)
        rng = np.random.default_rng(ds)
        X = rng.uniform(-1, 1, size=(n_max, p))
        noise = rng.standard_normal(n_max)
        X_all.append(X[: job.n])
        y_all.append(f0(X[: job.n]) + cfg.sigma * noise[: job.n])
        seeds.append(ds)
    return X_all, y_all, seeds


def _job_hyper(cfg: SweepConfig, n: int) -> Hyper:
    return Hyper(
        sigma=cfg.sigma,
        sigma_0=cfg.sigma_0,
        lambda_s=cell_lambda_s(cfg, n),
        lam=cfg.lam,
        batch_size=min(cfg.batch_size, n),
        lr=cfg.lr,
        init_nu=cfg.init_nu,
        init_sigma=cfg.init_sigma,
        l3=cfg.l3,
    )


def _train_group(cfg, hyper, batch, W, js, model_seeds, f0, Xt, cols) -> float:
    """Train the candidates ``js`` (positions in ``W``) of every replicate in one padded
    program until the stopping rule holds for each, evaluate them, and fill ``cols``;
    returns the training seconds."""
    R = batch.X.shape[0]
    order = [(i, j) for j in js for i in range(R)]  # model = (replicate i, width j)
    t0 = time.perf_counter()
    trained = train_models(
        hyper,
        [W[j] for _, j in order],
        [model_seeds[i * len(W) + j] for i, j in order],
        batch.X,
        batch.y,
        [i for i, _ in order],
        depth=cfg.depth,
        rule=cfg.stop_rule_at(batch.X.shape[1]),
        compile=cfg.compile,
    )
    train_s = time.perf_counter() - t0
    tr, post, conv = trained.trainer, trained.posterior, trained.convergence
    d2_draws, l2 = post.test_metrics(f0, Xt, cfg.draws)  # [T, models], [models]
    el = post.elbo(batch.X, batch.y, [i for i, _ in order], draws=cfg.elbo_draws)
    st = tr.state
    per_model = {
        "l2sq": l2,
        **{k: el[k] for k in ("elbo", "L1", "L2", "L3")},
        "edges": post.edges()["sum_nu"],
        "failed": st.failed.cpu().numpy(),
        "failed_step": st.failed_step.cpu().numpy(),
        "failed_terms": st.failed_terms.cpu().numpy(),
        "steps": conv["steps"],
        "converged": conv["converged"],
        **{k: [np.nan if x is None else x for x in conv[k]] for k in ("rel_change", "kl_change")},
    }
    for e, (i, j) in enumerate(order):
        cols["d2"][i, j] = d2_draws[:, e].mean()
        cols["d"][i, j] = np.sqrt(d2_draws[:, e]).mean()
        for k, v in per_model.items():
            cols[k][i, j] = v[e]
    return train_s


def _per_width(cols: dict, i: int) -> dict:
    """Replicate i's per-candidate columns as the record stores them."""
    return {
        **{k: cols[k][i].tolist() for k in ("elbo", "L1", "L2", "L3", "d2", "d", "l2sq")},
        "edges_sum_nu": cols["edges"][i].tolist(),
        "failed": cols["failed"][i].astype(bool).tolist(),
        "failed_step": [None if x < 0 else int(x) for x in cols["failed_step"][i]],
        "failed_term": [failed_term_names(x) for x in cols["failed_terms"][i]],
        "steps": [int(x) for x in cols["steps"][i]],
        "converged": [bool(x) for x in cols["converged"][i]],
        **{
            k: [None if np.isnan(x) else float(x) for x in cols[k][i]]
            for k in ("rel_change", "kl_change")
        },
    }


def _record_config(cfg: SweepConfig, hyper: Hyper, W, n: int) -> dict:
    """A record's ``config``: the settings its cell was trained with."""
    return {
        "widths": W,
        "depth": cfg.depth,
        "stop_rule": cfg.stop_rule_at(n).to_dict(),
        "max_epochs": cfg.max_epochs,
        "batch_size": hyper.batch_size,
        "lr": cfg.lr,
        "sigma": cfg.sigma,
        "sigma_0": cfg.sigma_0,
        "lambda_s": hyper.lambda_s,
        "lam": cfg.lam,
        "l3": cfg.l3,
        "n_test": cfg.n_test,
        "draws": cfg.draws,
        "elbo_draws": cfg.elbo_draws,
        "seed": cfg.seed,
        "init_nu": cfg.init_nu,
        "init_sigma": cfg.init_sigma,
        "compile": cfg.compile,
    }


def run_job(job: Job) -> list[dict]:
    """Train one job and return its records (pure: no file access; runs on Dask workers).
    The records store stamps their configuration fingerprint when it appends them."""
    cfg = SweepConfig.from_dict(job.config)
    if cfg.compile:
        # A job's graphs (its n and widths are constants of them) serve no later job, and
        # dynamo counts recompiles per function across the process: past its limit (64) it
        # silently runs new shapes eagerly, which the full tier hit after ~15 jobs per
        # worker (3x slower steps).  Forget the earlier jobs' graphs instead.
        torch._dynamo.reset()
    t0 = time.perf_counter()
    f0 = job.truth.build(max(cfg.ns))
    W, R = cfg.widths_at(job.n), len(job.replicates)
    X_all, y_all, data_seeds = _job_data(job, cfg, f0)
    hyper = _job_hyper(cfg, job.n)
    model_seeds = [
        stable_seed(cfg.seed, job.truth.key, job.n, r, "model", w)
        for r in job.replicates
        for w in W
    ]
    batch = Batch(
        torch.tensor(np.stack(X_all), dtype=torch.float32),
        torch.tensor(np.stack(y_all), dtype=torch.float32),
        torch.arange(R, dtype=torch.int64),
    )
    test_seed = stable_seed(cfg.seed, job.truth.key, "test")
    Xt = np.random.default_rng(test_seed).uniform(-1, 1, size=(cfg.n_test, job.truth.p))
    # Widths are trained in groups (``group_widths``): one batched program per group, its
    # models padded to the group's widest, each model stopped by the rule on its own.
    cols = {k: np.empty((R, len(W))) for k in _COLUMNS}
    train_s = sum(
        _train_group(cfg, hyper, batch, W, [W.index(w) for w in g], model_seeds, f0, Xt, cols)
        for g in group_widths(W)
    )
    refs = [None] * R
    if job.truth.kind == "holder" and job.truth.p <= REFERENCE_MAX_P:
        f0t = f0(Xt)
        refs = [
            oracle_piecewise(X_all[i], y_all[i], Xt, f0t, cfg.sigma, job.truth.alpha)
            for i in range(R)
        ]
    eval_s = time.perf_counter() - t0 - train_s
    records = []
    for i, r in enumerate(job.replicates):
        sl = slice(i * len(W), (i + 1) * len(W))
        pw = _per_width(cols, i)
        sel = cell_selection(pw, W, cfg.lam)
        records.append(
            {
                "schema": SCHEMA,
                "failed": sel["failed"],
                "cell": {"truth": job.truth.key, "n": job.n, "replicate": r},
                "truth": {**asdict(job.truth), **f0_describe(f0)},
                "config": _record_config(cfg, hyper, W, job.n),
                "seeds": {"data": data_seeds[i], "models": model_seeds[sl], "test": test_seed},
                **{k: sel[k] for k in ("selected_width", "selected_at_top", "metrics")},
                "per_width": {**pw, "penalized_elbo": sel["penalized_elbo"]},
                "reference": refs[i],
                "timing": {"job_train_s": train_s, "job_eval_s": eval_s, "job_models": R * len(W)},
                "versions": versions(),
            }
        )
    return records


def f0_describe(f0) -> dict:
    if hasattr(f0, "describe"):
        return f0.describe()
    return {"n_edges": getattr(f0, "n_edges", None)}


def _cell_key(r: dict) -> tuple:
    return (r["cell"]["truth"], r["cell"]["n"], r["cell"]["replicate"])


_NEW_FILE_HINT = "give another --out, or --new-file to write beside it"


def _store(cfg: SweepConfig, path) -> RecordStore:
    return RecordStore(
        path, SCHEMA, _cell_key, RECORD_KEYS, fingerprint_fields(cfg), _NEW_FILE_HINT
    )


def records_path_for(cfg: SweepConfig, path: str, new_file: bool = False) -> str:
    """The records file a sweep of ``cfg`` writes: ``path`` if it holds nothing or only
    this configuration's records; with ``new_file``, otherwise ``STEM-FINGERPRINT.jsonl``
    beside it (resumed if it exists).  Without ``new_file`` a file of another
    configuration is a :class:`RecordsError` naming the fields that differ."""
    store = _store(cfg, path)
    other = store.foreign(store.read())
    if other is None:
        return path
    if new_file:
        stem, ext = os.path.splitext(path)
        alt = f"{stem}-{store.fp}{ext or '.jsonl'}"
        return records_path_for(cfg, alt) if alt != path else path
    raise store.mismatch(other)


def run_sweep(
    cfg: SweepConfig,
    out_path,
    scheduler: str | None = None,
    progress=True,
    log=print,
    max_jobs: int | None = None,
    workers: int | None = None,
) -> list[dict]:
    """Run every unfinished job of ``cfg`` and append its records to ``out_path``; returns
    all records of the sweep's cells.  ``scheduler``: address of an existing Dask cluster;
    ``workers``: start a local Dask cluster of that many single-threaded worker processes
    for this sweep (two such processes beat one two-threaded process on the 2-core
    machine).  ``max_jobs`` stops after that many jobs (tests simulate a killed sweep).
    The records file is a :class:`simulate.records.RecordStore`: locked while the sweep
    runs, of this configuration only."""
    if scheduler and workers:
        raise ValueError("give either a scheduler address or a number of local workers")
    if workers is not None and int(workers) < 0:
        raise ValueError(f"workers must be >= 1 (or 0: in this process), got {workers}")
    cfg.validate()
    store = _store(cfg, out_path)
    with store.writing() as st:  # one sweep per records file, or exit 2
        todo = [j for j in jobs_for(cfg) if not all(c in st.done for c in j.cells())]
        if max_jobs is not None:
            todo = todo[:max_jobs]
        log(f"sweep: {len(st.done)} cells recorded, {len(todo)} jobs to run -> {out_path}")
        if todo and not st.writable:
            raise RecordsError(f"{out_path}: cannot write there ({len(todo)} jobs to run)")
        if todo:
            _run_jobs(todo, st, scheduler, workers, progress)
    keys = {c for j in jobs_for(cfg) for c in j.cells()}
    return [r for r in store.read() if _cell_key(r) in keys]


def _run_jobs(todo, store: RecordStore, scheduler, workers, progress) -> None:
    """Train ``todo`` (here, on a new local cluster of ``workers``, or on ``scheduler``) and
    append each job's records to ``store`` as they arrive."""
    total = len(todo)
    bar = Progress("sweep") if progress else None
    if workers:
        from distributed import LocalCluster

        one = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        with LocalCluster(
            n_workers=int(workers),
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
            env=one,
        ) as cluster:
            return _run_jobs(todo, store, cluster.scheduler_address, None, progress)
    if scheduler:
        from distributed import Client, as_completed

        with Client(scheduler, timeout=SCHEDULER_TIMEOUT_S) as client:
            futures = [client.submit(run_job, j, pure=False) for j in todo]
            for i, fut in enumerate(as_completed(futures), 1):
                store.append(fut.result())
                if bar:
                    bar(i, total)
    else:
        for i, job in enumerate(todo, 1):
            store.append(run_job(job))
            if bar:
                bar(i, total)


# --------------------------------------------------------------------------- command line
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


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m simulate.sweep",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=TRUTH_HELP,
    )
    ap.add_argument("--config", help="JSON file with the SweepConfig fields")
    ap.add_argument("--out", default="results/records.jsonl", help="records file (JSON lines)")
    ap.add_argument("--n", type=int, nargs="+", help="sample sizes (3 or more to fit a slope)")
    ap.add_argument("--replicates", type=int)
    ap.add_argument("--widths", type=int, nargs="+")
    ap.add_argument("--max-steps", type=int, help="step cap of every candidate (stop rule)")
    ap.add_argument(
        "--max-epochs",
        type=float,
        help="grow the cap with n: max(max_steps, ceil(max_epochs * n / batch_size))",
    )
    ap.add_argument("--stop-tol", type=float, help="relative-improvement tolerance (stop rule)")
    ap.add_argument("--batch-size", type=int)
    ap.add_argument("--lambda-s", type=float, help="fixed lambda_s (default: a L log n)")
    ap.add_argument("--seed", type=int)
    ap.add_argument(
        "--compile",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run the step through torch.compile (about 3x faster per step on 2 cores, plus"
        " 5-12 s of compilation per candidate group and n; needs a C++ compiler)",
    )
    ap.add_argument("--scheduler", help="address of an existing Dask scheduler")
    ap.add_argument("--workers", type=int, help="start a local Dask cluster of N workers")
    ap.add_argument(
        "--new-file",
        action="store_true",
        help="if --out holds another configuration's records, write OUT-FINGERPRINT.jsonl"
        " beside it instead of stopping",
    )
    return ap


def config_from_args(truths, args) -> SweepConfig:
    base = {}
    if args.config:
        with open(args.config) as fh:
            base = json.load(fh)
        base["truths"] = [TruthSpec(**t) for t in base.get("truths", [])]
    if truths:
        base["truths"] = truths
    for name, key in (
        ("n", "ns"),
        ("replicates", "replicates"),
        ("widths", "widths"),
        ("max_steps", "max_steps"),
        ("max_epochs", "max_epochs"),
        ("stop_tol", "stop_tol"),
        ("batch_size", "batch_size"),
        ("lambda_s", "lambda_s"),
        ("seed", "seed"),
        ("compile", "compile"),
    ):
        v = getattr(args, name)
        if v is not None:
            base[key] = v
    if "ns" not in base:
        raise ValueError("give the sample sizes with --n (or in --config)")
    base.setdefault("truths", [])
    return SweepConfig(**base)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        truths, rest = parse_truths(argv)
        args = build_parser().parse_args(rest)
        cfg = config_from_args(truths, args)
        cfg.validate()
        if args.workers is not None and args.workers < 1:
            raise ValueError(f"--workers must be >= 1, got {args.workers}")
        if args.scheduler and args.workers:
            raise ValueError("give either --scheduler or --workers, not both")
        check_output_file(args.out, "--out")
        out = records_path_for(cfg, args.out, new_file=args.new_file)
    except (ValueError, TypeError, OSError, json.JSONDecodeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    tune_malloc()
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    try:
        recs = run_sweep(cfg, out, scheduler=args.scheduler, workers=args.workers)
    except (RecordsError, OSError, TimeoutError) as exc:  # a lock held, an unreachable scheduler
        print(f"error: {exc}", file=sys.stderr)
        return 2
    failed = sum(bool(r["failed"]) for r in recs)
    print(f"{len(recs)} records in {out}" + (f" ({failed} failed cells)" if failed else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
