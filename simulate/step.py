"""One training step of every model: the optimiser (:func:`optimizer_update`: Adam or
RMSprop), the hand-written
spike-and-slab step (:func:`spike_slab_step`, also Dense-BNN's) and the hand-written
horseshoe step (:func:`horseshoe_step`), each one graph without autograd."""

from __future__ import annotations

import torch

from .families import _kl_lognormal_halfcauchy, _kl_normal
from .hyper import Hyper
from .layout import Layout, mlp_nll_and_grad
from .objective import _LOG2, l3_paper
from .slabs import SLABS, slab_of


def optimizer_update(
    hyper: Hyper, var, m, v, grad, step_size, corr2, alive=None, functional: bool = False
):
    """One step of the optimiser ``hyper.optimizer`` on every model, elementwise (models
    stay independent); returns ``(var, m, v)``, updated in place unless ``functional`` (the
    form ``torch.compile`` traces).

    * ``"adam"`` (Kingma & Ba): ``m = b1 m + (1 - b1) g``, ``v = b2 v + (1 - b2) g^2``,
      ``var -= step_size m / (sqrt(v corr2) + eps)`` with ``step_size = lr / (1 - b1^t)``
      and ``corr2 = 1 / (1 - b2^t)`` (:func:`simulate.paths.optimizer_factors`).
    * ``"rmsprop"``: ``torch.optim.RMSprop``'s default form (no momentum, not centred, no
      bias correction): ``v = alpha v + (1 - alpha) g^2``, ``var -= lr g / (sqrt(v) +
      eps)``; ``m`` is left alone, ``step_size`` is ``lr`` and ``corr2`` unused.

    Both use ``hyper.adam_eps`` as eps.  ``alive`` ([E] bool, optional) freezes the other
    models' parameters (their moments still decay with a zero gradient)."""
    eps = hyper.adam_eps
    if hyper.optimizer == "rmsprop":
        a = hyper.rmsprop_alpha
        v = (
            a * v + (1 - a) * grad * grad
            if functional
            else v.mul_(a).addcmul_(grad, grad, value=1 - a)
        )
        upd = step_size * grad / (v.sqrt() + eps)
    else:
        b1, b2 = hyper.betas
        if functional:
            m = b1 * m + (1 - b1) * grad
            v = b2 * v + (1 - b2) * grad * grad
        else:
            m.mul_(b1).add_(grad, alpha=1 - b1)
            v.mul_(b2).addcmul_(grad, grad, value=1 - b2)
        upd = step_size * m / ((v * corr2).sqrt() + eps)
    if functional:
        var = var - upd if alive is None else torch.where(alive[None, :, None], var - upd, var)
    else:
        if alive is not None:
            upd = torch.where(alive[None, :, None], upd, torch.zeros_like(upd))
        var.sub_(upd)
    return var, m, v


def spike_slab_step(
    layout: Layout,
    hyper: Hyper,
    n: int,
    var,
    m,
    v,
    failed,
    mask,
    H,
    xb,
    yb,
    eps,
    u,
    step_size,
    corr2,
    functional: bool = False,
    indicators: bool = True,
):
    """One whole training step of the spike-and-slab family with the paper's L3, with every
    gradient written by hand: no autograd graph, no host synchronisation, and under
    ``torch.compile`` a single graph.  Returns ``(var, m, v, failed, L1, L2, L3)``.

    ``eps [K, E, P]`` are the slab noises (:func:`slab_noise`: standard normals for the
    Gaussian slab, uniforms on (-1, 1) for the uniform slab) and ``u [K, E, P]`` the
    Gumbel-sigmoid uniforms of the K draws.
    The chain rule through the sampler (module docstring): ``theta = gamma_st w mask`` gives
    ``d theta / d w = gamma mask`` and ``d theta / d logit = w mask G (1 - G) / tau``;
    ``w = mu + softplus(rho) eps`` (Gaussian) or ``w = c + h eps`` with
    ``c = B0 tanh(a)``, ``h = (B0 - |c|) sigmoid(b)`` (uniform); L2 and L3 (eq. (loss2),
    eq. (loss3) as printed) are differentiated in closed form, with ``dS / d logit =
    nu (1 - nu) mask``.  Equal to autograd through :meth:`Trainer.loss_terms` (tested).

    Failure handling as in :meth:`Trainer.step`: a model whose total is not finite joins
    ``failed``; a failed model's gradient is zeroed and its parameters are not moved.
    ``functional=True`` writes nothing in place (the form ``torch.compile`` traces); the
    eager form updates ``var, m, v`` in place and returns them.

    ``indicators=False`` is the Dense-BNN family (``simulate.families.Dense``): every edge
    kept (``nu = gamma = 1``, ``u`` unused), the Gaussian slab's KL to ``N(0, sigma_0^2)``
    as L2, ``L3 = 0`` and no gradient for the (unused) logits -- the same numbers as
    autograd through ``Dense.draw`` and ``Dense.kl_terms``, which draw the same normals
    from the same stream (tested).
    """
    K, E = eps.shape[0], var.shape[1]
    loc, raw, logit = var[0], var[1], var[2]
    nu = torch.sigmoid(logit) if indicators else torch.ones_like(logit)
    slab = slab_of(hyper) if indicators else SLABS["gaussian"]
    w, kl, g_loc_kl, g_raw_kl, dw_dloc, dw_draw = slab.draw_and_grads(
        loc, raw, eps, nu, mask, hyper
    )
    if indicators:
        G = torch.sigmoid((logit + torch.log(u) - torch.log1p(-u)) / hyper.tau)
        hard = (G > 0.5).to(var.dtype)
        theta = (hard * w * mask).reshape(K * E, -1)
    else:  # every edge kept: no indicator to multiply by
        theta = (w * mask).reshape(K * E, -1)
    mb = xb.shape[1]
    nll, dtheta = mlp_nll_and_grad(
        layout,
        theta,
        xb.repeat(K, 1, 1) if K > 1 else xb,
        yb.repeat(K, 1) if K > 1 else yb,
        hyper,
        scale=n / (mb * K),
        functional=functional,
    )
    L1 = nll.reshape(K, E).mean(0) * (n / mb)
    L2 = (nu * kl * mask).sum(-1)
    if indicators:
        S = (nu * mask).sum(-1)
        L3 = l3_paper(S, H, hyper.lambda_s)
        dL3_dS = -0.5 / _LOG2 * (1 / S - 1 / (H - S)) + hyper.lambda_s
    else:
        L3 = torch.zeros_like(L2)
    failed = failed | ~torch.isfinite(L1 + L2 + L3)
    gw = dtheta.reshape(K, E, -1) * mask  # d L1 / d w = d L1 / d theta * gamma (below)
    gwh = gw * hard if indicators else gw
    g_loc = (gwh if dw_dloc is None else gwh * dw_dloc).sum(0) + g_loc_kl
    g_raw = (gwh * dw_draw).sum(0) + g_raw_kl
    if indicators:
        dnu = nu * (1 - nu) * mask
        g_logit = (gw * w * G * (1 - G)).sum(0) / hyper.tau + (kl + dL3_dS[:, None]) * dnu
    else:
        g_logit = torch.zeros_like(logit)
    grad = torch.stack([g_loc, g_raw, g_logit])
    var, m, v = _update_alive(hyper, var, m, v, grad, failed, step_size, corr2, functional)
    return var, m, v, failed, L1, L2, L3


def _update_alive(hyper, var, m, v, grad, failed, step_size, corr2, functional):
    """The optimiser's step on the models not ``failed`` (their gradients zeroed, their
    parameters not moved)."""
    alive = ~failed
    grad = torch.where(alive[None, :, None], grad, torch.zeros_like(grad))
    return optimizer_update(hyper, var, m, v, grad, step_size, corr2, alive, functional)


def horseshoe_step(
    layout: Layout,
    hyper: Hyper,
    n: int,
    var,
    m,
    v,
    failed,
    mask,
    H,
    xb,
    yb,
    eps,
    u,
    step_size,
    corr2,
    functional: bool = False,
):
    """One whole training step of the horseshoe family (HS-BNN, ``simulate.families.
    Horseshoe``) with every gradient written by hand; the same signature and returns as
    :func:`spike_slab_step` (``u`` unused; ``H`` unused; ``L3 = 0``).

    Every slot ``z = mu + softplus(rho) eps`` (standard normals ``eps [K, E, P]``: the
    network's ``beta`` in ``[:P_net]``, then one ``log tau`` per unit, one ``log upsilon``
    per layer); unit j of layer l has scale ``s = exp(log tau_j + log upsilon_l)`` and its
    weights are ``theta = beta s mask`` (biases ``beta mask``).  Chain rule, per draw:
    ``dL1/dbeta = g s``, ``dL1/dlog tau_j = sum_{i in unit j} g_i beta_i s_j`` (the unit's
    weights, not its bias) and ``dL1/dlog upsilon_l`` the sum of those over the layer's
    units, with ``g = dL1/dtheta * mask``; then ``d/dmu = sum_k dz``, ``d/drho = sum_k dz eps
    sigmoid(rho)``.  L2's derivatives in closed form: the Gaussian KLs (prior ``N(0, 1)``
    on weights, ``N(0, sigma_0^2)`` on biases) and the log-normal to half-Cauchy KLs
    through their quadrature (``simulate.families._kl_lognormal_halfcauchy``).  Equal to
    autograd through ``Horseshoe.draw`` / ``Horseshoe.kl_terms`` (tested).  The unit sums
    use each layer's ``[out, in + 1]`` block (static slices, nothing gathered).
    """
    K, E = eps.shape[0], var.shape[1]
    Pn, U = layout.P_net, layout.units
    loc, raw = var[0], var[1]
    sd = torch.nn.functional.softplus(raw)
    dsd = torch.sigmoid(raw)
    z = loc + sd * eps  # [K, E, P]
    beta, log_tau, log_ups = z[..., :Pn], z[..., Pn : Pn + U], z[..., Pn + U :]
    ones = torch.ones_like(beta[..., :1])
    # per layer: the units' scales [K, E, o] and the slots' factors [K, E, o * (in + 1)]
    scales, factors, u0 = [], [], 0
    for l, (_, i, o) in enumerate(layout.blocks):
        s_l = torch.exp(log_tau[..., u0 : u0 + o] + log_ups[..., l : l + 1])
        scales.append(s_l)
        f = torch.cat([s_l[..., None].expand(K, E, o, i), ones[..., None].expand(K, E, o, 1)], -1)
        factors.append(f.reshape(K, E, o * (i + 1)))
        u0 += o
    full = torch.cat(factors, -1)  # [K, E, P_net]
    mask_net = mask[:, :Pn]
    theta = (beta * full * mask_net).reshape(K * E, -1)
    mb = xb.shape[1]
    nll, dtheta = mlp_nll_and_grad(
        layout,
        theta,
        xb.repeat(K, 1, 1) if K > 1 else xb,
        yb.repeat(K, 1) if K > 1 else yb,
        hyper,
        scale=n / (mb * K),
        functional=functional,
    )
    L1 = nll.reshape(K, E).mean(0) * (n / mb)
    g = dtheta.reshape(K, E, -1) * mask_net  # d L1 / d theta, real slots only
    g_beta = g * full
    gbs = g_beta * beta  # d L1 / d log s of each weight's unit, per slot
    g_tau, g_ups = [], []
    for off, i, o in layout.blocks:
        per_unit = gbs[..., off : off + o * (i + 1)].reshape(K, E, o, i + 1)[..., :i].sum(-1)
        g_tau.append(per_unit)
        g_ups.append(per_unit.sum(-1, keepdim=True))
    g_z = torch.cat([g_beta, *g_tau, *g_ups], -1)  # [K, E, P]
    # L2: Gaussian KL of each beta (prior sd 1 on weights, sigma_0 on biases) ...
    prior_sd = torch.cat(
        [
            torch.cat(
                [
                    torch.ones_like(beta[0, :1, :1]).expand(o, i),
                    torch.full_like(beta[0, :1, :1], hyper.sigma_0).expand(o, 1),
                ],
                -1,
            ).reshape(1, -1)
            for (_, i, o) in layout.blocks
        ],
        -1,
    )  # [1, P_net]
    prior_var = prior_sd * prior_sd
    mu_n, sd_n = loc[:, :Pn], sd[:, :Pn]
    kl_w = _kl_normal(mu_n, sd_n, prior_sd)
    g_mu_w = mu_n / prior_var * mask_net
    g_sd_w = (sd_n / prior_var - 1 / sd_n) * mask_net
    # ... and the log-normal scales against their half-Cauchy priors
    m_tau, s_tau, m_tau_ups = loc[:, Pn : Pn + U], sd[:, Pn : Pn + U], mask[:, Pn : Pn + U]
    kl_tau, gm_tau, gs_tau = _kl_lognormal_halfcauchy(m_tau, s_tau, hyper.hs_b0, grads=True)
    kl_ups, gm_ups, gs_ups = _kl_lognormal_halfcauchy(
        loc[:, Pn + U :], sd[:, Pn + U :], hyper.hs_bg, grads=True
    )
    mask_ups = mask[:, Pn + U :]
    L2 = (kl_w * mask_net).sum(-1) + (kl_tau * m_tau_ups).sum(-1) + (kl_ups * mask_ups).sum(-1)
    L3 = torch.zeros_like(L2)
    failed = failed | ~torch.isfinite(L1 + L2)
    g_mu_kl = torch.cat([g_mu_w, gm_tau * m_tau_ups, gm_ups * mask_ups], -1)
    g_sd_kl = torch.cat([g_sd_w, gs_tau * m_tau_ups, gs_ups * mask_ups], -1)
    g_loc = g_z.sum(0) + g_mu_kl
    g_raw = ((g_z * eps).sum(0) + g_sd_kl) * dsd
    grad = torch.stack([g_loc, g_raw, torch.zeros_like(g_loc)])
    var, m, v = _update_alive(hyper, var, m, v, grad, failed, step_size, corr2, functional)
    return var, m, v, failed, L1, L2, L3
