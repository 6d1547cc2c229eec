"""A candidate ladder that grows at its edge (``SweepConfig.width_edge_max``), called by
``simulate.sweep.train.asvi_job.run_asvi_job`` after the ladder's groups have trained.

Why: the theorem's network grows with n (Lemma 6.1: width of order n^(p/(2 alpha + p)),
which depends on the unknown alpha), and a ladder capped at a fixed width binds where the
selection sits at its widest candidate (confirm-v4: 64 at every n >= 32,000 at alpha =
0.5).  A rung per replicate, chosen by the data alone: while a replicate's penalised ELBO
(eq. (13)) selects its widest candidate, the next power of two is trained for it (one
padded program for every replicate that asks, the same seeds, step and rule as the
ladder's), until the selection stops at a narrower candidate -- the ELBO turned down -- or
the next rung would pass ``width_edge_max``.  Each replicate's candidates are its own: a
rung trained because another replicate asked is never among them (its models are not
trained for it), so replicates stay independent.  Nothing of the truth enters: the
selection reads the ELBO of the training points only."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from simulate.sweep.setup.truth_spec import stable_seed
from simulate.sweep.setup.widths import cell_selection
from simulate.sweep.train.groups import train_group

__all__ = ["grow_at_edge", "model_seed", "own_columns"]


def model_seed(cfg, job, replicate: int, width: int) -> int:
    """The model seed of a replicate's candidate of ``width`` (the ladder's formula)."""
    return stable_seed(cfg.seed, job.truth.key, job.n, replicate, "model", width)


def own_columns(arms: dict, W_all, own) -> dict:
    """The arms' columns restricted to the candidates ``own`` (a subset of ``W_all``)."""
    idx = [list(W_all).index(w) for w in own]
    return {a: {k: v[:, idx] for k, v in cols.items()} for a, cols in arms.items()}


def _selects_top(per_width_of, cols: dict, i: int, own, lam: float) -> bool:
    sel = cell_selection(per_width_of(cols, i), own, lam)
    return not sel["failed"] and sel["selected_width"] == own[-1]


def grow_at_edge(job, inp, arms: dict, per_width_of, starts_of) -> tuple:
    """Grow each replicate's ladder at its edge (module docstring).  ``inp``: the job's
    ``JobInputs`` (its ladder ``inp.W``); ``arms``: the ladder's columns ``[R, len(W)]``
    per arm, filled; ``per_width_of(cols, i)``: replicate i's per-candidate record columns;
    ``starts_of(i, w)``: replicate i's constructive start of width w (used where the sweep
    has constructive arms).  Returns ``(arms, W_all, own, train_s, models)``: the columns
    over every width trained, those widths, each replicate's own candidates, the seconds
    and the models the growth trained."""
    cfg = inp.cfg
    R = len(job.replicates)
    W_all = list(inp.W)
    own = [list(W_all) for _ in range(R)]
    main = "R" if "R" in arms else "W"
    train_s, models = 0.0, 0
    while 2 * W_all[-1] <= cfg.width_edge_max:
        top, w = W_all[-1], 2 * W_all[-1]
        sub = [own_columns({main: arms[main]}, W_all, own[i])[main] for i in range(R)]
        need = [
            i for i in range(R)
            if own[i][-1] == top and _selects_top(per_width_of, sub[i], i, own[i], cfg.lam)
        ]  # fmt: skip
        if not need:
            break
        cols = {a: {k: np.full((R, 1), np.nan) for k in arms[a]} for a in arms}
        seeds = [model_seed(cfg, job, r, w) for r in job.replicates]
        starts = None
        if inp.starts is not None:
            nets = [[starts_of(i, w)] if i in need else [None] for i in range(R)]
            starts = (nets, inp.starts[1], inp.starts[2])
        one = replace(inp, W=[w], model_seeds=seeds, arms=cols, starts=starts, link=None)
        s, _ = train_group(one, [0], reps=need)
        train_s, models = train_s + s, models + len(need)
        for a in arms:
            for k in set(arms[a]) | set(cols[a]):
                old = arms[a].get(k, np.full((R, len(W_all)), np.nan))
                arms[a][k] = np.hstack([old, cols[a].get(k, np.full((R, 1), np.nan))])
        W_all.append(w)
        for i in need:
            own[i].append(w)
    return arms, W_all, own, train_s, models
