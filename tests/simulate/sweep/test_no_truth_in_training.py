"""No truth in training: the sweep's stopping rule, its training and its selection read the
data only (``simulate.sweep.train.asvi_job``); the truth ``f0`` draws the data and is evaluated
against, nothing else.  With the risk stop on (``stop_risk_tol``) the rule watches a
validation split of each replicate's own data."""

import math

import numpy as np
import pytest
import torch

from simulate.sweep.run.runner import run_job
from simulate.sweep.setup.config import SweepConfig
from simulate.sweep.setup.truth_spec import TruthSpec
from simulate.sweep.store.fingerprint import fingerprint_fields
from simulate.sweep.train.jobs import jobs_for

# a tiny sweep whose risk stop binds: a tolerance on the held-out risk's relative change
# that the objective-and-KL rule alone (loose here) would pass well before the cap
RISKY = dict(
    truths=[TruthSpec("holder", p=1, alpha=0.5)], ns=[64, 128], replicates=2, widths=[2, 4],
    max_steps=300, stop_window=20, stop_tol=0.05, stop_kl_abs=50.0, batch_size=32,
    n_test=200, draws=4, replicate_block=2, stop_risk_tol=1e-2, risk_draws=4,
)  # fmt: skip

# every column the training, the stopping rule or the selection writes
TRAINING_COLUMNS = (
    "steps", "converged", "risk_change", "rel_change", "kl_change", "failed", "failed_step",
    "failed_term", "elbo", "L1", "L2", "L3", "edges_sum_nu", "penalized_elbo",
)  # fmt: skip


class _TruthAtTheDataOnly:
    """A replicate's truth ``f0`` where the data are drawn, ``f0 + 1`` everywhere else.
    ``simulate.sweep.train.cells.job_data`` calls the truth once per replicate on its first n
    points (n one of the sweep's sample sizes); any other call -- the test points, or
    evaluation points of the truth's own -- has another number of points."""

    def __init__(self, f0, sizes):
        self.f0, self.sizes = f0, set(sizes)

    def __call__(self, X):
        v = np.asarray(self.f0(X), dtype=float)
        return v if len(X) in self.sizes else v + 1.0

    def describe(self):
        return self.f0.describe()


def _records(cfg):
    recs = [r for job in jobs_for(cfg) for r in run_job(job)]
    return sorted(recs, key=lambda r: (r["cell"]["n"], r["cell"]["replicate"]))


def test_the_risk_stop_reads_the_data_not_the_truth(monkeypatch):
    """The same tiny sweep with the risk stop, with the true truth and with one that agrees
    with it only where the data are drawn: every training-side column (steps, converged,
    the changes the rule read, ELBO parts, edges, the selection) is identical, while the
    test metrics differ (the altered truth was used, for evaluation only).  A rule that
    watched the truth elsewhere (the former evaluation points) stops at other steps."""
    cfg = SweepConfig(**RISKY)
    true = _records(cfg)
    build = TruthSpec.build
    monkeypatch.setattr(
        TruthSpec, "build", lambda self, r=None: _TruthAtTheDataOnly(build(self, r), cfg.ns)
    )
    other = _records(cfg)
    assert len(true) == len(other) == 4
    for a, b in zip(true, other, strict=True):
        assert a["cell"] == b["cell"]
        for k in TRAINING_COLUMNS:
            assert a["per_width"][k] == b["per_width"][k], k
        assert a["selected_width"] == b["selected_width"]
        assert a["failed"] == b["failed"]
        assert a["per_width"]["d2"] != b["per_width"]["d2"]  # the truth did change
        assert a["per_width"]["l2sq"] != b["per_width"]["l2sq"]
        # the rule read the held-out risk at every window end of every candidate
        assert all(isinstance(x, float) for x in a["per_width"]["risk_change"])


def test_the_risk_stop_holds_out_each_replicates_last_points():
    """With the risk stop, ASVI trains on ``n - n_val`` points, ``n_val = max(2,
    ceil(stop_val_fraction n))`` (the record's ``config.n_train``), and its hyperparameters
    are those of that sample; without it, on all n and no ``n_train`` is recorded."""
    cfg = SweepConfig(**{**RISKY, "ns": [64], "replicates": 1, "stop_val_fraction": 0.3})
    (rec,) = _records(cfg)
    n_val = max(2, math.ceil(0.3 * 64))
    assert cfg.n_val_at(64) == n_val == 20
    assert rec["config"]["n_train"] == cfg.n_train_at(64) == 64 - n_val
    assert rec["config"]["batch_size"] == min(RISKY["batch_size"], 64 - n_val)
    off = SweepConfig(**{**RISKY, "ns": [64], "replicates": 1, "stop_risk_tol": None})
    assert off.n_val_at(64) == 0 and off.n_train_at(64) == 64
    assert "n_train" not in off.cell_config(64, [2, 4])
    assert max(2, math.ceil(0.2 * 5)) == SweepConfig(**{**RISKY, "ns": [5]}).n_val_at(5) == 2


def test_the_selections_elbo_is_on_the_training_points(monkeypatch):
    """The ELBO that selects (eq. (13)) is that of the points ASVI trained on: every
    ELBO the job computes is on each replicate's ``n_train`` points, not all n."""

    from simulate.core.posterior import Posterior

    seen = []
    elbo = Posterior.elbo

    def spy(self, X, y, data_index=None, draws=10, chunk=8192):
        seen.append(tuple(torch.as_tensor(X).shape))
        return elbo(self, X, y, data_index, draws, chunk)

    monkeypatch.setattr(Posterior, "elbo", spy)
    cfg = SweepConfig(**{**RISKY, "ns": [64], "replicates": 1})
    (rec,) = _records(cfg)
    assert seen and all(s[1] == rec["config"]["n_train"] == 51 for s in seen)


def test_the_constructive_arms_train_on_the_split_and_the_plain_arm_on_all_points():
    """With both starts and the risk stop: every arm's columns are finite and the
    ASVI arms' ELBOs are on the training points; the starts and the plain arm P see all n
    (their own validation)."""
    cfg = SweepConfig(**{**RISKY, "ns": [64], "replicates": 1, "start": "both"})
    (rec,) = _records(cfg)
    assert rec["config"]["n_train"] == 51
    assert set(rec["arms"]) == {"W0", "W0s", "W0f", "W", "P"}
    for name, arm in rec["arms"].items():
        for k in ("elbo", "L1", "d2", "l2sq"):
            assert all(math.isfinite(x) for x in arm["per_width"][k]), (name, k)
    assert all(isinstance(x, float) for x in rec["arms"]["W"]["per_width"]["risk_change"])


def test_per_model_inputs_predict_each_models_own_points():
    """``Posterior.predict_mean`` at per-model inputs ``[E, m, p]`` (the risk stop's: each
    model its replicate's held-out points) is each model's row at those inputs shared."""
    from simulate.core import Hyper
    from simulate.core.training import train_models

    g = torch.Generator().manual_seed(0)
    X = torch.rand(2, 40, 1, generator=g) * 2 - 1
    y = torch.sin(3 * X[..., 0])
    tr = train_models(Hyper(batch_size=20), [2, 3], [1, 2], X, y, [0, 1], steps=5, depth=2)
    post = tr.posterior
    Xm = torch.rand(2, 7, 1, generator=g, dtype=torch.float64)
    own = post.predict_mean(Xm, 4)
    assert own.shape == (2, 7)
    for e in range(2):
        torch.testing.assert_close(own[e], post.predict_mean(Xm[e], 4)[e])
    with pytest.raises(ValueError, match="X must be"):
        post.predict_mean(torch.zeros(3, 7, 1), 4)


def test_the_fingerprint_carries_the_risk_settings_only_with_the_risk_stop():
    """Off (the default), the fingerprint has none of the risk stop's settings (records
    without it keep their fields, less the former ``risk_n_eval``); on, it has them."""
    off = fingerprint_fields(SweepConfig(**{**RISKY, "stop_risk_tol": None}))
    for k in ("stop_risk_tol", "stop_val_fraction", "risk_draws", "risk_n_eval"):
        assert k not in off
    on = fingerprint_fields(SweepConfig(**RISKY))
    assert on["stop_risk_tol"] == RISKY["stop_risk_tol"]
    assert on["stop_val_fraction"] == 0.2 and on["risk_draws"] == RISKY["risk_draws"]
    assert "risk_n_eval" not in on


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"stop_val_fraction": 0.0}, "stop_val_fraction"),
        ({"stop_val_fraction": 0.6}, "stop_val_fraction"),
        ({"stop_val_fraction": math.nan}, "stop_val_fraction"),
        ({"ns": [3, 64]}, "training point"),
    ],
)
def test_bad_validation_splits_are_refused(change, match):
    with pytest.raises(ValueError, match=match):
        SweepConfig(**{**RISKY, **change})
    with pytest.raises(TypeError):
        SweepConfig(**{**RISKY, "risk_n_eval": 200})  # no evaluation points any more
