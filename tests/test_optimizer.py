"""The core's optimisers (``simulate.step.optimizer_update``) against ``torch.optim``: Adam
and RMSprop on raw gradient sequences, and RMSprop inside a training trainer on every step
path, step for step on one model."""

import dataclasses

import numpy as np
import pytest
import torch

from simulate.core import Batch, Hyper, Layout, Trainer, optimizer_update
from simulate.paths import AutogradStep, CompiledHandWrittenStep, optimizer_factors


def _torch_optimizer(hyper, params):
    if hyper.optimizer == "rmsprop":
        return torch.optim.RMSprop(
            params, lr=hyper.lr, alpha=hyper.rmsprop_alpha, eps=hyper.adam_eps
        )
    return torch.optim.Adam(params, lr=hyper.lr, betas=hyper.betas, eps=hyper.adam_eps)


@pytest.mark.parametrize("optimizer", ["adam", "rmsprop"])
@pytest.mark.parametrize("functional", [False, True])
def test_update_equals_torch_optim(optimizer, functional):
    """30 steps of seeded random gradients (scales 1e-4..1e2, so eps matters somewhere):
    the core's update equals ``torch.optim``'s to float64 rounding; the second model, not
    alive, never moves.  Negative control: RMSprop's update is not Adam's."""
    h = Hyper(optimizer=optimizer, lr=1e-2)
    g = torch.Generator().manual_seed(1)
    var = torch.randn(3, 2, 7, generator=g, dtype=torch.float64)
    m, v = torch.zeros_like(var), torch.zeros_like(var)
    frozen = var[:, 1].clone()
    p = torch.nn.Parameter(var[:, 0].clone())
    opt = _torch_optimizer(h, [p])
    alive = torch.tensor([True, False])
    for t in range(1, 31):
        grad = torch.randn(3, 2, 7, generator=g, dtype=torch.float64)
        grad = grad * 10.0 ** torch.randint(-4, 3, (3, 2, 7), generator=g)
        step_size, corr2 = optimizer_factors(h, t, torch.float64, None)
        var, m, v = optimizer_update(h, var, m, v, grad, step_size, corr2, alive, functional)
        p.grad = grad[:, 0].clone()
        opt.step()
        np.testing.assert_allclose(var[:, 0].numpy(), p.detach().numpy(), rtol=1e-12, atol=1e-14)
    assert torch.equal(var[:, 1], frozen)
    other = dataclasses.replace(h, optimizer="adam" if optimizer == "rmsprop" else "rmsprop")
    x = torch.zeros(3, 1, 7, dtype=torch.float64)
    a = optimizer_update(h, x.clone(), x.clone(), x.clone(), torch.ones_like(x), 1.0, 1.0)
    b = optimizer_update(other, x.clone(), x.clone(), x.clone(), torch.ones_like(x), 1.0, 1.0)
    assert not torch.allclose(a[0], b[0])


def _grad_of_step(tr, twin, make_path):
    """The gradient ``tr``'s next step uses: its twin (the same model and streams, Adam)
    steps once from ``tr``'s parameters with zeroed moments; Adam's first moment is then
    ``(1 - b1) grad``."""
    st = twin.state
    st.var.copy_(tr.state.var)
    st.m.zero_(), st.v.zero_()
    st.step = tr.state.step
    make_path(twin)(twin)
    return st.m / (1 - twin.hyper.betas[0])


@pytest.mark.parametrize("path", ["hand-written", "compiled", "autograd"])
def test_rmsprop_training_equals_torch_rmsprop(path):
    """A trainer on RMSprop (one model, float64, 15 steps) equals ``torch.optim.RMSprop``
    fed the same gradients: each step's gradient comes from an Adam twin of the same model
    (:func:`_grad_of_step`), the torch optimiser steps a copy of the parameters, and the
    trainer's parameters and squared-gradient average must equal its to rounding.  Paths:
    the hand-written step (eager, compiled, ~15 s) and autograd (the exact L3)."""
    g = torch.Generator().manual_seed(0)
    X = torch.rand(1, 256, 3, generator=g, dtype=torch.float64) * 2 - 1
    y = X[..., 0] + 0.1 * torch.randn(1, 256, generator=g, dtype=torch.float64)
    batch = Batch(X, y, torch.zeros(1, dtype=torch.int64))
    h = Hyper(batch_size=32, optimizer="rmsprop", l3="exact" if path == "autograd" else "paper")
    make = {
        "hand-written": lambda tr: tr.path,
        "compiled": CompiledHandWrittenStep,
        "autograd": AutogradStep,
    }[path]
    tr = Trainer(Layout(3, 2, [4]), h, [7], batch, dtype=torch.float64)
    twin = Trainer(
        Layout(3, 2, [4]), dataclasses.replace(h, optimizer="adam"), [7], batch,
        dtype=torch.float64,
    )  # fmt: skip
    step, twin_step = make(tr), make(twin)
    p = torch.nn.Parameter(tr.state.var[:, 0].clone())
    opt = _torch_optimizer(h, [p])
    for _ in range(15):
        grad = _grad_of_step(tr, twin, lambda _: twin_step)
        step(tr)
        p.grad = grad[:, 0].clone()
        opt.step()
        np.testing.assert_allclose(
            tr.state.var[:, 0].numpy(), p.detach().numpy(), rtol=1e-9, atol=1e-12
        )
        np.testing.assert_allclose(
            tr.state.v[:, 0].numpy(), opt.state[p]["square_avg"].numpy(), rtol=1e-9, atol=1e-15
        )
    assert torch.all(tr.state.m == 0)  # RMSprop keeps no first moment
