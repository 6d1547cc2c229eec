"""The ladder grown at its edge (``SweepConfig.width_edge_max``,
``simulate.sweep.train.edge``): a rung is added for a replicate exactly while its penalised
ELBO selects its widest candidate, never past the cap; a replicate's record is the one it
gets trained alone (replicates stay independent); without the setting nothing changes."""

import pytest

from simulate.sweep.run.runner import run_job
from simulate.sweep.setup.config import SweepConfig
from simulate.sweep.setup.truth_spec import TruthSpec
from simulate.sweep.setup.widths import cell_selection
from simulate.sweep.store.fingerprint import fingerprint_fields
from simulate.sweep.train.jobs import Job, jobs_for

TINY = dict(
    ns=[2000], replicates=3, width_max=2, max_steps=300, stop_window=100, batch_size=64,
    n_test=500, draws=5, replicate_block=3,
)  # fmt: skip
TRUTH = TruthSpec("holder", p=1, alpha=0.5)


@pytest.fixture(scope="module")
def grown():
    cfg = SweepConfig(truths=[TRUTH], width_edge_max=16, **TINY)
    return cfg, run_job(jobs_for(cfg)[0])


def _prefix_selects_top(rec, k: int, lam: float) -> bool:
    """Whether the record's first k candidates' penalised ELBO selects the k-th."""
    pw = {key: v[:k] for key, v in rec["per_width"].items() if isinstance(v, list)}
    sel = cell_selection(pw, rec["config"]["widths"][:k], lam)
    return sel["selected_width"] == rec["config"]["widths"][k - 1]


def test_a_rung_is_added_exactly_while_the_widest_is_selected(grown):
    cfg, recs = grown
    grew = 0
    for r in recs:
        W = r["config"]["widths"]
        assert W[:1] == [2] and W == [2 ** (k + 1) for k in range(len(W))]
        assert max(W) <= 16
        for k in range(1, len(W)):  # each rung past the ladder: the one before was selected
            assert _prefix_selects_top(r, k, cfg.lam)
        grew += len(W) > 1
        capped = W[-1] == 16
        # it stopped because the selection left the top, or at the cap
        assert capped or not r["selected_at_top"]
        assert len(r["seeds"]["models"]) == len(W)
    assert grew >= 1  # the ladder of one width 2 is selected at its top: it must grow


def test_a_replicates_record_is_the_one_it_gets_alone(grown):
    cfg, recs = grown
    alone = run_job(Job(TRUTH, 2000, (1,), cfg))[0]
    both = recs[1]
    assert alone["config"]["widths"] == both["config"]["widths"]
    # the same models: trained alone or beside others, to the evaluation's float rounding
    # (a batched product of another batch size adds in another order)
    assert alone["per_width"]["elbo"] == pytest.approx(both["per_width"]["elbo"], rel=1e-9)
    assert alone["per_width"]["steps"] == both["per_width"]["steps"]
    assert alone["selected_width"] == both["selected_width"]
    assert alone["metrics"] == pytest.approx(both["metrics"], rel=1e-6)


def test_without_the_setting_the_ladder_and_fingerprint_are_unchanged():
    base = SweepConfig(truths=[TRUTH], **TINY)
    assert "width_edge_max" not in fingerprint_fields(base)
    grown = SweepConfig(truths=[TRUTH], width_edge_max=16, **TINY)
    assert fingerprint_fields(grown)["width_edge_max"] == 16
    with pytest.raises(ValueError, match="continuation"):
        SweepConfig(truths=[TRUTH], width_edge_max=16, continuation=True, **TINY)
    with pytest.raises(ValueError):
        SweepConfig(truths=[TRUTH], width_edge_max=0, **TINY)


def test_grown_rungs_carry_the_constructive_arms_and_the_plain_arm_is_a_setting():
    """With both starts and ``plain_arm=False``: the arms W0, W0s, W0f and W (no P) in every
    record, each filled at every candidate the replicate owns, grown rungs included; the
    records read back as data (``simulate.sweep.store.validate``)."""
    import math

    cfg = SweepConfig(truths=[TRUTH], width_edge_max=8, start="both", plain_arm=False,
                      **{**TINY, "replicates": 2, "replicate_block": 2})  # fmt: skip
    recs = run_job(jobs_for(cfg)[0])
    assert any(len(r["config"]["widths"]) > 1 for r in recs)
    for r in recs:
        assert set(r["arms"]) == {"W0", "W0s", "W0f", "W"}
        assert r["config"]["plain_arm"] is False
        for arm in r["arms"].values():
            assert len(arm["per_width"]["elbo"]) == len(r["config"]["widths"])
            assert all(math.isfinite(x) for x in arm["per_width"]["elbo"])
    with pytest.raises(ValueError, match="constructive start"):
        SweepConfig(truths=[TRUTH], plain_arm=False, **TINY)
