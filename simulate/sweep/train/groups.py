"""One group of a job's candidate widths (``simulate.sweep.setup.widths.group_widths``) trained in
one padded program and measured (:func:`train_group`, called by
``simulate.sweep.train.asvi_job.run_asvi_job``): the random start's arm R (with its restarts, width
continuation and the budget-doubling control's link) and the constructive start's arms
(:data:`ARMS`), each candidate's test metrics, ELBO parts and stopping columns filled into
its arm's columns.  The held-out risk the stopping rule may watch (:func:`_risk_fn`) reads
the data only, never the truth."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from simulate.core import Batch, Layout
from simulate.core.objective import family_of
from simulate.core.posterior import Posterior
from simulate.core.state import init_state, widen
from simulate.core.training import build_trainer, train_models
from simulate.references.constructive import encode, encode_theta, gauss_newton_scales, net_theta
from simulate.references.plain import PlainFit, train_plain
from simulate.sweep.setup.config import SweepConfig
from simulate.sweep.setup.truth_spec import stable_seed
from simulate.sweep.store.rules import ARMS

__all__ = ["ARMS", "JobInputs", "restart_seeds", "train_group"]


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


@dataclass(frozen=True)
class JobInputs:
    """What every group of a job's candidates trains on and is evaluated against
    (``simulate.sweep.train.asvi_job.run_asvi_job`` makes it, :func:`train_group` reads it):
    ``cfg``,
    ``hyper``, the training points ``batch``, the candidate widths ``W``, the model seeds
    ``model_seeds`` (replicate i's at width position j at ``i len(W) + j``), each
    replicate's truth (``f0t [R, m]``: its values at the test points ``Xt``) and each arm's
    columns, filled in by the groups (``arms``: ``"R"`` the random start, and with a
    constructive start ``"W0"``, ``"W0s"``, ``"W0f"``, ``"W"``, ``"P"``).  ``val``: each
    replicate's held-out points ``(X_val [R, n_val, p], y_val [R, n_val])`` for a rule that
    watches the held-out risk, else None.  ``starts``: None, or ``(nets, val_masks, full)``:
    the constructive start of replicate i at width position j (``nets[i][j]``), and the
    plain arm's data -- all n points of each replicate (``full``, a :class:`Batch`) with its
    validation points among them (``val_masks``).  ``link``: the job's
    :class:`simulate.sweep.train.budget.BudgetLink` or None (R's capped models' states kept for,
    or continued in, the budget-doubling control; no number changes)."""

    cfg: SweepConfig
    hyper: object
    batch: Batch
    W: list
    model_seeds: list
    f0t: np.ndarray
    Xt: np.ndarray
    arms: dict
    val: tuple | None
    starts: tuple | None
    link: object


@dataclass(frozen=True)
class _Group:
    """One group's models in their program's order (:func:`_group`): ``order`` the
    (replicate i, width position j) of each, ``di`` their replicates, ``widths``, ``seeds``,
    the held-out ``risk`` the rule watches (or None), each model's ``truth`` (its
    replicate's values at the test points), ``train`` the arguments of ``train_models``
    they share and ``n`` the training points."""

    order: list
    di: list
    widths: list
    seeds: list
    risk: object
    truth: np.ndarray
    train: dict
    n: int


def _group(inp: JobInputs, js, reps=None) -> _Group:
    """The models of the candidates ``js`` (positions in ``inp.W``) of every replicate, or
    of the replicates ``reps`` (positions in the job's block)."""
    cfg, batch, W, val = inp.cfg, inp.batch, inp.W, inp.val
    R, n = batch.X.shape[0], batch.X.shape[1]  # n: the training points
    reps = range(R) if reps is None else reps
    order = [(i, j) for j in js for i in reps]  # model = (replicate i, width j)
    di = [i for i, _ in order]
    widths = [W[j] for _, j in order]
    seeds = [inp.model_seeds[i * len(W) + j] for i, j in order]
    risk = None
    if val is not None:
        risk = _risk_fn(cfg, val[0][di], val[1][di])  # each model its replicate's points
    truth = inp.f0t[di]  # each model against its replicate's truth
    options = cfg.step_options()  # how every trainer here steps (compile, mlp)
    train = dict(depth=cfg.depth, rule=cfg.stop_rule_at(n), options=options, risk=risk)
    return _Group(order, di, widths, seeds, risk, truth, train, n)


def train_group(inp: JobInputs, js, grow=None, reps=None):
    """Train the candidates ``js`` (positions in ``inp.W``) of every replicate in one padded
    program on the training points ``inp.batch`` until the stopping rule holds for each,
    evaluate them against their replicate's truth, and fill each arm's columns
    (:class:`JobInputs`).  ``grow``: width continuation (``SweepConfig.continuation``),
    ``(layout, params)`` of the narrower candidates trained just before, which R starts
    from (``simulate.core.state.widen``); None: R's random start.  Returns the training
    seconds and ``(layout, params)`` of R's trained candidates (what the next width grows
    from).  ``reps``: the replicates (positions in the job's block) whose candidates train
    (None: every one); the other rows of the arms' columns are left as they are."""
    g = _group(inp, js, reps)
    train_s, grown = 0.0, None
    if "R" in inp.arms:
        train_s, grown = _train_random(inp, g, grow)
    if inp.starts is None:
        return train_s, grown
    return _train_constructive(inp, g, train_s), grown


def _train_random(inp: JobInputs, g: _Group, grow):
    """The random start's arm R of group ``g`` (``cfg.restarts`` restarts of each model,
    the best kept; grown from ``grow`` with width continuation; with the job's budget link,
    its capped models kept for or continued from the budget-doubling control): trained,
    measured and filled in; the training seconds and ``(layout, params)`` of the trained
    candidates."""
    cfg, hyper, batch, val, link = inp.cfg, inp.hyper, inp.batch, inp.val, inp.link
    order, di, widths, seeds, risk, n = g.order, g.di, g.widths, g.seeds, g.risk, g.n
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
                           **{**g.train, "risk": risk_k})  # fmt: skip
    if shadow is not None:
        link.save(cfg, trained.trainer, seeds)
    grown = (trained.trainer.layout, trained.trainer.state.params)
    train_s = time.perf_counter() - t0
    post = trained.posterior
    cols = _state_columns(trained.trainer.state, trained.convergence)
    if K > 1:
        post, cols = _best_restart(cfg, post, cols, batch, di, widths, K)
    _fill(inp.arms["R"], order, *_measured(cfg, post, batch, di, g.truth, inp.Xt), cols)
    return train_s, grown


def _train_constructive(inp: JobInputs, g: _Group, train_s: float) -> float:
    """The constructive start's arms (:data:`ARMS`) of group ``g``: measured, trained where
    they train, and filled in; ``train_s`` with their training seconds added."""
    cfg, hyper, batch = inp.cfg, inp.hyper, inp.batch
    Xt, arms, starts = inp.Xt, inp.arms, inp.starts
    order, di, widths, seeds = g.order, g.di, g.widths, g.seeds
    risk, truth, train = g.risk, g.truth, g.train
    options = train["options"]
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
    if "P" not in arms:  # the plain arm not asked (SweepConfig.plain_arm)
        return train_s
    t0 = time.perf_counter()
    full = starts[2]
    res = train_plain(
        layout, net_theta(layout, nets)[:, : layout.P_net], full.X, full.y, di, seeds,
        starts[1], PlainFit(lr=cfg.lr, batch_size=cfg.batch_at(full.X.shape[1]),
                            max_steps=cfg.steps_cap(full.X.shape[1])),
    )  # fmt: skip
    train_s += time.perf_counter() - t0
    theta = torch.zeros(layout.E, layout.P, dtype=torch.float64)
    theta[:, : layout.P_net] = res["theta"].to(torch.float64)
    postp = Posterior(layout, hyper, encode_theta(theta, hyper), seeds_t)
    idle = _idle_columns(len(order))
    idle.update(steps=res["steps"], converged=res["stopped"].astype(float), val_mse=res["val_mse"])
    _fill(arms["P"], order, *_measured(cfg, postp, batch, di, truth, Xt), {**idle, **st_cols})
    return train_s


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
