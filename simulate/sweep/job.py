"""One job of a growing-n sweep (``simulate.sweep``): the cells of one truth, one n and a
block of replicates, trained together and evaluated (:func:`run_asvi_job`).  Pure: no file
access, so it runs unchanged in this process or on a Dask worker.

Per job: each replicate's nested dataset and the shared test inputs (seeded by
``simulate.sweep.truth_spec.stable_seed``), the candidate widths trained in padded groups
(``simulate.sweep.widths.group_widths``) until the stopping rule holds for each, every candidate's
test metrics (squared Hellinger draws, posterior-mean L2) and ELBO, ASVI's selection per
cell, and the classical reference on the same data.  Its records are what the sweep writes.

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

from simulate.core import Batch, Layout, failed_term_names
from simulate.core.objective import family_of
from simulate.core.posterior import Posterior
from simulate.core.recipe import build_trainer, train_models
from simulate.core.state import init_state, widen
from simulate.references.constructive import (
    encode,
    encode_theta,
    gauss_newton_scales,
    net_theta,
    spline_starts,
    teacher_network,
)
from simulate.references.plain import train_plain, validation_split
from simulate.sweep.cells import f0_describe, job_data, reference
from simulate.sweep.config import Job, SweepConfig
from simulate.sweep.records import code_digest, versions
from simulate.sweep.schema import SCHEMA
from simulate.sweep.truth_spec import stable_seed
from simulate.sweep.widths import cell_selection, group_widths, plain_selection

__all__ = ["REFERENCE_MAX_P", "run_asvi_job"]

REFERENCE_MAX_P = 3  # the classical reference is fitted for Hoelder truths up to this p


_COLUMNS = (
    "d2", "d", "l2sq", "elbo", "L1", "L2", "L3", "edges", "failed", "failed_step",
    "failed_terms", "steps", "converged", "rel_change", "kl_change", "risk_change",
)  # fmt: skip


def _risk_fn(cfg: SweepConfig, X_val: torch.Tensor, y_val: torch.Tensor):
    """The held-out risk the stopping rule watches (``StopRule.risk_tol``): each model's
    posterior-mean squared error on its replicate's held-out points (``X_val [E, n_val, p]``,
    ``y_val [E, n_val]``, one row per model), from ``risk_draws`` draws -- the same draws at
    every window (counter-based noise), so its change is the parameters'.  Data only: the
    error is against the observed y (noise included, so it is ``sigma^2`` plus the excess
    risk), never against the truth; ``simulate.estimators`` watches the same criterion on
    its ``validation_fraction``."""

    def risk(tr, params):
        m = tr.posterior(params).predict_mean(X_val, cfg.risk_draws)  # [E, n_val]
        return ((m - y_val.to(m)) ** 2).mean(-1)

    return risk


# the constructive start's arms (R is the record's own ASVI run): W0 the start untrained,
# W0s the same with its slab sds fitted (simulate.references.constructive.gauss_newton_scales), W
# trained from W0, P plain Adam from it
ARMS = ("W0", "W0s", "W0f", "W", "P")


def _train_group(cfg, hyper, batch, W, js, model_seeds, f0t, Xt, arms, val, starts, grow=None,
                 link=None):  # fmt: skip
    """Train the candidates ``js`` (positions in ``W``) of every replicate in one padded
    program on the training points ``batch`` until the stopping rule holds for each,
    evaluate them against their replicate's truth (``f0t [R, m]``: its values at the test
    points ``Xt``), and fill each arm's columns (``arms``: ``"R"`` the random start, and
    with a constructive start ``"W0"``, ``"W0s"``, ``"W0f"``, ``"W"``, ``"P"``); returns the
    training seconds.  ``val``: each replicate's held-out points ``(X_val [R, n_val, p], y_val
    [R, n_val])`` for a rule that watches the held-out risk, else None.  ``starts``: None,
    or ``(nets, val_masks, full)``: the constructive start of replicate i at width position
    j (``nets[i][j]``), and the plain arm's data -- all n points of each replicate
    (``full``, a :class:`Batch`) with its validation points among them (``val_masks``).
    ``grow``: width continuation (``SweepConfig.continuation``), ``(layout, params)`` of
    the narrower candidates trained just before, which R starts from
    (``simulate.core.state.widen``); None: R's random start.  ``link``: the job's
    :class:`simulate.sweep.budget.BudgetLink` or None (R's capped models' states kept for,
    or continued in, the budget-doubling control; no number changes).  Returns the training seconds
    and ``(layout, params)`` of R's trained candidates (what the next width grows from)."""
    R, n = batch.X.shape[0], batch.X.shape[1]  # n: the training points
    order = [(i, j) for j in js for i in range(R)]  # model = (replicate i, width j)
    di = [i for i, _ in order]
    widths = [W[j] for _, j in order]
    seeds = [model_seeds[i * len(W) + j] for i, j in order]
    risk = None
    if val is not None:
        risk = _risk_fn(cfg, val[0][di], val[1][di])  # each model its replicate's points
    truth = f0t[di]  # each model against its replicate's truth
    options = cfg.step_options()  # how every trainer here steps (compile, mlp)
    train = dict(depth=cfg.depth, rule=cfg.stop_rule_at(n), options=options, risk=risk)
    train_s = 0.0
    if "R" in arms:
        K = int(cfg.restarts)
        t0 = time.perf_counter()
        seeds_k = [s for k in range(K) for s in restart_seeds(seeds, k)]
        risk_k = risk
        if K > 1 and val is not None:  # each restart its replicate's held-out points
            risk_k = _risk_fn(cfg, val[0][di * K], val[1][di * K])
        init = None
        if grow is not None:  # width continuation (K = 1: SweepConfig forbids both)
            wide = Layout(batch.X.shape[2], cfg.depth, widths)
            init = widen(grow[0], grow[1], wide, init_state(wide, hyper, seeds).params)
        shadow = resume = None
        if link is not None and K == 1 and grow is None:  # (BudgetLink.applies checks more)
            shadow = link.shadow(cfg, n)
            layout = Layout(batch.X.shape[2], cfg.depth, widths,
                            node_scales=family_of(hyper).node_scales)  # fmt: skip
            resume = link.resume(cfg, n, layout, seeds)
        trained = train_models(hyper, widths * K, seeds_k, batch.X, batch.y, di * K,
                               init_from=init, shadow=shadow, resume=resume,
                               **{**train, "risk": risk_k})  # fmt: skip
        if shadow is not None:
            link.save(cfg, trained.trainer, seeds)
        grown = (trained.trainer.layout, trained.trainer.state.params)
        train_s += time.perf_counter() - t0
        post = trained.posterior
        cols = _state_columns(trained.trainer.state, trained.convergence)
        if K > 1:
            post, cols = _best_restart(cfg, post, cols, batch, di, widths, K)
        _fill(arms["R"], order, *_measured(cfg, post, batch, di, truth, Xt), cols)
    else:
        grown = None
    if starts is None:
        return train_s, grown
    nets = [starts[0][i][j] for i, j in order]
    layout = Layout(batch.X.shape[2], cfg.depth, widths)
    start = encode(layout, nets, hyper)
    st_cols = {
        "start_k": [np.nan if net.info.get("k") is None else net.info["k"] for net in nets],
        "start_exact": [float(net.exact) for net in nets],
    }
    seeds_t = torch.as_tensor(seeds, dtype=torch.int64)
    post0 = Posterior(layout, hyper, start, seeds_t)
    _fill(arms["W0"], order, *_measured(cfg, post0, batch, di, truth, Xt),
          {**_idle_columns(len(order)), **st_cols})  # fmt: skip
    scaled = gauss_newton_scales(layout, start, batch.X, di, hyper)
    post0s = Posterior(layout, hyper, scaled, seeds_t)
    _fill(arms["W0s"], order, *_measured(cfg, post0s, batch, di, truth, Xt),
          {**_idle_columns(len(order)), **st_cols})  # fmt: skip
    # W0f: the same network, its slab sds and inclusion probabilities trained by the step
    # and the rule with the locations held (the best posterior around the fixed network
    # that the step can find, where W0s is a second-order approximation of it)
    t0 = time.perf_counter()
    tr = build_trainer(hyper, widths, seeds, batch.X, batch.y, di, init_from=scaled,
                       depth=cfg.depth, options=options)  # fmt: skip
    tr.hold_locations()
    conv = tr.fit_until(train["rule"], risk=None if risk is None else (lambda q: risk(tr, q)))
    train_s += time.perf_counter() - t0
    _fill(arms["W0f"], order, *_measured(cfg, tr.posterior(), batch, di, truth, Xt),
          {**_state_columns(tr.state, conv), **st_cols})  # fmt: skip
    t0 = time.perf_counter()
    trained = train_models(hyper, widths, seeds, batch.X, batch.y, di, init_from=start, **train)
    train_s += time.perf_counter() - t0
    _fill(arms["W"], order, *_measured(cfg, trained.posterior, batch, di, truth, Xt),
          {**_state_columns(trained.trainer.state, trained.convergence), **st_cols})  # fmt: skip
    t0 = time.perf_counter()
    full = starts[2]
    res = train_plain(
        layout, net_theta(layout, nets)[:, : layout.P_net], full.X, full.y, di, seeds,
        starts[1], lr=cfg.lr, batch_size=cfg.batch_at(full.X.shape[1]),
        max_steps=cfg.steps_cap(full.X.shape[1]),
    )  # fmt: skip
    train_s += time.perf_counter() - t0
    theta = torch.zeros(layout.E, layout.P, dtype=torch.float64)
    theta[:, : layout.P_net] = res["theta"].to(torch.float64)
    postp = Posterior(layout, hyper, encode_theta(theta, hyper), seeds_t)
    idle = _idle_columns(len(order))
    idle.update(steps=res["steps"], converged=res["stopped"].astype(float), val_mse=res["val_mse"])
    _fill(arms["P"], order, *_measured(cfg, postp, batch, di, truth, Xt), {**idle, **st_cols})
    return train_s, grown


def restart_seeds(seeds, k: int) -> list:
    """The model seeds of restart ``k`` (``SweepConfig.restarts``): the models' own for
    k = 0 (one restart is the sweep without restarts), derived ones after."""
    return list(seeds) if k == 0 else [stable_seed(int(s), "restart", k) for s in seeds]


def _best_restart(cfg, post, cols, batch, di, widths, K: int):
    """Of K restarts of each model (``post`` holds ``K * E`` models, restart k's model e at
    ``k E + e``), the one of highest ELBO on the training points (the ELBO the selection
    uses, ``cfg.elbo_draws`` draws; a failed restart never wins): its posterior over the E
    models and its state columns, with ``restart`` (which one won) added.  The truth plays
    no part.  The winner's reported ELBO is evaluated with the same draws that chose it,
    so it is the largest of K Monte Carlo estimates: biased up by at most the estimates'
    spread (a few nats at 100 draws), which flatters the restarts slightly."""
    E = len(widths)
    el = post.elbo(batch.X, batch.y, di * K, draws=cfg.elbo_draws)["elbo"]
    el = np.where(np.isfinite(el) & ~np.asarray(cols["failed"], dtype=bool), el, -np.inf)
    k_best = np.argmax(el.reshape(K, E), axis=0)
    idx = k_best * E + np.arange(E)
    sel = torch.as_tensor(idx, dtype=torch.int64)
    layout = Layout(batch.X.shape[2], cfg.depth, list(widths))
    best = Posterior(layout, post.hyper, post.params[:, sel], post.seeds[sel])
    out = {k: np.asarray(v)[idx] for k, v in cols.items()}
    out["restart"] = k_best.astype(float)
    return best, out


def _measured(cfg, post, batch, di, truth, Xt):
    """A posterior's test metrics (squared Hellinger draws, posterior-mean L2), its ELBO
    parts on the training points ``batch`` (those ASVI trained on: every arm's ELBO, the
    selection's, is on the same points) and its edges."""
    d2_draws, l2 = post.test_metrics(truth, Xt, cfg.draws)  # [T, models], [models]
    el = post.elbo(batch.X, batch.y, di, draws=cfg.elbo_draws)
    per_model = {
        "l2sq": l2,
        **{k: el[k] for k in ("elbo", "L1", "L2", "L3")},
        "edges": post.edges()["sum_nu"],
    }
    return d2_draws, per_model


def _state_columns(st, conv) -> dict:
    """A trained batch's failure and stopping columns."""
    health = st.health
    return {
        "failed": health.failed.cpu().numpy(),
        "failed_step": health.failed_step.cpu().numpy(),
        "failed_terms": health.failed_terms.cpu().numpy(),
        "steps": conv["steps"],
        "converged": conv["converged"],
        **({"lr_decays": conv["lr_decays"]} if "lr_decays" in conv else {}),
        **{
            k: [np.nan if x is None else x for x in conv[k]]
            for k in ("rel_change", "kl_change", "risk_change")
        },
    }


def _idle_columns(E: int) -> dict:
    """The stopping columns of an arm the ASVI step did not train (W0, P)."""
    return {
        "failed": np.zeros(E),
        "failed_step": np.full(E, -1),
        "failed_terms": np.zeros(E),
        "steps": np.zeros(E),
        "converged": np.zeros(E),
        **{k: np.full(E, np.nan) for k in ("rel_change", "kl_change", "risk_change")},
    }


def _fill(cols, order, d2_draws, per_model, state_cols) -> None:
    for e, (i, j) in enumerate(order):
        cols["d2"][i, j] = d2_draws[:, e].mean()
        cols["d"][i, j] = np.sqrt(d2_draws[:, e]).mean()
        for k, v in {**per_model, **state_cols}.items():
            if k not in cols:
                cols[k] = np.full(cols["d2"].shape, np.nan)
            cols[k][i, j] = v[e]


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
    Dask workers; the runner's estimator ``"asvi"``, ``simulate.sweep.runner.ESTIMATORS``).
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
    # ASVI's training points: with the risk stop, each replicate's last n_val points are
    # held out for it (the same count for every replicate, so shapes stay uniform)
    n_train = cfg.n_train_at(job.n)
    hyper = cfg.hyper_at(n_train)
    model_seeds = [
        stable_seed(cfg.seed, job.truth.key, job.n, r, "model", w)
        for r in job.replicates
        for w in W
    ]
    full = Batch(
        torch.tensor(np.stack(X_all), dtype=torch.float32),
        torch.tensor(np.stack(y_all), dtype=torch.float32),
        torch.arange(R, dtype=torch.int64),
    )
    batch = Batch(
        full.X[:, :n_train].contiguous(), full.y[:, :n_train].contiguous(), full.data_index
    )
    val = None
    if n_train < job.n:  # the risk stop's held-out points, never the truth's values
        val = (full.X[:, n_train:], full.y[:, n_train:])
    test_seed = stable_seed(cfg.seed, job.truth.key, "test")
    Xt = np.random.default_rng(test_seed).uniform(-1, 1, size=(cfg.n_test, job.truth.p))
    # Widths are trained in groups (``group_widths``): one batched program per group, its
    # models padded to the group's widest, each model stopped by the rule on its own.
    f0t = np.stack([f(Xt) for f in f0s])  # [R, m]: for evaluation only
    names = {"random": ["R"], "constructive": list(ARMS), "both": ["R", *ARMS]}[cfg.start]
    arms = {a: {k: np.empty((R, len(W))) for k in _COLUMNS} for a in names}
    starts = None
    if cfg.start != "random":
        starts = (
            [_starts(job, cfg, f0s[i], X_all[i], y_all[i], W) for i in range(R)],
            np.stack([validation_split(job.n, s) for s in data_seeds]),
            full,
        )
    # with width continuation one width at a time, narrowest first, each R candidate
    # started from the one trained before it (simulate.core.state.widen)
    groups = [[w] for w in W] if cfg.continuation else group_widths(W)
    train_s, grown = 0.0, None
    for g in groups:
        js = [W.index(w) for w in g]
        s, out = _train_group(cfg, hyper, batch, W, js, model_seeds, f0t, Xt, arms, val, starts,
                              grown if cfg.continuation else None, job.budget)  # fmt: skip
        train_s, grown = train_s + s, out
    refs = [None] * R
    if job.truth.kind == "holder" and job.truth.p <= REFERENCE_MAX_P:
        # the budget-doubling control takes the sweep's (the same data and seeds)
        kept = job.budget.references(cfg, job) if job.budget is not None else refs
        refs = [kept[i] if kept[i] is not None else reference(X_all[i], y_all[i], Xt, f0t[i],
                cfg, job) for i in range(R)]  # fmt: skip
        if job.budget is not None:
            job.budget.save_references(cfg, job, refs)
    eval_s = time.perf_counter() - t0 - train_s
    records = []
    for i, r in enumerate(job.replicates):
        sl = slice(i * len(W), (i + 1) * len(W))
        # the record's own fields: the random start (R), or W when it is the only ASVI run
        main = "R" if "R" in arms else "W"
        pw = _per_width(arms[main], i)
        sel = cell_selection(pw, W, cfg.lam)
        extra = {}
        if starts is not None:
            extra["arms"] = {a: _arm_record(arms[a], i, W, cfg) for a in ARMS if a != main}
        records.append(
            {
                "schema": SCHEMA,
                "failed": sel["failed"],
                "cell": {"truth": job.truth.key, "n": job.n, "replicate": r},
                "truth": {**asdict(job.truth), "function": f0_describe(f0s[i])},
                "config": cfg.cell_config(job.n, W),
                "seeds": {"data": data_seeds[i], "models": model_seeds[sl], "test": test_seed},
                **{k: sel[k] for k in ("selected_width", "selected_at_top", "metrics")},
                "per_width": {**pw, "penalized_elbo": sel["penalized_elbo"]},
                "reference": refs[i],
                "timing": {"job_train_s": train_s, "job_eval_s": eval_s, "job_models": R * len(W)},
                "versions": versions(),
                "code": code_digest(),  # the worker's code (the sweep compares it with its own)
                **extra,
            }
        )
    return records


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
