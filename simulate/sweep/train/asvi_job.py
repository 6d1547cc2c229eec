"""One job of a growing-n sweep (``simulate.sweep``): the cells of one truth, one n and a
block of replicates, trained together and evaluated (:func:`run_asvi_job`).  Pure: no file
access, so it runs unchanged in this process or on a Dask worker.

Per job: each replicate's nested dataset and the shared test inputs (seeded by
``simulate.sweep.setup.truth_spec.stable_seed``), the candidate widths trained in padded groups
(``simulate.sweep.setup.widths.group_widths``) until the stopping rule holds for each, every
candidate's
test metrics (squared Hellinger draws, posterior-mean L2) and ELBO, ASVI's selection per
cell, and the classical reference on the same data.  Its records are what the sweep writes.
One group's training and measurement: ``simulate.sweep.train.groups``.

No truth in training: the truth ``f0`` draws the data and is evaluated against (test
metrics, d^2), nothing else.  Training, the stopping rule and the selection see the data
only.  With the risk stop on (``SweepConfig.stop_risk_tol``) each replicate's last
``n_val = SweepConfig.n_val_at(n)`` points are held out of ASVI's training (every arm's),
the rule watches each model's posterior-mean squared error on their y (:func:`_risk_fn`),
and the ELBOs that select (eq. (13)) are those of the ``n - n_val`` training points, whose
sample size also sets ``lambda_s``, the batch and the step cap (``SweepConfig.cell_config``).
The classical reference and the constructive starts (and the plain arm P, a classical
control) see all n points: each chooses its own settings by its own validation on them.
"""

from __future__ import annotations

import time
from dataclasses import asdict

import numpy as np
import torch

from simulate.core import Batch, failed_term_names
from simulate.references.constructive import spline_starts, teacher_network
from simulate.references.plain import validation_split
from simulate.sweep.setup.config import SweepConfig
from simulate.sweep.setup.truth_spec import stable_seed
from simulate.sweep.setup.widths import cell_selection, group_widths, plain_selection
from simulate.sweep.store.records import code_digest, versions
from simulate.sweep.store.schema import SCHEMA
from simulate.sweep.train.cells import f0_describe, job_data, reference
from simulate.sweep.train.edge import grow_at_edge, model_seed, own_columns
from simulate.sweep.train.groups import ARMS, JobInputs, train_group
from simulate.sweep.train.jobs import Job

__all__ = ["REFERENCE_MAX_P", "run_asvi_job"]

REFERENCE_MAX_P = 3  # the classical reference is fitted for Hoelder truths up to this p


_COLUMNS = (
    "d2", "d", "l2sq", "elbo", "L1", "L2", "L3", "edges", "failed", "failed_step",
    "failed_terms", "steps", "converged", "rel_change", "kl_change", "risk_change",
)  # fmt: skip


def _per_width(cols: dict, i: int) -> dict:
    """Replicate i's per-candidate columns as the record stores them."""
    out = {
        **{k: cols[k][i].tolist() for k in ("elbo", "L1", "L2", "L3", "d2", "d", "l2sq")},
        "edges_sum_nu": cols["edges"][i].tolist(),
        "failed": cols["failed"][i].astype(bool).tolist(),
        "failed_step": [None if x < 0 else int(x) for x in cols["failed_step"][i]],
        "failed_term": [failed_term_names(x) for x in cols["failed_terms"][i]],
        "steps": [int(x) for x in cols["steps"][i]],
        "converged": [bool(x) for x in cols["converged"][i]],
        **{
            k: [None if np.isnan(x) else float(x) for x in cols[k][i]]
            for k in ("rel_change", "kl_change", "risk_change")
        },
    }
    if "val_mse" in cols:
        out["val_mse"] = cols["val_mse"][i].tolist()
    if "lr_decays" in cols:  # the plateaus that lowered each candidate's learning rate
        out["lr_decays"] = [int(x) for x in cols["lr_decays"][i]]
    if "restart" in cols:  # SweepConfig.restarts: which restart each candidate kept
        out["restart"] = [int(x) for x in cols["restart"][i]]
    if "start_k" in cols:
        out["start_k"] = [None if np.isnan(x) else int(x) for x in cols["start_k"][i]]
        out["start_exact"] = [bool(x) for x in cols["start_exact"][i]]
    return out


def run_asvi_job(job: Job) -> list[dict]:
    """Train one job's ASVI cells and return their records (pure: no file access but a
    budget link's state files, ``job.budget``, a cache that changes no number; runs on
    Dask workers; the runner's estimator ``"asvi"``, ``simulate.sweep.run.runner.RUNNERS``).
    The records store stamps their configuration fingerprint when it appends them."""
    cfg = job.config
    if cfg.compile:
        # A job's graphs (its n and widths are constants of them) serve no later job, and
        # dynamo counts recompiles per function across the process: past its limit (64) it
        # silently runs new shapes eagerly, which the full tier hit after ~15 jobs per
        # worker (3x slower steps).  Forget the earlier jobs' graphs instead.
        torch._dynamo.reset()
    t0 = time.perf_counter()
    f0s = [job.truth.build(r) for r in job.replicates]  # each replicate its own truth
    W, R = cfg.widths_at(job.n), len(job.replicates)
    X_all, y_all, data_seeds = job_data(job, cfg, f0s)
    n_train = cfg.n_train_at(job.n)
    hyper = cfg.hyper_at(n_train)
    model_seeds = [model_seed(cfg, job, r, w) for r in job.replicates for w in W]
    full, batch, val = _batches(job, X_all, y_all, n_train)
    test_seed = stable_seed(cfg.seed, job.truth.key, "test")
    Xt = np.random.default_rng(test_seed).uniform(-1, 1, size=(cfg.n_test, job.truth.p))
    # Widths are trained in groups (``group_widths``): one batched program per group, its
    # models padded to the group's widest, each model stopped by the rule on its own.
    f0t = np.stack([f(Xt) for f in f0s])  # [R, m]: for evaluation only
    own = [a for a in ARMS if a != "P" or cfg.plain_arm]  # the plain arm: a setting
    names = {"random": ["R"], "constructive": own, "both": ["R", *own]}[cfg.start]
    arms = {a: {k: np.empty((R, len(W))) for k in _COLUMNS} for a in names}
    starts = None
    if cfg.start != "random":
        starts = (
            [_starts(job, cfg, f0s[i], X_all[i], y_all[i], W) for i in range(R)],
            np.stack([validation_split(job.n, s) for s in data_seeds]),
            full,
        )
    inp = JobInputs(cfg, hyper, batch, W, model_seeds, f0t, Xt, arms, val, starts, job.budget)
    # with width continuation one width at a time, narrowest first, each R candidate
    # started from the one trained before it (simulate.core.state.widen)
    groups = [[w] for w in W] if cfg.continuation else group_widths(W)
    train_s, grown = 0.0, None
    for g in groups:
        js = [W.index(w) for w in g]
        s, out = train_group(inp, js, grown if cfg.continuation else None)
        train_s, grown = train_s + s, out
    W_all, own, models = W, [list(W) for _ in range(R)], R * len(W)
    if cfg.width_edge_max is not None:  # each replicate's ladder grown at its edge
        arms, W_all, own, s, extra = grow_at_edge(
            job, inp, arms, _per_width,
            lambda i, w: _starts(job, cfg, f0s[i], X_all[i], y_all[i], [w])[0],
        )  # fmt: skip
        train_s, models = train_s + s, models + extra
    refs = _references(job, X_all, y_all, Xt, f0t)
    eval_s = time.perf_counter() - t0 - train_s
    records = []
    for i, r in enumerate(job.replicates):
        Wi = own[i]  # the ladder, and the rungs grown for this replicate
        models_i = [model_seed(cfg, job, r, w) for w in Wi]
        seeds = {"data": data_seeds[i], "models": models_i, "test": test_seed}
        timing = {"job_train_s": train_s, "job_eval_s": eval_s, "job_models": models}
        cols = arms if Wi == W_all else own_columns(arms, W_all, Wi)
        records.append(_record(job, Wi, cols, i, f0s[i], seeds, refs[i], timing))
    return records


def _batches(job: Job, X_all, y_all, n_train: int):
    """A job's data as batches: ``full`` (all n points of each replicate), ``batch``
    (ASVI's training points, the first ``n_train``) and ``val`` (the rest, or None)."""
    R = len(job.replicates)
    full = Batch(
        torch.tensor(np.stack(X_all), dtype=torch.float32),
        torch.tensor(np.stack(y_all), dtype=torch.float32),
        torch.arange(R, dtype=torch.int64),
    )
    # ASVI's training points: with the risk stop, each replicate's last n_val points are
    # held out for it (the same count for every replicate, so shapes stay uniform)
    batch = Batch(
        full.X[:, :n_train].contiguous(), full.y[:, :n_train].contiguous(), full.data_index
    )
    val = None
    if n_train < job.n:  # the risk stop's held-out points, never the truth's values
        val = (full.X[:, n_train:], full.y[:, n_train:])
    return full, batch, val


def _references(job: Job, X_all, y_all, Xt, f0t) -> list:
    """Each replicate's classical reference (Hoelder truths up to :data:`REFERENCE_MAX_P`,
    else None), on all its n points."""
    cfg, R = job.config, len(job.replicates)
    refs = [None] * R
    if job.truth.kind == "holder" and job.truth.p <= REFERENCE_MAX_P:
        # the budget-doubling control takes the sweep's (the same data and seeds)
        kept = job.budget.references(cfg, job) if job.budget is not None else refs
        refs = [kept[i] if kept[i] is not None else reference(X_all[i], y_all[i], Xt, f0t[i],
                cfg, job) for i in range(R)]  # fmt: skip
        if job.budget is not None:
            job.budget.save_references(cfg, job, refs)
    return refs


def _record(job: Job, W, arms: dict, i: int, f0, seeds: dict, ref, timing: dict) -> dict:
    """Replicate i's record (its cell ``(job.truth, job.n, job.replicates[i])``): the
    selection from the record's own arm, the per-candidate columns, its truth ``f0``,
    ``seeds``, reference ``ref`` and the job's ``timing``; with a constructive start the
    other arms' records too."""
    cfg, r = job.config, job.replicates[i]
    # the record's own fields: the random start (R), or W when it is the only ASVI run
    main = "R" if "R" in arms else "W"
    pw = _per_width(arms[main], i)
    sel = cell_selection(pw, W, cfg.lam)
    extra = {}
    if cfg.start != "random":
        extra["arms"] = {a: _arm_record(arms[a], i, W, cfg) for a in ARMS
                         if a != main and a in arms}  # fmt: skip
    return {
        "schema": SCHEMA,
        "failed": sel["failed"],
        "cell": {"truth": job.truth.key, "n": job.n, "replicate": r},
        "truth": {**asdict(job.truth), "function": f0_describe(f0)},
        "config": cfg.cell_config(job.n, W),
        "seeds": seeds,
        **{k: sel[k] for k in ("selected_width", "selected_at_top", "metrics")},
        "per_width": {**pw, "penalized_elbo": sel["penalized_elbo"]},
        "reference": ref,
        "timing": timing,
        "versions": versions(),
        "code": code_digest(),  # the worker's code (the sweep compares it with its own)
        **extra,
    }


def _starts(job: Job, cfg: SweepConfig, f0, X, y, W) -> list:
    """One replicate's constructive start per candidate width
    (``simulate.references.constructive``):
    its linear spline (Hoelder truths, p = 1; mesh on a validation split of its data) or
    its teacher embedded."""
    if job.truth.kind == "teacher":
        return [teacher_network(f0, job.truth.p, w, cfg.depth) for w in W]
    return spline_starts(X, y, W, cfg.depth, seed=stable_seed(cfg.seed, "start", job.n))


def _arm_record(cols: dict, i: int, W, cfg: SweepConfig) -> dict:
    """One arm's per-candidate columns and selection in replicate i's cell.  W0 and W
    select by their own penalised ELBO (eq. (13)); the plain arm P by its validation error
    (it is not variational: its "ELBO" is that of a posterior placed on its weights,
    recorded for comparison, not its objective)."""
    pw = _per_width(cols, i)
    if "val_mse" in pw:
        sel = plain_selection(pw, W)
    else:
        sel = cell_selection(pw, W, cfg.lam)
    return {
        **{k: sel[k] for k in ("failed", "selected_width", "selected_at_top", "metrics")},
        "per_width": {**pw, "penalized_elbo": sel["penalized_elbo"]},
    }
