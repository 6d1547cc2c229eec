"""The network pass of a posterior draw on its live units only: exact evaluation of sparse
draws (``Posterior.elbo``, ``test_metrics``, ``outputs``).

A posterior draw's indicators are exactly Bernoulli(nu) (``Posterior.draw``), so a trained
spike-and-slab network's draw has exact zeros on most of its edges: a width-256, depth-2
candidate at n = 512,000 keeps about 130 of its 66,000 edges (sum nu, the shipped
width-256 records), yet :meth:`simulate.core.layout.Layout.forward` multiplies every padded
``Wmax x Wmax`` block, which made the selection's full-data ELBO of a width-256 group
cost 8x its width-64 group's.  :func:`draw_pass` removes, per model, every hidden unit that
cannot change the output:

* a unit is *off* when its bias and every weight from an active unit below are exactly zero:
  its pre-activation is exactly 0, its ReLU output exactly 0;
* a unit is *not needed* when every weight from it to a needed unit above is exactly zero
  (the output units are needed).

A live unit is on and needed.  Every term the pass drops is an exact zero (``0 * h`` with
``h`` finite, or a weight times an exact 0 output), so the outputs are the dense pass's up to
the order in which the matrix product adds the remaining terms: float rounding (tested
against :meth:`Layout.forward` to 1e-12 relative in float64).  A draw with a non-finite entry
(a diverged model) takes the dense pass, so it is NaN where the dense pass is.  The compact
pass is taken only where it pays (:data:`PAYS_BELOW`, :data:`MIN_WIDTH`); else the dense one,
bit for bit."""

from __future__ import annotations

import torch

from simulate.core.layout import Layout

__all__ = ["MIN_WIDTH", "PAYS_BELOW", "draw_pass", "live_units"]

# the compact pass is taken when its multiply-adds are below this fraction of the dense
# pass's: one small product per model and layer costs tens of microseconds of Python and
# dispatch where the dense pass makes one batched product per layer
PAYS_BELOW = 0.25
# ... and only where the padded width is at least this: below it the dense pass is cheap and
# the per-model products' overhead dominates (measured at n = 512,000: a [4, 2] group's
# evaluation 0.3 s dense against 0.7 s compact; [16, 8] 0.7 against 0.6 s;
# python -m simulate.bench.ladder)
MIN_WIDTH = 16


def live_units(layout: Layout, theta_e: torch.Tensor) -> list[torch.Tensor]:
    """The live units of each hidden layer of one drawn network ``theta_e [P]`` (indices,
    ascending; module docstring): on (a nonzero bias, or a nonzero weight from a live unit
    below) and needed (a nonzero weight to a needed unit above)."""
    blocks = [layout.block(theta_e[None], l)[0] for l in range(layout.depth + 1)]
    on = torch.ones(layout.p, dtype=torch.bool, device=theta_e.device)  # the inputs
    ons = []
    for l in range(layout.depth):
        b = blocks[l]
        on = (b[:, :-1][:, on] != 0).any(1) | (b[:, -1] != 0)
        ons.append(on)
    need = torch.ones(layout.out_dim, dtype=torch.bool, device=theta_e.device)
    lives = [None] * layout.depth
    for l in reversed(range(layout.depth)):
        w_up = blocks[l + 1][:, :-1]  # [o_{l+1}, o_l]
        need = (w_up[need] != 0).any(0) & ons[l]
        lives[l] = torch.nonzero(need).flatten()
    return lives


def _compact_blocks(layout: Layout, theta_e: torch.Tensor, lives) -> list[torch.Tensor]:
    """Each layer's block restricted to the live units (rows; every output unit) and the
    live units below (columns; the bias column kept last)."""
    dev = theta_e.device
    out = []
    cols = torch.arange(layout.p + 1, device=dev)  # the inputs and the bias column
    for l in range(layout.depth + 1):
        b = layout.block(theta_e[None], l)[0]  # [o, i + 1]
        rows = lives[l] if l < layout.depth else torch.arange(b.shape[0], device=dev)
        out.append(b[rows][:, cols].contiguous())
        if l < layout.depth:  # the next block's bias column sits at index dims[l + 1]
            cols = torch.cat([lives[l], torch.tensor([layout.dims[l + 1]], device=dev)])
    return out


def _work(dims_io) -> int:
    return sum(o * (i + 1) for i, o in dims_io)


class _Compact:
    """One draw's compact networks, one per model: :meth:`__call__` is the pass."""

    def __init__(self, layout: Layout, theta: torch.Tensor, nets):
        self.layout, self.theta, self.nets = layout, theta, nets

    def __call__(self, x, x_aug=None, scratch=None) -> torch.Tensor:
        xa = Layout.augment(x) if x_aug is None else x_aug  # [B, m, p + 1]
        B, m = xa.shape[0], xa.shape[1]
        out = torch.empty(B, self.layout.out_dim, m, dtype=xa.dtype, device=xa.device)
        ones = torch.ones(m, 1, dtype=xa.dtype, device=xa.device)
        for e, blocks in enumerate(self.nets):
            h = xa[e]  # [m, in + 1], sample-major
            for l, blk in enumerate(blocks):
                z = h @ blk.T  # [m, live units]
                if l == len(blocks) - 1:
                    out[e] = z.T
                    break
                h = torch.cat([torch.clamp_min(z, 0), ones], dim=1)  # what torch.relu computes
        return out


def draw_pass(layout: Layout, theta: torch.Tensor):
    """The network pass of the drawn networks ``theta [B, P]``: a callable ``(x, x_aug,
    scratch) -> [B, out_dim, m]`` as :meth:`Layout.forward` is called, on the live units
    (:func:`live_units`) where every entry is finite, the padded width is at least
    :data:`MIN_WIDTH` and the live work is below :data:`PAYS_BELOW` of the padded pass's,
    else :meth:`Layout.forward` itself."""

    def dense(x, x_aug=None, scratch=None):
        return layout.forward(theta, x, x_aug, scratch)

    if layout.node_scales or layout.Wmax < MIN_WIDTH:
        return dense
    if not bool(torch.isfinite(theta[:, : layout.P_net]).all()):
        return dense
    nets, work = [], 0
    for e in range(theta.shape[0]):
        lives = live_units(layout, theta[e])
        k = [layout.p] + [int(v.numel()) for v in lives] + [layout.out_dim]
        work += _work(zip(k[:-1], k[1:], strict=True))
        nets.append(_compact_blocks(layout, theta[e], lives))
    dense_work = theta.shape[0] * _work(zip(layout.dims[:-1], layout.dims[1:], strict=True))
    if work >= PAYS_BELOW * dense_work:
        return dense
    return _Compact(layout, theta, nets)
