"""The one training recipe every driver uses: ``Layout -> Batch -> Trainer -> fit ->
Posterior`` in one call (:func:`train_models`), so the estimators, the sweep and the
experiment drivers differ only in what they ask for."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .hyper import Hyper
from .layout import Layout
from .posterior import Posterior
from .state import Batch
from .trainer import Trainer

__all__ = ["Trained", "train_models"]


@dataclass
class Trained:
    """What :func:`train_models` returns: the trainer (its state, failures, history), the
    posteriors of every model, and the stopping summary (None when trained for ``steps``)."""

    trainer: Trainer
    posterior: Posterior
    convergence: dict | None


def train_models(
    hyper: Hyper,
    widths,
    seeds,
    X,
    y,
    data_index,
    *,
    depth: int,
    out_dim: int = 1,
    steps: int | None = None,
    rule=None,
    compile: bool = False,
    device=None,
    dtype=torch.float32,
    progress=None,
    record_every: int = 0,
) -> Trained:
    """Train one model per entry of ``widths`` (``depth`` hidden layers, padded together)
    on datasets ``X [D, n, p]``, ``y [D, n]`` (model e on dataset ``data_index[e]``) with
    their ``seeds``: for ``steps`` steps, or until ``rule`` (a
    :class:`simulate.stopping.StopRule`) stops each.  The horseshoe family gets its node
    scales from ``hyper.family``."""
    if (steps is None) == (rule is None):
        raise ValueError("give either steps or a stopping rule")
    layout = Layout(
        X.shape[2], depth, list(widths), out_dim, node_scales=hyper.family == "horseshoe"
    )
    batch = Batch(X, y, torch.as_tensor(data_index, dtype=torch.int64))
    tr = Trainer(layout, hyper, seeds, batch, device=device, dtype=dtype, compile=compile)
    if rule is not None:
        conv = tr.fit_until(rule)
    else:
        tr.fit(steps, progress=progress, record_every=record_every)
        conv = None
    return Trained(tr, Posterior(layout, hyper, tr.state.var, tr.seeds), conv)
