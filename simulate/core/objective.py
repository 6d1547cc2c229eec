"""The ELBO's pieces: sampling networks from q, the slab and indicator KL terms (L2, L3) and
the likelihood (L1), per model (eqs. (loss1)-(loss3); see ``simulate.core``)."""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from simulate.core.families import Dense, Horseshoe
from simulate.core.hyper import Hyper
from simulate.core.layout import Layout, neg_log_lik
from simulate.core.slabs import slab_of

LOG2 = math.log(2.0)  # the paper's L3 takes log base 2 (l3_paper); the hand-written step too


class ELBOTerms(NamedTuple):
    """The negative ELBO of every model as its three named terms (eq. (el), the objective
    Algorithm 1 minimises), each ``[E]``: ``L1`` the (minibatch estimate of the) expected
    negative log-likelihood (eq. (loss1)), ``L2`` the slabs' KL (eq. (loss2)), ``L3`` the
    indicators' KL (eq. (loss3), as printed or exact).  Every step path returns them, the
    plain-autograd loss (``Trainer.loss_terms``) too."""

    L1: torch.Tensor
    L2: torch.Tensor
    L3: torch.Tensor

    @property
    def kl(self) -> torch.Tensor:
        """``L2 + L3``: the KL part (no minibatch noise; the stopping rule watches it)."""
        return self.L2 + self.L3

    @property
    def total(self) -> torch.Tensor:
        """``L1 + L2 + L3``: the negative ELBO."""
        return self.L1 + self.L2 + self.L3

    def as_dict(self) -> dict:
        """``{"L1", "L2", "L3", "total"}``."""
        return {"L1": self.L1, "L2": self.L2, "L3": self.L3, "total": self.total}


def slab_params(params: torch.Tensor, hyper: Hyper):
    """(location, scale, nu): Gaussian (mu, sigma, nu) or uniform (centre, half-width, nu)
    (``simulate.core.slabs``)."""
    loc, scale = slab_of(hyper).location_scale(params, hyper)
    return loc, scale, torch.sigmoid(params[2])


def sample_theta(params, hyper: Hyper, mask, noise, u, hard_only=False):
    """One network per model: ``theta [E, P]`` with hard indicators forward and the relaxed
    Gumbel-sigmoid backward (module docstring); padding is zeroed by ``mask``.  ``noise``
    is the slab's standardised noise (:meth:`SpikeSlab.noise`) and ``u`` the
    Gumbel-sigmoid uniforms, each ``[E, P]``."""
    loc, scale, _ = slab_params(params, hyper)
    w = loc + scale * noise
    G = torch.sigmoid((params[2] + torch.log(u) - torch.log1p(-u)) / hyper.tau)
    hard = (G > 0.5).to(params.dtype)
    gamma = hard if hard_only else hard + G - G.detach()
    return gamma * w * mask


def kl_slab_edge(loc, scale, hyper: Hyper) -> torch.Tensor:
    """``KL(slab_i || prior slab)`` per edge: eq. (loss2)'s Gaussian term, or
    ``log(B0 / h)`` = KL(U(c-h, c+h) || U(-B0, B0)) for the uniform slab."""
    return slab_of(hyper).kl_edge(loc, scale, hyper)


def l3_paper(S: torch.Tensor, H: torch.Tensor, lambda_s: float) -> torch.Tensor:
    """Eq. (loss3) as printed, log2 included: ``-0.5 log2(2 pi e S (H - S)/H) + lambda_s S``."""
    return -0.5 * torch.log(2 * math.pi * math.e * S * (H - S) / H) / LOG2 + lambda_s * S


def kl_slab(params, hyper: Hyper, mask) -> torch.Tensor:
    """L2 per model: ``sum_i nu_i KL(slab_i || prior slab)`` over real edges (eq. (loss2))."""
    loc, scale, nu = slab_params(params, hyper)
    return (nu * kl_slab_edge(loc, scale, hyper) * mask).sum(-1)


class ModelSpec(NamedTuple):
    """The models an objective is of: ``hyper`` (the family and its hyper-parameters),
    ``layout``, ``mask [E, P]`` (1 on real slots), ``H [E]`` (real edges per model; the
    KL terms only, None where unused) and ``node_index`` (the horseshoe's unit index; None
    for the other families) -- the static setting with ``Consts``'s tensors."""

    hyper: Hyper
    layout: Layout
    mask: torch.Tensor
    H: torch.Tensor | None = None
    node_index: tuple | None = None


def draw_network(params, model: ModelSpec, eps, gumbel, offset, hard_only=False):
    """One network per model, ``[E, P_net]``, from the variational family of ``model``
    (:class:`ModelSpec`; ``H`` unused), with draw number ``offset`` of the models' streams
    ``eps`` (the family's noise, ``family.noise``) and ``gumbel`` (the indicators'
    uniforms; families with indicators only)."""
    hyper = model.hyper
    fam = family_of(hyper)
    noise = fam.noise(hyper, eps.uniform(offset, params.dtype))
    u = gumbel.uniform(offset, params.dtype) if fam.indicators else None
    return fam.draw(params, hyper, model.layout, model.mask, noise, u, hard_only,
                    model.node_index)  # fmt: skip


def kl_terms(params, hyper: Hyper, layout: Layout, mask, H, node_index=None):
    """(L2, L3) per model for the model's family (L3 = 0 without indicators)."""
    return family_of(hyper).kl_terms(params, hyper, layout, mask, H, node_index)


def reference_terms(params, model: ModelSpec, xb, yb, noise, gumbel, n: int, sd=None) -> ELBOTerms:
    """The objective's one reference definition, plain and slow, that every fast path is
    tested against (``tests/simulate/core/test_objective_reference.py``: the hand-written
    kernels eager and compiled, the autograd path, the fused C pass, ``Posterior.elbo``).

    For each draw k of the K in ``noise [K, E, P]`` (the family's standardised noise) and
    ``gumbel [K, E, P]`` (the indicators' uniforms; None without indicators): the network
    ``theta_k = family.draw(params, noise[k], gumbel[k])`` (for the spike-and-slab, hard
    indicators forward, the relaxed ones backward), its outputs by the autograd-able
    forward pass (:meth:`Layout.forward`) on the minibatch ``xb [E, m, p + 1]`` (last
    column ones, dropped here), ``yb [E, m]``; then

    * ``L1 = (n / m) (1 / K) sum_k sum_i -log p(y_i | f_theta_k(x_i))`` (eq. (loss1); at
      each model's noise sd ``sd [E]``, else ``hyper.sigma``),
    * ``(L2, L3)`` = the family's KL terms (eqs. (loss2), (loss3); :func:`kl_terms`, whose
      values are checked against closed forms and Monte Carlo on their own).

    Gradients are autograd's through it.  ``model`` (:class:`ModelSpec`): the
    hyper-parameters, the layout, its padding mask, edges per model and unit index."""
    hyper, layout, mask, H, node_index = model
    fam, K, m = family_of(hyper), noise.shape[0], xb.shape[1]
    x = xb[..., :-1]
    nll = 0
    for k in range(K):
        u = None if gumbel is None else gumbel[k]
        theta = fam.draw(params, hyper, layout, mask, noise[k], u, False, node_index)
        nll = nll + neg_log_lik(layout.forward(theta, x), yb, hyper, sd).sum(-1)
    L2, L3 = kl_terms(params, hyper, layout, mask, H, node_index)
    return ELBOTerms(nll / K * (n / m), L2, L3)


def _poisson_binomial_pmf(nu: torch.Tensor, mask: torch.Tensor, H: int) -> torch.Tensor:
    """Exact pmf of Gamma = sum of Bernoulli(nu_i) over masked entries, ``[E, H+1]``, via the
    characteristic function on the (H+1)-point grid (differentiable)."""
    t = torch.arange(H + 1, device=nu.device, dtype=nu.dtype)
    w = 2 * math.pi * t / (H + 1)
    z = torch.polar(torch.ones_like(w), w)  # e^{i w}
    nu_c = (nu * mask).to(torch.complex128 if nu.dtype == torch.float64 else torch.complex64)
    terms = 1 - nu_c[:, :, None] + nu_c[:, :, None] * z[None, None, :]  # [E, P, H+1]
    phi = torch.exp(torch.log(terms).sum(1))  # [E, H+1]
    pmf = torch.fft.fft(phi, dim=-1).real / (H + 1)
    return pmf.clamp_min(0)


def kl_indicator(params, hyper: Hyper, mask, H_per_model: torch.Tensor) -> torch.Tensor:
    """L3 per model: the paper's approximation (default) or the exact KL (module docstring)."""
    nu = torch.sigmoid(params[2])
    S = (nu * mask).sum(-1)
    H = H_per_model
    if hyper.l3 == "paper":
        return l3_paper(S, H, hyper.lambda_s)
    # exact KL of the product-Bernoulli q(gamma) to pi(gamma | N)
    neg_ent = (mask * (nu * torch.log(nu) + (1 - nu) * torch.log1p(-nu))).sum(-1)
    Hmax = int(H.max().item())
    pmf = _poisson_binomial_pmf(nu, mask, Hmax)
    t = torch.arange(Hmax + 1, device=nu.device, dtype=nu.dtype)
    log_binom = (
        torch.lgamma(H[:, None] + 1)
        - torch.lgamma(t + 1)
        - torch.lgamma((H[:, None] - t).clamp_min(0) + 1)
    )
    log_binom = torch.where(t[None, :] <= H[:, None], log_binom, torch.zeros_like(log_binom))
    e_log_binom = (pmf * log_binom).sum(-1)
    ls = hyper.lambda_s
    log_c1 = math.log(-math.expm1(-ls)) - torch.log(-torch.expm1(-ls * (H + 1)))
    return neg_ent + ls * S + e_log_binom - log_c1


class SpikeSlab:
    """The paper's family (eq. (vbpost)): a slab (``simulate.core.slabs``) or zero per edge,
    with inclusion probabilities nu; the only one with indicators, and with the
    hand-written step (``simulate.core.step.spike_slab_step``, for the paper's L3)."""

    indicators, node_scales, hand_written_step = True, False, True

    @staticmethod
    def noise(hyper, u):
        """The slab's standardised noise from a stream's uniforms ``u`` (``simulate.core.slabs``:
        normals for the Gaussian slab, uniforms on (-1, 1) for the uniform one)."""
        return slab_of(hyper).noise(u)

    @staticmethod
    def draw(params, hyper, layout, mask, noise, u, hard_only=False, node_index=None):
        return sample_theta(params, hyper, mask, noise, u, hard_only)

    @staticmethod
    def kl_terms(params, hyper, layout, mask, H, node_index=None):
        return kl_slab(params, hyper, mask), kl_indicator(params, hyper, mask, H)


FAMILY = {"spike_slab": SpikeSlab(), "dense": Dense(), "horseshoe": Horseshoe()}


def family_of(hyper):
    """The variational family object named by ``hyper.family``."""
    return FAMILY[hyper.family]
