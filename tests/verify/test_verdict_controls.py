"""The verdicts' supports: the class-matched reference, the truths drawn per replicate,
and the Gaussian-process known-answer control."""

import math
from pathlib import Path

import numpy as np
import pytest

from simulate.references.classical import (
    cv_linear_spline,
    fit_linear_spline,
    spline_grid,
    spline_reference,
)
from simulate.sweep.setup.config import SweepConfig
from simulate.sweep.setup.truth_spec import TruthSpec
from simulate.sweep.store.schema import read_records
from simulate.sweep.train.gp import gp_metrics, gp_posterior
from tests.factories import fake_records, verdict_entry
from theory import gp_matern_exponent, hellinger_sq_pointwise, predicted_exponent
from verify.reading.analysis import analyse
from verify.report.status import entry_outcome, exit_status
from verify.stats.slopes import fit_slope


# --------------------------------------------------------------------------- reference
@pytest.mark.parametrize("p", [1, 2])
def test_linear_spline_is_exact_on_its_own_class(p):
    """A continuous function linear on each simplex of the Kuhn triangulation of the k^p
    grid (here: linear, and for p = 1 a kinked |x - 0.5| with its kink on a node of k = 4)
    is recovered to the ridge's rounding."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(3000, p))
    Xt = rng.uniform(-1, 1, size=(500, p))
    lin = lambda Z: 0.3 + Z @ np.arange(1, p + 1) * 0.7  # noqa: E731
    np.testing.assert_allclose(fit_linear_spline(X, lin(X), 3)(Xt), lin(Xt), atol=1e-6)
    if p == 1:
        kink = lambda Z: np.abs(Z[:, 0] - 0.5)  # noqa: E731
        np.testing.assert_allclose(fit_linear_spline(X, kink(X), 4)(Xt), kink(Xt), atol=1e-6)
        # negative control: the kink between nodes (k = 3) is not representable
        assert np.abs(fit_linear_spline(X, kink(X), 3)(Xt) - kink(Xt)).max() > 1e-2


def test_linear_spline_mesh_is_chosen_without_the_test_points():
    """The mesh comes from cross-validation on (X, y) alone: the reference's k is the same
    whatever the test points and truth values, and the CV picks a finer mesh for more
    data on a rough truth."""
    f0 = TruthSpec("holder", p=1, alpha=0.5).build(0)
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, size=(4000, 1))
    y = f0(X) + rng.standard_normal(4000)
    k = cv_linear_spline(X, y)["k"]
    for s in (2, 3):
        Xt = np.random.default_rng(s).uniform(-1, 1, size=(300, 1))
        assert spline_reference(X, y, Xt, f0(Xt), 1.0)["k"] == k
        assert spline_reference(X, y, Xt, np.zeros(300), 1.0)["k"] == k
    assert cv_linear_spline(X[:250], y[:250])["k"] < k
    assert spline_grid(1000, 1)[0] == 1 and spline_grid(1000, 1)[-1] == 249
    assert spline_grid(1000, 2)[-1] == int(250**0.5) - 1


@pytest.mark.slow
@pytest.mark.parametrize(
    "alpha, p, ns, R",
    [
        (0.5, 1, [500, 2000, 8000, 32000], 4),
        (1.5, 1, [500, 2000, 8000, 32000, 128000], 6),
        (1.25, 2, [500, 2000, 8000, 32000], 8),
    ],
)
def test_class_matched_reference_recovers_the_minimax_rate(alpha, p, ns, R):
    """The CV linear spline's d^2 slope is within 0.05 of -2 alpha/(2 alpha + p) (the issue's
    tolerance; measured: -0.495, -0.76 / -0.78 on two truth draws, -0.579 on one truth and
    -0.606 with four replicates of their own truths, hence R = 8 at p = 2), each replicate
    on its own truth, mesh chosen without the test points.  Negative control: a fixed
    mesh (k = 2) does not converge."""
    spec = TruthSpec("holder", p=p, alpha=alpha)
    Xt = np.random.default_rng(9).uniform(-1, 1, size=(10000, p))
    V, C = [], []
    for r in range(R):
        f0 = spec.build(r)
        rng = np.random.default_rng(r)
        X = rng.uniform(-1, 1, size=(max(ns), p))
        y = f0(X) + rng.standard_normal(max(ns))
        f0t = f0(Xt)
        V.append([spline_reference(X[:n], y[:n], Xt, f0t, 1.0)["d2"] for n in ns])
        C.append([np.mean((fit_linear_spline(X[:n], y[:n], 2)(Xt) - f0t) ** 2) for n in ns])
    slope = fit_slope(ns, np.array(V)).slope
    assert abs(slope - float(predicted_exponent(alpha, p, "d2"))) < 0.05
    assert fit_slope(ns, np.array(C)).slope > -0.15


# --------------------------------------------------------------------------- truths
def test_each_replicate_draws_its_own_truth_independent_of_the_tier():
    spec = TruthSpec("holder", p=1, alpha=0.5)
    X = np.linspace(-1, 1, 50)[:, None]
    a, b = spec.build(0), spec.build(1)
    assert not np.allclose(a(X), b(X))
    np.testing.assert_array_equal(a(X), spec.build(0)(X))  # deterministic
    # one truncation for all tiers, K = ceil(log2 n_max / (2 alpha + p)) + 3 at n_max = 2^20,
    # worked by hand: alpha = 0.5, p = 1: ceil(20 / 2) + 3 = 13; alpha = 1.5, p = 1:
    # ceil(20 / 4) + 3 = 8; alpha = 1.25, p = 2: ceil(20 / 4.5) + 3 = 5 + 3 = 8
    assert a.K == 13
    assert TruthSpec("holder", p=1, alpha=1.5).build(0).K == 8
    assert TruthSpec("holder", p=2, alpha=1.25).build(0).K == 8
    # ... and what the tiers ran carries them whatever its n: the quick tier's records
    # (n <= 4000) and the full tier's (n <= 32000)
    for tier in ("quick", "full"):
        recs = read_records(
            Path(__file__).resolve().parents[2]
            / "figures"
            / "reference"
            / f"records-{tier}.jsonl.gz"
        )
        ks = {(r["truth"]["alpha"], r["truth"]["p"], r["truth"]["function"]["K"]) for r in recs
              if r["truth"]["kind"] == "holder"}  # fmt: skip
        assert ks <= {(0.5, 1, 13), (1.5, 1, 8), (1.25, 2, 8)} and (0.5, 1, 13) in ks
    assert spec.build().seed == spec.seed and spec.build(0).seed == spec.truth_seed(0)
    # teachers differing only in p share replicate r's draw (Corollary 6.3 stays paired)
    t20, t200 = TruthSpec("teacher", p=20).build(3), TruthSpec("teacher", p=200).build(3)
    for w20, w200 in zip(t20.weights, t200.weights, strict=True):
        np.testing.assert_array_equal(w20, w200)
    assert spec.truth_seed(0) != TruthSpec("holder", p=1, alpha=0.5, seed=1).truth_seed(0)


# --------------------------------------------------------------------------- GP control
def _matern12(A, B, ls):
    return np.exp(-np.abs(A[:, None, 0] - B[None, :, 0]) / ls)


def test_exact_gp_posterior_and_draws_match_the_closed_form():
    """On a tiny case the posterior mean and covariance equal the textbook formulas for
    the Matern-1/2 kernel; the Monte Carlo d^2 from 20,000 joint draws equals the closed
    form ``1 - (1 + v/(4 s^2))^(-1/2) exp(-mu^2 / (8 s^2 + 2 v))`` averaged over the test
    points (declared tolerance: 4 Monte Carlo SE)."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(6, 1))
    y = np.sin(3 * X[:, 0]) + 0.5 * rng.standard_normal(6)
    Xt = np.linspace(-1, 1, 5)[:, None]
    ls, sigma = 0.7, 0.5
    mean, cov = gp_posterior(X, y, Xt, 0.5, ls, 1.0, sigma)
    K = _matern12(X, X, ls) + sigma**2 * np.eye(6)
    Ks = _matern12(Xt, X, ls)
    np.testing.assert_allclose(mean, Ks @ np.linalg.solve(K, y), atol=1e-10)
    want = _matern12(Xt, Xt, ls) - Ks @ np.linalg.solve(K, Ks.T)
    np.testing.assert_allclose(cov, want, atol=1e-10)
    f0t = np.cos(Xt[:, 0])
    mu, v = mean - f0t, np.diag(cov)
    closed = np.mean(
        1 - (1 + v / (4 * sigma**2)) ** -0.5 * np.exp(-(mu**2) / (8 * sigma**2 + 2 * v))
    )
    got = gp_metrics(mean, cov, f0t, sigma, 20000, seed=1)
    L = np.linalg.cholesky(cov + 1e-12 * np.eye(5))
    F = mean[:, None] + L @ np.random.default_rng(2).standard_normal((5, 2000))
    sd = np.asarray(hellinger_sq_pointwise(F - f0t[:, None], sigma)).mean(0).std()
    assert abs(got["d2"] - closed) < 4 * sd / math.sqrt(20000)
    assert got["l2sq"] == pytest.approx(np.mean(mu**2))


def test_gp_exponents_and_known_answers():
    assert gp_matern_exponent(0.5, 0.5, 1) == pytest.approx(-0.5)
    assert gp_matern_exponent(0.5, 2.5, 1) == pytest.approx(-1 / 6)
    assert gp_matern_exponent(0.5, 2.5, 1, "d") == pytest.approx(-1 / 12)

    def gp(att, expected="FAIL"):
        return verdict_entry("gp-matern-2.5", "PASS", att, expected)

    assert entry_outcome(gp("FAIL")) == "PASS"  # the over-smooth prior found slower: as known
    for att, outcome in (("PASS", "FAIL"), ("INCONCLUSIVE", "INCONCLUSIVE")):
        assert entry_outcome(gp(att)) == outcome
    # no known answer at a design: reported, not counted
    assert entry_outcome(gp("FAIL", expected=None)) == "PASS"
    with pytest.raises(ValueError, match="holder"):
        SweepConfig(truths=[TruthSpec("teacher", p=20)], ns=[10], estimator="gp",
                    gp_nus=[0.5]).validate()  # fmt: skip
    with pytest.raises(ValueError, match="gp_nus"):
        SweepConfig(truths=[TruthSpec("holder", p=1, alpha=0.5)], ns=[10], estimator="gp",
                    gp_nus=[]).validate()  # fmt: skip


def test_known_answers_come_from_the_exponent_gap_against_the_allowance():
    """The known answers at alpha = 0.5 from the proven exponents (d^2: e = -0.5; nu = 0.5,
    1.5, 2.5 give -0.5, -0.25 = e/2, -1/6) against the log^2 allowance (0.280 over n =
    250..8000, above |e|/2: a pass is withheld) and the design's prospective half-width h
    of the paired difference (pilot cv 0.13): the matched prior is UNDECIDABLE; nu = 1.5
    (gap 0.25 within 2h of the allowance) has no known answer; nu = 2.5 (gap 1/3) is a FAIL
    only where two half-widths fit in 1/3 - 0.280 = 0.053: at R = 20, not at R = 6.  The
    earlier rule (PASS iff nu = alpha) gave nu = 1.5 a known FAIL and the matched prior a
    known PASS, neither of which this design can show."""
    from verify.reading.design import expected_attainment
    from verify.stats.attainment import attainment_power
    from verify.stats.slopes import expected_slope_se, log_allowance

    spec = TruthSpec("holder", p=1, alpha=0.5)
    ns = [250, 500, 1000, 2000, 4000, 8000]
    A = log_allowance(ns, 2.0)
    assert A == pytest.approx(0.280, abs=0.001)

    def known(nu, R):
        pw = attainment_power(ns, -0.5, A, expected_slope_se(ns, R, 0.13), R)
        return expected_attainment(spec, f"gp-matern-{nu:g}", "d2", A, pw)

    assert known(0.5, 20) == "UNDECIDABLE" and known(1.5, 20) is None
    assert known(2.5, 20) == "FAIL" and known(2.5, 6) is None
    assert expected_attainment(spec, "asvi", "d2", A, None) is None
    # alpha = 1.5 (|e|/2 = 0.375 > A): a matched prior's known answer is PASS
    spec15 = TruthSpec("holder", p=1, alpha=1.5)
    pw = attainment_power(ns, -0.75, A, expected_slope_se(ns, 20, 0.05), 20)
    assert pw.separable and expected_attainment(spec15, "gp-matern-1.5", "d2", A, pw) == "PASS"
    # a FAIL against a known UNDECIDABLE is a contradiction of the control
    r = verdict_entry("gp-matern-0.5", "PASS", "FAIL", "UNDECIDABLE")
    assert entry_outcome(r) == "FAIL"
    r = verdict_entry("gp-matern-0.5", "PASS", "INCONCLUSIVE", "UNDECIDABLE")
    assert entry_outcome(r) == "INCONCLUSIVE"


@pytest.fixture(scope="module")
def gp_harness(tmp_path_factory):
    """The whole harness on exact GP posteriors (same sweep, reference, slopes, verdicts) on
    the gp tier's design (n = 250..8000, 6 replicates; measured slopes -0.49 and -0.19,
    c_hat 0.18 and 3.17 when written): the results by (estimator, metric)."""
    from simulate.sweep.run.runner import run_sweep

    cfg = SweepConfig(
        truths=[TruthSpec("holder", p=1, alpha=0.5)],
        ns=[250, 500, 1000, 2000, 4000, 8000],
        replicates=6,
        estimator="gp",
        gp_nus=[0.5, 2.5],
        n_test=1000,
        draws=20,
        replicate_block=1,
    )
    path = tmp_path_factory.mktemp("gp") / "gp.jsonl"
    recs = run_sweep(cfg, path, progress=False, log=lambda *_: None)
    out = {(r.estimator, r.metric): r for r in analyse(recs)}
    # and under the earlier rule (exploratory-v1), whose theorem PASS rejects e/2
    out.update({("v1", r.estimator, r.metric): r for r in analyse(recs, protocol="exploratory-v1")})
    return out


@pytest.mark.slow
def test_gp_known_answer_through_the_harness(gp_harness):
    """The matched Matern-1/2 prior attains the class's rate at alpha = 0.5: the allowance
    eats half the rate, so its attainment is UNDECIDABLE (as known); held to the class's
    band (the confirming rule) it PASSes, as known; under the earlier rule its theorem test
    rejects e/2."""
    m = gp_harness[("gp-matern-0.5", "d2")]
    assert m.attainment.verdict == m.decision.expected_attainment == "UNDECIDABLE"
    assert m.class_theorem.verdict == m.decision.expected_theorem == "PASS"
    assert gp_harness[("v1", "gp-matern-0.5", "d2")].theorem.verdict == "PASS"


@pytest.mark.slow
@pytest.mark.xfail(
    strict=True,
    reason="fails on main as found (cf5dae9, measured 2026-12-01 with and without xdist): the"
    " over-smooth Matern-5/2 prior's attainment difference is 0.331 [0.249, 0.413], c_flip"
    " 2.36 (3.17 when this test was written), inside the allowance: UNDECIDABLE, not FAIL;"
    " strict, so a change that restores the FAIL is seen",
)
def test_gp_over_smooth_prior_is_found_slower_through_the_harness(gp_harness):
    """The over-smooth Matern-5/2 prior (proven d^2 exponent -1/6) is found slower, which
    this design's 2h does not make a known answer (reported only); on n up to 4000 with 4
    replicates its interval still reached the allowance (INCONCLUSIVE)."""
    assert gp_harness[("gp-matern-2.5", "d2")].attainment.verdict == "FAIL"
    assert exit_status([r for k, r in gp_harness.items() if k[0] != "v1"]) == 0


# --------------------------------------------------------------------------- risk stopping
def test_the_risk_stop_watches_a_validation_split_of_the_training_data(tmp_path):
    """The same tiny sweep with and without ``stop_risk_tol``: with it, each replicate's
    last ``stop_val_fraction`` of its points are held out of ASVI's training (``n_train``
    in the record's config) and the rule records the held-out risk's change per candidate;
    without it nothing is held out and the fingerprint carries none of the rule's
    settings (earlier records keep theirs).  That the truth never reaches it is
    ``tests/simulate/sweep/test_no_truth_in_training.py``'s."""
    from simulate.sweep.run.runner import run_sweep
    from simulate.sweep.store.fingerprint import fingerprint_fields

    base = dict(
        truths=[TruthSpec("holder", p=1, alpha=0.5)], ns=[64, 128, 256], replicates=1,
        widths=[2, 4], max_steps=400, stop_window=20, stop_tol=0.05, stop_kl_abs=50.0,
        batch_size=32, n_test=200, draws=4,
    )  # fmt: skip
    quiet = lambda *_: None  # noqa: E731
    off = run_sweep(SweepConfig(**base), tmp_path / "off.jsonl", progress=False, log=quiet)
    cfg_on = SweepConfig(**base, stop_risk_tol=1e-3, risk_draws=4)
    on = run_sweep(cfg_on, tmp_path / "on.jsonl", progress=False, log=quiet)
    key = lambda r: r["cell"]["n"]  # noqa: E731
    for a, b in zip(sorted(off, key=key), sorted(on, key=key), strict=True):
        n = a["cell"]["n"]
        assert all(x is None for x in a["per_width"]["risk_change"])
        assert all(isinstance(x, float) for x in b["per_width"]["risk_change"])
        assert "n_train" not in a["config"]
        # held out: max(2, ceil(0.2 n)) = 13, 26, 52 (0.2 n = 12.8, 25.6, 51.2)
        assert b["config"]["n_train"] == {64: 51, 128: 102, 256: 204}[n]
    assert "stop_risk_tol" not in fingerprint_fields(SweepConfig(**base))
    assert "stop_val_fraction" not in fingerprint_fields(SweepConfig(**base))
    assert fingerprint_fields(cfg_on)["stop_risk_tol"] == 1e-3
    assert fingerprint_fields(cfg_on)["stop_val_fraction"] == 0.2


def _gp_shaped(records, ns=(250, 500, 1000), R=3):
    """Known-answer-control-shaped records on ``records``' truth (fake sweep records,
    4 n per replicate): its own n and replicates, the prior's metrics in
    ``per_estimator`` and, as the GP sweep writes them, in ``metrics``; no candidate
    widths.  Values follow n^-1/2 from the sweep record at the same position."""
    out = []
    for q in range(R):
        for i, n in enumerate(ns):
            src = records[q * 4 + i % 4]
            m = {
                k: src["metrics"][k] * (1 + 0.01 * q) * (n / 250) ** -0.5
                for k in ("d2", "d", "l2sq")
            }
            out.append({
                "cell": {**src["cell"], "n": n, "replicate": q},
                "truth": src["truth"],
                "config": {"estimator": "gp", "gp_nus": [0.5]},
                "failed": False,
                "metrics": dict(m),
                "per_estimator": {"gp-matern-0.5": m},
                "reference": src["reference"],
            })  # fmt: skip
    return out


def _same_results(both, alone):
    assert [(r.truth, r.estimator, r.metric) for r in both] == [
        (r.truth, r.estimator, r.metric) for r in alone
    ]
    for a, b in zip(both, alone, strict=True):
        assert (a.theorem, a.curve, a.attainment, a.control, a.replicates) == (
            b.theorem, b.curve, b.attainment, b.control, b.replicates
        )  # fmt: skip


def test_an_asvi_sweep_and_the_known_answer_control_on_one_truth_are_separate_designs():
    """confirm-v4 runs the GP control on its ASVI sweeps' truths (alpha = 0.5, 1.5) with
    other n and replicates: one truth's cells are analysed per source, each source's
    results equal to its records' alone (before, the cells of both were one table: an
    error with other designs, and with equal designs one source's cells overwrote the
    other's), the budget control (ASVI's) on the ASVI results, the family's Holm
    adjustment unchanged (the GP's entries are controls, outside it)."""
    asvi = fake_records(-0.5, -0.5, R=4)
    control = [r for r in fake_records(-0.5, -0.5, R=4, seed=3) if r["cell"]["n"] in (250, 16000)]
    asvi_alone = analyse(asvi, control=control)
    for gp, ns, order in [
        (_gp_shaped(asvi), (250, 500, 1000), "asvi first"),  # another design
        (_gp_shaped(asvi, ns=(250, 1000, 4000, 16000), R=4), (250, 1000, 4000, 16000),
         "gp first"),  # the same design: the overwrite
    ]:  # fmt: skip
        both = analyse(asvi + gp if order == "asvi first" else gp + asvi, control=control)
        _same_results(both, asvi_alone + analyse(gp))
        asvi_r = [r for r in both if r.estimator == "asvi"]
        gp_r = [r for r in both if r.estimator == "gp-matern-0.5"]
        assert len(asvi_r) == len(gp_r) == 3
        assert all(r.curve.ns == (250, 1000, 4000, 16000) for r in asvi_r)
        assert all(r.control is not None for r in asvi_r)  # the control paired
        assert all(r.curve.ns == ns for r in gp_r)
        assert [r.decision.fail_p_holm for r in asvi_r] == [
            r.decision.fail_p_holm for r in asvi_alone
        ]


def test_one_truth_holding_a_cell_twice_is_refused():
    """Two designs of one source on one truth (two ASVI sweeps' records read together)
    would overwrite each other's cells in the replicate-by-n table: refused, naming the
    cell, instead."""
    asvi = fake_records(-0.5, -0.5, R=4)
    with pytest.raises(ValueError, match="twice"):
        analyse(asvi + fake_records(-0.5, -0.5, R=2, seed=5))
