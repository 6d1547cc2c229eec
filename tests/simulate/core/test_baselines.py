"""The paper's baselines in the batched core: Dense-BNN and HS-BNN (simulate.core.families)."""

import math

import numpy as np
import pytest
import torch
from scipy import integrate, stats

from simulate.core import Batch, Hyper, Layout, Trainer
from simulate.core.families import kl_lognormal_halfcauchy
from simulate.estimators import DenseBNNRegressor, HSBNNRegressor, SVIRegressor
from simulate.truths.functions import TeacherNetwork, make_regression_data


@pytest.mark.parametrize(("m", "s", "b"), [(0.0, 0.1, 1.0), (-2.0, 0.5, 1.0), (1.0, 0.3, 1e-2)])
def test_lognormal_halfcauchy_kl_against_numerical_integration(m, s, b):
    def integrand(t):
        q = stats.lognorm.pdf(t, s, scale=math.exp(m))
        p = 2 / (math.pi * b * (1 + (t / b) ** 2))
        return q * (math.log(q) - math.log(p)) if q > 0 else 0.0

    lo, hi = math.exp(m - 12 * s), math.exp(m + 12 * s)
    want, _ = integrate.quad(integrand, lo, hi, limit=400, points=[math.exp(m)])
    got = float(
        kl_lognormal_halfcauchy(
            torch.tensor(m, dtype=torch.float64), torch.tensor(s, dtype=torch.float64), b
        )
    )
    assert got == pytest.approx(want, rel=1e-6, abs=1e-8)


@pytest.mark.parametrize("family", ["dense", "horseshoe"])
def test_baseline_batching_is_exact(family):
    g = torch.Generator().manual_seed(0)
    X = torch.rand(1, 400, 3, generator=g, dtype=torch.float64) * 2 - 1
    y = X[..., 0] + 0.2 * torch.randn(1, 400, generator=g, dtype=torch.float64)
    h = Hyper(family=family, batch_size=50)
    hs = family == "horseshoe"
    widths, seeds = [3, 6], [7, 8]
    both = Trainer(
        Layout(3, 2, widths, node_scales=hs),
        h,
        seeds,
        Batch(X, y, torch.zeros(2, dtype=torch.int64)),
        dtype=torch.float64,
    )
    tb = [both.step() for _ in range(3)]
    for e, w in enumerate(widths):
        one = Trainer(
            Layout(3, 2, [w], node_scales=hs),
            h,
            [seeds[e]],
            Batch(X, y, torch.zeros(1, dtype=torch.int64)),
            dtype=torch.float64,
        )
        to = [one.step() for _ in range(3)]
        for a, b in zip(tb, to, strict=True):
            assert float(a.total[e]) == pytest.approx(float(b.total[0]), rel=1e-10)
            assert float(a.L3[e]) == 0.0


def test_horseshoe_needs_node_scales():
    X = torch.rand(1, 100, 2)
    with pytest.raises(ValueError, match="node_scales"):
        Trainer(
            Layout(2, 1, [3]),
            Hyper(family="horseshoe", batch_size=10),
            [0],
            Batch(X, X[..., 0], torch.zeros(1, dtype=torch.int64)),
        )


@pytest.fixture(scope="module")
def irrelevant_inputs():
    """y depends on the first 2 of 8 inputs."""
    t = TeacherNetwork(p=8, p_active=2, widths=(4,), seed=5, bias="add")
    X, y = make_regression_data(t, 3000, 8, 0.5, seed=0)
    Xt, yt = make_regression_data(t, 5000, 8, 0.5, seed=1)
    return X, y, Xt, yt


@pytest.mark.parametrize("cls", [DenseBNNRegressor, HSBNNRegressor])
def test_baseline_contract_and_fit_beats_the_mean(cls, irrelevant_inputs):
    X, y, Xt, yt = irrelevant_inputs
    m = cls(width=8, depth=1, sigma=0.5, epochs=60, batch_size=256, random_state=0).fit(X, y)
    assert m.get_params()["width"] == 8 and m.selected_width_ == 8
    mean, sd = m.predict(Xt[:7], return_std=True)
    assert mean.shape == sd.shape == (7,)
    assert m.n_edges_ == m.posterior_.edges()["H"][0]  # no indicators: every edge counts
    rmse = math.sqrt(np.mean((m.predict(Xt) - yt) ** 2))
    null = math.sqrt(np.mean((yt - yt.mean()) ** 2))  # predicting the mean: about 0.74
    # within 10% of the noise floor sigma = 0.5 (its SE on 5000 points is about 0.005)
    assert rmse < 0.55 < null


def _irrelevant_weight_energy(model):
    """E_q[w^2] of first-layer weights from the 6 irrelevant inputs over 30 draws, relative
    to the same for the 2 relevant ones."""
    post = model.posterior_
    ws = torch.stack(
        [post.layout.weight(post.draw(t)[:, : post.layout.P_net], 0) for t in range(30)]
    )  # [T, E, out, in]
    energy = (ws**2).mean(dim=(0, 1, 2))
    return float(energy[2:].mean() / energy[:2].mean())


# one small fit on the irrelevant-inputs data, in the paper's setting (known sigma,
# targets as generated, lambda_s = 3)
IRRELEVANT_FIT = {
    "width": 8, "depth": 1, "sigma": 0.5, "epochs": 60, "batch_size": 256, "random_state": 0,
    "standardize_y": False, "lambda_s": 3.0,
}  # fmt: skip


def test_horseshoe_shrinks_irrelevant_inputs_more_than_dense(irrelevant_inputs):
    X, y, _, _ = irrelevant_inputs
    kw = IRRELEVANT_FIT
    dense = DenseBNNRegressor(**kw).fit(X, y)
    hs = HSBNNRegressor(**kw).fit(X, y)
    assert _irrelevant_weight_energy(hs) < _irrelevant_weight_energy(dense)


def test_svi_keeps_the_spike_and_slab_family(irrelevant_inputs):
    """SVI's edges carry inclusion probabilities (initially 0.99) that training lowers
    (pruning: 77.1 of 81 after 60 epochs, measured); the Dense-BNN baseline counts every
    edge (checked above)."""
    X, y, _, _ = irrelevant_inputs
    kw = IRRELEVANT_FIT
    m = SVIRegressor(**kw).fit(X, y)
    e = m.posterior_.edges()
    assert e["sum_nu"][0] < 0.99 * e["H"][0] - 2
