"""The benchmark's textbook reference trainer computes the core's loss and gradients."""

import pytest
import torch

from simulate.bench.baselines import TextbookASVI
from simulate.core import Batch, Hyper, Layout, Trainer


def _pair(p=3, depth=2, width=4, n=256, hyper=None):
    hyper = hyper or Hyper(batch_size=64)
    g = torch.Generator().manual_seed(0)
    X = torch.rand(n, p, generator=g, dtype=torch.float64) * 2 - 1
    y = X[:, 0] - X[:, 1] + 0.3 * torch.randn(n, generator=g, dtype=torch.float64)
    core = Trainer(
        Layout(p, depth, [width]), hyper, [5], Batch(X[None], y[None], [0]), dtype=torch.float64
    )
    ref = TextbookASVI(p, depth, width, hyper, X, y, seed=5)
    # the reference's parameters := the core model's (block l of the core is [out, in + 1])
    lay = core.layout
    with torch.no_grad():
        for l in range(depth + 1):
            for j in range(3):
                blk = lay.block(core.state.params[j], l)[0]
                ref.layers[2 * l][j].data = blk[:, :-1].clone()
                ref.layers[2 * l + 1][j].data = blk[:, -1].clone()
    return core, ref


def _core_noise(core, offset, model=0):
    """The core's draw at ``offset`` cut into per-tensor (eps, u): of one model (``model``),
    or stacked over all models (``model=None``, the vmap ensemble's form)."""
    lay = core.layout
    eps = core.sampler.eps_stream.normal(offset, torch.float64)
    u = core.sampler.gumbel_stream.uniform(offset, torch.float64)
    pick = slice(None) if model is None else model
    out = []
    for l in range(lay.depth + 1):
        e, v = lay.block(eps, l)[pick], lay.block(u, l)[pick]
        out += [(e[..., :-1], v[..., :-1]), (e[..., -1], v[..., -1])]
    return out


def test_reference_loss_and_gradients_equal_the_core():
    core, ref = _pair()
    xb, yb = core.minibatch()
    params = core.state.params.clone().requires_grad_(True)
    c_terms = core.loss_terms(params, xb, yb, 0)
    r_terms = ref.loss_terms(xb[0, :, :-1], yb[0], _core_noise(core, 0))
    for c, r in zip(c_terms, r_terms, strict=True):
        assert float(c[0].detach()) == pytest.approx(float(r.detach()), rel=1e-12)
    (g_core,) = torch.autograd.grad(sum(t.sum() for t in c_terms), params)
    sum(r_terms).backward()
    lay = core.layout
    for l in range(lay.depth + 1):
        for j in range(3):
            blk = lay.block(g_core[j], l)[0]
            torch.testing.assert_close(ref.layers[2 * l][j].grad, blk[:, :-1], rtol=1e-10, atol=0)
            torch.testing.assert_close(
                ref.layers[2 * l + 1][j].grad, blk[:, -1], rtol=1e-10, atol=0
            )
    # negative control: another draw's noise gives another loss
    other = ref.loss_terms(xb[0, :, :-1], yb[0], _core_noise(core, 1))
    assert float(other[0].detach()) != pytest.approx(float(c_terms[0][0].detach()), rel=1e-6)


def test_reference_trains_and_rejects_what_it_does_not_cover():
    _, ref = _pair()
    first = ref.step()
    for _ in range(200):
        last = ref.step()
    assert last < first  # the ELBO's negative falls under Adam
    X, y = torch.zeros(100, 3), torch.zeros(100)
    with pytest.raises(ValueError, match="textbook trainer covers"):
        TextbookASVI(3, 1, 2, Hyper(slab="uniform"), X, y)
    with pytest.raises(ValueError, match="batch_size"):
        TextbookASVI(3, 1, 2, Hyper(), X, y)
    with pytest.raises(ValueError, match="X must be"):
        TextbookASVI(4, 1, 2, Hyper(batch_size=8), X, y)


def _vmap_pair(E=2, p=3, depth=2, width=4, n=256):
    """A core trainer of E models and the vmap ensemble holding the same parameters."""
    from simulate.bench.baselines import VmapEnsemble

    hyper = Hyper(batch_size=64)
    g = torch.Generator().manual_seed(1)
    X = torch.rand(n, p, generator=g, dtype=torch.float64) * 2 - 1
    y = X[:, 0] * X[:, 2] + 0.3 * torch.randn(n, generator=g, dtype=torch.float64)
    seeds = list(range(5, 5 + E))
    core = Trainer(
        Layout(p, depth, [width] * E), hyper, seeds, Batch(X[None], y[None], [0] * E),
        dtype=torch.float64,
    )  # fmt: skip
    ens = VmapEnsemble(p, depth, width, hyper, X, y, seeds)
    lay = core.layout
    with torch.no_grad():
        for l in range(depth + 1):
            for j, name in enumerate(("mu", "rho", "logit")):
                blk = lay.block(core.state.params[j], l)  # [E, out, in + 1]
                ens.params[f"{name}.{2 * l}"].copy_(blk[:, :, :-1])
                ens.params[f"{name}.{2 * l + 1}"].copy_(blk[:, :, -1])
    return core, ens


def test_vmap_ensemble_loss_and_gradients_equal_the_core():
    """The benchmark's vmap baseline (PyTorch's ensembling recipe) computes the core's
    (L1, L2, L3) and gradients for every model, given the same parameters, minibatches and
    noise; planted errors (the models' noise swapped, one parameter moved) are seen."""
    core, ens = _vmap_pair()
    xb, yb = core.minibatch()
    params = core.state.params.clone().requires_grad_(True)
    c_terms = core.loss_terms(params, xb, yb, 0)
    noise = _core_noise(core, 0, model=None)
    v_terms = ens.loss_terms(xb[..., :-1], yb, noise)  # [E, 3]
    for k, c in enumerate(c_terms):
        torch.testing.assert_close(v_terms[:, k], c.detach(), rtol=1e-12, atol=0)
    (g_core,) = torch.autograd.grad(sum(t.sum() for t in c_terms), params)
    v_terms.sum().backward()
    lay = core.layout
    for l in range(lay.depth + 1):
        for j, name in enumerate(("mu", "rho", "logit")):
            blk = lay.block(g_core[j], l)
            torch.testing.assert_close(ens.params[f"{name}.{2 * l}"].grad, blk[:, :, :-1])
            torch.testing.assert_close(ens.params[f"{name}.{2 * l + 1}"].grad, blk[:, :, -1])
    swapped = [(e.flip(0), u.flip(0)) for e, u in noise]
    other = ens.loss_terms(xb[..., :-1], yb, swapped).detach()
    assert not torch.allclose(other[:, 0], c_terms[0].detach(), rtol=1e-6)
    with torch.no_grad():
        ens.params["mu.2"][1, 0, 0] += 0.1
    moved = ens.loss_terms(xb[..., :-1], yb, noise).detach()
    torch.testing.assert_close(moved[0], v_terms[0].detach())  # model 0 untouched
    assert not torch.allclose(moved[1], v_terms[1].detach(), rtol=1e-9)


def test_vmap_ensemble_trains():
    _, ens = _vmap_pair(E=3)
    first = ens.step()
    for _ in range(200):
        last = ens.step()
    assert last < first
