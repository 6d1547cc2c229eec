"""The optimisers of the core as ``(init, update)`` pairs over the variational parameters of
every model at once, elementwise (models stay independent).

``optimizer_of(hyper, donate)`` returns an :class:`Optimizer`:

* ``init(params) -> OptState``: zero moments shaped like ``params [3, E, P]``, no
  learning-rate multipliers;
* ``factors(t, dtype, device, lr_scale) -> Factors``: the step-t scalars (Adam's bias
  corrections), computed on the host in float64 and passed as tensors, so a compiled step is
  not re-specialised per step, the step size times ``lr_scale`` (``OptState.lr_scale``, of
  the models the step runs);
* ``schedule(t, S, E, lr_scale) -> (step_size [S, 3, E], corr2 [S])``: the factors of steps
  ``t .. t + S - 1`` at once, float32, each equal to :func:`factors`'s bit for bit (the
  step size per parameter row -- location, slab scale, inclusion logit -- and model), for
  the whole step in C's several steps per call;
* ``update(grad, opt_state, params, factors, alive) -> (params, opt_state)``: one step;
  ``alive`` ([E] bool or None) freezes the other models' parameters (their moments still
  decay with a zero gradient: the gradient of a held model is zeroed by the caller).

The step size is made here and only here: ``hyper.lr`` (and ``hyper.lr_inclusion``), the
bias correction, and the optimiser state's per-model multipliers ``OptState.lr_scale``,
which the plateau decay (:func:`lower_lr`, ``StopRule.lr_decays``) and held parameter rows
(:func:`scale_rows`) change -- pure updates of the state, each returning a new one.

``donate=True`` lets ``update`` overwrite ``params`` and ``opt_state`` in place and return
them (the eager step's form, like a donated buffer: the caller must not reuse the inputs);
``donate=False`` writes nothing in place (the form ``torch.compile`` traces).  Both compute
the same numbers (tested against ``torch.optim``).

* ``"adam"`` (Kingma & Ba): ``exp_avg = b1 exp_avg + (1 - b1) g``, ``exp_avg_sq = b2
  exp_avg_sq + (1 - b2) g^2``, ``params -= step_size exp_avg / (sqrt(exp_avg_sq corr2) +
  eps)`` with ``step_size = lr / (1 - b1^t)`` and ``corr2 = 1 / (1 - b2^t)``.
* ``"rmsprop"``: ``torch.optim.RMSprop``'s default form (no momentum, not centred, no bias
  correction): ``exp_avg_sq = alpha exp_avg_sq + (1 - alpha) g^2``, ``params -= lr g /
  (sqrt(exp_avg_sq) + eps)``; ``exp_avg`` stays zero, ``step_size`` is ``lr``, ``corr2`` 1.

Both use ``hyper.adam_eps`` as eps.  The moments are named as ``torch.optim`` names them
(``exp_avg``, ``exp_avg_sq``), not ``m``, which is the paper's minibatch size.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

__all__ = [
    "Factors",
    "OptState",
    "Optimizer",
    "lower_lr",
    "optimizer_of",
    "scale_rows",
    "with_lr_scale",
]


class OptState(NamedTuple):
    """The optimiser's state: its moments, each shaped like the parameters ``[3, E, P]``,
    and ``lr_scale [E, 3]``, each model's learning-rate multiplier per parameter row
    (location, slab scale, inclusion logit), or None: every model at ``hyper.lr``.  The
    update carries the multipliers through; they change only by :func:`with_lr_scale`,
    :func:`lower_lr` and :func:`scale_rows`, each a new tensor (never written in place)."""

    exp_avg: torch.Tensor
    exp_avg_sq: torch.Tensor
    lr_scale: torch.Tensor | None = None


class Factors(NamedTuple):
    """One step's scalars as 0-d tensors: the step size and the second moment's bias
    correction; ``kl_weight``, the KL warm-up's weight on the KL part's gradient
    (``Hyper.kl_warmup``; None: 1, no warm-up), set by the step
    (``simulate.core.training_step``)."""

    step_size: torch.Tensor
    corr2: torch.Tensor
    kl_weight: torch.Tensor | None = None


class Optimizer(NamedTuple):
    """An optimiser as functions (module docstring)."""

    init: Callable[[torch.Tensor], OptState]
    factors: Callable[[int], Factors]
    update: Callable
    schedule: Callable


def with_lr_scale(opt: OptState, E: int, dtype=torch.float32, device=None) -> OptState:
    """``opt`` with a learning-rate multiplier per model and parameter row (ones), where it
    has none; else ``opt``."""
    if opt.lr_scale is not None:
        return opt
    return opt._replace(lr_scale=torch.ones(E, 3, device=device, dtype=dtype))


def lower_lr(opt: OptState, models: torch.Tensor, factor: float) -> OptState:
    """The plateau decay (``StopRule.lr_decays``): the multipliers of ``models`` (bool
    ``[E]``) times ``factor``, the others' as they are (a new tensor)."""
    scale = opt.lr_scale
    lower = models.to(scale.device)[:, None]
    return opt._replace(lr_scale=torch.where(lower, scale * factor, scale))


def scale_rows(opt: OptState, rows: torch.Tensor) -> OptState:
    """Every model's multipliers times ``rows [3]`` (one per parameter row; 0 holds a row)."""
    return opt._replace(lr_scale=opt.lr_scale * rows)


def _scaled(step_size: torch.Tensor, lr_scale: torch.Tensor | None) -> torch.Tensor:
    """The step size (0-d, or ``[3, 1, 1]`` per parameter row) times each model's
    ``lr_scale [E, 3]``, shaped ``[3, E, 1]`` to broadcast over the parameters
    ``[3, E, P]``; unchanged for None."""
    return step_size if lr_scale is None else step_size * lr_scale.T[:, :, None]


def _rows(hyper, divisor: float) -> list:
    """:func:`_lr`'s step sizes of one step as three floats (location, slab scale,
    inclusion logit), from the same float64 expressions."""
    lr = hyper.lr / divisor
    return [lr, lr, lr if hyper.lr_inclusion is None else hyper.lr_inclusion / divisor]


def _schedule(rows: list, corr2: list, E: int, lr_scale: torch.Tensor | None):
    """The step sizes ``[S, 3, E]`` (each step's rows times the models' multipliers) and
    the second moment's corrections ``[S]``, float32."""
    step = torch.tensor(rows, dtype=torch.float32)[:, :, None]
    if lr_scale is not None:
        step = step * lr_scale.T
    return step.expand(len(rows), 3, E).contiguous(), torch.tensor(corr2, dtype=torch.float32)


def _zeros(params: torch.Tensor) -> OptState:
    return OptState(torch.zeros_like(params), torch.zeros_like(params))


def _apply(params, upd, alive, donate: bool):
    """``params - upd`` on the ``alive`` models (all when None)."""
    if donate:
        if alive is not None:
            upd = torch.where(alive[None, :, None], upd, torch.zeros_like(upd))
        return params.sub_(upd)
    if alive is None:
        return params - upd
    return torch.where(alive[None, :, None], params - upd, params)


def _lr(hyper, divisor: float, dtype, device) -> torch.Tensor:
    """The step size ``lr / divisor``: a 0-d tensor (computed as it always was, so the
    default's numbers do not move by an ulp), or with ``hyper.lr_inclusion`` set one per
    parameter row ``[3, 1, 1]`` (location, slab scale at ``lr``; the inclusion logits at
    ``lr_inclusion``)."""
    if hyper.lr_inclusion is None:
        return torch.tensor(hyper.lr / divisor, dtype=dtype, device=device)
    rows = [hyper.lr / divisor, hyper.lr / divisor, hyper.lr_inclusion / divisor]
    return torch.tensor(rows, dtype=dtype, device=device)[:, None, None]


def _adam(hyper, donate: bool) -> Optimizer:
    b1, b2 = hyper.betas
    eps = hyper.adam_eps

    def factors(t: int, dtype=torch.float32, device=None, lr_scale=None) -> Factors:
        return Factors(
            _scaled(_lr(hyper, 1 - b1**t, dtype, device), lr_scale),
            torch.tensor(1 / (1 - b2**t), dtype=dtype, device=device),
        )

    def update(grad, opt: OptState, params, f: Factors, alive=None):
        if donate:
            m = opt.exp_avg.mul_(b1).add_(grad, alpha=1 - b1)
            v = opt.exp_avg_sq.mul_(b2).addcmul_(grad, grad, value=1 - b2)
        else:
            m = b1 * opt.exp_avg + (1 - b1) * grad
            v = b2 * opt.exp_avg_sq + (1 - b2) * grad * grad
        upd = f.step_size * m / ((v * f.corr2).sqrt() + eps)
        return _apply(params, upd, alive, donate), OptState(m, v, opt.lr_scale)

    def schedule(t: int, S: int, E: int, lr_scale=None):
        ts = range(t, t + S)
        rows, corr2 = [_rows(hyper, 1 - b1**u) for u in ts], [1 / (1 - b2**u) for u in ts]
        return _schedule(rows, corr2, E, lr_scale)

    return Optimizer(_zeros, factors, update, schedule)


def _rmsprop(hyper, donate: bool) -> Optimizer:
    a = hyper.rmsprop_alpha
    eps = hyper.adam_eps

    def factors(t: int, dtype=torch.float32, device=None, lr_scale=None) -> Factors:
        return Factors(
            _scaled(_lr(hyper, 1.0, dtype, device), lr_scale),
            torch.tensor(1.0, dtype=dtype, device=device),
        )

    def update(grad, opt: OptState, params, f: Factors, alive=None):
        if donate:
            v = opt.exp_avg_sq.mul_(a).addcmul_(grad, grad, value=1 - a)
        else:
            v = a * opt.exp_avg_sq + (1 - a) * grad * grad
        upd = f.step_size * grad / (v.sqrt() + eps)
        return _apply(params, upd, alive, donate), OptState(opt.exp_avg, v, opt.lr_scale)

    def schedule(t: int, S: int, E: int, lr_scale=None):
        return _schedule([_rows(hyper, 1.0)] * S, [1.0] * S, E, lr_scale)

    return Optimizer(_zeros, factors, update, schedule)


OPTIMIZERS = {"adam": _adam, "rmsprop": _rmsprop}


def optimizer_of(hyper, donate: bool = False) -> Optimizer:
    """The optimiser ``hyper.optimizer`` (``"adam"`` or ``"rmsprop"``) as an
    :class:`Optimizer`; ``donate`` as in the module docstring."""
    return OPTIMIZERS[hyper.optimizer](hyper, donate)
