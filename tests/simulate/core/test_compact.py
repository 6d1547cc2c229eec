"""The compact pass of a sparse draw (``simulate.core.compact``): the dense pass's outputs to
float rounding, the live units as defined, the dense pass itself where the compact one does
not pay or a draw is not finite, and the posterior's ELBO and test metrics unchanged by it.
Tolerance 1e-12 relative in float64: the passes add the same nonzero terms in another
order (a few ulps at these sizes); the negative control shows the check sees a change of one
live weight."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from simulate.core import Hyper, Layout, compact
from simulate.core.compact import draw_pass, live_units
from simulate.core.posterior import Posterior
from simulate.core.state import init_state


def _sparse_theta(layout: Layout, live: int, seed: int, edge_keep: float = 0.5):
    """Drawn-like networks: each model keeps ``live`` random units per hidden layer (the
    rest of its units and their edges exactly zero) and about ``edge_keep`` of the edges
    among them; padding zero."""
    g = torch.Generator().manual_seed(seed)
    theta = torch.randn(layout.E, layout.P, generator=g, dtype=torch.float64)
    keep = torch.rand(layout.E, layout.P, generator=g) < edge_keep
    theta = theta * keep * layout.mask(dtype=torch.float64)
    for e, w in enumerate(layout.widths):
        for l in range(layout.depth):
            dead = torch.randperm(w, generator=g)[min(live, w) :]
            layout.block(theta[e : e + 1], l)[0, dead, :] = 0  # no input, no bias
            layout.block(theta[e : e + 1], l + 1)[0, :, dead] = 0  # no output
    return theta


@settings(max_examples=40, deadline=None)
@given(
    depth=st.integers(1, 3),
    p=st.integers(1, 4),
    widths=st.lists(st.sampled_from([8, 16, 64]), min_size=1, max_size=4),
    live=st.integers(0, 10),
    seed=st.integers(0, 2**16),
)
def test_the_compact_pass_is_the_dense_pass_to_rounding(depth, p, widths, live, seed):
    layout = Layout(p, depth, widths)
    theta = _sparse_theta(layout, live, seed)
    x = torch.rand(len(widths), 300, p, dtype=torch.float64) * 2 - 1
    fw = draw_pass(layout, theta)
    dense = layout.forward(theta, x)
    np.testing.assert_allclose(fw(x, layout.augment(x), {}), dense, rtol=1e-12, atol=1e-12)


def test_a_sparse_draw_takes_the_compact_pass_and_a_changed_live_weight_is_seen():
    layout = Layout(2, 2, [64, 64])
    theta = _sparse_theta(layout, 6, 3)
    fw = draw_pass(layout, theta)
    assert isinstance(fw, compact._Compact)
    x = torch.rand(2, 500, 2, dtype=torch.float64) * 2 - 1
    out = fw(x)
    assert float(out[0].std()) > 0  # some hidden unit is active: not the bias alone
    # negative control: the last layer's live weights doubled change the output
    changed = theta.clone()
    layout.block(changed[:1], layout.depth)[0, :, :-1] *= 2.0
    assert not torch.allclose(draw_pass(layout, changed)(x)[0], out[0], rtol=1e-6)


def test_live_units_are_on_and_needed():
    layout = Layout(1, 2, [4])
    theta = torch.zeros(1, layout.P, dtype=torch.float64)
    b0, b1, b2 = (layout.block(theta, l)[0] for l in range(3))
    b0[0, 0] = 1.0  # unit 0 of layer 1: an input weight
    b0[1, -1] = 1.0  # unit 1: a bias only
    b0[2, 0] = 1.0  # unit 2: on, but nothing above reads it
    b1[0, 0], b1[0, 1], b1[1, 3] = 1.0, 1.0, 1.0  # unit 3 of layer 1 is off: its weight is idle
    b2[0, 0], b2[0, 1] = 1.0, 0.0  # the output reads unit 0 of layer 2 only
    lives = live_units(layout, theta[0])
    assert lives[0].tolist() == [0, 1]  # 2 is not needed, 3 is off
    assert lives[1].tolist() == [0]  # 1 is off (its one input is off), the rest unread
    x = torch.rand(1, 50, 1, dtype=torch.float64) * 2 - 1
    np.testing.assert_allclose(draw_pass(layout, theta)(x), layout.forward(theta, x), rtol=1e-14)


def test_a_dense_or_non_finite_draw_takes_the_dense_pass_bit_for_bit():
    layout = Layout(3, 2, [16, 16])
    g = torch.Generator().manual_seed(0)
    theta = torch.randn(2, layout.P, generator=g, dtype=torch.float64)
    x = torch.rand(2, 40, 3, generator=g, dtype=torch.float64)
    assert torch.equal(draw_pass(layout, theta)(x), layout.forward(theta, x))
    sparse = _sparse_theta(layout, 2, 1)
    sparse[1, 0] = float("nan")  # a diverged model: NaN where the dense pass gives NaN
    fw = draw_pass(layout, sparse)
    assert not isinstance(fw, compact._Compact)
    assert torch.equal(fw(x).isnan(), layout.forward(sparse, x).isnan())


@pytest.mark.parametrize("keep", [True, False])
def test_the_posteriors_elbo_and_test_metrics_do_not_change(keep, monkeypatch):
    hyper = Hyper()
    layout = Layout(1, 2, [64, 32])
    params = init_state(layout, hyper, [0, 1]).params.to(torch.float64).clone()
    params[2] = torch.where(torch.rand(params[2].shape) < 0.03, 4.0, -9.0)  # nu sparse
    post = Posterior(layout, hyper, params, torch.tensor([0, 1]))
    if not keep:
        monkeypatch.setattr("simulate.core.posterior.KEEP_DRAWS_BYTES", 0)
    assert isinstance(draw_pass(layout, post.draw(0)), compact._Compact)
    rng = np.random.default_rng(0)
    X, Xt = rng.uniform(-1, 1, (1, 3000, 1)), rng.uniform(-1, 1, (700, 1))
    y = np.sin(3 * X[..., 0]) + rng.normal(size=(1, 3000))
    truth = np.cos(Xt[:, 0])
    fast = post.elbo(X, y, [0, 0], draws=4, chunk=512), post.test_metrics(truth, Xt, 5)
    monkeypatch.setattr(compact, "PAYS_BELOW", -1.0)  # the dense pass everywhere
    slow = post.elbo(X, y, [0, 0], draws=4, chunk=512), post.test_metrics(truth, Xt, 5)
    for k in ("L1", "rss", "elbo"):
        np.testing.assert_allclose(fast[0][k], slow[0][k], rtol=1e-12)
    np.testing.assert_allclose(fast[1][0], slow[1][0], rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(fast[1][1], slow[1][1], rtol=1e-10, atol=1e-15)
