"""The estimators' own summaries (``simulate.estimators.summary``, issue 62 item 5): the
table's numbers are the fitted attributes they name, read when the table is made (a
corrupted attribute shows), for every regressor and classifier; before ``fit`` sklearn's
``NotFittedError``; storing what the table reads leaves every prediction as it was.

Tolerances: the table prints ELBOs with two decimals (compared to 0.005 + float rounding)
and the noise sd and inclusion statistics with three or four significant digits; counts,
widths and steps are compared exactly.  All fits are tiny (n = 150, a few hundred steps at
most) and seeded."""

from __future__ import annotations

import dataclasses
import pickle
import re
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError

import simulate.estimators.base as base
from simulate.estimators import (
    ASVIClassifier,
    ASVIRegressor,
    BNNClassifier,
    BNNRegressor,
    DenseBNNRegressor,
    FitSummary,
    HSBNNRegressor,
    SVIClassifier,
    SVIRegressor,
)
from simulate.estimators.summary import KEEP_THRESHOLD, LINE_WIDTH, layer_inclusion

ALL = (
    ASVIRegressor,
    SVIRegressor,
    BNNRegressor,
    DenseBNNRegressor,
    HSBNNRegressor,
    ASVIClassifier,
    SVIClassifier,
    BNNClassifier,
)
_ROW = re.compile(
    r"^([* ])\s*(\d+)\s+(\d+)\s+(\w+)\s+(\S+)\s+(\S+)\s+(\S+)(?:\s+(\S+))?$"
)  # candidate rows: mark, width, steps, stop, ELBO, log prior, penalised[, noise sd]
_LAYER = re.compile(
    r"^\s+(\d+)\s+(\d+) -> (\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)%\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)$"
)


def _data(n: int = 150, seed: int = 0):
    r = np.random.default_rng(seed)
    X = r.uniform(-1, 1, (n, 2))
    return X, np.sin(3 * X[:, 0]) + 0.1 * r.normal(size=n)


def _fit(est, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return est.fit(X, y)


@pytest.fixture(scope="module")
def reg():
    X, y = _data()
    return _fit(ASVIRegressor(widths=(2, 4, 8), max_epochs=60, batch_size=64, random_state=0), X, y)


@pytest.fixture(scope="module")
def clf():
    X, y = _data()
    est = ASVIClassifier(widths=(2, 4), max_epochs=40, batch_size=64, random_state=0)
    return _fit(est, X, (y > 0).astype(int))


def _parse(text: str) -> dict:
    """The table's numbers: candidate rows, layer rows, the selected width, kept edges."""
    lines = text.splitlines()
    rows = [m.groups() for m in map(_ROW.match, lines) if m]
    layers = [tuple(m.groups()) for m in map(_LAYER.match, lines) if m]
    sel = re.search(r"^Selected width: (\d+)", text, re.M)
    kept = re.search(r"^(?:Kept edges \(nu > [\d.]+\)|Edges): (\d+) of (\d+)", text, re.M)
    noise = re.search(r"^Noise sd: (\S+) in y's units, (\w+)", text, re.M)
    return {
        "rows": rows,
        "layers": layers,
        "selected": int(sel.group(1)),
        "kept": (int(kept.group(1)), int(kept.group(2))),
        "noise": None if noise is None else (float(noise.group(1)), noise.group(2)),
    }


def _expected_stop(est, k: int) -> str:
    """Candidate k's stop label from its fitted flags."""
    if est.failed_[k]:
        return "failed"
    if est.stop_rule_ is None:
        return "budget"
    if est.retired_[k]:
        return "retired"
    return "converged" if est.converged_[k] else "capped"


def _check_table_reads_the_fit(est) -> dict:
    """Every number the table shows against the fitted attribute it names."""
    text = est.summary()
    t = _parse(text)
    assert t["selected"] == est.selected_width_
    assert len(t["rows"]) == len(est.widths_)
    for k, (mark, w, steps, stop, elbo, logp, pen, sd) in enumerate(t["rows"]):
        assert int(w) == est.widths_[k] and int(steps) == est.n_iter_[k]
        assert (mark == "*") == (k == est.selected_index_)
        assert float(elbo) == pytest.approx(est.elbo_[k], abs=0.0051)
        assert float(logp) == pytest.approx(est.selection_["log_prior"][k], abs=0.0051)
        assert float(pen) == pytest.approx(est.penalized_elbo_[k], abs=0.0051)
        assert stop == _expected_stop(est, k)
        if hasattr(est, "sigma_all_"):
            assert float(sd) == pytest.approx(est.sigma_all_[k], rel=1e-3)
        else:
            assert sd is None
    assert len(t["layers"]) == len(est.inclusion_) == est.posterior_.layout.depth + 1
    for (_, _, _, edges, kept, share, mean, q10, med, q90), nu in zip(
        t["layers"], est.inclusion_, strict=True
    ):
        assert int(edges) == nu.size and int(kept) == int((nu > KEEP_THRESHOLD).sum())
        assert float(share) == pytest.approx(100 * int(kept) / nu.size, abs=0.051)
        assert float(mean) == pytest.approx(nu.mean(), abs=5e-4)
        q = np.quantile(nu, (0.1, 0.5, 0.9))
        assert [float(q10), float(med), float(q90)] == pytest.approx(q, abs=5e-4)
    assert t["kept"] == (est.n_edges_gt_half_, sum(nu.size for nu in est.inclusion_))
    assert all(len(line) <= LINE_WIDTH for line in text.splitlines())
    return t


def test_a_regressor_s_table_is_its_fitted_attributes(reg):
    t = _check_table_reads_the_fit(reg)
    assert t["noise"][0] == pytest.approx(reg.sigma_, rel=1e-3) and t["noise"][1] == "learned"
    text = reg.summary()
    assert f"n = {reg.n_samples_fit_} fitted, p = 2, depth 2" in text
    assert "C step (mlp='native-step')" in text or reg.step_path_["mlp"] != "native-step"
    assert f"cap {reg.stop_rule_.max_steps} steps" in text
    assert "Convergence: budget-limited" in text  # every candidate capped at 60 epochs
    assert str(reg.fit_summary()) == text


def test_a_classifier_s_table_is_its_fitted_attributes(clf):
    t = _check_table_reads_the_fit(clf)
    assert t["noise"] is None and "Noise sd: none (categorical likelihood)" in clf.summary()
    s = clf.fit_summary()
    assert isinstance(s, FitSummary) and s.noise_sd is None and s.likelihood == "categorical"


def test_the_stored_inclusion_probabilities_are_the_posterior_s_edges(reg):
    """``inclusion_`` per layer (padding dropped: width 2 of a program padded to 8) sums to
    the fit's ``n_edges_`` and counts ``n_edges_gt_half_``; every candidate's likewise."""
    nu = np.concatenate(reg.inclusion_)
    assert reg.selected_width_ < max(reg.widths_)  # the padding is there to drop
    assert nu.sum() == pytest.approx(reg.n_edges_, rel=1e-12)
    assert int((nu > 0.5).sum()) == reg.n_edges_gt_half_
    edges = reg.posterior_.edges()
    for k in range(len(reg.widths_)):
        nu_k = np.concatenate(layer_inclusion(reg.posterior_, k))
        assert nu_k.size == edges["H"][k]
        assert nu_k.sum() == pytest.approx(edges["sum_nu"][k], rel=1e-12)


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.__name__)
def test_before_fit_the_summary_is_sklearn_s_not_fitted_error(cls):
    est = cls()
    with pytest.raises(NotFittedError, match="not fitted"):
        est.summary()
    with pytest.raises(NotFittedError, match="not fitted"):
        est.fit_summary()


def test_a_clone_of_a_fitted_estimator_is_not_fitted(reg):
    with pytest.raises(NotFittedError):
        clone(reg).summary()


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.__name__)
def test_every_estimator_has_a_table_of_its_fit(cls):
    X, y = _data()
    classifier = "Classifier" in cls.__name__
    y = (y > 0).astype(int) if classifier else y
    kw = {"widths": (2, 3)} if "widths" in cls().get_params() else {"width": 3}
    est = _fit(cls(epochs=2, batch_size=64, random_state=1, **kw), X, y)
    text = est.summary()
    t = _parse(text)
    assert t["selected"] == est.selected_width_
    assert [r[3] for r in t["rows"]] == ["budget"] * len(est.widths_)
    assert "Stopping rule: none, a fixed budget of" in text
    if est.fit_summary().indicators:
        assert "Kept edges (nu > 0.5)" in text
    else:  # Dense-BNN and HS-BNN: no indicators, every edge counted
        assert "no indicators" in text and t["kept"][0] == t["kept"][1]
    assert all(len(line) <= LINE_WIDTH for line in text.splitlines())


def test_a_known_noise_is_said_to_be_fixed():
    X, y = _data()
    est = SVIRegressor(width=3, epochs=2, sigma=0.5, random_state=0).fit(X, y)
    noise = _parse(est.summary())["noise"]
    assert noise == (pytest.approx(0.5), "fixed") and est.sigma_ == pytest.approx(0.5)


def test_the_default_widths_fit_one_screen():
    """The regressors' ten default widths, and as many classifier candidates as its five
    defaults (the table has a line per candidate and per layer, whatever the widths; the
    defaults' 400-800 units would cost half a minute here): at most 40 lines of at most
    100 characters."""
    X, y = _data()
    n_clf = len(ASVIClassifier().widths)
    for est, target in (
        (ASVIRegressor(max_epochs=1, random_state=0), y),
        (ASVIClassifier(widths=tuple(range(2, 2 + n_clf)), max_epochs=1, random_state=0), y > 0),
    ):
        lines = _fit(est, X, target).summary().splitlines()
        assert len(lines) <= 40 and max(map(len, lines)) <= LINE_WIDTH
        assert len(_parse("\n".join(lines))["rows"]) == len(est.widths)
    assert len(ASVIRegressor().widths) == 10 and n_clf == 5  # the defaults counted above


def test_the_table_is_read_not_cached_a_corrupted_attribute_shows(reg):
    """Negative control: corrupt the fitted attributes of a copy and the table shows the
    corrupted values (nothing is stored as text, nothing hard-coded)."""
    bad = pickle.loads(pickle.dumps(reg))
    assert bad.summary() == reg.summary()  # an unpickled fit reads the same
    bad.selected_width_ = 999
    bad.elbo_ = bad.elbo_.copy()
    bad.elbo_[1] = 12345.678
    bad.inclusion_ = (np.zeros_like(bad.inclusion_[0]), *bad.inclusion_[1:])
    bad.sigma_ = 7.25
    bad.step_path_ = {"mlp": "batched", "compiled": True}
    bad.convergence_ = {**bad.convergence_, "kl_change": [99.5] * len(bad.widths_)}
    t = _parse(bad.summary())
    assert t["selected"] == 999 and float(t["rows"][1][4]) == 12345.68
    assert int(t["layers"][0][4]) == 0 and t["noise"][0] == 7.25
    assert "batched torch step (mlp='batched'), compiled" in bad.summary()
    assert "KL's change (nats) 99.5" in bad.summary()
    assert _parse(reg.summary())["selected"] == reg.selected_width_  # the original as it was


def test_the_summary_is_frozen_and_its_parts_are_numbers(reg):
    s = reg.fit_summary()
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.selected_width = 3
    assert [c.width for c in s.candidates] == list(reg.widths_)
    assert [c.selected for c in s.candidates].index(True) == reg.selected_index_
    assert s.stopping.rule == reg.stop_rule_ and s.stopping.n_steps == reg.n_steps_
    assert "FitSummary(estimator='ASVIRegressor'" in repr(s)


def test_held_out_points_are_not_counted_and_the_validation_test_is_said():
    """Variant: with ``validation_fraction`` the table's n is the points trained on and the
    stopping rule names the validation risk's tolerance."""
    X, y = _data()
    est = _fit(ASVIRegressor(widths=(2, 4), max_epochs=60, batch_size=64,
                             validation_fraction=0.2, random_state=0), X, y)  # fmt: skip
    text = est.summary()
    assert est.n_samples_fit_ == 120 and "n = 120 fitted" in text
    assert f"the validation risk's < {est.stop_rule_.risk_tol:g}" in text
    _check_table_reads_the_fit(est)


def test_a_race_s_retired_candidate_and_the_rule_s_bookkeeping_are_shown():
    """A longer fit (n = 200, to 4,000 epochs) in which the halving race retires the
    widest candidate: its row says so, and the selected width's learning-rate cuts and last
    window's changes are the rule's bookkeeping (``convergence_``)."""
    X, y = _data(200)
    est = _fit(
        ASVIRegressor(widths=(2, 4, 8), max_epochs=4000, batch_size=64, random_state=0), X, y
    )
    assert est.retired_.any()  # the case this test is about
    t = _check_table_reads_the_fit(est)
    assert [r[3] == "retired" for r in t["rows"]] == est.retired_.tolist()
    k, conv = est.selected_index_, est.convergence_
    text = " ".join(est.summary().split())  # the wrapped phrases joined
    assert f"the selected width's lr cut {conv['lr_decays'][k]} time(s)" in text
    assert f"KL's change (nats) {conv['kl_change'][k]:.3g}" in text
    assert f"objective's relative change {conv['rel_change'][k]:.2g}" in text
    assert est.fit_summary().stopping.kl_change == conv["kl_change"][k]


def test_storing_what_the_summary_reads_leaves_predictions_as_they_were(monkeypatch):
    """The same seeded fit with and without ``store_fit_details``: identical predictions,
    predictive sds and selection (the hook reads what training left, draws nothing)."""
    X, y = _data()
    Xt, _ = _data(40, seed=5)

    def fit():
        est = _fit(ASVIRegressor(widths=(2, 4), max_epochs=60, batch_size=64, random_state=3), X, y)
        return est, *est.predict(Xt, return_std=True)

    with_hook, mean, sd = fit()
    monkeypatch.setattr(base, "store_fit_details", lambda *a, **k: None)
    without, mean0, sd0 = fit()
    assert not hasattr(without, "inclusion_") and hasattr(with_hook, "inclusion_")
    np.testing.assert_array_equal(mean, mean0)
    np.testing.assert_array_equal(sd, sd0)
    assert with_hook.selected_width_ == without.selected_width_
    np.testing.assert_array_equal(with_hook.elbo_, without.elbo_)
