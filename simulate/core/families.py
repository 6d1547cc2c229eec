"""Variational families beside the spike-and-slab one: the paper's baselines.

* ``dense`` -- Dense-BNN (Bayes by Backprop, Blundell et al. 2015): fully connected,
  Gaussian mean-field ``q(w) = N(mu, sigma^2)`` for every weight and bias, prior
  ``N(0, sigma_0^2)``; L2 is the closed-form KL, there is no L3.
* ``horseshoe`` -- HS-BNN (Ghosh, Yao and Doshi-Velez): a horseshoe prior on node
  pre-activations.  The weights into unit j of layer l are ``w = beta * tau_lj * upsilon_l``
  with ``beta ~ N(0, 1)``, ``tau_lj ~ C+(0, b_0)`` (one scale per unit, shrinking the unit's
  whole pre-activation) and ``upsilon_l ~ C+(0, b_g)`` (one per layer); biases are not
  shrunk (``N(0, sigma_0^2)``).  Variational family: Gaussian mean-field on beta and the
  biases, log-normal ``q(tau) = LogNormal(m, s^2)`` on every scale (the non-centred,
  log-normal family Ghosh et al. use).  KL of a log-normal to a half-Cauchy:
  ``E_q log q = -m - log s - log(2 pi)/2 - 1/2`` exactly and
  ``E_q log p = log(2 / (pi b)) - E_q log(1 + tau^2 / b^2)``, the last expectation by
  20-point Gauss-Hermite quadrature (deterministic, so the ELBO needs no extra noise).
  Defaults ``b_0 = 1`` and ``b_g = 1e-5`` follow Ghosh et al.  Their inverse-gamma
  auxiliary parametrisation of the half-Cauchy with closed-form updates is not used:
  everything here is trained by the same stochastic gradient as SVI.

Both are trained by the batched core (``simulate.core.Trainer`` with
``Hyper(family=...)``); posterior draws, predictions and summaries work unchanged.  Their
edge count is every edge (no indicators).  Each family is one class (:class:`Dense`,
:class:`Horseshoe`; the spike-and-slab one is ``simulate.core.objective.SpikeSlab``) with the
same few members: ``noise`` (a stream's uniforms to the family's standardised noise),
``draw`` (a network from that noise), ``kl_terms`` and the flags ``indicators``, ``node_scales``,
``hand_written_step``; ``simulate.core.objective.family_of`` picks one by name.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from simulate.core import rng

__all__ = ["FAMILIES", "Dense", "Horseshoe", "kl_lognormal_halfcauchy", "kl_normal"]

FAMILIES = ("spike_slab", "dense", "horseshoe")

_GH_X, _GH_W = np.polynomial.hermite_e.hermegauss(20)  # probabilists' Hermite
_GH_W = _GH_W / math.sqrt(2 * math.pi)


def _gaussian_draw(params, z):
    """``mu + softplus(rho) z`` for every slot ``[E, P]`` (weights, biases, log-scales)."""
    return params[0] + torch.nn.functional.softplus(params[1]) * z


def _normals(hyper, u):
    """The families without indicators draw every slot from normals (whatever the slab):
    standard normals from a stream's uniforms ``u``."""
    return rng.uniform_to_normal(u)


def kl_normal(mu, sd, s0):
    """KL(N(mu, sd^2) || N(0, s0^2)) elementwise; ``s0`` a number or a tensor."""
    log_s0 = math.log(s0) if isinstance(s0, (int, float)) else torch.log(s0)
    return log_s0 - torch.log(sd) + (sd**2 + mu**2) / (2 * s0**2) - 0.5


def kl_lognormal_halfcauchy(m, s, b, grads: bool = False):
    """KL(LogNormal(m, s^2) || C+(0, b)), elementwise (module docstring); with ``grads``
    also its derivatives in m and s, in closed form through the same quadrature:
    ``d/dm = -1 + sum_k w_k 2 sigmoid(z_k)`` and ``d/ds = -1/s + sum_k w_k 2 x_k
    sigmoid(z_k)`` with ``z_k = 2 (m + s x_k) - 2 log b`` (for the hand-written horseshoe
    step, ``simulate.core.step.horseshoe_step``)."""
    x = torch.as_tensor(_GH_X, dtype=m.dtype, device=m.device)
    w = torch.as_tensor(_GH_W, dtype=m.dtype, device=m.device)
    z = 2 * (m.unsqueeze(-1) + s.unsqueeze(-1) * x) - 2 * math.log(b)  # [..., 20]
    e_log1p = (torch.nn.functional.softplus(z) * w).sum(-1)
    e_log_q = -m - torch.log(s) - 0.5 * math.log(2 * math.pi) - 0.5
    e_log_p = math.log(2 / (math.pi * b)) - e_log1p
    kl = e_log_q - e_log_p
    if not grads:
        return kl
    sw = torch.sigmoid(z) * (2 * w)
    return kl, sw.sum(-1) - 1, (sw * x).sum(-1) - 1 / s


class Dense:
    """Dense-BNN: Gaussian mean-field on every weight and bias, prior ``N(0, sigma_0^2)``.
    Trained by the hand-written step without indicators (``simulate.core.step.spike_slab_step``
    with ``indicators=False``); ``draw`` and ``kl_terms`` serve the autograd path,
    posterior draws and the ELBO."""

    indicators, node_scales, hand_written_step = False, False, True

    noise = staticmethod(_normals)

    @staticmethod
    def draw(params, hyper, layout, mask, noise, u=None, hard_only=False, node_index=None):
        """One network per model ``[E, P_net]`` for standard normals ``noise [E, P]``."""
        Pn = layout.P_net
        return _gaussian_draw(params, noise)[:, :Pn] * mask[:, :Pn]

    @staticmethod
    def kl_terms(params, hyper, layout, mask, H, node_index=None):
        """(L2, L3): the closed-form Gaussian KL; no indicators, so L3 = 0."""
        mu, sd = params[0], torch.nn.functional.softplus(params[1])
        Pn = layout.P_net
        L2 = (kl_normal(mu[:, :Pn], sd[:, :Pn], hyper.sigma_0) * mask[:, :Pn]).sum(-1)
        return L2, torch.zeros_like(L2)


class Horseshoe:
    """HS-BNN: ``w = beta tau_lj upsilon_l`` with log-normal q on the scales (module
    docstring); biases ``N(0, sigma_0^2)``, not shrunk.  Trained by the hand-written
    horseshoe step (``simulate.core.step.horseshoe_step``); ``draw`` and ``kl_terms`` serve the
    autograd path, posterior draws and the ELBO."""

    indicators, node_scales, hand_written_step = False, True, True

    noise = staticmethod(_normals)

    @staticmethod
    def draw(params, hyper, layout, mask, noise, u=None, hard_only=False, node_index=None):
        """One network per model ``[E, P_net]`` for standard normals ``noise [E, P]``: each
        unit's weights times its scale."""
        draw = _gaussian_draw(params, noise)  # [E, P]
        Pn = layout.P_net
        slot_unit, unit_layer = node_index
        log_scale = draw[:, Pn:]
        tau = torch.exp(log_scale[:, : layout.units])
        ups = torch.exp(log_scale[:, layout.units :])
        unit_scale = tau * ups[:, unit_layer]
        full = torch.cat([unit_scale, torch.ones_like(unit_scale[:, :1])], dim=1)
        return draw[:, :Pn] * full[:, slot_unit] * mask[:, :Pn]

    @staticmethod
    def kl_terms(params, hyper, layout, mask, H, node_index=None):
        """(L2, L3): Gaussian KLs of beta and the biases plus the scales' log-normal to
        half-Cauchy KLs; L3 = 0."""
        mu, sd = params[0], torch.nn.functional.softplus(params[1])
        Pn = layout.P_net
        slot_unit, _ = node_index
        is_bias = (slot_unit == layout.units)[None, :]
        kl_w = torch.where(
            is_bias,
            kl_normal(mu[:, :Pn], sd[:, :Pn], hyper.sigma_0),
            kl_normal(mu[:, :Pn], sd[:, :Pn], 1.0),
        )
        U = layout.units
        kl_tau = kl_lognormal_halfcauchy(mu[:, Pn : Pn + U], sd[:, Pn : Pn + U], hyper.hs_b0)
        kl_ups = kl_lognormal_halfcauchy(mu[:, Pn + U :], sd[:, Pn + U :], hyper.hs_bg)
        L2 = (
            (kl_w * mask[:, :Pn]).sum(-1)
            + (kl_tau * mask[:, Pn : Pn + U]).sum(-1)
            + (kl_ups * mask[:, Pn + U :]).sum(-1)
        )
        return L2, torch.zeros_like(L2)
