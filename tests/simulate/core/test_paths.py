"""The step's paths (``simulate.core.training_step``): the compiled hand-written step equals the
eager one (a frozen model held alike), and the hand-written kernels of the Dense-BNN and
horseshoe families equal the autograd path."""

import dataclasses

import numpy as np
import pytest
import torch

from simulate.core import Batch, Hyper, Layout, StepOptions, Trainer

COMPILED = StepOptions(compile=True)


def test_compiled_step_tiny_with_a_frozen_model():
    """In the default suite (compiles in ~10 s): the compiled hand-written step equals the
    eager one, and holds a model frozen by the stopping rule as eager does (the full tier
    trains compiled with frozen models)."""
    g = torch.Generator().manual_seed(1)
    X = torch.rand(1, 256, 2, generator=g, dtype=torch.float64) * 2 - 1
    y = X[..., 0] + 0.1 * torch.randn(1, 256, generator=g, dtype=torch.float64)
    batch = Batch(X, y, torch.zeros(2, dtype=torch.int64))
    h = Hyper(batch_size=32)
    a = Trainer(Layout(2, 1, [2, 3]), h, [4, 5], batch, dtype=torch.float64)
    b = Trainer(Layout(2, 1, [2, 3]), h, [4, 5], batch, dtype=torch.float64, options=COMPILED)
    for _ in range(2):
        a.step(), b.step()
    for t in (a, b):
        t.frozen = torch.tensor([True, False])
    held = b.state.params[:, 0].clone()
    for _ in range(2):
        ta, tb = a.step(), b.step()
        np.testing.assert_allclose(ta.total.numpy(), tb.total.numpy(), rtol=1e-9)
    assert torch.equal(b.state.params[:, 0], held)
    np.testing.assert_allclose(
        a.state.params.numpy(), b.state.params.numpy(), rtol=1e-7, atol=1e-10
    )


@pytest.mark.slow
def test_compiled_step_matches_eager():
    """torch.compile path: same numbers as eager up to float rounding (compiles ~30 s)."""
    g = torch.Generator().manual_seed(0)
    X = torch.rand(1, 512, 3, generator=g, dtype=torch.float64) * 2 - 1
    y = X[..., 0] + 0.1 * torch.randn(1, 512, generator=g, dtype=torch.float64)
    batch = Batch(X, y, torch.zeros(2, dtype=torch.int64))
    kinds = [{}, {"sampling": "permutation", "slab": "uniform", "mc_samples": 2}]
    for kw in kinds:  # the compiled draw graph: iid and permutation minibatches, K = 1, 2
        h = Hyper(batch_size=64, **kw)
        a = Trainer(Layout(3, 2, [3, 5]), h, [1, 2], batch, dtype=torch.float64)
        b = Trainer(Layout(3, 2, [3, 5]), h, [1, 2], batch, dtype=torch.float64, options=COMPILED)
        c = Trainer(  # one compiled call per model (chunks of 1)
            Layout(3, 2, [3, 5]),
            h,
            [1, 2],
            batch,
            dtype=torch.float64,
            options=StepOptions(compile=True, chunk=1),
        )
        assert b.chunk == 2 and c.chunk == 1
        for _ in range(10):  # over one epoch (512 / 64 = 8 steps): a fresh permutation
            ta, tb, tc = a.step(), b.step(), c.step()
            np.testing.assert_allclose(ta.total.numpy(), tb.total.numpy(), rtol=1e-9)
            np.testing.assert_allclose(tc.total.numpy(), tb.total.numpy(), rtol=1e-12)
        for t in (b, c):
            np.testing.assert_allclose(
                a.state.params.numpy(), t.state.params.numpy(), rtol=1e-7, atol=1e-10
            )


# compiled (a torch.compile, 20-35 s cold): -m slow; test_compiled_step_tiny_with_a_frozen_model
# keeps a compiled step in the default suite
@pytest.mark.parametrize("compile", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_dense_hand_written_step_equals_autograd(compile):
    """Dense-BNN on the hand-written step (no indicators) gives autograd's numbers through
    ``Dense.draw`` / ``Dense.kl_terms`` (same normals, same minibatches), eager and compiled
    (compiles ~10 s); negative control: the spike-and-slab step on the same models differs."""
    from functools import partial

    from simulate.core import spike_slab_step
    from simulate.core.objective import family_of

    g = torch.Generator().manual_seed(0)
    X = torch.rand(1, 512, 3, generator=g, dtype=torch.float64) * 2 - 1
    y = X[..., 0] - X[..., 1] + 0.3 * torch.randn(1, 512, generator=g, dtype=torch.float64)
    batch = Batch(X, y, torch.zeros(2, dtype=torch.int64))
    h = Hyper(family="dense", batch_size=64)

    def trainer(hyper=h, **kw):
        return Trainer(
            Layout(3, 2, [4, 6]), hyper, [3, 4], batch, dtype=torch.float64,
            options=StepOptions(**kw),
        )  # fmt: skip

    a, b = trainer(autograd=True), trainer(compile=compile)
    assert b.hand_written and not a.hand_written
    for _ in range(12):
        ta, tb = a.step(), b.step()
        np.testing.assert_allclose(tb.total.numpy(), ta.total.numpy(), rtol=1e-10)
        assert torch.all(tb.L3 == 0)
    np.testing.assert_allclose(
        b.state.params.numpy(), a.state.params.numpy(), rtol=1e-9, atol=1e-12
    )
    # planted error: the same models stepped with indicators (the spike-and-slab kernel)
    c, d = trainer(), trainer(autograd=True)
    spec = c.step_fn.spec
    wrong = dataclasses.replace(spec, hyper=dataclasses.replace(h, family="spike_slab"))
    c.step_fn.kernel = partial(spike_slab_step, wrong)
    c.sampler.family = family_of(wrong.hyper)  # which draws the indicators' uniforms too
    assert not np.allclose(c.step().total.numpy(), d.step().total.numpy(), rtol=1e-6)


# compiled (a torch.compile, 20-35 s cold): -m slow; test_compiled_step_tiny_with_a_frozen_model
# keeps a compiled step in the default suite
@pytest.mark.parametrize("compile", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_horseshoe_hand_written_step_equals_autograd(compile):
    """HS-BNN's hand-written step (``simulate.core.step.horseshoe_step``) gives autograd's
    gradient through ``Horseshoe.draw`` / ``Horseshoe.kl_terms`` and the same ELBO terms,
    step after step from the same state, K = 1 and 2, eager and compiled (~20 s to compile).
    The gradient is read from Adam's first moment, ``(m_t - b1 m_{t-1}) / (1 - b1)``:
    parameter trajectories are not compared because at the initial ``log tau = 0`` (b0 = 1)
    the scales' KL gradient is ~0, so units whose ReLU never fires have gradients of
    rounding size, which Adam's normalisation blows up to a step.  Tolerance 1e-8 of the
    largest gradient: the two differ by ~2e-10 absolute, from the softplus threshold at 20
    (autograd's derivative is exactly 1 there, the closed form's sigmoid 1 - 1e-10) on the
    layer scales' quadrature.  Negative control: the step with a
    wrong unit-scale prior."""
    from simulate.core import Consts, build_step

    g = torch.Generator().manual_seed(0)
    X = torch.rand(1, 512, 3, generator=g, dtype=torch.float64) * 2 - 1
    y = X[..., 0] - X[..., 1] + 0.3 * torch.randn(1, 512, generator=g, dtype=torch.float64)
    batch = Batch(X, y, torch.zeros(2, dtype=torch.int64))

    def gradient(tr, m0):
        b1 = tr.hyper.betas[0]
        terms = tr.step()
        return terms, ((tr.state.opt.exp_avg - b1 * m0) / (1 - b1)).numpy()

    def trainer(hyper, **kw):
        lay = Layout(3, 2, [4, 6], node_scales=True)
        return Trainer(lay, hyper, [3, 4], batch, dtype=torch.float64, options=StepOptions(**kw))

    for K in (1, 2) if not compile else (1,):
        h = Hyper(family="horseshoe", batch_size=64, mc_samples=K)
        a, b = trainer(h, autograd=True), trainer(h, compile=compile)
        assert b.hand_written and not a.hand_written
        for _ in range(12):
            b.state = b.state._replace(
                params=a.state.params.clone(),
                opt=type(a.state.opt)(*(x if x is None else x.clone() for x in a.state.opt)),
            )
            m0 = a.state.opt.exp_avg.clone()
            ta, ga = gradient(a, m0)
            tb, gb = gradient(b, m0)
            np.testing.assert_allclose(tb.total.numpy(), ta.total.numpy(), rtol=1e-10)
            np.testing.assert_allclose(gb, ga, rtol=0, atol=1e-8 * np.abs(ga).max())
            assert np.abs(ga[:, :, b.layout.P_net :]).max() > 1e-3  # the scales do move
    # planted error: the hand-written step with the unit scales' prior C+(0, 2), not C+(0, 1)
    c, d = trainer(h), trainer(h, autograd=True)
    wrong_h = dataclasses.replace(h, hs_b0=2.0)
    c.step_fn = build_step(c.layout, wrong_h, c.n, Consts(c.mask, c.H, c.node_index))
    assert not np.allclose(c.step().total.numpy(), d.step().total.numpy(), rtol=1e-6)
