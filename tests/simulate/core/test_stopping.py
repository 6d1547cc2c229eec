"""The stopping rule (``simulate.core.stopping``: windows, patience, the KL's change, the
held-out risk, validation and doubling) and the trainer's stopped models (frozen models do
not change; a model stopped inside a batch equals it trained alone)."""

import math

import numpy as np
import pytest
import torch

from simulate.core import Batch, ELBOTerms, Hyper, Info, Layout, Trainer
from simulate.core.stopping import StopRule, StopState, update
from tests.factories import assert_model_alone


def info(total, kl):
    """A step's Info with this objective and KL part (L1 the rest, nobody failed)."""
    total, kl = (torch.as_tensor(x, dtype=torch.float64) for x in (total, kl))
    failed = torch.zeros(total.shape, dtype=torch.bool)
    return Info(ELBOTerms(total - kl, kl, torch.zeros_like(kl)), failed)


def run_rule(curve, rule, E=1, kl=lambda t: np.array([50.0])):
    conv = StopState.start(rule, E)
    for t in range(rule.max_steps):
        conv, ev = update(conv, info(curve(t), kl(t)))
        if ev is not None and bool(conv.done.all()):
            break
    return conv


def window_rel(curve, w, k):
    """Noiseless relative improvement between windows k-1 and k."""
    prev = np.mean([curve(t) for t in range((k - 1) * w, k * w)])
    cur = np.mean([curve(t) for t in range(k * w, (k + 1) * w)])
    return (prev - cur) / abs(cur)


def test_stopping_rule_stops_within_its_tolerance():
    """A decaying toy objective stops at the first window after which the improvement was
    below tol twice in a row; a steadily improving one runs to the cap (negative control)."""
    rule = StopRule(max_steps=20_000, window=100, tol=1e-3, patience=2)

    def decay(t):
        return np.array([100.0 + 1000.0 * math.exp(-t / 400.0)])

    conv = run_rule(decay, rule)
    assert bool(conv.converged[0]) and int(conv.steps[0]) < rule.max_steps
    k = int(conv.steps[0]) // rule.window - 1  # index of the last window
    assert window_rel(decay, 100, k) < rule.tol and window_rel(decay, 100, k - 1) < rule.tol
    assert window_rel(decay, 100, k - 2) >= rule.tol  # not a window later than needed
    assert conv.rel_change[0] == pytest.approx(window_rel(decay, 100, k), rel=1e-9)

    def steady(t):  # improves by 10 tol per window, for ever
        return np.array([1e6 * (1 - 1e-4) ** t])

    capped = run_rule(steady, StopRule(max_steps=3000, window=100, tol=1e-3))
    assert not bool(capped.converged[0]) and int(capped.steps[0]) == 3000


def test_a_pruning_model_does_not_stop():
    """The objective has levelled off (relative to its size) but the KL still falls by
    10 nats a window, more than max(tol KL, kl_abs): not converged until the KL settles."""
    rule = StopRule(max_steps=12_000, window=100, tol=1e-3, patience=2, kl_abs=2.0)

    def kl(t):  # 1000 nats shed over 10,000 steps (10 a window), then constant at 200
        return np.array([200.0 + max(0.0, 1000.0 - 0.1 * t)])

    conv = run_rule(lambda t: 47_000.0 + kl(t), rule, kl=kl)
    assert bool(conv.converged[0])
    assert 10_000 < int(conv.steps[0]) <= 10_000 + 3 * rule.window
    # the same objective without the KL test would have stopped within 300 steps
    flat = run_rule(lambda t: 47_000.0 + kl(t), rule)
    assert int(flat.steps[0]) <= 300 and float(conv.kl_change[0]) < 2.0


def test_the_rule_waits_for_the_held_out_risk():
    """Objective and KL flat from the start (without the risk the rule stops after three
    windows).  Per model, a held-out risk still falling by 5% a window keeps training to the
    cap; one that has levelled off (1 + 0.5 exp(-k/2) at window k) stops, at the first
    window after which its relative change was below risk_tol twice in a row; the
    decisions are per model.  The risk is asked for at window ends only."""
    rule = StopRule(max_steps=3000, window=100, tol=1e-3, patience=2, risk_tol=0.01)
    calls = []

    def risk():
        k = len(calls)
        calls.append(k)
        return np.array([0.95**k, 1 + 0.5 * math.exp(-k / 2)])

    conv = StopState.start(rule, 2)
    flat = torch.full((2,), 100.0, dtype=torch.float64)
    for _ in range(rule.max_steps):
        conv, _ev = update(conv, info(flat, flat / 10), risk)
        if bool(conv.done.all()):
            break
    assert len(calls) == rule.max_steps // rule.window  # once per window end
    falling, level = conv.summary()["converged"], conv.summary()["steps"]
    assert falling == [False, True] and level[0] == rule.max_steps
    rel = [abs(math.exp(-k / 2) - math.exp(-(k - 1) / 2)) * 0.5 / (1 + 0.5 * math.exp(-k / 2))
           for k in range(1, 30)]  # fmt: skip
    # windows k and k + 1 (0-based) the first two quiet in a row: stop at the end of k + 1
    k = next(k for k in range(1, 29) if rel[k - 1] < 0.01 and rel[k] < 0.01)
    assert level[1] == (k + 2) * rule.window
    assert conv.summary()["risk_change"][1] < 0.01 < conv.summary()["risk_change"][0]
    # without the risk the same objective stops both models at once (the negative control)
    plain = StopState.start(StopRule(max_steps=3000, window=100, tol=1e-3, patience=2), 2)
    for _ in range(3000):
        plain, _ev = update(plain, info(flat, flat / 10))
        if bool(plain.done.all()):
            break
    assert plain.summary()["converged"] == [True, True] and max(plain.summary()["steps"]) < 500
    with pytest.raises(ValueError, match="risk"):
        c = StopState.start(rule, 2)
        for _ in range(rule.window):
            c, _ev = update(c, info(flat, flat / 10))
    with pytest.raises(ValueError, match="risk_tol"):
        StopRule(risk_tol=0.0)
    assert rule.doubled().risk_tol == 0.005


def test_stop_rule_validation_and_doubling():
    with pytest.raises(ValueError, match="tol"):
        StopRule(tol=0)
    with pytest.raises(ValueError, match="window"):
        StopRule(window=0)
    d = StopRule(max_steps=100, tol=0.01).doubled()
    assert (d.max_steps, d.tol, d.window, d.kl_abs) == (200, 0.005, 500, 1.0)


def small_problem(E_widths, dtype=torch.float64, l3="paper"):
    g = torch.Generator().manual_seed(0)
    X = torch.rand(1, 256, 1, generator=g, dtype=dtype) * 2 - 1
    y = torch.sin(3 * X[..., 0]) + 0.3 * torch.randn(1, 256, generator=g, dtype=dtype)
    h = Hyper(batch_size=32, lr=1e-2, lambda_s=1.0, l3=l3)
    seeds = [21, 22, 23][: len(E_widths)]
    batch = Batch(X, y, torch.zeros(len(E_widths), dtype=torch.int64))
    return h, seeds, batch


@pytest.mark.parametrize("l3", ["paper", "exact"])  # hand-written and autograd steps
def test_frozen_model_does_not_change(l3):
    h, seeds, batch = small_problem([3, 5], l3=l3)
    tr = Trainer(Layout(1, 2, [3, 5]), h, seeds, batch, dtype=torch.float64)
    for _ in range(3):
        tr.step()
    tr.frozen = torch.tensor([True, False])
    before = tr.state.params.clone()
    for _ in range(5):
        tr.step()
    assert torch.equal(tr.state.params[:, 0], before[:, 0])
    assert not torch.equal(tr.state.params[:, 1], before[:, 1])
    assert not bool(tr.state.health.failed.any())


def test_model_stopped_inside_a_batch_equals_it_trained_alone():
    widths = [2, 8]
    h, seeds, batch = small_problem(widths)
    rule = StopRule(max_steps=3000, window=50, tol=2e-2, patience=2)
    together = Trainer(Layout(1, 2, widths), h, seeds, batch, dtype=torch.float64)
    s = together.fit_until(rule)
    assert all(s["converged"]) and s["steps"][0] != s["steps"][1]  # one froze before the other
    for e, w in enumerate(widths):
        alone = Trainer(
            Layout(1, 2, [w]),
            h,
            [seeds[e]],
            Batch(batch.X, batch.y, batch.data_index[:1]),
            dtype=torch.float64,
        )
        a = alone.fit_until(rule)
        assert a["steps"][0] == s["steps"][e] and a["converged"][0] == s["converged"][e]
        assert_model_alone(together, e, alone)
