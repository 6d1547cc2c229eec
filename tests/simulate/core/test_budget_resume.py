"""Continuing capped models under a stricter rule (``Trainer.fit_until``'s ``shadow`` and
``resume``): a model that reached the cap of a run with no plateau, continued from its
state there in a run under the stricter rule, ends exactly where that run from the start
ends it.  Exact equality is the claim (``torch.equal``, no tolerance); the negative
controls join without the optimiser's moments, or with the quiet count the stricter rule
had reset, and see other trajectories."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from simulate.core import Hyper, StepOptions
from simulate.core.stopping import StopRule, StopState, stricter, update
from simulate.core.training import build_trainer
from tests.factories import STEP_MLPS

# a small cap: the narrow models plateau (some twice, stopping), the wide ones do not
RULE = StopRule(max_steps=400, window=50, tol=2e-2, patience=2, kl_abs=20.0, lr_decays=1)
WIDTHS, SEEDS, DATA = [2, 2, 3, 12, 16, 16], [5, 6, 7, 8, 9, 10], [0, 1, 0, 1, 0, 1]


def _trainer(mlp, compile=False):
    rng = np.random.default_rng(3)
    X = torch.tensor(rng.uniform(-1, 1, (2, 400, 2)), dtype=torch.float32)
    y = torch.tensor(np.sin(3 * X[..., 0].numpy()) + 0.2 * rng.standard_normal((2, 400)),
                     dtype=torch.float32)  # fmt: skip
    return build_trainer(Hyper(batch_size=32), WIDTHS, SEEDS, X, y, DATA, depth=2,
                         options=StepOptions(mlp=mlp, compile=compile))  # fmt: skip


def _state(tr):
    st = tr.state
    return [t.clone() for t in (st.params, st.opt.exp_avg, st.opt.exp_avg_sq)]


@pytest.mark.parametrize("mlp", STEP_MLPS)
def test_capped_models_continue_as_in_a_run_from_the_start(mlp):
    ctl = RULE.doubled()
    base = _trainer(mlp)
    base.fit_until(RULE, shadow=ctl)
    capped = base.capped_models()
    # the setting has both kinds: models continued and models trained again from the start
    assert 0 < capped.numel() < len(WIDTHS)
    resume = base.resume_from(capped)
    assert resume.at == RULE.max_steps

    straight = _trainer(mlp)
    want = straight.fit_until(ctl)
    joined = _trainer(mlp)
    got = joined.fit_until(ctl, resume=resume)
    assert got == want  # steps, converged, plateaus, last changes: every model's
    assert torch.equal(joined.state.params, straight.state.params)  # every model's
    # the moments of the models still running at the end (the stopped ones' may have
    # skipped decays while nothing ran: Trainer.fit_until)
    running = ~torch.tensor(want["converged"])
    for a, b in zip(_state(joined)[1:], _state(straight)[1:], strict=True):
        assert torch.equal(a[:, running], b[:, running])


@pytest.mark.parametrize("mlp", STEP_MLPS)
def test_a_join_without_the_moments_is_seen(mlp):
    """Negative control: the same join with the optimiser's moments zeroed (the
    parameters alone carried over) ends the joined models elsewhere."""
    ctl = RULE.doubled()
    base = _trainer(mlp)
    base.fit_until(RULE, shadow=ctl)
    capped = base.capped_models()
    resume = base.resume_from(capped)
    resume = dataclasses.replace(resume, exp_avg=torch.zeros_like(resume.exp_avg),
                                 exp_avg_sq=torch.zeros_like(resume.exp_avg_sq))  # fmt: skip
    straight, joined = _trainer(mlp), _trainer(mlp)
    straight.fit_until(ctl)
    joined.fit_until(ctl, resume=resume)
    a, b = joined.state.params[:, capped], straight.state.params[:, capped]
    assert not torch.equal(a, b)


def test_the_shadow_count_is_the_stricter_rules_own():
    """``below_shadow`` counts as a run under the shadow rule counts, while the rule has
    had no plateau."""
    rule, shadow = RULE, RULE.doubled()
    g = np.random.default_rng(0)
    E = 40
    a = StopState.start(rule, E, shadow=shadow)
    b = StopState.start(shadow, E)
    level = torch.tensor(g.uniform(50, 500, E), dtype=torch.float64)
    for _ in range(8):
        # objectives whose windows fall by 0.2% to 3% (some quiet under one rule only)
        level = level * torch.tensor(1 - g.uniform(0.002, 0.03, E))
        for _step in range(rule.window):
            info = _info(level, 0.5 * level, E)
            a, _ = update(a, info)
            b, _ = update(b, info)
        clean = (a.decays == 0) & ~a.done
        assert torch.equal(a.below_shadow[clean], b.below[clean])


def _info(total, kl, E):
    from types import SimpleNamespace

    terms = SimpleNamespace(total=total.to(torch.float32), kl=kl.to(torch.float32))
    return SimpleNamespace(terms=terms, failed=torch.zeros(E, dtype=torch.bool))


def test_stricter():
    assert stricter(RULE.doubled(), RULE)
    assert not stricter(RULE, RULE.doubled())
    with pytest.raises(ValueError, match="not stricter"):
        StopState.start(RULE.doubled(), 2, shadow=RULE)


@pytest.mark.parametrize("mlp", STEP_MLPS)
def test_the_count_jumps_to_the_join_when_nothing_else_runs(mlp):
    """With every other model held, the run goes straight to the join's step (no steps
    of an all-held program) and the joined models still end as in the straight run."""
    ctl = RULE.doubled()
    base = _trainer(mlp)
    base.fit_until(RULE, shadow=ctl)
    capped = base.capped_models()
    straight, joined = _trainer(mlp), _trainer(mlp)
    want = straight.fit_until(ctl)
    others = torch.ones(len(WIDTHS), dtype=torch.bool)
    others[capped] = False
    joined.frozen = others.clone()
    calls = []
    step = joined.advance_steps if joined.step_fn.multi else joined.advance
    name = "advance_steps" if joined.step_fn.multi else "advance"
    setattr(joined, name, lambda *a, **k: calls.append(int(joined.state.count)) or step(*a, **k))
    got = joined.fit_until(ctl, resume=base.resume_from(capped))
    assert min(calls) == RULE.max_steps  # no step before the join's
    for k in ("steps", "converged", "rel_change", "kl_change"):
        assert [got[k][i] for i in capped] == [want[k][i] for i in capped]
    assert torch.equal(joined.state.params[:, capped], straight.state.params[:, capped])


def test_a_quiet_count_under_way_at_the_cap_is_carried():
    """A model whose last windows before the cap were quiet under both rules (its quiet
    count 2 of patience 3) plateaus one window after the join, as in the straight run;
    seeded with a count of 0 (the negative control) it plateaus later."""
    rule = StopRule(max_steps=400, window=50, tol=2e-2, patience=3, kl_abs=20.0, lr_decays=1)
    ctl = StopRule(max_steps=800, window=50, tol=1.9e-2, patience=3, kl_abs=19.0, lr_decays=1)
    base = _trainer("batched")
    base.fit_until(rule, shadow=ctl)
    capped = base.capped_models()
    counts = base.convergence.below_shadow[capped]
    assert bool((counts > 0).any())  # the case this test is for
    straight = _trainer("batched")
    want = straight.fit_until(ctl)
    joined = _trainer("batched")
    assert joined.fit_until(ctl, resume=base.resume_from(capped)) == want
    assert torch.equal(joined.state.params, straight.state.params)
    wrong = base.resume_from(capped)
    wrong.entries["below"][:] = 0
    again = _trainer("batched")
    assert again.fit_until(ctl, resume=wrong)["steps"] != want["steps"]


@pytest.mark.slow  # three compilations, ~40 s
def test_the_compiled_step_continues_alike():
    """The same on the compiled step (the full tier's default path)."""
    ctl = RULE.doubled()
    base = _trainer("batched", compile=True)
    base.fit_until(RULE, shadow=ctl)
    capped = base.capped_models()
    assert 0 < capped.numel() < len(WIDTHS)
    straight, joined = _trainer("batched", compile=True), _trainer("batched", compile=True)
    want = straight.fit_until(ctl)
    assert joined.fit_until(ctl, resume=base.resume_from(capped)) == want
    assert torch.equal(joined.state.params, straight.state.params)


@pytest.mark.parametrize("mlp", STEP_MLPS)
def test_models_continue_from_their_first_plateau(mlp):
    """The models that plateaued in the run are continued from their state at the window
    end of their first plateau (before its decay), each joining at its own step, with the
    capped ones: every model then ends as in the straight run under the stricter rule."""
    ctl = RULE.doubled()
    base = _trainer(mlp)
    base.fit_until(RULE, shadow=ctl)
    joins = [base.resume_from(base.capped_models()), *base.plateau_states]
    # joins at several steps, one before the cap (a model whose first plateau was also
    # the stricter rule's is not kept: the two runs part there)
    assert base.plateau_states and min(r.at for r in joins) < RULE.max_steps
    assert len({r.at for r in joins}) > 1
    straight, joined = _trainer(mlp), _trainer(mlp)
    want = straight.fit_until(ctl)
    assert joined.fit_until(ctl, resume=joins) == want
    assert torch.equal(joined.state.params, straight.state.params)


def test_a_trainer_that_never_ran_has_nothing_to_keep():
    """A fresh trainer has no first-plateau states (nor capped models: nothing ran)."""
    tr = _trainer("batched")
    assert tr.plateau_states == []
    assert tr.capped_models().numel() == 0
