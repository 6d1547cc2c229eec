"""A textbook single-model ASVI trainer: the benchmark's per-model baseline, not the toolkit's core.

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
from torch.func import functional_call, stack_module_state

from simulate.core import (
    Hyper,
    inclusion_logit,
    inverse_softplus,
    kl_slab_edge,
    l3_paper,
    neg_log_lik,
)

__all__ = ["TextbookASVI", "SpikeSlabMLP", "VmapEnsemble", "spike_slab_terms"]


def spike_slab_terms(layers, xb, yb, noise, h: Hyper, n: int, H: int):
    """(L1, L2, L3) of eq. (el), K = 1, of one spike-and-slab network written plainly:
    ``layers`` alternates a weight ``[out, in]`` and a bias ``[out]``, each as its
    (mu, rho, logit) tensors; ``noise`` gives each its (standard normal eps, uniform u);
    ``n`` training points, ``H`` parameters.  The Gumbel-softmax indicator is hard forward,
    relaxed backward (the core's choice); the formulas are the core's own functions."""
    thetas = []
    for (mu, rho, logit), (eps, u) in zip(layers, noise, strict=True):
        w = mu + torch.nn.functional.softplus(rho) * eps
        G = torch.sigmoid((logit + torch.log(u) - torch.log1p(-u)) / h.tau)
        gamma = (G > 0.5).to(w.dtype) + G - G.detach()  # hard forward, relaxed backward
        thetas.append(gamma * w)
    a = xb
    for k in range(0, len(thetas), 2):
        a = a @ thetas[k].T + thetas[k + 1]
        if k + 2 < len(thetas):
            a = torch.relu(a)
    L1 = neg_log_lik(a.T[None], yb[None], h).sum() * (n / xb.shape[0])
    L2 = 0.0
    S = 0.0
    for mu, rho, logit in layers:
        nu = torch.sigmoid(logit)
        L2 = L2 + (nu * kl_slab_edge(mu, torch.nn.functional.softplus(rho), h)).sum()
        S = S + nu.sum()
    L3 = l3_paper(S, torch.tensor(float(H), dtype=xb.dtype), h.lambda_s)
    return L1, L2, L3


def _init_layers(p, depth, width, hyper: Hyper, gen, dtype):
    """Per weight and bias tensor, initial (mu, rho, logit) as in ``simulate.core``'s
    ``init_state``: ``mu ~ U(-init_mu, init_mu)``, slab sd ``init_sigma``, ``nu = init_nu``."""
    dims = [p] + [width] * depth + [1]
    raw0, logit0 = inverse_softplus(hyper.init_sigma), inclusion_logit(hyper.init_nu)
    out = []
    for i, o in zip(dims[:-1], dims[1:], strict=True):
        for shape in ((o, i), (o,)):
            mu = (torch.rand(shape, generator=gen, dtype=dtype) * 2 - 1) * hyper.init_mu
            out.append((mu, torch.full_like(mu, raw0), torch.full_like(mu, logit0)))
    return out


class TextbookASVI:
    """One spike-and-slab ReLU network ``p -> width^depth -> 1``, trained by autograd.

    ``X [n, p]``, ``y [n]`` float tensors (their dtype is the model's); ``seed`` seeds the
    model's own generator.
    Parameters are initialised as in :func:`simulate.core.init_state` (``mu ~ U(-init_mu,
    init_mu)``, slab sd ``init_sigma``, ``nu = init_nu``).
    """

    def __init__(self, p: int, depth: int, width: int, hyper: Hyper, X, y, seed: int = 0):
        if hyper.slab != "gaussian" or hyper.likelihood != "gaussian" or hyper.l3 != "paper":
            raise ValueError(
                "the textbook trainer covers the Gaussian slab, likelihood and paper L3"
            )
        if X.ndim != 2 or X.shape[1] != p or y.shape != X.shape[:1]:
            raise ValueError(f"X must be [n, {p}] and y [n], got {tuple(X.shape)}, {y.shape}")
        if X.shape[0] < hyper.batch_size:
            raise ValueError(f"batch_size ({hyper.batch_size}) must be <= n ({X.shape[0]})")
        self.h, self.X, self.y = hyper, X, y
        self.gen = torch.Generator().manual_seed(int(seed))
        # two per layer: (mu, rho, logit) of W [out, in], then of b [out]
        self.layers = [
            tuple(torch.nn.Parameter(t) for t in group)
            for group in _init_layers(p, depth, width, hyper, self.gen, X.dtype)
        ]
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
        return spike_slab_terms(self.layers, xb, yb, noise, self.h, self.X.shape[0], self.H)

    def step(self):
        """One Adam step on a fresh minibatch (i.i.d. indices) and a fresh draw."""
        idx = torch.randint(0, self.X.shape[0], (self.h.batch_size,), generator=self.gen)
        L1, L2, L3 = self.loss_terms(self.X[idx], self.y[idx], self.noise())
        total = L1 + L2 + L3
        self.opt.zero_grad(set_to_none=True)
        total.backward()
        self.opt.step()
        return float(total.detach())


class SpikeSlabMLP(torch.nn.Module):
    """One spike-and-slab network ``p -> width^depth -> 1`` as an ``nn.Module`` whose
    ``forward(xb, yb, noise)`` returns ``[L1, L2, L3]`` (:func:`spike_slab_terms`): the form
    PyTorch's model-ensembling recipe stacks.  ``n``: training points (L1's scale)."""

    def __init__(self, p, depth, width, hyper: Hyper, n: int, seed: int = 0, dtype=None):
        super().__init__()
        self.h, self.n = hyper, int(n)
        gen = torch.Generator().manual_seed(int(seed))
        groups = _init_layers(p, depth, width, hyper, gen, dtype or torch.get_default_dtype())
        self.mu = torch.nn.ParameterList([g[0] for g in groups])
        self.rho = torch.nn.ParameterList([g[1] for g in groups])
        self.logit = torch.nn.ParameterList([g[2] for g in groups])
        self.H = sum(m.numel() for m in self.mu)

    def forward(self, xb, yb, noise):
        layers = list(zip(self.mu, self.rho, self.logit, strict=True))
        return torch.stack(spike_slab_terms(layers, xb, yb, noise, self.h, self.n, self.H))


class VmapEnsemble:
    """E spike-and-slab networks of one width trained the way the PyTorch "model ensembling"
    recipe does it: the E modules' parameters stacked by ``torch.func.stack_module_state``,
    the loss of all E by ``torch.vmap`` over ``torch.func.functional_call`` (each model its
    own minibatch and noise), one ``backward`` and ``torch.optim.Adam`` on the stacked
    tensors (Adam is elementwise, so this is E independent Adams).  The benchmark's
    baseline for what a PyTorch user would write to train many small models at once;
    tested to give the core's loss terms and gradients for the same parameters and noise.
    Its noise comes from a ``torch.Generator``, so it is never used for results."""

    def __init__(self, p, depth, width, hyper: Hyper, X, y, seeds):

        if X.ndim != 2 or X.shape[1] != p or y.shape != X.shape[:1]:
            raise ValueError(f"X must be [n, {p}] and y [n], got {tuple(X.shape)}, {y.shape}")
        self.h, self.X, self.y, self.E = hyper, X, y, len(seeds)
        models = [SpikeSlabMLP(p, depth, width, hyper, X.shape[0], s, X.dtype) for s in seeds]
        self.params, self.buffers = stack_module_state(models)
        base = models[0].to("meta")

        def terms(params, buffers, xb, yb, noise):
            return functional_call(base, (params, buffers), (xb, yb, noise))

        self._terms = torch.vmap(terms)
        self.gen = torch.Generator().manual_seed(int(seeds[0]))
        self.opt = torch.optim.Adam(
            list(self.params.values()), lr=hyper.lr, betas=hyper.betas, eps=hyper.adam_eps
        )

    def noise(self):
        """One draw per model: per parameter tensor, ``(eps, u)`` of shape ``[E, *shape]``."""
        out = []
        for i in range(sum(k.startswith("mu.") for k in self.params)):
            mu = self.params[f"mu.{i}"]
            eps = torch.randn(mu.shape, generator=self.gen, dtype=mu.dtype)
            u = torch.rand(mu.shape, generator=self.gen, dtype=mu.dtype)
            out.append((eps, u.clamp(1e-7, 1 - 1e-7)))
        return out

    def loss_terms(self, xb, yb, noise):
        """``[E, 3]``: each model's (L1, L2, L3) on its minibatch ``xb [E, m, p]``,
        ``yb [E, m]`` and noise."""
        return self._terms(self.params, self.buffers, xb, yb, noise)

    def step(self) -> float:
        """One Adam step of every model on its own minibatch (i.i.d. indices) and draw."""
        idx = torch.randint(0, self.X.shape[0], (self.E, self.h.batch_size), generator=self.gen)
        total = self.loss_terms(self.X[idx], self.y[idx], self.noise()).sum()
        self.opt.zero_grad(set_to_none=True)
        total.backward()
        self.opt.step()
        return float(total.detach())
