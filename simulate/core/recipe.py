"""The one training recipe every driver uses: ``Layout -> Batch -> Trainer``
(:func:`build_trainer`) and ``-> fit -> Posterior`` (:func:`train_models`), so the
estimators, the sweep, the experiment drivers and the benchmark differ only in what they
ask for."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from simulate.core.hyper import Hyper
from simulate.core.layout import Layout
from simulate.core.objective import family_of
from simulate.core.options import DEFAULT_OPTIONS, StepOptions
from simulate.core.posterior import Posterior
from simulate.core.state import Batch
from simulate.core.trainer import Trainer

__all__ = ["WARMUP_TOL_FACTOR", "Trained", "build_trainer", "fit_trainer", "train_models"]


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


# The learned noise's warm-up (:func:`fit_trainer`) ends when the objective's windowed
# improvement falls below this many times the rule's tolerance, once (it is there to fit the
# signal first, not to converge at the start value)
WARMUP_TOL_FACTOR = 4.0


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
    race=None,
    **build,
) -> Trained:
    """Train the models of :func:`build_trainer` (``build``: its keywords -- ``depth``,
    ``out_dim``, ``options``, ``device``, ``dtype``, ``init_from``) for ``steps`` steps, or
    until ``rule`` (a :class:`simulate.core.stopping.StopRule`) stops each
    (:func:`fit_trainer`); the trainer, the posteriors and the stopping summary."""
    if (steps is None) == (rule is None):
        raise ValueError("give either steps or a stopping rule")
    tr = build_trainer(hyper, widths, seeds, X, y, data_index, **build)
    conv = fit_trainer(
        tr, steps=steps, rule=rule, progress=progress, record_every=record_every, risk=risk,
        shadow=shadow, resume=resume, race=race,
    )  # fmt: skip
    return Trained(tr, tr.posterior(), conv)


def fit_trainer(
    tr: Trainer, *, steps=None, rule=None, progress=None, record_every=0, risk=None,
    shadow=None, resume=None, race=None,
) -> dict | None:  # fmt: skip
    """Train ``tr`` for ``steps`` steps or until ``rule`` stops each model; returns the
    stopping summary (None for a fixed budget).  ``progress``: a progress callable;
    ``record_every``: the loss history's spacing (fixed budget); ``risk``: for a rule that
    watches the held-out risk, a function ``(trainer, params) -> [E]``; ``shadow``,
    ``resume``: a stricter rule kept beside ``rule``, models joining the run from an earlier
    one's state; ``race``: a race between candidates (``simulate.estimators.Halving``)
    (the last four ``Trainer.fit_until``'s).

    With learned noise (``tr.options.learn_noise``), in two phases: a *warm-up* at the start
    value (sds fixed) -- until the rule holds for every model, or the first half of a fixed
    budget -- then variational EM (the sds updated at every window end, or every
    ``noise_every`` steps) until the rule holds again or the budget ends.  Why: updating
    from the first window let a narrow network's posterior collapse to the constant fit
    before it had fit anything (the residuals of a half-trained fit raise the sd, the
    likelihood weakens, the KL prunes; measured: SVI width 2 on y = x_1 + N(0, 0.1^2),
    n = 300: R^2 0.00); a network fitted first only ever prunes as the sd rises, which it
    can.  Each model's ``steps`` in the summary add up both phases; ``converged`` is the
    second phase's.  ``race`` runs in the EM phase only: in the warm-up every candidate's
    objective is at the same start sd, not the ELBO at its own.  ``shadow`` and ``resume``
    are refused with learned noise (no driver combines them)."""
    watch = None if risk is None else (lambda params: risk(tr, params))
    until = {"progress": progress, "risk": watch, "shadow": shadow, "resume": resume, "race": race}
    until = {k: v for k, v in until.items() if v is not None}
    if not tr.options.learn_noise:
        if rule is None:
            tr.fit(steps, progress=progress, record_every=record_every)
            return None
        return tr.fit_until(rule, **until)
    if shadow is not None or resume is not None:
        raise ValueError("learned noise trains in two phases: shadow and resume are not for it")
    tr.pause_noise()
    if rule is None:
        warm = steps // 2
        tr.fit(warm, progress=progress, record_every=record_every)
        tr.resume_noise()
        tr.fit(steps - warm, progress=progress, record_every=record_every)
        return None
    # the warm-up ends at its first plateau: the learning rate is lowered in the EM phase
    warm_rule = replace(rule, tol=WARMUP_TOL_FACTOR * rule.tol, patience=1, lr_decays=0)
    first = tr.fit_until(warm_rule, **{k: v for k, v in until.items() if k != "race"})
    left = rule.max_steps - max(first["steps"])
    if left <= 0:  # the cap ended the warm-up: EM never ran
        return first
    tr.release_stopped()  # failed models stay held (state.health)
    tr.resume_noise()
    second = tr.fit_until(replace(rule, max_steps=left), **until)
    second["steps"] = [a + b for a, b in zip(first["steps"], second["steps"], strict=True)]
    return second
