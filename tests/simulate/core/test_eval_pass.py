"""The evaluation pass (``Layout.forward`` with ``x_aug`` / ``scratch``, and the posterior's
test metrics and ELBO built on it) computes the same numbers bit for bit as the plain
forward pass and the straightforward loops it replaced.  Exact equality is the claim, so
``torch.equal`` / ``np.array_equal``, no tolerance; the negative control checks that the
comparison notices a one-ulp change."""

import numpy as np
import pytest
import torch

from simulate.core import Hyper, Layout, posterior
from simulate.core.layout import neg_log_lik
from simulate.core.posterior import Posterior
from simulate.core.state import init_state


def _posterior(p, widths, depth=2, seed=0, likelihood="gaussian"):
    hyper = Hyper(likelihood=likelihood)
    layout = Layout(p, depth, widths)
    seeds = list(range(seed, seed + len(widths)))
    st = init_state(layout, hyper, seeds)
    return Posterior(layout, hyper, st.params, torch.tensor(seeds))


@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.parametrize("p,widths,m", [(1, [2, 5, 5], 700), (7, [16, 3], 257), (30, [8], 1)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_buffered_forward_is_the_plain_forward_bit_for_bit(depth, p, widths, m, dtype):
    g = torch.Generator().manual_seed(depth * 100 + p)
    layout = Layout(p, depth, widths)
    x = torch.rand(len(widths), m, p, generator=g, dtype=dtype) * 2 - 1
    xa, scratch = layout.augment(x), {}
    for _ in range(3):  # the buffers reused across calls with other parameters
        theta = torch.randn(len(widths), layout.P, generator=g, dtype=dtype)
        assert torch.equal(layout.forward(theta, x, xa, scratch), layout.forward(theta, x))
    # kept for the next call: one product buffer (the hidden layers share a padded width)
    # and at most two augmented ones, used in turn
    assert len(scratch) == 1 + min(depth, 2)


def _plain_test_metrics(post, truth, X, draws):
    """The loop before the evaluation pass: each draw through the plain forward."""
    x = post._x(X)
    outs = [post.layout.forward(post.draw(t), x)[:, 0, :] for t in range(draws)]
    return torch.stack(outs).mean(0).numpy()


def test_test_metrics_use_the_plain_forwards_outputs():
    post = _posterior(3, [4, 4, 9, 9])
    rng = np.random.default_rng(1)
    X, truth = rng.uniform(-1, 1, (513, 3)), rng.normal(size=(4, 513))
    with torch.no_grad():
        fhat = _plain_test_metrics(post, truth, X, 6)
        _, l2 = post.test_metrics(truth, X, 6)
        assert np.array_equal(l2, ((fhat - truth) ** 2).mean(-1))
        assert np.array_equal(post.outputs(X, 6)[:, :, 0, :].mean(0).numpy(), fhat)


def _plain_elbo_l1(post, X, y, d, draws, chunk):
    """L1 and rss by the draws-outside loop the ELBO used before the evaluation pass."""
    X, y = torch.as_tensor(X, dtype=torch.float64), torch.as_tensor(y, dtype=torch.float64)
    L1 = torch.zeros(post.E, dtype=torch.float64)
    rss = torch.zeros_like(L1)
    for t in range(draws):
        theta = post.draw(t)
        for a in range(0, X.shape[1], chunk):
            xb, yb = X[d, a : a + chunk], y[d, a : a + chunk]
            out = post.layout.forward(theta, xb)
            L1 += neg_log_lik(out, yb, post.hyper, None).sum(-1)
            rss += ((yb - out[:, 0, :]) ** 2).sum(-1)
    return (L1 / draws).numpy(), (rss / draws).numpy()


@pytest.mark.parametrize("keep", [True, False])  # the draws kept, or drawn for each chunk
@pytest.mark.parametrize("chunk", [64, 100, 10_000])  # several chunks, a ragged last one, one
def test_elbo_sums_in_the_draws_outside_order(chunk, keep, monkeypatch):
    if not keep:
        monkeypatch.setattr(posterior, "KEEP_DRAWS_BYTES", 0)
    post = _posterior(2, [3, 3, 6, 6, 6])
    rng = np.random.default_rng(2)
    X = rng.uniform(-1, 1, (2, 450, 2))
    y = np.sin(3 * X[..., 0]) + 0.3 * rng.normal(size=(2, 450))
    d = torch.tensor([0, 1, 0, 1, 1])
    with torch.no_grad():
        L1, rss = _plain_elbo_l1(post, X, y, d, 5, chunk)
    el = post.elbo(X, y, d, draws=5, chunk=chunk)
    assert np.array_equal(el["L1"], L1)
    assert np.array_equal(el["rss"], rss)
    # negative control: one ulp away is seen as different (the comparison is exact)
    assert not np.array_equal(el["L1"], np.nextafter(L1, np.inf))
