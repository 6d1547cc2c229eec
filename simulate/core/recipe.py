"""The one training recipe every driver uses: ``Layout -> Batch -> Trainer``
(:func:`build_trainer`) and ``-> fit -> Posterior`` (:func:`train_models`), so the
estimators, the sweep, the experiment drivers and the benchmark differ only in what they
ask for."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from simulate.core.hyper import Hyper
from simulate.core.layout import Layout
from simulate.core.objective import family_of
from simulate.core.posterior import Posterior
from simulate.core.state import Batch
from simulate.core.trainer import Trainer

__all__ = ["Trained", "build_trainer", "train_models"]


@dataclass
class Trained:
    """What :func:`train_models` returns: the trainer (its state, failures, history), the
    posteriors of every model, and the stopping summary (None when trained for ``steps``)."""

    trainer: Trainer
    posterior: Posterior
    convergence: dict | None


def build_trainer(
    hyper: Hyper,
    widths,
    seeds,
    X,
    y,
    data_index,
    *,
    depth: int,
    out_dim: int = 1,
    compile: bool = False,
    chunk: int | None = None,
    device=None,
    dtype=torch.float32,
    init_from=None,
    autograd: bool = False,
    learn_noise: bool = False,
    noise_every: int = 100,
    noise_floor: float = 1e-3,
    mlp: str = "batched",
) -> Trainer:
    """The first half of the recipe, ``Layout -> Batch -> Trainer``: one model per entry of
    ``widths`` (``depth`` hidden layers, padded together) on datasets ``X [D, n, p]``,
    ``y [D, n]`` (model e on dataset ``data_index[e]``) with their ``seeds``, untrained.
    The family's node scales (the horseshoe's) follow ``hyper.family``.  For drivers that step
    the trainer themselves (the benchmark, runs evaluated every few epochs).  ``init_from``:
    a start built by hand (``Trainer``; ``simulate.references.constructive``), else the random one;
    ``autograd``: the autograd step path for any family (the hand-written kernels' check);
    ``learn_noise``, ``noise_every``, ``noise_floor``: the noise sd learned with each model;
    ``mlp``: how the network's pass is computed (``Trainer``)."""
    layout = Layout(
        X.shape[2], depth, list(widths), out_dim, node_scales=family_of(hyper).node_scales
    )
    batch = Batch(X, y, torch.as_tensor(data_index, dtype=torch.int64))
    return Trainer(
        layout,
        hyper,
        seeds,
        batch,
        device=device,
        dtype=dtype,
        compile=compile,
        chunk=chunk,
        init_from=init_from,
        autograd=autograd,
        learn_noise=learn_noise,
        noise_every=noise_every,
        noise_floor=noise_floor,
        mlp=mlp,
    )


def train_models(
    hyper: Hyper,
    widths,
    seeds,
    X,
    y,
    data_index,
    *,
    steps: int | None = None,
    rule=None,
    progress=None,
    record_every: int = 0,
    risk=None,
    **build,
) -> Trained:
    """Train the models of :func:`build_trainer` (``build``: its keywords -- ``depth``,
    ``out_dim``, ``compile``, ``chunk``, ``device``, ``dtype``, ``learn_noise``, ...) for
    ``steps`` steps, or until ``rule`` (a :class:`simulate.core.stopping.StopRule`) stops
    each; the trainer, the posteriors and the stopping summary.  ``risk``: for a rule that
    watches the held-out risk, a function ``(trainer, params) -> [E]`` (``Trainer.fit_until``)."""
    if (steps is None) == (rule is None):
        raise ValueError("give either steps or a stopping rule")
    tr = build_trainer(hyper, widths, seeds, X, y, data_index, **build)
    if rule is not None:
        if risk is None:
            conv = tr.fit_until(rule)
        else:
            conv = tr.fit_until(rule, risk=lambda params: risk(tr, params))
    else:
        tr.fit(steps, progress=progress, record_every=record_every)
        conv = None
    return Trained(tr, tr.posterior(), conv)
