"""The core's optimisers (``simulate.core.optim``) against ``torch.optim``: Adam
and RMSprop on raw gradient sequences, and RMSprop inside a training trainer on every step
path, step for step on one model."""

import dataclasses

import numpy as np
import pytest
import torch

from simulate.core import Batch, Hyper, Layout, OptState, StepOptions, Trainer, optimizer_of


def _torch_optimizer(hyper, params):
    if hyper.optimizer == "rmsprop":
        return torch.optim.RMSprop(
            params, lr=hyper.lr, alpha=hyper.rmsprop_alpha, eps=hyper.adam_eps
        )
    return torch.optim.Adam(params, lr=hyper.lr, betas=hyper.betas, eps=hyper.adam_eps)


@pytest.mark.parametrize("optimizer", ["adam", "rmsprop"])
@pytest.mark.parametrize("donate", [False, True])
def test_update_equals_torch_optim(optimizer, donate):
    """30 steps of seeded random gradients (scales 1e-4..1e2, so eps matters somewhere):
    the core's update equals ``torch.optim``'s to float64 rounding; the second model, not
    alive, never moves; without ``donate`` the inputs are left untouched.  Negative
    control: RMSprop's update is not Adam's."""
    h = Hyper(optimizer=optimizer, lr=1e-2)
    g = torch.Generator().manual_seed(1)
    params = torch.randn(3, 2, 7, generator=g, dtype=torch.float64)
    opt_fn = optimizer_of(h, donate)
    state = opt_fn.init(params)
    frozen = params[:, 1].clone()
    p = torch.nn.Parameter(params[:, 0].clone())
    opt = _torch_optimizer(h, [p])
    alive = torch.tensor([True, False])
    for t in range(1, 31):
        grad = torch.randn(3, 2, 7, generator=g, dtype=torch.float64)
        grad = grad * 10.0 ** torch.randint(-4, 3, (3, 2, 7), generator=g)
        before = (params.clone(), *(x.clone() for x in state[:2]))
        factors = opt_fn.factors(t, torch.float64)
        new_var, state_new = opt_fn.update(grad, state, params, factors, alive)
        if not donate:  # nothing written in place
            after = (params, *state[:2])
            assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True))
        params, state = new_var, state_new
        p.grad = grad[:, 0].clone()
        opt.step()
        np.testing.assert_allclose(params[:, 0].numpy(), p.detach().numpy(), rtol=1e-12, atol=1e-14)
    assert torch.equal(params[:, 1], frozen)
    other = dataclasses.replace(h, optimizer="adam" if optimizer == "rmsprop" else "rmsprop")
    x = torch.zeros(3, 1, 7, dtype=torch.float64)
    one = torch.ones_like(x)
    a = optimizer_of(h).update(one, OptState(x, x), x, optimizer_of(h).factors(1, x.dtype))
    b = optimizer_of(other).update(one, OptState(x, x), x, optimizer_of(other).factors(1, x.dtype))
    assert not torch.allclose(a[0], b[0])


def _grad_of_step(tr, twin):
    """The gradient ``tr``'s next step uses: its twin (the same model and streams, Adam)
    steps once from ``tr``'s parameters with zeroed moments; Adam's first moment is then
    ``(1 - b1) grad``."""
    params = tr.state.params.clone()
    twin.state = twin.state._replace(
        params=params, opt=optimizer_of(twin.hyper).init(params), count=tr.state.count
    )
    twin.step()
    return twin.state.opt.exp_avg / (1 - twin.hyper.betas[0])


# the compiled path (a torch.compile, 20-25 s cold) runs with -m slow; the tiny compiled step
# of test_paths stays in the default suite
@pytest.mark.parametrize(
    "path", ["hand-written", pytest.param("compiled", marks=pytest.mark.slow), "autograd"]
)
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
    kw = {"options": StepOptions(compile=path == "compiled", autograd=path == "autograd")}
    tr = Trainer(Layout(3, 2, [4]), h, [7], batch, dtype=torch.float64, **kw)
    twin = Trainer(
        Layout(3, 2, [4]), dataclasses.replace(h, optimizer="adam"), [7], batch,
        dtype=torch.float64, **kw,
    )  # fmt: skip
    assert tr.hand_written == (path != "autograd") and tr.compiled == (path == "compiled")
    p = torch.nn.Parameter(tr.state.params[:, 0].clone())
    opt = _torch_optimizer(h, [p])
    for _ in range(15):
        grad = _grad_of_step(tr, twin)
        tr.step()
        p.grad = grad[:, 0].clone()
        opt.step()
        np.testing.assert_allclose(
            tr.state.params[:, 0].numpy(), p.detach().numpy(), rtol=1e-9, atol=1e-12
        )
        np.testing.assert_allclose(
            tr.state.opt.exp_avg_sq[:, 0].numpy(),
            opt.state[p]["square_avg"].numpy(),
            rtol=1e-9,
            atol=1e-15,
        )
    assert torch.all(tr.state.opt.exp_avg == 0)  # RMSprop keeps no first moment


@pytest.mark.parametrize("optimizer", ["adam", "rmsprop"])
def test_the_optimiser_alone_makes_the_step_size_from_its_states_multipliers(optimizer):
    """The plateau decay and held rows are pure updates of the optimiser's state
    (``lower_lr``, ``scale_rows``: new states, the old one untouched); ``factors`` and
    ``schedule`` make the step size from its multipliers, each model's and row's the plain
    step size times its multiplier, the same bit for bit in both; the update carries them."""
    from simulate.core.optim import lower_lr, scale_rows, with_lr_scale

    h = Hyper(optimizer=optimizer, lr=1e-2, lr_inclusion=3e-2)
    fn = optimizer_of(h)
    params = torch.zeros(3, 4, 5)
    opt = with_lr_scale(fn.init(params), 4)
    assert with_lr_scale(opt, 4) is opt and torch.equal(opt.lr_scale, torch.ones(4, 3))
    lowered = lower_lr(opt, torch.tensor([False, True, False, True]), 0.1)
    held = scale_rows(lowered, torch.tensor([0.0, 1.0, 1.0]))
    assert torch.equal(opt.lr_scale, torch.ones(4, 3))  # not written
    want = torch.tensor([[0.0, 1, 1], [0, 0.1, 0.1], [0, 1, 1], [0, 0.1, 0.1]])
    torch.testing.assert_close(held.lr_scale, want, rtol=0, atol=0)
    plain = fn.factors(7).step_size  # [3, 1, 1]: lr, lr, lr_inclusion
    got = fn.factors(7, lr_scale=held.lr_scale).step_size  # [3, E, 1]
    assert torch.equal(got, plain * held.lr_scale.T[:, :, None])
    rows, _ = fn.schedule(7, 2, 4, held.lr_scale)  # [S, 3, E]
    assert torch.equal(rows[0], got[:, :, 0])
    _, new = fn.update(torch.ones_like(params), held, params, fn.factors(7, lr_scale=held.lr_scale))
    assert new.lr_scale is held.lr_scale
