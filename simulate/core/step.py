"""The hand-written training steps, one per family, as pure functions of typed values.

A step kernel is ``kernel(spec, consts, params, opt, inputs, factors) -> (params, opt,
nonfinite, terms)``: ``spec`` (:class:`StepSpec`) the static setting (layout,
hyper-parameters, n, the optimiser, whether buffers may be reused), ``consts``
(:class:`Consts`) the models' fixed tensors (edge masks, edge counts), ``params`` and ``opt``
the variational parameters and the optimiser's moments (``simulate.core.state.State``),
``inputs`` the step's draws (:class:`simulate.core.sampler.Inputs`), ``factors`` the
optimiser's step-t scalars (:class:`simulate.core.optim.Factors`).  It returns the new
parameters and moments, which models' objective was not finite (``[E]`` bool) and the
terms (:class:`simulate.core.objective.ELBOTerms`).  A model held by ``inputs.held`` or not
finite at this step is not moved.  ``simulate.core.training_step`` wraps a kernel into the step over
``State`` (failures, step count) and compiles it.

* :func:`spike_slab_step` -- the paper's family with the paper's L3 (and Dense-BNN, the
  same step without indicators);
* :func:`horseshoe_step` -- HS-BNN.

Each is one graph without autograd: every gradient is written by hand (no host
synchronisation; under ``torch.compile`` a single graph), equal to autograd through the
family's ``draw`` and ``kl_terms`` (tested).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch

from simulate.core.families import kl_lognormal_halfcauchy, kl_normal
from simulate.core.hyper import Hyper
from simulate.core.layout import Layout, mlp_nll_and_grad
from simulate.core.native import fused_nll_and_grad
from simulate.core.objective import LOG2, ELBOTerms, family_of, l3_paper
from simulate.core.optim import Factors, Optimizer, OptState
from simulate.core.options import DEFAULT_OPTIONS
from simulate.core.sampler import Inputs
from simulate.core.slabs import SLABS, slab_of
from simulate.core.steppath import path_of


@dataclass(frozen=True)
class StepSpec:
    """The static setting of a step: ``n`` (the data size, for eq. (loss1)'s ``n / m``),
    the optimiser (``simulate.core.optim``), ``donate``: whether the step may overwrite its
    inputs' buffers (the eager step; ``False`` for the form ``torch.compile`` traces), and
    ``mlp``: the step path's name (``simulate.core.steppath``), whose ``fused_pass`` says
    how the network's pass is computed -- one batched product per layer over all models
    (:func:`simulate.core.layout.mlp_nll_and_grad`) or fused per model in C
    (:func:`simulate.core.native.fused_nll_and_grad`; equal to float rounding); the whole
    step in C runs no torch step (``simulate.core.training_step.NativeStep``)."""

    layout: Layout
    hyper: Hyper
    n: int
    optimizer: Optimizer
    donate: bool = False
    mlp: str = DEFAULT_OPTIONS.mlp


class Consts(NamedTuple):
    """The models' fixed tensors: ``mask [E, P]`` (1 on real slots), ``H [E]`` (real edges
    of the network), the horseshoe's ``node_index`` (None for the other families) and
    ``noise_sd [E]``, each model's Gaussian noise sd where it is learned (None: the known
    ``hyper.sigma``).  ``noise_sd`` is fixed within a step; the trainer rewrites its values
    in place between steps (``Trainer.update_noise``), which a compiled step reads as it
    reads any input.  ``widths [E]`` (int64): each model's hidden width, which the fused
    network pass (``StepSpec.mlp = "native"``) reads to skip the padding (None: unused).
    The learning-rate multipliers are the optimiser's state's
    (``simulate.core.optim.OptState.lr_scale``), made into the step size by the optimiser."""

    mask: torch.Tensor
    H: torch.Tensor
    node_index: tuple | None = None
    noise_sd: torch.Tensor | None = None
    widths: torch.Tensor | None = None

    def part(self, s: slice) -> Consts:
        """The constants of models ``s`` (a chunk of the batch)."""
        maybe = lambda t: None if t is None else t[s].contiguous()  # noqa: E731
        return Consts(self.mask[s].contiguous(), self.H[s].contiguous(), self.node_index,
                      maybe(self.noise_sd), maybe(self.widths))  # fmt: skip


def _update(spec: StepSpec, params, opt, grad, stopped, factors):
    """The optimiser's step on the models not ``stopped`` (their gradients zeroed, their
    parameters not moved)."""
    alive = ~stopped
    grad = torch.where(alive[None, :, None], grad, torch.zeros_like(grad))
    return spec.optimizer.update(grad, opt, params, factors, alive)


def repeat_draws(t, K: int):
    """A per-model tensor ``[E, ...]`` for the K draws' networks ``[K*E, ...]`` (network
    ``k E + e`` is model e's draw k); None stays None."""
    if t is None or K == 1:
        return t
    return t.repeat(K, *([1] * (t.dim() - 1)))


def _nll(spec: StepSpec, consts: Consts, theta, inputs: Inputs, K: int):
    """The K draws' minibatch negative log-likelihood and its gradient in ``theta``."""
    xb, yb = inputs.xb, inputs.yb
    args = (spec.layout, theta, repeat_draws(xb, K), repeat_draws(yb, K), spec.hyper)
    scale, sd = spec.n / (xb.shape[1] * K), repeat_draws(consts.noise_sd, K)
    if path_of(spec.mlp).fused_pass:
        return fused_nll_and_grad(*args, scale, sd, repeat_draws(consts.widths, K))
    return mlp_nll_and_grad(*args, scale, functional=not spec.donate, sd=sd)


def spike_slab_step(
    spec: StepSpec, consts: Consts, params, opt: OptState, inputs: Inputs, factors: Factors
):
    """One whole training step of the spike-and-slab family with the paper's L3, with every
    gradient written by hand (module docstring for the signature and the returns).

    ``inputs.noise [K, E, P]`` are the slab noises (standard normals for the Gaussian
    slab, uniforms on (-1, 1) for the uniform slab) and ``inputs.gumbel [K, E, P]`` the
    Gumbel-sigmoid uniforms of the K draws.
    The chain rule through the sampler (module docstring): ``theta = gamma_st w mask`` gives
    ``d theta / d w = gamma mask`` and ``d theta / d logit = w mask G (1 - G) / tau``;
    ``w = mu + softplus(rho) eps`` (Gaussian) or ``w = c + h eps`` with
    ``c = B0 tanh(a)``, ``h = (B0 - |c|) sigmoid(b)`` (uniform); L2 and L3 (eq. (loss2),
    eq. (loss3) as printed) are differentiated in closed form, with ``dS / d logit =
    nu (1 - nu) mask``.  Equal to autograd through :meth:`Trainer.loss_terms` (tested).

    Without indicators (``spec.hyper.family == "dense"``) it is the Dense-BNN family
    (``simulate.core.families.Dense``): every edge kept (``nu = gamma = 1``, ``inputs.gumbel``
    unused), the Gaussian slab's KL to ``N(0, sigma_0^2)`` as L2, ``L3 = 0`` and no gradient
    for the (unused) logits -- the same numbers as autograd through ``Dense.draw`` and
    ``Dense.kl_terms``, which draw the same normals from the same stream (tested).
    """
    hyper, mask = spec.hyper, consts.mask
    indicators = family_of(hyper).indicators
    eps, u = inputs.noise, inputs.gumbel
    K, E = eps.shape[0], params.shape[1]
    loc, raw, logit = params[0], params[1], params[2]
    nu = torch.sigmoid(logit) if indicators else torch.ones_like(logit)
    slab = slab_of(hyper) if indicators else SLABS["gaussian"]
    w, kl, g_loc_kl, g_raw_kl, dw_dloc, dw_draw = slab.draw_and_grads(
        loc, raw, eps, nu, mask, hyper
    )
    if indicators:
        G = torch.sigmoid((logit + torch.log(u) - torch.log1p(-u)) / hyper.tau)
        hard = (G > 0.5).to(params.dtype)
        theta = (hard * w * mask).reshape(K * E, -1)
    else:  # every edge kept: no indicator to multiply by
        theta = (w * mask).reshape(K * E, -1)
    nll, dtheta = _nll(spec, consts, theta, inputs, K)
    L1 = nll.reshape(K, E).mean(0) * (spec.n / inputs.xb.shape[1])
    L2 = (nu * kl * mask).sum(-1)
    if indicators:
        S, H = (nu * mask).sum(-1), consts.H
        L3 = l3_paper(S, H, hyper.lambda_s)
        dL3_dS = -0.5 / LOG2 * (1 / S - 1 / (H - S)) + hyper.lambda_s
    else:
        L3 = torch.zeros_like(L2)
    nonfinite = ~torch.isfinite(L1 + L2 + L3)
    if factors.kl_weight is not None:  # the KL warm-up (Hyper.kl_warmup)
        g_loc_kl, g_raw_kl = g_loc_kl * factors.kl_weight, g_raw_kl * factors.kl_weight
    gw = dtheta.reshape(K, E, -1) * mask  # d L1 / d w = d L1 / d theta * gamma (below)
    gwh = gw * hard if indicators else gw
    g_loc = (gwh if dw_dloc is None else gwh * dw_dloc).sum(0) + g_loc_kl
    g_raw = (gwh * dw_draw).sum(0) + g_raw_kl
    if indicators:
        dnu = nu * (1 - nu) * mask
        g_kl = (kl + dL3_dS[:, None]) * dnu
        if factors.kl_weight is not None:
            g_kl = g_kl * factors.kl_weight
        g_logit = (gw * w * G * (1 - G)).sum(0) / hyper.tau + g_kl
    else:
        g_logit = torch.zeros_like(logit)
    grad = torch.stack([g_loc, g_raw, g_logit])
    params, opt = _update(spec, params, opt, grad, inputs.held | nonfinite, factors)
    return params, opt, nonfinite, ELBOTerms(L1, L2, L3)


def _hs_slot_factors(layout: Layout, log_tau, log_ups, ones):
    """Each network slot's factor ``[K, E, P_net]`` of the horseshoe's draw: a weight's
    unit scale ``s = exp(log tau_j + log upsilon_l)``, a bias's 1, per layer's
    ``[out, in + 1]`` block (static slices)."""
    K, E = log_tau.shape[0], log_tau.shape[1]
    slot_factors, u0 = [], 0
    for l, (_, i, o) in enumerate(layout.blocks):
        s_l = torch.exp(log_tau[..., u0 : u0 + o] + log_ups[..., l : l + 1])
        f = torch.cat([s_l[..., None].expand(K, E, o, i), ones[..., None].expand(K, E, o, 1)], -1)
        slot_factors.append(f.reshape(K, E, o * (i + 1)))
        u0 += o
    return torch.cat(slot_factors, -1)  # [K, E, P_net]


def _hs_grad_z(layout: Layout, g, full, beta):
    """``d L1 / d z [K, E, P]`` from ``g = d L1 / d theta * mask``: ``g s`` on each
    ``beta``, each unit's ``sum_i g_i beta_i s_j`` over its weights (not its bias) on its
    ``log tau``, and their sum over the layer's units on its ``log upsilon``."""
    K, E = g.shape[0], g.shape[1]
    g_beta = g * full
    gbs = g_beta * beta  # d L1 / d log s of each weight's unit, per slot
    g_tau, g_ups = [], []
    for off, i, o in layout.blocks:
        per_unit = gbs[..., off : off + o * (i + 1)].reshape(K, E, o, i + 1)[..., :i].sum(-1)
        g_tau.append(per_unit)
        g_ups.append(per_unit.sum(-1, keepdim=True))
    return torch.cat([g_beta, *g_tau, *g_ups], -1)  # [K, E, P]


def _hs_prior_sd(layout: Layout, beta, sigma_0: float):
    """The Gaussian prior sd of each network slot, ``[1, P_net]``: 1 on weights,
    ``sigma_0`` on biases."""
    return torch.cat(
        [
            torch.cat(
                [
                    torch.ones_like(beta[0, :1, :1]).expand(o, i),
                    torch.full_like(beta[0, :1, :1], sigma_0).expand(o, 1),
                ],
                -1,
            ).reshape(1, -1)
            for (_, i, o) in layout.blocks
        ],
        -1,
    )  # [1, P_net]


class _HSKL(NamedTuple):
    """The horseshoe's L2 pieces' gradients in (location, sd) before masking the scales:
    the network slots' (already masked), the unit scales' and the layer scales', with the
    scales' masks."""

    g_mu_w: torch.Tensor
    g_sd_w: torch.Tensor
    gm_tau: torch.Tensor
    gs_tau: torch.Tensor
    gm_ups: torch.Tensor
    gs_ups: torch.Tensor
    m_tau_ups: torch.Tensor
    mask_ups: torch.Tensor


def _hs_kl(layout: Layout, hyper: Hyper, loc, sd, mask, beta):
    """``(L2 [E], pieces)``: the Gaussian KL of each ``beta`` (prior sd 1 on weights,
    ``sigma_0`` on biases) and the log-normal scales' KLs against their half-Cauchy priors,
    with their derivatives in closed form (:class:`_HSKL`)."""
    Pn, U = layout.P_net, layout.units
    mask_net = mask[:, :Pn]
    # the Gaussian KL of each beta (prior sd 1 on weights, sigma_0 on biases) ...
    prior_sd = _hs_prior_sd(layout, beta, hyper.sigma_0)
    prior_var = prior_sd * prior_sd
    mu_n, sd_n = loc[:, :Pn], sd[:, :Pn]
    kl_w = kl_normal(mu_n, sd_n, prior_sd)
    g_mu_w = mu_n / prior_var * mask_net
    g_sd_w = (sd_n / prior_var - 1 / sd_n) * mask_net
    # ... and the log-normal scales against their half-Cauchy priors
    m_tau, s_tau, m_tau_ups = loc[:, Pn : Pn + U], sd[:, Pn : Pn + U], mask[:, Pn : Pn + U]
    kl_tau, gm_tau, gs_tau = kl_lognormal_halfcauchy(m_tau, s_tau, hyper.hs_b0, grads=True)
    kl_ups, gm_ups, gs_ups = kl_lognormal_halfcauchy(
        loc[:, Pn + U :], sd[:, Pn + U :], hyper.hs_bg, grads=True
    )
    mask_ups = mask[:, Pn + U :]
    L2 = (kl_w * mask_net).sum(-1) + (kl_tau * m_tau_ups).sum(-1) + (kl_ups * mask_ups).sum(-1)
    return L2, _HSKL(g_mu_w, g_sd_w, gm_tau, gs_tau, gm_ups, gs_ups, m_tau_ups, mask_ups)


def _hs_kl_grads(kl: _HSKL, kl_weight):
    """L2's gradients in the locations and the sds, ``[E, P]`` each (times the KL
    warm-up's weight where there is one)."""
    g_mu_kl = torch.cat([kl.g_mu_w, kl.gm_tau * kl.m_tau_ups, kl.gm_ups * kl.mask_ups], -1)
    g_sd_kl = torch.cat([kl.g_sd_w, kl.gs_tau * kl.m_tau_ups, kl.gs_ups * kl.mask_ups], -1)
    if kl_weight is not None:  # the KL warm-up (Hyper.kl_warmup)
        g_mu_kl, g_sd_kl = g_mu_kl * kl_weight, g_sd_kl * kl_weight
    return g_mu_kl, g_sd_kl


def horseshoe_step(
    spec: StepSpec, consts: Consts, params, opt: OptState, inputs: Inputs, factors: Factors
):
    """One whole training step of the horseshoe family (HS-BNN, ``simulate.core.families.
    Horseshoe``) with every gradient written by hand; the same signature and returns as
    :func:`spike_slab_step` (``inputs.gumbel`` and ``consts.H`` unused; ``L3 = 0``).

    Every slot ``z = mu + softplus(rho) eps`` (standard normals ``eps [K, E, P]``: the
    network's ``beta`` in ``[:P_net]``, then one ``log tau`` per unit, one ``log upsilon``
    per layer); unit j of layer l has scale ``s = exp(log tau_j + log upsilon_l)`` and its
    weights are ``theta = beta s mask`` (biases ``beta mask``).  Chain rule, per draw:
    ``dL1/dbeta = g s``, ``dL1/dlog tau_j = sum_{i in unit j} g_i beta_i s_j`` (the unit's
    weights, not its bias) and ``dL1/dlog upsilon_l`` the sum of those over the layer's
    units, with ``g = dL1/dtheta * mask`` (:func:`_hs_grad_z`); then ``d/dmu = sum_k dz``,
    ``d/drho = sum_k dz eps sigmoid(rho)``.  L2's derivatives in closed form
    (:func:`_hs_kl`): the Gaussian KLs (prior ``N(0, 1)`` on weights, ``N(0, sigma_0^2)``
    on biases) and the log-normal to half-Cauchy KLs through their quadrature
    (``simulate.core.families.kl_lognormal_halfcauchy``).  Equal to autograd through
    ``Horseshoe.draw`` / ``Horseshoe.kl_terms`` (tested).  The unit sums use each layer's
    ``[out, in + 1]`` block (static slices, nothing gathered).
    """
    layout, hyper, mask, eps = spec.layout, spec.hyper, consts.mask, inputs.noise
    K, E = eps.shape[0], params.shape[1]
    Pn, U = layout.P_net, layout.units
    loc, raw = params[0], params[1]
    sd = torch.nn.functional.softplus(raw)
    dsd = torch.sigmoid(raw)
    z = loc + sd * eps  # [K, E, P]
    beta, log_tau, log_ups = z[..., :Pn], z[..., Pn : Pn + U], z[..., Pn + U :]
    ones = torch.ones_like(beta[..., :1])
    full = _hs_slot_factors(layout, log_tau, log_ups, ones)  # [K, E, P_net]
    mask_net = mask[:, :Pn]
    theta = (beta * full * mask_net).reshape(K * E, -1)
    nll, dtheta = _nll(spec, consts, theta, inputs, K)
    L1 = nll.reshape(K, E).mean(0) * (spec.n / inputs.xb.shape[1])
    g = dtheta.reshape(K, E, -1) * mask_net  # d L1 / d theta, real slots only
    g_z = _hs_grad_z(layout, g, full, beta)  # [K, E, P]
    L2, kl = _hs_kl(layout, hyper, loc, sd, mask, beta)
    L3 = torch.zeros_like(L2)
    nonfinite = ~torch.isfinite(L1 + L2)
    g_mu_kl, g_sd_kl = _hs_kl_grads(kl, factors.kl_weight)
    g_loc = g_z.sum(0) + g_mu_kl
    g_raw = ((g_z * eps).sum(0) + g_sd_kl) * dsd
    grad = torch.stack([g_loc, g_raw, torch.zeros_like(g_loc)])
    params, opt = _update(spec, params, opt, grad, inputs.held | nonfinite, factors)
    return params, opt, nonfinite, ELBOTerms(L1, L2, L3)
