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
from simulate.core.options import DEFAULT_OPTIONS, StepOptions
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
    options: StepOptions = DEFAULT_OPTIONS,
    device=None,
    dtype=torch.float32,
    init_from=None,
) -> Trainer:
    """The first half of the recipe, ``Layout -> Batch -> Trainer``: one model per entry of
    ``widths`` (``depth`` hidden layers, padded together) on datasets ``X [D, n, p]``,
    ``y [D, n]`` (model e on dataset ``data_index[e]``) with their ``seeds``, untrained.
    The family's node scales (the horseshoe's) follow ``hyper.family``.  For drivers that step
    the trainer themselves (the benchmark, runs evaluated every few epochs).  ``options``:
    how the step runs (:class:`simulate.core.options.StepOptions`: compiled, chunked, the
    network's pass, the autograd path, learned noise), made by the caller and handed to
    the ``Trainer`` whole; ``init_from``: a start built by hand (``Trainer``;
    ``simulate.references.constructive``), else the random one."""
    layout = Layout(
        X.shape[2], depth, list(widths), out_dim, node_scales=family_of(hyper).node_scales
    )
    batch = Batch(X, y, torch.as_tensor(data_index, dtype=torch.int64))
    return Trainer(
        layout,
        hyper,
        seeds,
        batch,
        options=options,
        device=device,
        dtype=dtype,
        init_from=init_from,
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
    shadow=None,
    resume=None,
    **build,
) -> Trained:
    """Train the models of :func:`build_trainer` (``build``: its keywords -- ``depth``,
    ``out_dim``, ``options``, ``device``, ``dtype``, ``init_from``) for
    ``steps`` steps, or until ``rule`` (a :class:`simulate.core.stopping.StopRule`) stops
    each; the trainer, the posteriors and the stopping summary.  ``risk``: for a rule that
    watches the held-out risk, a function ``(trainer, params) -> [E]``; ``shadow``, ``resume``:
    a stricter rule kept beside ``rule``, models joining the run from an earlier one's state
    (both ``Trainer.fit_until``)."""
    if (steps is None) == (rule is None):
        raise ValueError("give either steps or a stopping rule")
    tr = build_trainer(hyper, widths, seeds, X, y, data_index, **build)
    if rule is not None:
        watch = None if risk is None else (lambda params: risk(tr, params))
        extra = {"risk": watch, "shadow": shadow, "resume": resume}
        conv = tr.fit_until(rule, **{k: v for k, v in extra.items() if v is not None})
    else:
        tr.fit(steps, progress=progress, record_every=record_every)
        conv = None
    return Trained(tr, tr.posterior(), conv)
