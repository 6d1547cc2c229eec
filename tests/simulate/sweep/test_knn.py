"""The k-nearest-neighbour known-answer control (``simulate.sweep.train.knn``): its proven
exponent (``theory.knn_exponent``), its neighbour counts, its estimate against a
brute-force one, its configuration's refusals, its records as the validator reads them,
and the known answers the design derives for the ``knn`` tier."""

import json
import math
import re

import numpy as np
import pytest

from simulate.sweep.setup.config import SweepConfig
from simulate.sweep.setup.truth_spec import TruthSpec
from simulate.sweep.train.knn import knn_k, knn_name, knn_predict
from theory import knn_exponent, predicted_exponent

H05 = TruthSpec("holder", p=1, alpha=0.5)


@pytest.mark.parametrize("alpha, p", [(0.5, 1), (0.9, 1), (0.75, 2), (1.0, 3)])
def test_the_matched_k_contracts_at_the_class_exponent_and_a_fixed_k_not_at_all(alpha, p):
    """k of order n^(2a/(2a+p)) balances sigma^2/k against (k/n)^(2a/p): the class's
    exponent in d^2 and l2sq, half of it in d; k fixed: exponent 0 (the variance stays)."""
    gamma = 2 * alpha / (2 * alpha + p)
    for metric in ("d2", "l2sq", "d"):
        got = knn_exponent(alpha, p, gamma, metric)
        assert got == pytest.approx(float(predicted_exponent(alpha, p, metric)), abs=1e-12)
        assert knn_exponent(alpha, p, 0, metric) == 0.0
    # off the balance the slower of the two terms decides: k too small (variance) or too
    # large (bias)
    assert knn_exponent(alpha, p, gamma / 2, "d2") == pytest.approx(-gamma / 2)
    assert knn_exponent(alpha, p, 0.99, "d2") == pytest.approx(-0.01 * 2 * alpha / p)


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(alpha=1.5, p=1, gamma=0.5), "alpha <= 1"),
        (dict(alpha=0.5, p=1, gamma=1.0), "gamma must be below 1"),
        (dict(alpha=0.5, p=1, gamma=-0.1), "gamma"),
        (dict(alpha=0.5, p=0, gamma=0.5), "p"),
    ],
)
def test_the_knn_exponent_refuses_what_it_does_not_prove(kw, match):
    with pytest.raises(ValueError, match=match):
        knn_exponent(**kw)


def test_neighbour_counts_and_names():
    """The matched member's k is ceil(n^(2a/(2a+p))) (at most n), a fixed member's K (at
    most n); their names are what the records and reports carry."""
    assert knn_k("matched", 10_000, 1, 0.5) == 100  # 10,000^(1/2)
    assert knn_k("matched", 500, 1, 0.9) == 55  # 500^(9/14) = 54.33
    assert knn_k(5, 10_000, 1, 0.5) == 5 and knn_k(5, 3, 1, 0.5) == 3
    assert knn_name("matched") == "knn-matched" and knn_name(5) == "knn-k5"


def test_the_estimate_is_the_mean_of_the_k_nearest_responses():
    """Against a brute-force k-NN on random data (ties have probability zero)."""
    rng = np.random.default_rng(0)
    X, y, Xt = rng.uniform(-1, 1, (300, 2)), rng.standard_normal(300), rng.uniform(-1, 1, (50, 2))
    d = ((Xt[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    want = y[np.argsort(d, axis=1)[:, :7]].mean(1)
    np.testing.assert_allclose(knn_predict(X, y, Xt, 7), want, rtol=1e-12)


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(estimator="knn"), "knn_ks"),
        (dict(estimator="asvi", knn_ks=[5]), "knn_ks"),
        (dict(estimator="knn", knn_ks=[]), "non-empty"),
        (dict(estimator="knn", knn_ks=[0]), "k >= 1"),
        (dict(estimator="knn", knn_ks=["nearest"]), "'matched'"),
        (dict(estimator="knn", knn_ks=[5, 5]), "distinct"),
        (dict(estimator="knn", knn_ks=[True]), "integer"),
        (dict(estimator="knn", knn_ks=[5], truths=[TruthSpec("holder", p=1, alpha=1.5)]),
         "alpha <= 1"),
        (dict(estimator="knn", knn_ks=[5], truths=[TruthSpec("teacher", p=20)]), "Hoelder"),
    ],
)  # fmt: skip
def test_a_knn_configuration_outside_its_proof_is_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        SweepConfig(**{"truths": [H05], "ns": [100, 200, 400], **kw}).validate()


@pytest.fixture(scope="module")
def knn_records(tmp_path_factory):
    from simulate.sweep.run.runner import run_sweep

    cfg = SweepConfig(truths=[H05], ns=[100, 200, 400], replicates=2, estimator="knn",
                      knn_ks=["matched", 3], n_test=300, replicate_block=2)  # fmt: skip
    path = tmp_path_factory.mktemp("knn") / "knn.jsonl"
    return path, run_sweep(cfg, path, progress=False, log=lambda *_: None)


def test_knn_records_hold_every_member_and_read_back_whole(knn_records):
    from simulate.sweep.store.schema import read_records

    path, recs = knn_records
    assert len(recs) == 6 and read_records(path) == recs
    for r in recs:
        n = r["cell"]["n"]
        assert sorted(r["per_estimator"]) == ["knn-k3", "knn-matched"]
        assert r["knn_k"] == {"knn-matched": math.ceil(n**0.5), "knn-k3": 3}
        assert r["metrics"] == r["per_estimator"]["knn-matched"]  # the first member's
        assert r["selected_width"] is None and r["reference"] is not None
    # a job's records share its seconds, which the cost table divides by their number
    by_job = {}
    for r in recs:
        by_job.setdefault(r["cell"]["n"], []).append(json.dumps(r["timing"]))
    assert all(len(set(ts)) == 1 for ts in by_job.values())


@pytest.mark.parametrize(
    "edit, field",
    [
        (lambda r: r["knn_k"].update({"knn-k3": 0}), "'knn_k.knn-k3'"),
        # a count in range but not the member's at the cell's n
        (
            lambda r: r["knn_k"].update({"knn-matched": r["knn_k"]["knn-matched"] + 1}),
            "'knn_k.knn-matched'",
        ),
        (lambda r: r["knn_k"].update({"knn-k4": 4}), "'knn_k'"),
        (lambda r: r["per_estimator"].pop("knn-k3"), "'per_estimator'"),
        (lambda r: r["config"].update(knn_ks=["matched", 0]), "'config.knn_ks[1]'"),
        (lambda r: r["metrics"].update(d2=0.5), "'metrics.d2'"),
    ],
    ids=["count", "count-off-by-one", "extra-count", "member", "config", "metrics"],
)
def test_a_damaged_knn_record_is_refused_naming_its_field(knn_records, tmp_path, edit, field):
    from simulate.sweep.store.schema import read_records
    from theory.plumbing.jsonl import RecordsError

    path, _ = knn_records
    lines = path.read_text().splitlines()
    rec = json.loads(lines[2])
    edit(rec)
    lines[2] = json.dumps(rec)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(RecordsError, match=re.escape(field)):
        read_records(bad)


def test_the_knn_tier_derives_known_answers_in_both_directions():
    """The ``knn`` tier's design under the default protocol: at alpha = 0.9 the matched
    member is a known PASS of the attainment test and of the class band's theorem test,
    the fixed k a known FAIL of both (their proven exponents -0.643 and 0, against the
    allowance and the band's top with the design's 2h), and the same at alpha = 0.5;
    derived, not written in the tier."""
    from simulate.sweep.setup.tiers import RATES
    from verify import protocol
    from verify.reading.design import design_power

    tier = RATES["knn"]
    cfg = SweepConfig(truths=tier["truths"], **tier["sweep"])
    rows = {(r.truth, r.estimator): r for r in design_power(cfg, protocol.load(protocol.DEFAULT))}
    for truth, e in (("holder-a0.9-p1-s0", -1.8 / 2.8), ("holder-a0.5-p1-s0", -0.5)):
        matched, fixed = rows[truth, "knn-matched"], rows[truth, "knn-k5"]
        assert matched.predicted == pytest.approx(e) and fixed.predicted == 0.0
        assert (matched.expected_attainment, matched.expected_theorem) == ("PASS", "PASS")
        assert (fixed.expected_attainment, fixed.expected_theorem) == ("FAIL", "FAIL")
    # alpha = 0.5's attainment PASS stands on a thin margin: half the rate (0.25) over the
    # log^2 n allowance (0.246 over n = 500..32,000; 0.293 over 250..4000 would eat it)
    gap = rows["holder-a0.5-p1-s0", "knn-matched"].attainment_power.gap
    assert 0 < gap < 0.01


@pytest.mark.slow
def test_the_knn_tier_meets_every_known_answer_through_the_harness(tmp_path):
    """The ``knn`` tier whole (2 truths x 4 n x 12 replicates; ~40 s): every member's
    attainment verdict and class-band theorem verdict is the known answer its proven
    exponent implies (the matched k PASS, the fixed k FAIL), so the exit status is 0.
    Measured when written: d^2 slopes -0.533 (matched) and -0.025 (fixed) at alpha = 0.5,
    -0.646 and 0.003 at alpha = 0.9 (proven -0.5, 0, -0.643, 0)."""
    from simulate.sweep.run.runner import run_sweep
    from simulate.sweep.setup.tiers import RATES
    from verify.reading.analysis import analyse
    from verify.report.status import entry_outcome, exit_status

    tier = RATES["knn"]
    cfg = SweepConfig(truths=tier["truths"], **tier["sweep"])
    recs = run_sweep(cfg, tmp_path / "knn.jsonl", progress=False, log=lambda *_: None)
    results = [r for r in analyse(recs) if r.metric == "d2"]
    assert len(results) == 4
    for r in results:
        assert r.attainment.verdict == r.decision.expected_attainment, r.estimator
        assert r.class_theorem.verdict == r.decision.expected_theorem, r.estimator
        assert entry_outcome(r) == "PASS"
        want = "PASS" if r.estimator == "knn-matched" else "FAIL"
        assert r.decision.expected_attainment == r.decision.expected_theorem == want
    assert exit_status(analyse(recs)) == 0


def test_a_stated_rate_reads_the_class_band_of_a_knn_control_not_its_own(knn_records, tmp_path):
    """Under ``--rate`` the report's per-truth row is the stated rate's band as the
    control is held to it (its class-band test), not a member's own exponent (the fixed
    k's 0, which the row once took when its first entry was that member's)."""
    from tests.factories import run_main

    path, _ = knn_records
    rep = tmp_path / "r.json"
    r = run_main("verify.rates", "--records", path, "--rate", "n**(-2*alpha/(2*alpha+p))",
                 "--json", rep, "--figures", tmp_path / "f")  # fmt: skip
    assert r.returncode in (0, 1, 3), r.stderr[-2000:]
    (row,) = json.loads(rep.read_text())["stated_rate"]["truths"]
    assert row["truth"] == "holder-a0.5-p1-s0"
    assert row["exponent"] == pytest.approx(-0.5) and row["log_power"] == pytest.approx(0.0)


def test_one_list_names_the_known_answer_controls():
    """The estimators that are known-answer controls (``simulate.sweep.setup.parts.KNOWN_ANSWER``)
    are the families the verdicts derive known answers for, the protocol's pilot-cv kinds
    and the refusals' words."""
    from simulate.sweep.setup.kinds import KINDS
    from simulate.sweep.setup.parts import KNOWN_ANSWER
    from verify.cli.flag_rules import _CONTROL_WORDS
    from verify.protocol import CONTROL_KINDS
    from verify.reading.design import control_family

    families = {control_family(n) for n in ("gp-matern-0.5", "knn-matched", "knn-k3")}
    assert families == set(CONTROL_KINDS) == set(_CONTROL_WORDS)
    assert set(CONTROL_KINDS) == set(KNOWN_ANSWER)
    assert {k for k, kind in KINDS.items() if kind.known_answer} == set(KNOWN_ANSWER)
    for name in ("asvi", "asvi-constructive", "KNeighborsRegressor", "plain-adam"):
        assert control_family(name) is None


def test_a_gp_jobs_records_share_its_seconds_too(tmp_path):
    """The GP control's records of one job hold the job's seconds (they were cumulative
    per replicate, as the k-NN's were: the cost table divides them by the block)."""
    from simulate.sweep.run.runner import run_sweep

    cfg = SweepConfig(truths=[H05], ns=[50, 100, 200], replicates=2, estimator="gp",
                      gp_nus=[0.5], n_test=100, draws=4, replicate_block=2)  # fmt: skip
    recs = run_sweep(cfg, tmp_path / "gp.jsonl", progress=False, log=lambda *_: None)
    by_job = {}
    for r in recs:
        by_job.setdefault(r["cell"]["n"], set()).add(json.dumps(r["timing"]))
    assert len(by_job) == 3 and all(len(ts) == 1 for ts in by_job.values())
