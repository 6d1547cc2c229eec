"""The one training recipe every driver uses: ``Layout -> Batch -> Trainer``
(:func:`build_trainer`) and ``-> fit -> Posterior`` (:func:`train_models`), so the
estimators, the sweep, the experiment drivers and the benchmark differ only in what they
ask for."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import torch

from simulate.core.hyper import Hyper
from simulate.core.layout import Layout
from simulate.core.objective import family_of
from simulate.core.options import DEFAULT_OPTIONS, StepOptions
from simulate.core.posterior import Posterior
from simulate.core.state import Batch
from simulate.core.trainer import Trainer

__all__ = [
    "WARMUP_TOL_FACTOR",
    "Build",
    "Fit",
    "Trained",
    "build_trainer",
    "fit_trainer",
    "train_models",
]


@dataclass
class Trained:
    """What :func:`train_models` returns: the trainer (its state, failures, history), the
    posteriors of every model, and the stopping summary (None when trained for ``steps``)."""

    trainer: Trainer
    posterior: Posterior
    convergence: dict | None


@dataclass(frozen=True)
class Build:
    """How :func:`build_trainer` builds the models beyond what they are (hyper, widths,
    seeds, data): ``depth`` hidden layers (required), ``out_dim`` outputs (1), ``options`` how
    the step runs (:class:`simulate.core.options.StepOptions`: compiled, chunked, the
    network's pass, the autograd path, learned noise; made by the caller and handed to the
    ``Trainer`` whole), ``device`` and ``dtype`` (None: the CPU; float32), ``init_from`` a
    start built by hand (``Trainer``; ``simulate.references.constructive``), else the random
    one."""

    depth: int
    out_dim: int = 1
    options: StepOptions = DEFAULT_OPTIONS
    device: object = None
    dtype: torch.dtype = torch.float32
    init_from: object = None


@dataclass(frozen=True)
class Fit:
    """How :func:`fit_trainer` trains: for ``steps`` steps or until ``rule`` (a
    :class:`simulate.core.stopping.StopRule`) stops each model, exactly one of the two;
    ``progress``: a progress callable; ``record_every``: the loss history's spacing (fixed
    budget); ``risk``: for a rule that watches the held-out risk, a function ``(trainer,
    params) -> [E]``; ``shadow``, ``resume``: a stricter rule kept beside ``rule``, models
    joining the run from an earlier one's state; ``race``: a race between candidates
    (``simulate.estimators.Halving``) (the last four ``Trainer.fit_until``'s)."""

    steps: int | None = None
    rule: object = None
    progress: object = None
    record_every: int = 0
    risk: object = None
    shadow: object = None
    resume: object = None
    race: object = None


_BUILD_NAMES = tuple(f.name for f in fields(Build))
_FIT_NAMES = tuple(f.name for f in fields(Fit))


def _by_name(func: str, by_name: dict, names: tuple) -> dict:
    """``by_name`` checked against ``names``: an unknown keyword is a ``TypeError`` naming it,
    as Python's own for a function's unknown keyword argument."""
    for name in by_name:
        if name not in names:
            raise TypeError(f"{func}() got an unexpected keyword argument {name!r}")
    return by_name


def build_trainer(hyper: Hyper, widths, seeds, X, y, data_index, build: Build | None = None,
                  **by_name) -> Trainer:  # fmt: skip
    """The first half of the recipe, ``Layout -> Batch -> Trainer``: one model per entry of
    ``widths`` (``build.depth`` hidden layers, padded together) on datasets ``X [D, n, p]``,
    ``y [D, n]`` (model e on dataset ``data_index[e]``) with their ``seeds``, untrained.
    The family's node scales (the horseshoe's) follow ``hyper.family``.  For drivers that step
    the trainer themselves (the benchmark, runs evaluated every few epochs).  How it is built
    comes as ``build`` (:class:`Build`) or by name, ``build_trainer(hyper, widths, seeds, X,
    y, data_index, depth=2, options=...)``, a name replacing that field of ``build``."""
    _by_name("build_trainer", by_name, _BUILD_NAMES)
    if build is None:
        build = Build(**by_name)
    elif by_name:
        build = replace(build, **by_name)
    layout = Layout(
        X.shape[2], build.depth, list(widths), build.out_dim,
        node_scales=family_of(hyper).node_scales,
    )  # fmt: skip
    batch = Batch(X, y, torch.as_tensor(data_index, dtype=torch.int64))
    return Trainer(
        layout,
        hyper,
        seeds,
        batch,
        options=build.options,
        device=build.device,
        dtype=build.dtype,
        init_from=build.init_from,
    )


# The learned noise's warm-up (:func:`fit_trainer`) ends when the objective's windowed
# improvement falls below this many times the rule's tolerance, once (it is there to fit the
# signal first, not to converge at the start value)
WARMUP_TOL_FACTOR = 4.0


def train_models(hyper: Hyper, widths, seeds, X, y, data_index, **by_name) -> Trained:
    """Train the models of :func:`build_trainer` for ``steps`` steps, or until ``rule`` stops
    each (:func:`fit_trainer`); the trainer, the posteriors and the stopping summary.
    ``by_name``: the fields of :class:`Fit` (``steps``, ``rule``, ``progress``,
    ``record_every``, ``risk``, ``shadow``, ``resume``, ``race``) and of :class:`Build`
    (``depth``, ``out_dim``, ``options``, ``device``, ``dtype``, ``init_from``), by name; an
    unknown name is a ``TypeError``."""
    _by_name("train_models", by_name, _FIT_NAMES + _BUILD_NAMES)
    fit = Fit(**{k: v for k, v in by_name.items() if k in _FIT_NAMES})
    if (fit.steps is None) == (fit.rule is None):
        raise ValueError("give either steps or a stopping rule")
    build = Build(**{k: v for k, v in by_name.items() if k in _BUILD_NAMES})
    tr = build_trainer(hyper, widths, seeds, X, y, data_index, build)
    conv = fit_trainer(tr, fit)
    return Trained(tr, tr.posterior(), conv)


def fit_trainer(tr: Trainer, fit: Fit) -> dict | None:
    """Train ``tr`` as ``fit`` says (:class:`Fit`): for ``fit.steps`` steps or until
    ``fit.rule`` stops each model; returns the stopping summary (None for a fixed budget).

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
    steps, rule, progress, record_every = fit.steps, fit.rule, fit.progress, fit.record_every
    risk, shadow, resume, race = fit.risk, fit.shadow, fit.resume, fit.race
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
