"""The optimiser recipes of the core: a per-model learning rate lowered on the stopping
rule's plateaus, the KL warm-up, and width continuation (``simulate.core.state.widen``)."""

import numpy as np
import pytest
import torch

from simulate.core import Batch, Hyper, Layout, Trainer
from simulate.core.hyper import inclusion_rate
from simulate.core.state import init_state, widen
from simulate.core.stopping import StopRule, StopState, update
from tests.factories import assert_model_alone, family_cases


def make_batch(E, n=256, p=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(1, n, p, generator=g, dtype=torch.float64) * 2 - 1
    y = X[..., 0] * 2 - X[..., -1] + 0.3 * torch.randn(1, n, generator=g, dtype=torch.float64)
    return Batch(X, y, torch.zeros(E, dtype=torch.int64))


@pytest.mark.parametrize("kw, node_scales", family_cases({"l3": "exact"}))
def test_kl_warmup_weights_the_kl_gradient_and_reports_the_elbo(kw, node_scales):
    """At step t of a warm-up of T steps the step's gradient is grad L1 + (t / T) grad (L2 +
    L3) (plain autograd through loss_terms), for every family and step path; the terms it
    reports are the ELBO's, unweighted."""
    T = 4
    h = Hyper(batch_size=100, mc_samples=2, lr=1e-3, kl_warmup=T, **kw)
    lay = Layout(3, 2, [4, 6], node_scales=node_scales)
    tr = Trainer(lay, h, [1, 2], make_batch(2), dtype=torch.float64)
    ref = Trainer(lay, h, [1, 2], make_batch(2), dtype=torch.float64)
    xb, yb = ref.minibatch()
    params = ref.state.params.clone().requires_grad_(True)
    L1, L2, L3 = ref.loss_terms(params, xb, yb, 0)
    (g1,) = torch.autograd.grad(L1.sum(), params, retain_graph=True)
    kl = (L2 + L3).sum()
    (gk,) = torch.autograd.grad(kl, params, allow_unused=True) if kl.requires_grad else (None,)
    g = g1 + (0 if gk is None else gk / T)
    terms = tr.step()
    for got, want in zip(terms, (L1, L2, L3), strict=True):
        np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-12)
    grad = tr.state.opt.exp_avg / (1 - h.betas[0])
    np.testing.assert_allclose(grad.numpy(), g.numpy(), rtol=1e-9, atol=1e-10)
    # negative control: without the warm-up the same step's gradient is the whole one
    full = g1 + (0 if gk is None else gk)
    if gk is not None and float(gk.abs().max()) > 0:
        assert not np.allclose(grad.numpy(), full.numpy(), rtol=1e-6, atol=1e-8)


def test_the_warmup_ends_at_weight_one():
    """After T steps the warm-up's step is the plain step: the same parameters as a trainer
    without warm-up given the same state."""
    lay, batch = Layout(3, 2, [4]), make_batch(1)
    warm = Trainer(lay, Hyper(batch_size=64, kl_warmup=3), [5], batch, dtype=torch.float64)
    for _ in range(3):
        warm.step()
    plain = Trainer(lay, Hyper(batch_size=64), [5], batch, dtype=torch.float64)
    plain.state = warm.state._replace(
        params=warm.state.params.clone(),
        opt=type(warm.state.opt)(*(x if x is None else x.clone() for x in warm.state.opt)),
    )
    warm.step()
    plain.step()
    torch.testing.assert_close(warm.state.params, plain.state.params, rtol=0, atol=0)


def test_lr_scale_multiplies_each_models_step_and_ones_change_nothing():
    """A model's Adam step is its lr_scale times the plain one (the first step moves by
    -lr s g / (|g| + eps)); scale 1 gives the plain step bit for bit."""
    lay, batch, h = Layout(3, 2, [4, 4]), make_batch(2), Hyper(batch_size=64)
    plain = Trainer(lay, h, [1, 2], batch, dtype=torch.float64)
    scaled = Trainer(lay, h, [1, 2], batch, dtype=torch.float64)
    scaled._enable_lr_scale()
    scaled.lr_scale[1] = 0.1
    start = plain.state.params.clone()
    plain.step()
    scaled.step()
    d_plain, d_scaled = plain.state.params - start, scaled.state.params - start
    assert torch.equal(d_scaled[:, 0], d_plain[:, 0])
    torch.testing.assert_close(d_scaled[:, 1], 0.1 * d_plain[:, 1], rtol=1e-12, atol=1e-15)


def _info(total, kl, E=1):
    from simulate.core.objective import ELBOTerms
    from simulate.core.training_step import Info

    t = torch.full((E,), float(total), dtype=torch.float64)
    k = torch.full((E,), float(kl), dtype=torch.float64)
    return Info(ELBOTerms(t - k, k, torch.zeros(E, dtype=torch.float64)),
                torch.zeros(E, dtype=torch.bool))  # fmt: skip


def test_plateaus_lower_the_rate_before_one_stops_the_model():
    """A flat objective is a plateau at every window past the first: with lr_decays = 2 the
    first two plateaus lower the rate (decayed, not converged) and the third stops it;
    without decays the first plateau stops it."""
    rule = StopRule(max_steps=100, window=2, patience=1, lr_decays=2)
    conv = StopState.start(rule, 1)
    events = []
    for _ in range(10):
        conv, ev = update(conv, _info(100.0, 5.0))
        if ev is not None:
            events.append((bool(ev.decayed[0]), bool(ev.newly[0])))
        if bool(conv.done.all()):
            break
    assert events == [(False, False), (True, False), (True, False), (False, True)]
    assert conv.summary()["lr_decays"] == [2] and conv.summary()["steps"] == [8]
    plain = StopState.start(StopRule(max_steps=100, window=2, patience=1), 1)
    stops = []
    for _ in range(4):
        plain, ev = update(plain, _info(100.0, 5.0))
        stops.append(ev)
    assert bool(stops[3].newly[0]) and "lr_decays" not in plain.summary()


def test_no_window_is_quiet_before_not_before():
    conv = StopState.start(StopRule(max_steps=100, window=2, patience=1), 1, not_before=6)
    stopped_at = None
    for t in range(1, 20):
        conv, ev = update(conv, _info(100.0, 5.0))
        if ev is not None and bool(ev.newly[0]):
            stopped_at = t
            break
    assert stopped_at == 8  # the first window ending after step 6 (a flat run stops at 4)


def test_plateau_run_keeps_models_independent_and_records_the_decays():
    """fit_until with lr_decays: each model's learning rate is lr_factor^decays, and a model
    trained beside others ends where it ends trained alone."""
    rule = StopRule(max_steps=600, window=50, tol=5e-2, patience=1, kl_abs=50.0, lr_decays=1)
    lay, batch, h = Layout(3, 2, [3, 6]), make_batch(2), Hyper(batch_size=64)
    together = Trainer(lay, h, [1, 2], batch, dtype=torch.float64)
    conv = together.fit_until(rule)
    assert conv["lr_decays"] == [1, 1]  # the loose tolerance makes both plateau early
    np.testing.assert_allclose(together.lr_scale.numpy(), np.full((2, 3), 0.1))
    alone = Trainer(Layout(3, 2, [6]), h, [2], make_batch(1), dtype=torch.float64)
    conv1 = alone.fit_until(rule)
    assert conv1["steps"][0] == conv["steps"][1]
    assert_model_alone(together, 1, alone)


def test_widen_keeps_the_narrow_networks_mean_function():
    h = Hyper()
    narrow, wide = Layout(3, 2, [2, 4]), Layout(3, 2, [4, 8])
    pn = init_state(narrow, h, [1, 2]).params
    pw = init_state(wide, h, [3, 4]).params
    out = widen(narrow, pn, wide, pw)
    X = torch.rand(2, 40, 3) * 2 - 1
    mean_n = narrow.forward(pn[0] * narrow.mask(), X)
    torch.testing.assert_close(wide.forward(out[0] * wide.mask(), X), mean_n, rtol=0, atol=1e-6)
    # negative control: the random wide start computes another function
    assert (wide.forward(pw[0] * wide.mask(), X) - mean_n).abs().max() > 1e-2
    # every row of the narrow model's slots is carried over (scale and inclusion too)
    real = widen(narrow, pn, narrow, init_state(narrow, h, [7, 8]).params)
    torch.testing.assert_close(real * narrow.mask(), pn * narrow.mask(), rtol=0, atol=0)
    with pytest.raises(ValueError, match="narrow <= wide"):
        widen(wide, pw, narrow, pn)


def test_held_locations_stay_while_scales_and_inclusions_move():
    lay, batch = Layout(3, 2, [4, 4]), make_batch(2)
    tr = Trainer(lay, Hyper(batch_size=64), [1, 2], batch, dtype=torch.float64)
    start = tr.state.params.clone()
    tr.hold_locations()
    for _ in range(5):
        tr.step()
    d = (tr.state.params - start).abs().amax(-1)  # [3, E]
    assert (d[0] == 0).all() and (d[1] > 0).all() and (d[2] > 0).all()


def test_inclusion_learning_rate_moves_only_the_logits_faster():
    """``lr_inclusion``: the logits' first Adam step is lr_inclusion / lr times the plain
    one; the locations and slab scales move exactly as without it."""
    lay, batch = Layout(3, 2, [4]), make_batch(1)
    plain = Trainer(lay, Hyper(batch_size=64), [1], batch, dtype=torch.float64)
    fast = Trainer(lay, Hyper(batch_size=64, lr_inclusion=5e-2), [1], batch, dtype=torch.float64)
    start = plain.state.params.clone()
    plain.step()
    fast.step()
    dp, df = plain.state.params - start, fast.state.params - start
    assert torch.equal(df[:2], dp[:2])
    torch.testing.assert_close(df[2], 10 * dp[2], rtol=1e-12, atol=1e-15)
    assert dp[2].abs().max() > 0


def test_inclusion_rate_grows_with_n_from_lr_to_its_cap():
    """``inclusion_rate`` (the one formula the sweeps and the estimators share): None (the
    default step path) without ``lr_inclusion`` or at or below the ramp, then lr n / ramp,
    at most ``lr_inclusion``; without a ramp ``lr_inclusion`` at every n."""
    assert inclusion_rate(5e-3, None, 1000, 10**6) is None
    assert inclusion_rate(5e-3, 0.1, None, 10) == 0.1
    assert inclusion_rate(5e-3, 0.1, 1000, 999) is None
    assert inclusion_rate(5e-3, 0.1, 1000, 1000) is None
    assert inclusion_rate(5e-3, 0.1, 1000, 4000) == pytest.approx(2e-2)
    assert inclusion_rate(5e-3, 0.1, 1000, 10**6) == 0.1
    assert inclusion_rate(5e-3, 1e-3, 1000, 10**6) == 1e-3  # a cap below lr: the cap


def test_estimator_ramp_below_n_fits_as_the_default_and_checks_its_value():
    """``ASVIRegressor(lr_inclusion=..., lr_inclusion_ramp=...)``: with n below the ramp the
    fit is the default's to the bit; above it, another; a bad ramp is a ValueError."""
    from simulate.estimators import ASVIRegressor

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (200, 1))
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.standard_normal(200)
    kw = dict(widths=[2, 4], epochs=3, batch_size=64, predict_draws=2, progress=False)
    base = ASVIRegressor(**kw).fit(X, y).predict(X)
    below = ASVIRegressor(lr_inclusion=0.1, lr_inclusion_ramp=10_000, **kw).fit(X, y)
    above = ASVIRegressor(lr_inclusion=0.1, lr_inclusion_ramp=20, **kw).fit(X, y)
    assert np.array_equal(below.predict(X), base)
    assert not np.array_equal(above.predict(X), base)
    with pytest.raises(ValueError, match="lr_inclusion_ramp"):
        ASVIRegressor(lr_inclusion=0.1, lr_inclusion_ramp=-1, **kw).fit(X, y)


def test_estimators_take_the_default_recipe_and_the_classifiers_the_papers_optimiser():
    """The regressors' defaults are ``DEFAULT_RECIPE``'s parameters (said once, in
    ``simulate.sweep.setup.recipes``); the classifiers keep the paper's optimiser (the recipes
    were measured on regression); a recipe without an estimator form is refused."""
    from simulate.estimators import ASVIClassifier, ASVIRegressor, recipe_params
    from simulate.sweep.setup.recipes import DEFAULT_RECIPE, RECIPES

    reg, clf = ASVIRegressor().get_params(), ASVIClassifier().get_params()
    for k, v in recipe_params(DEFAULT_RECIPE).items():
        assert reg[k] == v
    for k, v in recipe_params("baseline").items():
        assert clf[k] == v
    assert recipe_params("logit-ramp-plateau") == {
        "lr": 5e-3, "lr_inclusion": 0.1, "lr_inclusion_ramp": 1000, "lr_decays": 2}  # fmt: skip
    for name in ("batch", "restarts", "continuation", "kl-warmup", "epochs"):
        assert name in RECIPES
        with pytest.raises(ValueError, match="no estimator form"):
            recipe_params(name)


def test_the_learning_rate_scale_is_the_optimisers_state_and_is_replaced_never_written():
    """One route for the learning rate besides ``hyper.lr``: the optimiser's state,
    ``OptState.lr_scale`` (the step's constants and the training state hold none).  A
    plateau decay and ``hold_locations`` give the state a new tensor; the one a caller kept
    from before is untouched (it was rewritten in place when the scale lived in the step's
    constants)."""
    from simulate.core.state import State
    from simulate.core.step import Consts

    assert "lr_scale" not in Consts._fields and "lr_scale" not in State._fields
    rule = StopRule(max_steps=600, window=50, tol=5e-2, patience=1, kl_abs=50.0, lr_decays=1)
    lay, batch, h = Layout(3, 2, [3, 6]), make_batch(2), Hyper(batch_size=64)
    tr = Trainer(lay, h, [1, 2], batch, dtype=torch.float64)
    assert tr.state.opt.lr_scale is None and tr.lr_scale is None  # every model at hyper.lr
    tr._enable_lr_scale()
    before = tr.state.opt.lr_scale
    tr.fit_until(rule)
    assert torch.equal(before, torch.ones(2, 3, dtype=torch.float64))  # not written
    assert tr.lr_scale is tr.state.opt.lr_scale
    np.testing.assert_allclose(tr.state.opt.lr_scale.numpy(), np.full((2, 3), 0.1))
    kept = tr.state.opt.lr_scale
    tr.hold_locations()
    np.testing.assert_allclose(kept.numpy(), np.full((2, 3), 0.1))
    np.testing.assert_allclose(tr.state.opt.lr_scale.numpy(), [[0.0, 0.1, 0.1]] * 2)
    tr.release_stopped()  # the rule stopped both: train them on
    start = tr.state.params.clone()
    tr.step()
    assert torch.equal(tr.state.params[0], start[0])  # the held locations do not move
    assert not torch.equal(tr.state.params[1], start[1])


def test_recipe_takes_its_build_and_fit_settings_as_objects_or_by_name():
    """``build_trainer``'s settings as one ``Build`` (or by name, a name replacing that
    field) and ``train_models``'s as the fields of ``Fit`` and ``Build`` by name train the
    same models bit for bit; an unknown name is a TypeError naming it, and ``fit_trainer``
    trains as its ``Fit`` says."""
    from simulate.core.training import Build, Fit, build_trainer, fit_trainer, train_models

    b = make_batch(2, n=60)
    args = (Hyper(batch_size=20), [2, 3], [1, 2], b.X, b.y, [0, 0])
    by_name = build_trainer(*args, depth=2, dtype=torch.float64)
    by_object = build_trainer(*args, Build(depth=1, dtype=torch.float64), depth=2)
    assert by_object.layout.depth == 2
    for tr in (by_name, by_object):
        tr.fit(4)
    assert torch.equal(by_name.state.params, by_object.state.params)
    trained = train_models(*args, steps=4, depth=2, dtype=torch.float64)
    assert torch.equal(trained.trainer.state.params, by_name.state.params)
    again = build_trainer(*args, depth=2, dtype=torch.float64)
    assert fit_trainer(again, Fit(steps=4)) is None
    assert torch.equal(again.state.params, by_name.state.params)
    with pytest.raises(TypeError, match="unexpected keyword argument 'width'"):
        build_trainer(*args, depth=2, width=3)
    with pytest.raises(TypeError, match="unexpected keyword argument 'step'"):
        train_models(*args, step=4, depth=2)
    with pytest.raises(ValueError, match="either steps or a stopping rule"):
        train_models(*args, depth=2)
