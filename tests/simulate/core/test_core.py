"""The batched ASVI core: exact batching, the loss terms against their formulas, the
straight-through estimator, the hand-written backward, failure handling."""

import itertools
import math

import numpy as np
import pytest
import torch
from scipy import stats

from simulate.core import (
    Batch,
    DrawSource,
    Hyper,
    Layout,
    StepOptions,
    Trainer,
    chunk_bounds,
    draw_step_inputs,
    kl_indicator,
    kl_slab,
    mlp_nll_and_grad,
    rng,
    sample_theta,
    slab_params,
)
from tests.factories import assert_model_alone


def make_batch(E, n=512, p=3, seed=0, classes=None, D=1):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(D, n, p, generator=g, dtype=torch.float64) * 2 - 1
    if classes:
        y = torch.randint(0, classes, (D, n), generator=g)
    else:
        y = X[..., 0] * 2 - X[..., -1] + 0.3 * torch.randn(D, n, generator=g, dtype=torch.float64)
    return Batch(X, y, torch.arange(E) % D)


def test_layout_edges_match_theory_count():
    from theory import num_edges

    lay = Layout(20, 2, [2, 10, 20])
    H = lay.mask().sum(-1).tolist()
    assert H == [num_edges(2, w, 20) for w in (2, 10, 20)] == [51, 331, 861]


@pytest.mark.parametrize("likelihood", ["gaussian", "categorical"])
@pytest.mark.parametrize("slab", ["gaussian", "uniform"])
def test_batching_is_exact(likelihood, slab):
    """Model e inside a padded batch = the same model trained alone (same seed, same data):
    same loss terms and same parameters after several Adam steps."""
    widths, seeds = [3, 7, 5], [11, 12, 13]
    classes = 4 if likelihood == "categorical" else None
    h = Hyper(likelihood=likelihood, slab=slab, batch_size=64, mc_samples=2)
    batch = make_batch(3, classes=classes, D=2)
    out = 1 if classes is None else classes
    together = Trainer(Layout(3, 2, widths, out), h, seeds, batch, dtype=torch.float64)
    hist_t = [together.step() for _ in range(4)]
    for e, w in enumerate(widths):
        alone_batch = Batch(batch.X, batch.y, batch.data_index[e : e + 1])
        alone = Trainer(Layout(3, 2, [w], out), h, [seeds[e]], alone_batch, dtype=torch.float64)
        hist_a = [alone.step() for _ in range(4)]
        for ht, ha in zip(hist_t, hist_a, strict=True):
            for k in ("L1", "L2", "L3"):
                assert float(getattr(ht, k)[e]) == pytest.approx(
                    float(getattr(ha, k)[0]), rel=1e-10, abs=1e-10
                )
        assert_model_alone(together, e, alone)


def test_batched_gradients_equal_single_model_gradients():
    h = Hyper(batch_size=128)
    batch = make_batch(2)
    tb = Trainer(Layout(3, 2, [4, 6]), h, [5, 6], batch, dtype=torch.float64)
    xb, yb = tb.minibatch()
    params = tb.state.params.clone().requires_grad_(True)
    g_batch = torch.autograd.grad(sum(t.sum() for t in tb.loss_terms(params, xb, yb, 0)), params)[0]
    ts = Trainer(
        Layout(3, 2, [4]),
        h,
        [5],
        Batch(batch.X, batch.y, batch.data_index[:1]),
        dtype=torch.float64,
    )
    xs, ys = ts.minibatch()
    var1 = ts.state.params.clone().requires_grad_(True)
    g1 = torch.autograd.grad(sum(t.sum() for t in ts.loss_terms(var1, xs, ys, 0)), var1)[0]
    m = tb.mask[0] > 0
    np.testing.assert_allclose(g_batch[:, 0][:, m].numpy(), g1[:, 0].numpy(), rtol=1e-10)


@pytest.mark.parametrize("likelihood", ["gaussian", "categorical"])
def test_hand_backward_equals_autograd(likelihood):
    classes = 3 if likelihood == "categorical" else None
    out = 1 if classes is None else classes
    lay = Layout(4, 3, [5, 2, 6], out)
    h = Hyper(likelihood=likelihood)
    g = torch.Generator().manual_seed(1)
    theta = torch.randn(3, lay.P, generator=g, dtype=torch.float64) * lay.mask(dtype=torch.float64)
    x = torch.randn(3, 50, 4, generator=g, dtype=torch.float64)
    x_aug = torch.cat([x, torch.ones(3, 50, 1, dtype=torch.float64)], dim=-1)
    y = (
        torch.randint(0, 3, (3, 50), generator=g)
        if classes
        else torch.randn(3, 50, generator=g, dtype=torch.float64)
    )
    scale = torch.tensor([1.0, 2.5, 7.0], dtype=torch.float64)
    nll, dtheta = mlp_nll_and_grad(lay, theta, x_aug, y, h, scale)
    th = theta.clone().requires_grad_(True)
    from simulate.core import neg_log_lik

    ref = neg_log_lik(lay.forward(th, x), y, h).sum(-1)
    (gref,) = torch.autograd.grad((ref * scale).sum(), th)
    np.testing.assert_allclose(nll.numpy(), ref.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(dtheta.numpy(), gref.numpy(), rtol=1e-10, atol=1e-12)


def test_gaussian_l2_closed_form_and_monte_carlo():
    h = Hyper(sigma_0=0.8)
    lay = Layout(2, 1, [3])
    mask = lay.mask(dtype=torch.float64)
    g = torch.Generator().manual_seed(0)
    params = torch.randn(3, 1, lay.P, generator=g, dtype=torch.float64)
    mu, sd, nu = slab_params(params, h)
    got = float(kl_slab(params, h, mask)[0])
    # closed form, written independently: KL(N(m, s^2) || N(0, s0^2))
    s0 = 0.8
    kl = np.log(s0 / sd.numpy()) + (sd.numpy() ** 2 + mu.numpy() ** 2) / (2 * s0**2) - 0.5
    assert got == pytest.approx(float((nu.numpy() * kl).sum()), rel=1e-12)
    # Monte Carlo: E_q[log q - log p] with 200k draws per weight, within 6 standard errors
    gen = np.random.default_rng(1)
    z = mu.numpy()[0] + sd.numpy()[0] * gen.standard_normal((200_000, lay.P))
    lr = stats.norm.logpdf(z, mu.numpy()[0], sd.numpy()[0]) - stats.norm.logpdf(z, 0, s0)
    mc = (nu.numpy()[0] * lr.mean(0)).sum()
    se = np.sqrt(((nu.numpy()[0] ** 2) * lr.var(0) / 200_000).sum())
    assert abs(mc - got) < 6 * se


def test_uniform_l2_closed_form_and_monte_carlo():
    h = Hyper(slab="uniform", B0=2.0)
    lay = Layout(1, 1, [2])
    mask = lay.mask(dtype=torch.float64)
    params = torch.randn(
        3, 1, lay.P, generator=torch.Generator().manual_seed(2), dtype=torch.float64
    )
    c, hw, nu = slab_params(params, h)
    assert torch.all(c - hw >= -2) and torch.all(c + hw <= 2)  # support inside the prior's
    got = float(kl_slab(params, h, mask)[0])
    assert got == pytest.approx(float((nu * torch.log(2.0 / hw)).sum()), rel=1e-12)
    gen = np.random.default_rng(3)
    cc, hh = c.numpy()[0], hw.numpy()[0]
    z = cc + hh * gen.uniform(-1, 1, (100_000, lay.P))
    lr = stats.uniform.logpdf(z, cc - hh, 2 * hh) - stats.uniform.logpdf(z, -2, 4)
    assert (nu.numpy()[0] * lr.mean(0)).sum() == pytest.approx(got, rel=1e-9)


def test_l3_paper_formula_as_printed():
    h = Hyper(lambda_s=3.0)
    lay = Layout(2, 2, [3, 5])
    mask = lay.mask(dtype=torch.float64)
    params = torch.randn(
        3, 2, lay.P, generator=torch.Generator().manual_seed(4), dtype=torch.float64
    )
    got = kl_indicator(params, h, mask, mask.sum(-1)).numpy()
    nu = 1 / (1 + np.exp(-params[2].numpy()))
    for e in range(2):
        m = mask[e].numpy() > 0
        S, H = nu[e][m].sum(), m.sum()
        want = -0.5 * math.log2(2 * math.pi * math.e * S * (H - S) / H) + 3.0 * S
        assert got[e] == pytest.approx(want, rel=1e-12)


def test_l3_exact_equals_enumeration():
    """Exact KL of the product-Bernoulli q(gamma) to pi(gamma) = c1 e^{-ls G} / C(H, G),
    by enumerating all 2^H indicator vectors (H = 4: a 1-1-1 network)."""
    h = Hyper(lambda_s=1.7, l3="exact")
    lay = Layout(1, 1, [1])
    mask = lay.mask(dtype=torch.float64)
    H = int(mask.sum())
    params = torch.randn(
        3, 1, lay.P, generator=torch.Generator().manual_seed(5), dtype=torch.float64
    )
    got = float(kl_indicator(params, h, mask, mask.sum(-1))[0])
    nu = 1 / (1 + np.exp(-params[2, 0].numpy()))
    norm = sum(math.exp(-1.7 * t) for t in range(H + 1))  # sum_gamma e^{-ls G} / C(H, G)
    kl = 0.0
    for gam in itertools.product([0, 1], repeat=H):
        q = np.prod([v if g_ else 1 - v for v, g_ in zip(nu, gam, strict=True)])
        G = sum(gam)
        prior = math.exp(-1.7 * G) / math.comb(H, G) / norm
        kl += q * math.log(q / prior)
    assert got == pytest.approx(kl, rel=1e-10)


def test_straight_through_forward_hard_backward_relaxed():
    h = Hyper(tau=0.5)
    lay = Layout(2, 1, [3])
    mask = torch.ones(1, lay.P, dtype=torch.float64)
    params = torch.randn(
        3, 1, lay.P, generator=torch.Generator().manual_seed(6), dtype=torch.float64
    )
    params.requires_grad_(True)
    keys = (
        rng.seed_key(torch.tensor([9]), 1)[:, None],
        rng.seed_key(torch.tensor([9]), 2)[:, None],
    )
    ctr = lay.counters()
    u = rng.uniform(keys[1], ctr, 0, torch.float64)
    eps = rng.normal(keys[0], ctr, 0, torch.float64)
    theta = sample_theta(params, h, mask, eps, u)
    # recompute the relaxation independently
    mu, sd, _ = slab_params(params, h)
    G = torch.sigmoid((params[2] + torch.log(u / (1 - u))) / 0.5)
    w = mu + sd * eps
    hard = (G > 0.5).double()
    assert set(hard.unique().tolist()) <= {0.0, 1.0}
    torch.testing.assert_close(theta, hard * w)  # forward: hard indicator
    up = torch.randn(theta.shape, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    (g_st,) = torch.autograd.grad((theta * up).sum(), params)
    # backward wrt the logit is that of the relaxed G * w; wrt mu that of the hard gamma * w
    (g_rel,) = torch.autograd.grad((G * w.detach() * up).sum(), params, retain_graph=True)
    torch.testing.assert_close(g_st[2], g_rel[2])
    (g_mu,) = torch.autograd.grad((hard * w * up).sum(), params)
    torch.testing.assert_close(g_st[0], g_mu[0])


def test_hard_indicator_is_exactly_bernoulli_nu():
    """P(G > 1/2) = nu for the Gumbel-sigmoid at any temperature: posterior draws are exact."""
    lay = Layout(1, 1, [1])
    P = lay.P
    nu = np.array([0.1, 0.5, 0.8, 0.97])
    params = torch.zeros(3, 4, P, dtype=torch.float64)
    params[2] = torch.tensor(np.log(nu / (1 - nu)))[:, None]
    ctr = lay.counters()
    streams = [rng.Stream(rng.seed_key(torch.arange(4), s)[:, None], ctr) for s in (1, 2)]
    T = 4000
    inc = np.zeros((4, P))
    for t in range(T):
        ones = torch.ones(4, P, dtype=torch.float64)
        noise = [s.uniform(t, torch.float64) for s in streams]
        th = sample_theta(params, Hyper(), ones, rng.uniform_to_normal(noise[0]), noise[1], True)
        inc += (th != 0).numpy()
    freq = inc / T
    se = np.sqrt(nu * (1 - nu) / T)[:, None]
    assert np.all(np.abs(freq - nu[:, None]) < 5 * se)  # 5 SE: false failure ~ 1e-5 per cell


def test_rng_uniformity_and_independence():
    k = rng.seed_key(torch.tensor([0, 1]), rng.STREAM_EPS)[:, None]
    c = torch.arange(100_000)[None, :]
    u = rng.uniform(k, c, 3, torch.float64).numpy()
    for row in u:
        assert stats.kstest(row, "uniform").pvalue > 1e-4  # false failure 1e-4
    assert abs(np.corrcoef(u[0], u[1])[0, 1]) < 5 / math.sqrt(100_000)
    assert abs(np.corrcoef(u[0, :-1], u[0, 1:])[0, 1]) < 5 / math.sqrt(100_000)
    u2 = rng.uniform(k, c, 4, torch.float64).numpy()  # next step: a fresh stream
    assert abs(np.corrcoef(u[0], u2[0])[0, 1]) < 5 / math.sqrt(100_000)
    h = torch.tensor([0, (1 << 23) - 1])
    for dt in (torch.float32, torch.float64):
        v = rng.bits_to_uniform(h, dt)
        assert 0 < float(v[0]) and float(v[1]) < 1


def test_int32_hot_path_is_bit_identical_to_the_int64_reference():
    # every 32-bit corner, random values, and lengths that hit the vector loops' scalar tails
    x = torch.cat(
        [
            torch.tensor([0, 1, (1 << 31) - 1, 1 << 31, (1 << 32) - 1]),
            torch.randint(0, 1 << 32, (4099,), generator=torch.Generator().manual_seed(0)),
        ]
    )
    for k in (1, 7, 17, x.numel()):
        ref = rng.mix32(x[:k])
        got = rng.mix32_i32(rng._to_i32(x[:k])).to(torch.int64) & 0xFFFFFFFF
        assert torch.equal(ref, got)
    # a whole draw: the int32 Stream against the int64 formula it replaced
    key = rng.seed_key(torch.tensor([3, 1 << 40]), rng.STREAM_GUMBEL)[:, None]
    ctr = torch.arange(1001)[None, :] + (5 << 42)
    for off in (0, 12345, (1 << 33) + 7, torch.tensor(99)):
        o = int(off)
        base = rng.mix32(rng.mix32(ctr & 0xFFFFFFFF) ^ rng.mix32(((ctr >> 32) & 0xFFFFFFFF) ^ key))
        a = rng.mix32(torch.tensor((o & 0xFFFFFFFF) ^ 0x632BE5AB))
        b = rng.mix32(((torch.tensor(o) >> 32) & 0xFFFFFFFF) ^ a)
        ref = rng.mix32(rng.mix32(base ^ a) ^ b)
        got = rng.Stream(key, ctr).bits(off).to(torch.int64) & 0xFFFFFFFF
        assert torch.equal(ref, got)
        u = rng.Stream(key, ctr).uniform(off, torch.float64)
        assert torch.equal(u, rng.bits_to_uniform(ref >> 9, torch.float64))


@pytest.mark.parametrize("sampling", ["iid", "permutation"])
def test_step_inputs_in_one_call_equal_the_streams_and_minibatch(sampling):
    """draw_step_inputs (the form the compiled sampler uses) gives bit for bit the streams'
    draws and the sampler's minibatch, for K = 2 draws, two datasets and padded widths; a
    wrong draw word (offset off by one) must change every draw (negative control).  The
    compiled sampler itself: ``test_the_compiled_sampler_draws_what_the_eager_one_draws``."""
    h = Hyper(batch_size=64, mc_samples=2, sampling=sampling)
    tr = Trainer(Layout(3, 2, [3, 5, 4]), h, [7, 8, 9], make_batch(3, D=2))
    sm = tr.sampler
    source = DrawSource(
        sm.eps_stream.base, sm.gumbel_stream.base, sm.iid_stream.base, sm.X_aug, sm.y_flat,
        sm.data_index,
    )  # fmt: skip
    assert all(map(torch.equal, sm.source(), source))  # the sampler's own
    step = sm.draw_words(5)
    u_slab, u_gum, xb, yb = draw_step_inputs(source, step, n=tr.n)
    xb_ref, yb_ref = tr.minibatch(5)
    assert torch.equal(xb, xb_ref) and torch.equal(yb, yb_ref)
    for k in range(2):
        assert torch.equal(u_slab[k], sm.eps_stream.uniform(5 * 2 + k))
        assert torch.equal(u_gum[k], sm.gumbel_stream.uniform(5 * 2 + k))
    off = torch.tensor([rng.offset_words(11), rng.offset_words(12)], dtype=torch.int32)
    u_off = draw_step_inputs(source, step._replace(words=off), n=tr.n)[0]
    assert torch.equal(u_off[0], u_slab[1]) and not torch.equal(u_off[1], u_slab[1])
    assert (u_off[0] != u_slab[0]).float().mean() > 0.99


@pytest.mark.slow  # a torch.compile of the sampler: 10-22 s, most of it the compile
@pytest.mark.parametrize("sampling", ["iid", "permutation"])
def test_the_compiled_sampler_draws_what_the_eager_one_draws(sampling):
    """The compiled sampler's Inputs (draw_step_inputs in one compiled graph) equal the
    eager sampler's bit for bit, a held model among them."""
    h = Hyper(batch_size=64, mc_samples=2, sampling=sampling)
    eager = Trainer(Layout(3, 2, [3, 5, 4]), h, [7, 8, 9], make_batch(3, D=2))
    compiled = Trainer(
        Layout(3, 2, [3, 5, 4]), h, [7, 8, 9], make_batch(3, D=2), options=StepOptions(compile=True)
    )
    held = torch.tensor([False, True, False])
    got, want = compiled.sampler.draw(5, held), eager.sampler.draw(5, held)
    assert got.source is None and want.source is None  # the C step's
    for a, b in zip(got[:5], want[:5], strict=True):
        assert torch.equal(a, b)


def test_chunks_cover_every_model_once_in_at_most_two_sizes():
    for E in range(1, 60):
        for chunk in (1, 2, 7, 25, 27, 100):
            b = chunk_bounds(E, chunk)
            sizes = np.diff(b)
            assert b[0] == 0 and b[-1] == E and sizes.min() >= 1 and sizes.max() <= chunk
            assert len(b) - 1 == -(-E // chunk) and sizes.max() - sizes.min() <= 1
    assert chunk_bounds(100, 27) == [0, 25, 50, 75, 100]
    with pytest.raises(ValueError, match="chunk"):
        StepOptions(chunk=0)


def test_non_finite_loss_stops_that_model_only():
    h = Hyper(batch_size=64)
    tr = Trainer(Layout(3, 2, [3, 4]), h, [1, 2], make_batch(2), dtype=torch.float64)
    tr.step()
    tr.state.params[1, 1, 0] = float("nan")  # corrupt model 1's first slab scale
    frozen = tr.state.params[:, 1].clone()
    terms = tr.step()
    assert not torch.isfinite(terms.total[1]) and torch.isfinite(terms.total[0])
    assert tr.state.health.failed.tolist() == [False, True]
    assert tr.state.health.failed_step.tolist() == [-1, 1]
    before0 = tr.state.params[:, 0].clone()
    tr.step()
    assert torch.equal(torch.isnan(tr.state.params[:, 1]), torch.isnan(frozen))
    np.testing.assert_array_equal(
        tr.state.params[:, 1].nan_to_num().numpy(), frozen.nan_to_num().numpy()
    )
    assert not torch.equal(tr.state.params[:, 0], before0)  # the healthy model keeps learning


def test_same_seed_same_run_and_iid_minibatches_cover_data():
    h = Hyper(batch_size=64)
    a = Trainer(Layout(3, 2, [3]), h, [42], make_batch(1))
    b = Trainer(Layout(3, 2, [3]), h, [42], make_batch(1))
    for _ in range(3):
        a.step(), b.step()
    assert torch.equal(a.state.params, b.state.params)
    c = Trainer(Layout(3, 2, [3]), h, [43], make_batch(1))
    c.step()
    assert not torch.equal(
        c.state.params, Trainer(Layout(3, 2, [3]), h, [42], make_batch(1)).state.params
    )
    # iid minibatches: indices in [0, n), and 60 steps of 64 draws cover all n = 256 points
    # (a point is missed with probability (1 - 1/256)^3840 ~ 3e-7; the seed is fixed)
    d = Trainer(Layout(3, 2, [3]), h, [42], make_batch(1, n=256))
    seen = set()
    for _ in range(60):
        idx = d.sampler.minibatch_index(d.state.count)
        assert idx.shape == (1, 64) and int(idx.min()) >= 0 and int(idx.max()) < 256
        seen.update(idx[0].tolist())
        d.step()
    assert seen == set(range(256))


def test_permutation_sampling_visits_every_point_once_per_epoch():
    h = Hyper(batch_size=64, sampling="permutation")
    tr = Trainer(Layout(3, 1, [2]), h, [3], make_batch(1, n=256))
    assert tr.sampler.steps_per_epoch == 4
    seen = [tr.sampler.minibatch_index(t)[0].clone() for t in range(4)]
    assert sorted(torch.cat(seen).tolist()) == list(range(256))
    fresh = tr.sampler.minibatch_index(4)[0]  # the next epoch: another permutation
    assert not torch.equal(fresh, seen[0])


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"likelihood": "poisson"}, "likelihood"),
        ({"slab": "laplace"}, "slab"),
        ({"l3": "approx"}, "l3"),
        ({"sigma": 0.0}, "sigma"),
        ({"batch_size": 0}, "batch_size"),
        ({"lr": float("nan")}, "lr"),
        ({"sampling": "stratified"}, "sampling"),
    ],
)
def test_bad_hyperparameters(kw, match):
    with pytest.raises(ValueError, match=match):
        Trainer(Layout(3, 1, [2]), Hyper(**kw), [0], make_batch(1))


def test_bad_layout_and_batch():
    with pytest.raises(ValueError, match="widths"):
        Layout(3, 1, [])
    with pytest.raises(ValueError, match="width"):
        Layout(3, 1, [2, 0])
    with pytest.raises(ValueError, match="batch_size"):
        Trainer(Layout(3, 1, [2]), Hyper(batch_size=1024), [0], make_batch(1, n=100))
    with pytest.raises(ValueError, match="X must be"):
        Trainer(Layout(4, 1, [2]), Hyper(batch_size=10), [0], make_batch(1, n=100))
