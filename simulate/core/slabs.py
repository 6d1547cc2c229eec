"""The slab of the spike-and-slab family, one class per slab (eq. (vbpost):
``q(theta_i) = nu_i M(theta_i) + (1 - nu_i) delta_0``; ``M`` is the slab).

Each slab says, from the first two rows of the variational parameters ``params [3, E, P]``
(location row and unconstrained scale row): how they map to its location and scale
(:meth:`location_scale`), how a draw is made from the stream's uniforms (:meth:`noise`: ``w =
loc + scale * noise``), its KL to the prior slab per edge (:meth:`kl_edge`, eq. (loss2)),
its initial parameters (:meth:`init`), and, for the hand-written step
(``simulate.core.step.spike_slab_step``), the draw and the closed-form derivatives of the draw
and of the KL with respect to the two rows (:meth:`draw_and_grads`).  Adding a slab is one
class here and its name in :data:`SLABS`.

* :class:`GaussianSlab` (default): ``M = N(mu, sigma^2)``, ``sigma = softplus(rho)`` (the
  paper's ``sigma' = log(exp(sigma) - 1)``), prior slab ``N(0, sigma_0^2)``.
* :class:`UniformSlab`: ``M = U(c - h, c + h)`` inside the prior slab ``U(-B0, B0)``:
  ``c = B0 tanh(a)``, ``h = (B0 - |c|) sigmoid(b)`` keeps the support inside [-B0, B0], as
  the theory requires (a variational support outside the prior's has infinite KL).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from simulate.core import rng

__all__ = ["SLABS", "GaussianSlab", "SlabDraw", "UniformSlab", "slab_of"]


class SlabDraw(NamedTuple):
    """One step's slab draws and derivatives (``[K, E, P]`` or ``[E, P]`` tensors).

    ``w``: the draws; ``kl``: the per-edge KL; ``g_loc_kl``, ``g_raw_kl``: d KL / d rows
    (times ``nu``, masked); ``dw_dloc`` (None: 1) and ``dw_draw``: d w / d rows."""

    w: torch.Tensor
    kl: torch.Tensor
    g_loc_kl: torch.Tensor
    g_raw_kl: torch.Tensor
    dw_dloc: torch.Tensor | None
    dw_draw: torch.Tensor


class GaussianSlab:
    """``N(mu, softplus(rho)^2)`` against the prior slab ``N(0, sigma_0^2)``."""

    @staticmethod
    def location_scale(params, hyper):
        """(location, scale): ``(mu, softplus(rho))``."""
        return params[0], torch.nn.functional.softplus(params[1])

    @staticmethod
    def noise(u: torch.Tensor) -> torch.Tensor:
        """Standard normals from the stream's uniforms."""
        return rng.uniform_to_normal(u)

    @staticmethod
    def kl_edge(loc, scale, hyper) -> torch.Tensor:
        """Eq. (loss2)'s Gaussian KL per edge."""
        s0 = hyper.sigma_0
        return math.log(s0) - torch.log(scale) + (scale**2 + loc**2) / (2 * s0**2) - 0.5

    @staticmethod
    def init(loc, hyper):
        """Rows from drawn locations ``loc``: every scale ``init_sigma``."""
        return loc, torch.full_like(loc, inverse_softplus(hyper.init_sigma))

    def draw_and_grads(self, loc, raw, eps, nu, mask, hyper) -> SlabDraw:
        scale = torch.nn.functional.softplus(raw)
        dscale = torch.sigmoid(raw)  # d softplus / d raw
        s0sq = hyper.sigma_0**2
        w = loc + scale * eps  # [K, E, P]
        g_loc_kl = nu * loc / s0sq * mask
        g_raw_kl = nu * (scale / s0sq - 1 / scale) * dscale * mask
        kl = self.kl_edge(loc, scale, hyper)
        return SlabDraw(w, kl, g_loc_kl, g_raw_kl, None, eps * dscale)


class UniformSlab:
    """``U(c - h, c + h)`` with ``c = B0 tanh(a)``, ``h = (B0 - |c|) sigmoid(b)``, against
    the prior slab ``U(-B0, B0)``."""

    @staticmethod
    def location_scale(params, hyper):
        """(centre, half-width)."""
        c = hyper.B0 * torch.tanh(params[0])
        return c, (hyper.B0 - c.abs()) * torch.sigmoid(params[1])

    @staticmethod
    def noise(u: torch.Tensor) -> torch.Tensor:
        """Uniforms on (-1, 1): ``w = c + h (2u - 1)``."""
        return 2 * u - 1

    @staticmethod
    def kl_edge(loc, scale, hyper) -> torch.Tensor:
        """``log(B0 / h)`` = KL(U(c-h, c+h) || U(-B0, B0)) per edge."""
        return math.log(hyper.B0) - torch.log(scale)

    @staticmethod
    def init(loc, hyper):
        """Rows from drawn centres ``loc``: half-width ``init_sigma`` (clamped to fit)."""
        a = torch.atanh(loc / hyper.B0)  # c = B0 tanh(a) = drawn centre
        c = hyper.B0 * torch.tanh(a)
        frac = torch.clamp(hyper.init_sigma / (hyper.B0 - c.abs()), 1e-6, 1 - 1e-6)
        return a, torch.log(frac / (1 - frac))  # h = (B0 - |c|) sigmoid(b)

    def draw_and_grads(self, loc, raw, eps, nu, mask, hyper) -> SlabDraw:
        B0 = hyper.B0
        th = torch.tanh(loc)
        c = B0 * th
        dc = B0 * (1 - th * th)
        sb = torch.sigmoid(raw)
        room = B0 - c.abs()
        scale = room * sb
        dh_dloc = -torch.sign(c) * dc * sb
        dh_draw = room * sb * (1 - sb)
        w = c + scale * eps
        g_loc_kl = -nu / scale * dh_dloc * mask
        g_raw_kl = -nu / scale * dh_draw * mask
        kl = self.kl_edge(c, scale, hyper)
        return SlabDraw(w, kl, g_loc_kl, g_raw_kl, dc + eps * dh_dloc, eps * dh_draw)


def inverse_softplus(x: float) -> float:
    """The raw value whose softplus is ``x``: ``log(exp(x) - 1)``."""
    return math.log(math.expm1(x))


SLABS = {"gaussian": GaussianSlab(), "uniform": UniformSlab()}


def slab_of(hyper):
    """The slab object named by ``hyper.slab``."""
    return SLABS[hyper.slab]
