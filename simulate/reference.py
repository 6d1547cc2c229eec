"""A textbook single-model ASVI trainer: the benchmark's reference loop, not the toolkit's core.

What someone writing the paper's algorithm for one network at a time would write in plain
PyTorch (the way the predecessor paper's public code is organised): per layer a weight matrix
and a bias vector of variational parameters as ``torch.nn.Parameter``, noise from a stateful
``torch.Generator``, the loss of eq. (el) built as an autograd graph, ``backward()`` and
``torch.optim.Adam``.  ``python -m simulate.bench`` times a Python loop over E such models
beside the batched core, so the speed-up of the core over this style of code is measured
rather than assumed.

It is the same model and the same loss as :class:`simulate.core.Trainer` for one spike-and-
slab network with a Gaussian slab, the Gaussian likelihood and the paper's L3 (the formulas
are the core's own: :func:`simulate.core.kl_slab_edge`, :func:`simulate.core.l3_paper`,
:func:`simulate.core.neg_log_lik`); given the same parameters and the same noise its loss
terms and gradients equal the core's (tested).  Only its random numbers differ (a
``torch.Generator`` instead of the core's counter-based streams), so its runs are not
comparable draw for draw, and it is never used for results.
"""

from __future__ import annotations

import torch

from .core import Hyper, inclusion_logit, inverse_softplus, kl_slab_edge, l3_paper, neg_log_lik

__all__ = ["ReferenceASVI"]


class ReferenceASVI:
    """One spike-and-slab ReLU network ``p -> width^depth -> 1``, trained by autograd.

    ``X [n, p]``, ``y [n]`` float tensors (their dtype is the model's); ``seed`` seeds the
    model's own generator.
    Parameters are initialised as in :func:`simulate.core.init_state` (``mu ~ U(-init_mu,
    init_mu)``, slab sd ``init_sigma``, ``nu = init_nu``).
    """

    def __init__(self, p: int, depth: int, width: int, hyper: Hyper, X, y, seed: int = 0):
        hyper.validate()
        if hyper.slab != "gaussian" or hyper.likelihood != "gaussian" or hyper.l3 != "paper":
            raise ValueError("the reference covers the Gaussian slab, likelihood and paper L3")
        if X.ndim != 2 or X.shape[1] != p or y.shape != X.shape[:1]:
            raise ValueError(f"X must be [n, {p}] and y [n], got {tuple(X.shape)}, {y.shape}")
        if X.shape[0] < hyper.batch_size:
            raise ValueError(f"batch_size ({hyper.batch_size}) must be <= n ({X.shape[0]})")
        self.h, self.X, self.y = hyper, X, y
        self.gen = torch.Generator().manual_seed(int(seed))
        dims = [p] + [width] * depth + [1]
        raw0, logit0 = inverse_softplus(hyper.init_sigma), inclusion_logit(hyper.init_nu)
        self.layers = []  # two per layer: (mu, rho, logit) of W [out, in], then of b [out]
        for i, o in zip(dims[:-1], dims[1:], strict=True):
            for shape in ((o, i), (o,)):
                mu = (torch.rand(shape, generator=self.gen, dtype=X.dtype) * 2 - 1) * hyper.init_mu
                self.layers.append(
                    tuple(
                        torch.nn.Parameter(t)
                        for t in (mu, torch.full_like(mu, raw0), torch.full_like(mu, logit0))
                    )
                )
        self.H = sum(mu.numel() for mu, _, _ in self.layers)
        self.opt = torch.optim.Adam(
            [t for group in self.layers for t in group],
            lr=hyper.lr,
            betas=hyper.betas,
            eps=hyper.adam_eps,
        )

    def noise(self):
        """One draw's noise: per parameter tensor, (standard normal eps, uniform u)."""
        return [
            (
                torch.randn(mu.shape, generator=self.gen, dtype=mu.dtype),
                torch.rand(mu.shape, generator=self.gen, dtype=mu.dtype).clamp(1e-7, 1 - 1e-7),
            )
            for mu, _, _ in self.layers
        ]

    def loss_terms(self, xb, yb, noise):
        """(L1, L2, L3) of eq. (el) for minibatch ``xb [m, p]``, ``yb [m]`` and ``noise`` as
        from :meth:`noise` (one draw, K = 1), as autograd graphs."""
        h = self.h
        thetas = []
        for (mu, rho, logit), (eps, u) in zip(self.layers, noise, strict=True):
            w = mu + torch.nn.functional.softplus(rho) * eps
            G = torch.sigmoid((logit + torch.log(u) - torch.log1p(-u)) / h.tau)
            gamma = (G > 0.5).to(w.dtype) + G - G.detach()  # hard forward, relaxed backward
            thetas.append(gamma * w)
        a = xb
        for k in range(0, len(thetas), 2):
            a = a @ thetas[k].T + thetas[k + 1]
            if k + 2 < len(thetas):
                a = torch.relu(a)
        m = xb.shape[0]
        L1 = neg_log_lik(a.T[None], yb[None], h).sum() * (self.X.shape[0] / m)
        L2 = 0.0
        S = 0.0
        for mu, rho, logit in self.layers:
            nu = torch.sigmoid(logit)
            L2 = L2 + (nu * kl_slab_edge(mu, torch.nn.functional.softplus(rho), h)).sum()
            S = S + nu.sum()
        L3 = l3_paper(S, torch.tensor(float(self.H)), h.lambda_s)
        return L1, L2, L3

    def step(self):
        """One Adam step on a fresh minibatch (i.i.d. indices) and a fresh draw."""
        idx = torch.randint(0, self.X.shape[0], (self.h.batch_size,), generator=self.gen)
        L1, L2, L3 = self.loss_terms(self.X[idx], self.y[idx], self.noise())
        total = L1 + L2 + L3
        self.opt.zero_grad(set_to_none=True)
        total.backward()
        self.opt.step()
        return float(total.detach())
