"""One job of a growing-n sweep (``simulate.sweep``): the cells of one truth, one n and a
block of replicates, trained together and evaluated (:func:`run_job`).  Pure: no file
access, so it runs unchanged in this process or on a Dask worker.

Per job: each replicate's nested dataset and the shared test inputs (seeded by
``simulate.spec.stable_seed``), the candidate widths trained in padded groups
(``simulate.spec.group_widths``) until the stopping rule holds for each, every candidate's
test metrics (squared Hellinger draws, posterior-mean L2) and ELBO, ASVI's selection per
cell, and the classical reference on the same data.  Its records are what the sweep writes.
"""

from __future__ import annotations

import time
from dataclasses import asdict

import numpy as np
import torch

from .classical import oracle_piecewise, spline_reference
from .core import Batch, Hyper, failed_term_names
from .posterior import Posterior
from .recipe import train_models
from .records import versions
from .spec import (
    SCHEMA,
    Job,
    SweepConfig,
    cell_lambda_s,
    cell_selection,
    group_widths,
    stable_seed,
)

__all__ = ["REFERENCE_MAX_P", "f0_describe", "run_job"]

REFERENCE_MAX_P = 3  # the classical reference is fitted for Hoelder truths up to this p


_COLUMNS = (
    "d2", "d", "l2sq", "elbo", "L1", "L2", "L3", "edges", "failed", "failed_step",
    "failed_terms", "steps", "converged", "rel_change", "kl_change", "risk_change",
)  # fmt: skip


def _job_data(job: Job, cfg: SweepConfig, f0s):
    """Each replicate's first n points of its dataset drawn for the largest n (nested data)
    from its own truth ``f0s[i]``: ``X [R, n, p]``, ``y [R, n]`` and the data seeds."""
    n_max, p = max(cfg.ns), job.truth.p
    X_all, y_all, seeds = [], [], []
    for r, f0 in zip(job.replicates, f0s, strict=True):
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


def _risk_fn(cfg: SweepConfig, hyper: Hyper, truth_eval: np.ndarray, Xe: np.ndarray):
    """The held-out risk the stopping rule watches (``StopRule.risk_tol``): each model's
    posterior-mean squared L2 error against its replicate's truth (``truth_eval``, one row
    per model) on the evaluation points ``Xe`` (not the test points), from ``risk_draws``
    draws -- the same draws at every window (counter-based noise)."""

    def risk(tr, var):
        post = Posterior(tr.layout, hyper, var, tr.seeds)
        return post.test_metrics(truth_eval, Xe, cfg.risk_draws)[1]

    return risk


def _train_group(cfg, hyper, batch, W, js, model_seeds, f0t, Xt, cols, ev) -> float:
    """Train the candidates ``js`` (positions in ``W``) of every replicate in one padded
    program until the stopping rule holds for each, evaluate them against their
    replicate's truth (``f0t [R, m]``: its values at the test points ``Xt``), and fill
    ``cols``; returns the training seconds.  ``ev``: the evaluation points and the truths'
    values there ``(Xe, f0e [R, m])`` for a rule that watches the held-out risk, else None."""
    R = batch.X.shape[0]
    order = [(i, j) for j in js for i in range(R)]  # model = (replicate i, width j)
    risk = None
    if ev is not None:
        Xe, f0e = ev
        risk = _risk_fn(cfg, hyper, f0e[[i for i, _ in order]], Xe)
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
        risk=risk,
    )
    train_s = time.perf_counter() - t0
    tr, post, conv = trained.trainer, trained.posterior, trained.convergence
    truth = f0t[[i for i, _ in order]]  # each model against its replicate's truth
    d2_draws, l2 = post.test_metrics(truth, Xt, cfg.draws)  # [T, models], [models]
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
        **{
            k: [np.nan if x is None else x for x in conv[k]]
            for k in ("rel_change", "kl_change", "risk_change")
        },
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
            for k in ("rel_change", "kl_change", "risk_change")
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
    if cfg.estimator == "gp":  # the known-answer control: no network is trained
        from .gp import run_gp_job

        return run_gp_job(job, cfg)
    if cfg.compile:
        # A job's graphs (its n and widths are constants of them) serve no later job, and
        # dynamo counts recompiles per function across the process: past its limit (64) it
        # silently runs new shapes eagerly, which the full tier hit after ~15 jobs per
        # worker (3x slower steps).  Forget the earlier jobs' graphs instead.
        torch._dynamo.reset()
    t0 = time.perf_counter()
    f0s = [job.truth.build(r) for r in job.replicates]  # each replicate its own truth
    W, R = cfg.widths_at(job.n), len(job.replicates)
    X_all, y_all, data_seeds = _job_data(job, cfg, f0s)
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
    f0t = np.stack([f(Xt) for f in f0s])  # [R, m]
    ev = None
    if cfg.stop_risk_tol is not None:  # the stopping rule's own points, never the test's
        eval_seed = stable_seed(cfg.seed, job.truth.key, "eval")
        Xe = np.random.default_rng(eval_seed).uniform(-1, 1, size=(cfg.risk_n_eval, job.truth.p))
        ev = (Xe, np.stack([f(Xe) for f in f0s]))
    cols = {k: np.empty((R, len(W))) for k in _COLUMNS}
    train_s = sum(
        _train_group(cfg, hyper, batch, W, [W.index(w) for w in g], model_seeds, f0t, Xt, cols, ev)
        for g in group_widths(W)
    )
    refs = [None] * R
    if job.truth.kind == "holder" and job.truth.p <= REFERENCE_MAX_P:
        refs = [_reference(X_all[i], y_all[i], Xt, f0t[i], cfg, job) for i in range(R)]
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
                "truth": {**asdict(job.truth), "function": f0_describe(f0s[i])},
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


def _reference(X, y, Xt, f0t, cfg: SweepConfig, job: Job) -> dict:
    """The class-matched reference on one replicate's data (``classical.spline_reference``:
    the linear spline, its mesh by cross-validation on the training data), with the
    piecewise-polynomial oracle (bins by true error on the test points) as a second,
    labelled curve under ``oracle``."""
    ref = spline_reference(X, y, Xt, f0t, cfg.sigma, seed=stable_seed(cfg.seed, "cv", job.n))
    ref["oracle"] = oracle_piecewise(X, y, Xt, f0t, cfg.sigma, job.truth.alpha)
    return ref


def f0_describe(f0) -> dict:
    if hasattr(f0, "describe"):
        return f0.describe()
    return {"n_edges": getattr(f0, "n_edges", None)}
