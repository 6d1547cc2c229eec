"""Training state (:class:`State`), its initialisation, failure bookkeeping, and the data a
trainer holds (:class:`Batch`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from . import rng
from .hyper import Hyper
from .layout import Layout
from .objective import family_of
from .slabs import SLABS, inverse_softplus, slab_of


@dataclass
class State:
    """Everything a training step reads and writes (explicit, so runs can be resumed)."""

    var: torch.Tensor  # [3, E, P]: slab location, slab scale (raw), inclusion logit
    m: torch.Tensor  # Adam first moment, same shape
    v: torch.Tensor  # Adam second moment
    step: int
    epoch: int
    perm: torch.Tensor | None  # [E, n] current epoch's permutation
    failed: torch.Tensor  # [E] bool: model stopped on a non-finite loss
    failed_step: torch.Tensor  # [E] int64, -1 if not failed
    failed_terms: torch.Tensor  # [E] int64 bit mask of the non-finite terms: 1 L1, 2 L2, 4 L3
    frozen: torch.Tensor  # [E] bool: model stopped by a stopping rule, parameters fixed
    history: list = field(default_factory=list)


TERM_NAMES = ("L1", "L2", "L3")


def mark_failed(st: State, newly: torch.Tensor, L1, L2, L3) -> None:
    """Record the models that failed at this step (``newly``, [E] bool): ``failed``, the
    step (``failed_step``) and which terms were not finite (``failed_terms``, a bit mask
    over :data:`TERM_NAMES`, read by :func:`failed_term_names`).  Runs every step: the
    term mask (a dozen small ops, ~45 us, 5% of a compiled step on 2 cores) is built only
    when some model failed; on the CPU that check costs ~5 us, on a GPU it would cost a host
    synchronisation, so there the mask is built unconditionally."""
    st.failed_step = torch.where(newly, torch.full_like(st.failed_step, st.step), st.failed_step)
    st.failed = st.failed | newly
    if newly.device.type == "cpu" and not bool(newly.any()):
        return
    code = sum((~torch.isfinite(t)).to(torch.int64) << i for i, t in enumerate((L1, L2, L3)))
    st.failed_terms = torch.where(newly, code, st.failed_terms)


def failed_term_names(code: int) -> str | None:
    """``"L1+L3"`` for the bit mask of :func:`mark_failed`; None for 0 (not failed)."""
    names = [name for i, name in enumerate(TERM_NAMES) if int(code) >> i & 1]
    return "+".join(names) or None


def inclusion_logit(p: float) -> float:
    """The inclusion logit of an inclusion probability ``p``: ``log(p / (1 - p))``."""
    return math.log(p / (1 - p))


def init_state(layout: Layout, hyper: Hyper, seeds, device=None, dtype=torch.float32) -> State:
    """Initial variational parameters of each model from its own seed (counter-based)."""
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
    var = torch.stack([loc, scale_raw, torch.full_like(loc, inclusion_logit(hyper.init_nu))])
    E = layout.E
    return State(
        var=var,
        m=torch.zeros_like(var),
        v=torch.zeros_like(var),
        step=0,
        epoch=-1,
        perm=None,
        failed=torch.zeros(E, dtype=torch.bool, device=device),
        failed_step=torch.full((E,), -1, dtype=torch.int64, device=device),
        failed_terms=torch.zeros(E, dtype=torch.int64, device=device),
        frozen=torch.zeros(E, dtype=torch.bool, device=device),
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
