"""Every fast path of the objective against its one reference definition,
:func:`simulate.core.objective.reference_terms` (plain autograd, one draw at a time): the
hand-written kernels (each family, eager; compiled), the autograd path, the fused C pass
(where a C compiler builds it) and ``Posterior.elbo``.  Each compares the ELBO's terms
L1, L2, L3 (and, for a training step, the gradient, read off Adam's first moment:
``g = (m_t - b1 m_(t-1)) / (1 - b1)``) on the same parameters and the same noise draws,
at a declared tolerance."""

import numpy as np
import pytest
import torch

from simulate.core import Batch, Hyper, Layout, StepOptions, Trainer, rng
from simulate.core.objective import ModelSpec, family_of, reference_terms
from tests.factories import family_cases

# Tolerances: the terms relative; the gradient relative per entry plus an absolute part
# that is a fraction of the largest |g| (entries near zero carry the rounding of the big ones).
# float64, the same sums in another order (the kernels' fused products, the hand-derived
# derivatives, inductor's fused reductions when compiled, Posterior.elbo's chunks): measured
# <= 3e-16 for the terms, <= 1e-13 for the gradient but the horseshoe's 2e-10 absolute (the
# softplus threshold at 20: autograd's derivative exactly 1, the closed form's 1 - 1e-10)
TERMS_64 = dict(rtol=1e-12, atol=0)
GRAD_64 = dict(rtol=1e-9, atol_of_max=1e-11)
# the fused C pass runs in float32 (its only dtype), against the reference in float64 on the
# same float32 values: float32 rounding (eps 6e-8) grown by sums of m = 100 terms and read
# back through the float32 moment; measured 2.4e-7 for the terms, 3.7e-5 absolute (1e-7 of
# the largest |g|) for the gradient
TERMS_32 = dict(rtol=1e-5, atol=0)
GRAD_32 = dict(rtol=1e-4, atol_of_max=1e-6)


def assert_close_grad(got, want, rtol, atol_of_max):
    atol = atol_of_max * float(want.abs().max())
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=rtol, atol=atol)


def make_batch(E, n=512, p=3, seed=0, classes=None):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(1, n, p, generator=g, dtype=torch.float64) * 2 - 1
    if classes:
        y = torch.randint(0, classes, (1, n), generator=g)
    else:
        y = X[..., 0] * 2 - X[..., -1] + 0.3 * torch.randn(1, n, generator=g, dtype=torch.float64)
    return Batch(X, y, torch.zeros(E, dtype=torch.int64))


def trainer(kw=None, dtype=torch.float64, node_scales=False, **options):
    h = Hyper(**{"batch_size": 100, "mc_samples": 3, "lr": 1e-3, **(kw or {})})
    classes = 3 if h.likelihood == "categorical" else None
    lay = Layout(3, 2, [4, 6], classes or 1, node_scales=node_scales)
    batch = make_batch(2, classes=classes)
    return Trainer(lay, h, [1, 2], batch, dtype=dtype, options=StepOptions(**options))


def reference(tr, dtype=torch.float64, draws=None):
    """The reference's terms and gradient at ``tr``'s current parameters on its next step's
    inputs (minibatch, noise and uniforms as the sampler draws them); ``draws`` picks other
    noise draws (a planted error)."""
    t = int(tr.state.count)
    inputs = tr.sampler.draw(t, torch.zeros(tr.layout.E, dtype=torch.bool))
    noise, gumbel = inputs.noise, inputs.gumbel
    if draws is not None:
        noise, gumbel = noise[draws], None if gumbel is None else gumbel[draws]

    def up(x):
        return None if x is None else x.detach().clone().to(dtype)

    yb = inputs.yb.clone() if not inputs.yb.is_floating_point() else up(inputs.yb)
    params = up(tr.state.params).requires_grad_(True)
    model = ModelSpec(tr.hyper, tr.layout, tr.mask.to(dtype), tr.H.to(dtype), tr.node_index)
    terms = reference_terms(
        params, model, up(inputs.xb), yb, up(noise), up(gumbel), tr.n, up(tr.noise_sd)
    )
    (grad,) = torch.autograd.grad(terms.total.sum(), params)
    return terms, grad


def assert_step_equals_reference(tr, terms_tol, grad_tol, dtype=torch.float64):
    want, g = reference(tr, dtype)
    b1, m0 = tr.hyper.betas[0], tr.state.opt.exp_avg.double().clone()
    got = tr.step()
    for k, a, b in zip("L1 L2 L3".split(), got, want, strict=True):
        np.testing.assert_allclose(a.double().numpy(), b.detach().numpy(), **terms_tol, err_msg=k)
    grad = (tr.state.opt.exp_avg.double() - b1 * m0) / (1 - b1)  # m_t = b1 m_(t-1) + (1 - b1) g
    assert_close_grad(grad, g, **grad_tol)
    assert (grad[:, tr.mask == 0] == 0).all()  # padding gets no gradient


@pytest.mark.parametrize("kw, node_scales", family_cases({"likelihood": "categorical"}))
def test_the_hand_written_kernels_equal_the_reference(kw, node_scales):
    """Each family's hand-written kernel (``simulate.core.step``), eager, K = 3 draws, two
    padded widths: the terms and the gradient of one step; then the first Adam step moves
    each parameter by ``-lr g / (|g| + eps)``."""
    tr = trainer(kw, node_scales=node_scales)
    assert tr.hand_written
    start = tr.state.params.clone()
    _, g = reference(tr)
    assert_step_equals_reference(tr, TERMS_64, GRAD_64)
    h = tr.hyper
    expect = (-h.lr * g / (g.abs() + h.adam_eps)).numpy()
    np.testing.assert_allclose((tr.state.params - start).numpy(), expect, rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize("kw", [{}, {"l3": "exact"}])
def test_the_autograd_path_equals_the_reference(kw):
    """The autograd path (``paths.AutogradKernel``: the hand backward of the network,
    autograd through the sampler and the KL terms), asked for, or the only path (the exact
    L3)."""
    tr = trainer(kw, autograd=True)
    assert not tr.hand_written
    assert_step_equals_reference(tr, TERMS_64, GRAD_64)


@pytest.mark.slow  # a torch.compile: 20-25 s cold; the eager kernels are checked above
def test_the_compiled_kernel_equals_the_reference():
    """The hand-written kernel under ``torch.compile`` (compiles in ~10 s), two steps, at
    the float64 tolerance."""
    tr = trainer(compile=True)
    assert tr.compiled and tr.hand_written
    for _ in range(2):
        assert_step_equals_reference(tr, TERMS_64, GRAD_64)


def test_the_fused_c_pass_equals_the_reference():
    """``mlp="native"``: the network's pass fused per model in C (float32), two steps."""
    from simulate.core import native

    if not native.available():
        pytest.skip("no C compiler builds the fused pass here")
    tr = trainer(dtype=torch.float32, mlp="native")
    assert tr.step_fn.spec.mlp == "native"
    for _ in range(2):
        assert_step_equals_reference(tr, TERMS_32, GRAD_32)


def test_the_posterior_elbo_equals_the_reference():
    """``Posterior.elbo`` on the whole training set (so n / m = 1) is the reference's terms
    at the posterior's own draws (the evaluation streams, hard indicators), averaged over
    the draws, after a few steps of training; learned noise sds included."""
    tr = trainer(kw={"mc_samples": 1}, learn_noise=True)
    tr.fit(5)
    tr.update_noise()
    post, draws = tr.posterior(), 3
    h, lay = tr.hyper, tr.layout
    counter = lay.counters()
    eps, gum = (rng.Stream(rng.seed_key(post.seeds, s)[:, None], counter)
                for s in (rng.STREAM_EVAL_EPS, rng.STREAM_EVAL_GUMBEL))  # fmt: skip
    fam = family_of(h)
    noise = torch.stack([fam.noise(h, eps.uniform(t, torch.float64)) for t in range(draws)])
    gumbel = torch.stack([gum.uniform(t, torch.float64) for t in range(draws)])
    X, y = tr.sampler.X_aug.view(1, tr.n, -1), tr.sampler.y_flat.view(1, tr.n)
    X, y = X.expand(lay.E, -1, -1), y.expand(lay.E, -1)
    model = ModelSpec(h, lay, post.mask, post.H, post.node_index)
    want = reference_terms(post.params, model, X, y, noise, gumbel, tr.n, post.noise_sd)
    got = post.elbo(X[:1, :, :-1], y[:1], [0, 0], draws=draws, chunk=200)
    for k, b in zip("L1 L2 L3".split(), want, strict=True):
        np.testing.assert_allclose(got[k], b.numpy(), **TERMS_64, err_msg=k)
    assert post.noise_sd is not None and not torch.all(post.noise_sd == h.sigma)


def test_the_tolerances_see_a_wrong_draw():
    """Negative control: the reference with one of the step's three draws wrong (draw 1
    again where draw 0 was) is outside every tolerance above, the loosest included, for
    the terms and the gradient."""
    tr, again = trainer(), trainer()
    wrong_terms, wrong_g = reference(tr, draws=[1, 1, 2])
    got = again.step()
    grad = again.state.opt.exp_avg / (1 - again.hyper.betas[0])
    assert not np.allclose(got.L1.numpy(), wrong_terms.L1.detach().numpy(), **TERMS_32)
    with pytest.raises(AssertionError):
        assert_close_grad(grad, wrong_g, **GRAD_32)
