"""The no-VB control: plain ReLU networks trained by Adam on squared error, early-stopped
on validation data (arm P of the constructive-start comparison,
``simulate.references.constructive``).  Its command line, the same training from a random or
a constructive start on one Hoelder truth beside the linear-spline reference, is
``python -m simulate.experiments.plain_control``.

:func:`train_plain` trains E networks at once (stacked parameters ``theta [E, P]`` of a
:class:`simulate.core.layout.Layout`, autograd, ``torch.optim.Adam``: elementwise, so each model
trains as it would alone).  Each model's dataset is split once: the last
``VAL_FRACTION`` of a seeded permutation is validation data, the rest training data;
minibatches of the training part are drawn with replacement from the model's own counter-
based stream (``rng.STREAM_PLAIN``).  Every ``eval_every`` steps (at least one pass over the
training part, at least 50 steps) the validation mean squared error is measured; a model
keeps the parameters of its best evaluation and stops after :data:`PATIENCE` evaluations
without improvement (or at the step cap).  Choices: the split, the patience and the
evaluation period are fixed here, not tuned; the budget is the ASVI cell's step cap at the
same batch size (the same number of steps, so 1/(1 - VAL_FRACTION) times the epochs over
the smaller training part).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from simulate.core import rng
from simulate.core.layout import Layout
from simulate.core.sampler import iid_index

__all__ = ["PATIENCE", "VAL_FRACTION", "PlainFit", "train_plain", "validation_split"]

VAL_FRACTION = 0.2
PATIENCE = 20


def validation_split(n: int, seed: int) -> np.ndarray:
    """Boolean ``[n]``: the validation points of a dataset of n points (seeded)."""
    n_val = max(1, int(round(VAL_FRACTION * n)))
    return np.random.default_rng(seed).permutation(n) >= n - n_val


@dataclass(frozen=True)
class PlainFit:
    """How :func:`train_plain` trains: Adam at learning rate ``lr`` on minibatches of
    ``batch_size`` points (at most the training part's size), for at most ``max_steps`` steps,
    a model stopping after ``patience`` evaluations without improvement (:data:`PATIENCE`);
    ``progress``: a progress callable ``(step, max_steps)``, or None."""

    lr: float
    batch_size: int
    max_steps: int
    patience: int = PATIENCE
    progress: object = None


def train_plain(
    layout: Layout,
    theta0: torch.Tensor,
    X: torch.Tensor,
    y: torch.Tensor,
    data_index,
    seeds,
    val_masks: np.ndarray,
    fit: PlainFit,
) -> dict:
    """Train ``theta0 [E, P_net]`` (model e on dataset ``data_index[e]`` of ``X [D, n, p]``,
    ``y [D, n]``; ``val_masks [D, n]`` its validation points) by Adam on the training
    points' mean squared error, as ``fit`` says (:class:`PlainFit`); returns ``theta`` (each
    model's best-validation parameters), ``val_mse``, ``steps`` (the step of the best
    evaluation), ``stopped`` (patience ran out before the cap) per model."""
    lr, batch_size, max_steps = fit.lr, fit.batch_size, fit.max_steps
    patience, progress = fit.patience, fit.progress
    E = layout.E
    di = torch.as_tensor(data_index, dtype=torch.int64).reshape(-1)
    if theta0.shape != (E, layout.P_net) or di.numel() != E:
        raise ValueError(f"need theta0 [{E}, {layout.P_net}] and one dataset per model")
    X = torch.as_tensor(X, dtype=torch.float32)
    y = torch.as_tensor(y, dtype=torch.float32)
    vm = torch.as_tensor(np.asarray(val_masks, dtype=bool))
    n_tr = int((~vm[0]).sum())
    tr_rows = torch.stack([torch.nonzero(~vm[d])[:, 0] for d in range(vm.shape[0])])
    va_rows = torch.stack([torch.nonzero(vm[d])[:, 0] for d in range(vm.shape[0])])
    Xv, yv = X[di[:, None], va_rows[di]], y[di[:, None], va_rows[di]]  # [E, n_val, p]
    m = min(batch_size, n_tr)
    stream = rng.Stream(
        rng.seed_key(torch.as_tensor(seeds, dtype=torch.int64).reshape(-1), rng.STREAM_PLAIN)[
            :, None
        ],
        torch.arange(m)[None],
    )
    mask = layout.mask(dtype=torch.float32)[:, : layout.P_net]
    theta = (theta0.detach().to(torch.float32) * mask).clone().requires_grad_(True)
    opt = torch.optim.Adam([theta], lr=lr)
    eval_every = max(50, -(-n_tr // m))

    def val_mse():
        with torch.no_grad():
            return ((layout.forward(theta, Xv)[:, 0, :] - yv) ** 2).mean(-1)

    best = val_mse()
    best_theta = theta.detach().clone()
    best_step = torch.zeros(E, dtype=torch.int64)
    since = torch.zeros(E, dtype=torch.int64)
    done = torch.zeros(E, dtype=torch.bool)
    step = 0
    while step < max_steps and not bool(done.all()):
        idx = iid_index(stream.uniform(step, torch.float64), n_tr)  # [E, m]
        rows = tr_rows[di[:, None], idx]
        xb, yb = X[di[:, None], rows], y[di[:, None], rows]
        opt.zero_grad(set_to_none=False)
        loss = ((layout.forward(theta, xb)[:, 0, :] - yb) ** 2).mean(-1)
        loss.sum().backward()
        theta.grad.mul_(mask)
        opt.step()
        step += 1
        if step % eval_every == 0 or step == max_steps:
            v = val_mse()
            better = (v < best) & ~done & torch.isfinite(v)
            best = torch.where(better, v, best)
            best_theta[better] = theta.detach()[better]
            best_step[better] = step
            since = torch.where(better, torch.zeros_like(since), since + 1)
            done |= since >= patience
        if progress is not None:
            progress(step, max_steps)
    return {
        "theta": best_theta,
        "val_mse": best.numpy().astype(float),
        "steps": best_step.numpy(),
        "stopped": done.numpy(),
        "steps_run": step,
    }


# --------------------------------------------------------------------------- the driver
