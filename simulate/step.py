"""One training step of every model: Adam (:func:`adam_update`) and the hand-written
spike-and-slab step (:func:`spike_slab_step`, one graph without autograd)."""

from __future__ import annotations

import torch

from .hyper import Hyper
from .layout import Layout, mlp_nll_and_grad
from .objective import _LOG2, l3_paper
from .slabs import SLABS, slab_of


def adam_update(var, m, v, grad, step_size, corr2, b1: float, b2: float, eps: float, alive=None):
    """One Adam step (Kingma & Ba), in place on ``var, m, v``; elementwise, so models stay
    independent.  ``step_size = lr / (1 - b1^t)`` and ``corr2 = 1 / (1 - b2^t)`` are tensors
    so a compiled version is not re-specialised every step.  ``alive`` ([E] bool, optional)
    freezes the other models entirely (their momentum would otherwise keep moving them)."""
    m.mul_(b1).add_(grad, alpha=1 - b1)
    v.mul_(b2).addcmul_(grad, grad, value=1 - b2)
    upd = step_size * m / ((v * corr2).sqrt() + eps)
    if alive is not None:
        upd = torch.where(alive[None, :, None], upd, torch.zeros_like(upd))
    var.sub_(upd)


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
    alive = ~failed
    grad = torch.where(alive[None, :, None], grad, torch.zeros_like(grad))
    b1, b2 = hyper.betas
    if functional:
        m = b1 * m + (1 - b1) * grad
        v = b2 * v + (1 - b2) * grad * grad
        upd = step_size * m / ((v * corr2).sqrt() + hyper.adam_eps)
        var = torch.where(alive[None, :, None], var - upd, var)
    else:
        adam_update(var, m, v, grad, step_size, corr2, b1, b2, hyper.adam_eps, alive)
    return var, m, v, failed, L1, L2, L3
