"""Training state (:class:`State`, :class:`Health`), its initialisation, failure
bookkeeping, and the data a trainer holds (:class:`Batch`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch

from simulate.core import rng
from simulate.core.hyper import Hyper
from simulate.core.layout import Layout
from simulate.core.objective import family_of
from simulate.core.optim import OptState, optimizer_of
from simulate.core.slabs import SLABS, inverse_softplus, slab_of


class Health(NamedTuple):
    """Which models failed (their objective turned non-finite), at which step, and on which
    terms; each ``[E]``.  A failed model is held: its parameters no longer move."""

    failed: torch.Tensor  # bool
    failed_step: torch.Tensor  # int64, -1 if not failed
    failed_terms: torch.Tensor  # int64 bit mask of the non-finite terms: 1 L1, 2 L2, 4 L3


class State(NamedTuple):
    """What one training step carries to the next: a step returns a new State (the
    eager step and the whole step in C write the new values into the buffers of the one
    they are given -- donated, ``simulate.core.optim`` -- so keep a ``.clone()`` of what you
    compare against later; the compiled step allocates new ones).

    ``params [3, E, P]``: the variational parameters (rows: slab location, raw slab scale,
    inclusion logit); ``opt``: the optimiser's state (:class:`simulate.core.optim.OptState`:
    its moments and the models' learning-rate multipliers, from which the optimiser alone
    makes the step size); ``count``: steps taken; ``health``: the failures
    (:class:`Health`).  The minibatch sampler's cache lives in the sampler, the stopping
    rule's held models and the loss history in the trainer's loop
    (``simulate.core.trainer``)."""

    params: torch.Tensor
    opt: OptState
    count: int
    health: Health


TERM_NAMES = ("L1", "L2", "L3")


def record_failures(health: Health, newly: torch.Tensor, terms, count: int) -> Health:
    """``health`` with the models that failed at step ``count`` (``newly``, [E] bool) added:
    ``failed``, the step (``failed_step``) and which terms were not finite
    (``failed_terms``, a bit mask over :data:`TERM_NAMES`, read by
    :func:`failed_term_names`).  Runs every step: the term mask (a dozen small ops, ~45 us,
    5% of a compiled step on 2 cores) is built only when some model failed; on the CPU that
    check costs ~5 us, on a GPU it would cost a host synchronisation, so there the mask is
    built unconditionally."""
    failed_step = torch.where(newly, torch.full_like(health.failed_step, count), health.failed_step)
    failed = health.failed | newly
    if newly.device.type == "cpu" and not bool(newly.any()):
        return Health(failed, failed_step, health.failed_terms)
    code = sum((~torch.isfinite(t)).to(torch.int64) << i for i, t in enumerate(terms))
    return Health(failed, failed_step, torch.where(newly, code, health.failed_terms))


def failed_term_names(code: int) -> str | None:
    """``"L1+L3"`` for the bit mask of :func:`record_failures`; None for 0 (not failed)."""
    names = [name for i, name in enumerate(TERM_NAMES) if int(code) >> i & 1]
    return "+".join(names) or None


def inclusion_logit(p: float) -> float:
    """The inclusion logit of an inclusion probability ``p``: ``log(p / (1 - p))``."""
    return math.log(p / (1 - p))


def init_state(layout: Layout, hyper: Hyper, seeds, device=None, dtype=torch.float32) -> State:
    """The state before the first step: each model's variational parameters from its own
    seed (counter-based), zero moments, no failures."""
    seeds = torch.as_tensor(seeds, dtype=torch.int64, device=device).reshape(-1)
    if seeds.numel() != layout.E:
        raise ValueError(f"need one seed per model ({layout.E}), got {seeds.numel()}")
    key = rng.seed_key(seeds, rng.STREAM_INIT)[:, None]
    u = rng.uniform(key, layout.counters(device), 0, dtype)
    loc = (2 * u - 1) * hyper.init_mu
    # the slab's rows (the families without indicators are Gaussian mean-field)
    slab = slab_of(hyper) if family_of(hyper).indicators else SLABS["gaussian"]
    loc, scale_raw = slab.init(loc, hyper)
    if layout.node_scales:  # horseshoe scales: log tau ~ N(0, 0.1^2), tau near 1
        loc[:, layout.P_net :] = 0.0
        scale_raw[:, layout.P_net :] = inverse_softplus(0.1)
    params = torch.stack([loc, scale_raw, torch.full_like(loc, inclusion_logit(hyper.init_nu))])
    return State(params, optimizer_of(hyper).init(params), 0, healthy(layout.E, device))


def healthy(E: int, device=None) -> Health:
    """No model failed."""
    return Health(
        torch.zeros(E, dtype=torch.bool, device=device),
        torch.full((E,), -1, dtype=torch.int64, device=device),
        torch.zeros(E, dtype=torch.int64, device=device),
    )


@dataclass
class Batch:
    """Training data shared by the models.

    ``X [D, n, p]`` and ``y [D, n]`` hold D datasets of the same size n (float targets for the
    Gaussian likelihood, int64 labels for the categorical); model e trains on dataset
    ``data_index[e]``.
    """

    X: torch.Tensor
    y: torch.Tensor
    data_index: torch.Tensor  # [E] int64

    @property
    def n(self) -> int:
        return self.X.shape[1]


def widen(narrow: Layout, params: torch.Tensor, wide: Layout, start: torch.Tensor) -> torch.Tensor:
    """Width continuation: variational parameters ``[3, E, wide.P]`` for models of
    ``wide``'s widths started from trained narrower ones (``params [3, E, narrow.P]``, model
    e of width ``narrow.widths[e] <= wide.widths[e]``), the new units near zero.

    ``start`` (``[3, E, wide.P]``, e.g. :func:`init_state`'s random start) supplies every
    slot the narrow model does not have; the narrow model's slots (weights and biases of
    its units, all three rows: location, slab scale, inclusion logit) are copied over it;
    then the locations of the weights *out of* the new units (the next layer's inputs from
    them) are set to 0, so the widened network computes the narrow one's function in mean
    while its new units' incoming weights start random and can grow (their edges keep the
    start's inclusion probability and slab sd).  Spike-and-slab layouts only (no node
    scales)."""
    if narrow.node_scales or wide.node_scales:
        raise ValueError("width continuation is for layouts without node scales")
    if (narrow.p, narrow.depth, narrow.out_dim) != (wide.p, wide.depth, wide.out_dim):
        raise ValueError("the two layouts must share p, depth and out_dim")
    if narrow.E != wide.E or any(a > b for a, b in zip(narrow.widths, wide.widths, strict=True)):
        raise ValueError(f"need one model each, narrow <= wide: {narrow.widths}, {wide.widths}")
    if tuple(params.shape[:2]) != (3, narrow.E) or tuple(start.shape) != (3, wide.E, wide.P):
        raise ValueError("params must be [3, E, narrow.P] and start [3, E, wide.P]")
    out = start.clone()
    for e, (wn, ww) in enumerate(zip(narrow.widths, wide.widths, strict=True)):
        rn = [narrow.p] + [wn] * narrow.depth + [narrow.out_dim]
        rw = [wide.p] + [ww] * wide.depth + [wide.out_dim]
        for l, ((on, i_n, o_n), (ow, i_w, o_w)) in enumerate(
            zip(narrow.blocks, wide.blocks, strict=True)
        ):
            src = params[:, e, on : on + o_n * (i_n + 1)].reshape(3, o_n, i_n + 1)
            dst = out[:, e, ow : ow + o_w * (i_w + 1)].reshape(3, o_w, i_w + 1)
            dst[:, : rn[l + 1], : rn[l]] = src[:, : rn[l + 1], : rn[l]]
            dst[:, : rn[l + 1], i_w] = src[:, : rn[l + 1], i_n]
            if l > 0:  # weights out of the new units of layer l - 1: mean 0
                dst[0, : rw[l + 1], rn[l] : rw[l]] = 0.0
            out[:, e, ow : ow + o_w * (i_w + 1)] = dst.reshape(3, -1)
    return out
