"""The noise sd learned with each model (``Trainer(learn_noise=True)``): the step with a
per-model noise equals the step with that known sigma, every path agrees, and the EM step
sets each sd to the ELBO's maximiser given q."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from simulate.core import Hyper, StepOptions
from simulate.core.training import build_trainer


def _data(n=400, seed=0, noise=0.3):
    r = np.random.default_rng(seed)
    X = r.uniform(-1, 1, (n, 2))
    y = np.sin(3 * X[:, 0]) + noise * r.normal(size=n)
    return torch.tensor(X, dtype=torch.float32)[None], torch.tensor(y, dtype=torch.float32)[None]


def _trainer(hyper, widths=(4, 6), learn=False, **options):
    X, y = _data()
    return build_trainer(
        hyper, list(widths), [11 + k for k in range(len(widths))], X, y, [0] * len(widths),
        depth=2, options=StepOptions(learn_noise=learn, **options),
    )  # fmt: skip


H = dict(batch_size=64, lambda_s=3.0)


@pytest.mark.parametrize("family", ["spike_slab", "dense", "horseshoe"])
@pytest.mark.parametrize("autograd", [False, True])
def test_a_per_model_noise_is_the_known_noise_of_each_model(family, autograd):
    """Two models with noise sds 0.5 and 2.0 (held fixed: no EM update) train exactly as
    each would with that sigma known (float rounding: 1e-5 after 30 steps)."""
    sds = (0.5, 2.0)
    both = _trainer(Hyper(family=family, sigma=1.0, **H), learn=True, autograd=autograd,
                    noise_every=10**9)  # fmt: skip
    both.noise_sd.copy_(torch.tensor(sds))
    both.fit(30)
    for k, s in enumerate(sds):
        alone = _trainer(Hyper(family=family, sigma=s, **H), autograd=autograd)
        alone.fit(30)
        np.testing.assert_allclose(
            both.state.params[:, k].numpy(), alone.state.params[:, k].numpy(), atol=1e-5
        )
    # negative control: the other model's noise gives other parameters
    other = _trainer(Hyper(family=family, sigma=sds[1], **H), autograd=autograd)
    other.fit(30)
    assert not np.allclose(both.state.params[:, 0].numpy(), other.state.params[:, 0].numpy())


def test_the_em_step_sets_each_sd_to_the_elbo_maximiser_given_q():
    """After training, a window of steps at a fixed q (the models held, their terms still
    computed) then :meth:`update_noise` gives sd^2 = the steps' mean RSS estimate / n, an
    estimate of E_q[RSS] / n; the full-data value from 200 posterior draws agrees within
    the estimates' Monte Carlo error (5%: a draw's RSS varies by about 40% between
    posterior draws here, indicators flipping, so 2,000 training draws and 1,000 evaluation
    draws leave relative SEs of about 1% and 1.3%: 5% is 3 SE of the difference)."""
    tr = _trainer(Hyper(sigma=1.0, **H), learn=True, noise_every=200)
    tr.fit(1600)
    tr.noise_every = 10**9
    tr.frozen[:] = True  # q fixed while the window collects
    tr.fit(2000)
    tr.frozen[:] = False
    tr.update_noise()
    X, y = _data()
    rss = tr.posterior().elbo(X, y, draws=1000)["rss"]
    np.testing.assert_allclose(tr.noise_sd.numpy() ** 2, rss / X.shape[1], rtol=0.05)
    assert np.all(np.abs(tr.noise_sd.numpy() - 0.3) < 0.1)  # near the data's noise, 0.3
    # the ELBO at the learned sd beats it at the known start and at twice the learned sd
    post = tr.posterior()
    at = post.elbo(X, y, draws=50)["elbo"]
    for factor in (1 / tr.noise_sd, 2 * torch.ones(2)):
        post.noise_sd = tr.noise_sd.double() * factor.double()
        assert np.all(post.elbo(X, y, draws=50)["elbo"] < at)


def test_held_models_keep_their_sd_and_the_history_records_it():
    tr = _trainer(Hyper(sigma=1.0, **H), learn=True, noise_every=50)
    tr.frozen[1] = True
    tr.fit(100, record_every=50)
    assert tr.noise_sd[1].item() == 1.0 and tr.noise_sd[0].item() != 1.0
    assert "noise_sd" in tr.history[-1] and len(tr.history[-1]["noise_sd"]) == 2
    warm = _trainer(Hyper(sigma=0.1, **H), learn=True, noise_every=50)
    warm.pause_noise()  # a warm-up: sds fixed, and its steps not collected
    warm.fit(120)
    assert warm._rss_steps == 0 and np.allclose(warm.noise_sd.numpy(), 0.1)
    warm.resume_noise()
    warm.fit(50)  # the first update averages these 50 steps only
    assert warm._rss_steps == 0 and not np.allclose(warm.noise_sd.numpy(), 0.1)


def test_fit_until_updates_the_noise_at_window_ends():
    from simulate.core.stopping import StopRule

    tr = _trainer(Hyper(sigma=1.0, **H), learn=True)
    tr.fit_until(StopRule(max_steps=250, window=100))
    assert np.all(tr.noise_sd.numpy() < 0.9)  # two window ends moved it from 1 towards 0.3
    assert tr.posterior().noise_sd is not None


def test_learned_noise_is_refused_where_it_has_no_meaning():
    with pytest.raises(ValueError, match="Gaussian likelihood"):
        _trainer(Hyper(likelihood="categorical", **H), learn=True)
    tr = _trainer(Hyper(sigma=1.0, **H), learn=True)
    with pytest.raises(ValueError, match="known sigma"):
        tr.posterior().hellinger_sq(lambda X: X[:, 0], np.zeros((5, 2)))
    known = _trainer(Hyper(sigma=1.0, **H))
    for method in (known.update_noise, known.pause_noise, known.resume_noise):
        with pytest.raises(ValueError, match="noise is known"):
            method()
    with pytest.raises(ValueError, match="noise_every"):
        StepOptions(learn_noise=True, noise_every=0)
    with pytest.raises(ValueError, match="noise_floor"):
        StepOptions(learn_noise=True, noise_floor=0.0)


@pytest.mark.slow
def test_the_compiled_step_reads_the_updated_noise():
    """The compiled step reads the sds the trainer rewrites in place: the same learned sds
    and parameters as the eager step (float rounding: 1e-4 after 600 steps)."""
    eager = _trainer(Hyper(sigma=1.0, **H), learn=True, noise_every=100)
    comp = _trainer(Hyper(sigma=1.0, **H), learn=True, noise_every=100, compile=True)
    eager.fit(600), comp.fit(600)
    assert np.all(comp.noise_sd.numpy() < 0.9)
    np.testing.assert_allclose(comp.noise_sd.numpy(), eager.noise_sd.numpy(), rtol=1e-4)
    np.testing.assert_allclose(comp.state.params.numpy(), eager.state.params.numpy(), atol=1e-4)
