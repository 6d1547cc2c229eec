"""The equivalence reading of a stated exact rate (issue 77, item 3;
``verify.stats.equivalence``): two one-sided tests that the slope lies within +- 0.25 |e| of
e, beside the one-sided theorem test and never deciding; read by default for a stated rate
with no log factor and on request (``--equivalence-margin``) for every entry.  Known
answers: k-NN with k matched to the class passes ``n**(-1/2)`` at alpha = 0.5, p = 1; k-NN
with a fixed k (slope near 0) fails it."""

import math

import numpy as np
import pytest
from scipy import stats

import verify
from simulate.sweep.setup.truth_spec import TruthSpec
from verify.cli.rates_args import read_command
from verify.stats.equivalence import DEFAULT_RELATIVE_MARGIN, equivalence_test
from verify.stats.verdict import Verdict

KNN = "sklearn.neighbors:KNeighborsRegressor"
H05 = TruthSpec("holder", p=1, alpha=0.5)
NS = [250, 500, 1000, 2000, 4000]


def test_the_rule_at_its_bounds():
    e = -0.5  # margin 0.125: bounds -0.625, -0.375
    assert equivalence_test(e, -0.6, -0.4).verdict == Verdict.PASS
    assert equivalence_test(e, -0.6, -0.37).verdict == Verdict.INCONCLUSIVE  # straddles
    assert equivalence_test(e, -0.3, -0.1).verdict == Verdict.FAIL  # too slow
    assert equivalence_test(e, -0.9, -0.7).verdict == Verdict.FAIL  # too fast
    assert equivalence_test(e, math.nan, math.nan).verdict == Verdict.INCONCLUSIVE
    eq = equivalence_test(e, -0.6, -0.4)
    assert eq.bounds == pytest.approx((-0.625, -0.375)) and eq.relative == DEFAULT_RELATIVE_MARGIN
    for bad in (0.0, 0.5, 0.7, -0.1):  # at |e| / 2 or more an estimator at e/2 could pass
        with pytest.raises(ValueError, match="margin"):
            equivalence_test(e, -0.6, -0.4, bad)
    with pytest.raises(ValueError, match="e != 0"):
        equivalence_test(0.0, -0.1, 0.1)


def test_a_slope_at_a_bound_passes_at_most_at_the_one_sided_level():
    """The TOST's size: with the slope's estimate normal about a true slope on a bound, the
    interval ``slope +- t_{R-1} SE`` (SE estimated from R replicates) lies inside the bounds
    in at most (1 - level) / 2 = 2.5% of draws.  20,000 draws (seeded): the rate's Monte
    Carlo SE is 0.11 points, so 3.0% is over 4 SEs above the nominal 2.5%."""
    rng = np.random.default_rng(7)
    e, R, sd = -0.5, 6, 0.1
    true = e + DEFAULT_RELATIVE_MARGIN * abs(e)  # on the upper bound
    t = stats.t.ppf(0.975, R - 1)
    passes = 0
    draws = 20_000
    for _ in range(draws):
        x = rng.normal(true, sd, R)
        m, se = x.mean(), x.std(ddof=1) / math.sqrt(R)
        passes += equivalence_test(e, m - t * se, m + t * se).verdict == Verdict.PASS
    assert passes / draws < 0.030
    # and with the true slope at e and a half-width below the margin it passes (its power:
    # a negative control, the rule is not simply strict): sd 0.05 gives a half-width ~0.05
    hits = 0
    for _ in range(2000):
        x = rng.normal(e, 0.05, R)
        m, se = x.mean(), x.std(ddof=1) / math.sqrt(R)
        hits += equivalence_test(e, m - t * se, m + t * se).verdict == Verdict.PASS
    assert hits / 2000 > 0.9


@pytest.fixture(scope="module")
def knn(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("eq")
    out = {}
    for name, params in (
        ("matched", {"n_neighbors": "ceil(n**(2*alpha/(2*alpha+p)))"}),
        ("fixed", {"n_neighbors": 5}),
    ):
        run = verify.RunOptions(tier="tiny", out=str(tmp / f"{name}.jsonl"), workers=0, quiet=True)
        out[name] = verify.check_rate(KNN, truths=[H05], ns=NS, replicates=6, params=params,
                                      rate="n**(-1/2)", run=run)  # fmt: skip
    out["folder"] = tmp
    return out


def _eq(rc, metric="d2"):
    (r,) = [x for x in rc.results if x.metric == metric]
    return r.theorem


def test_the_known_answers(knn):
    """Matched k-NN is at the stated rate (its proven exponent -0.5): PASS; fixed k is
    not (variance-bound, slope near 0): FAIL.  d is read at its own exponent, -0.25."""
    t = _eq(knn["matched"])
    assert t.band_log_power == pytest.approx(0.0, abs=1e-12)
    # it reads the theorem test's own interval (the protocol's level), not another
    assert t.equivalence.ci == (t.ci_low, t.ci_high) and t.level == 0.95
    assert t.equivalence.verdict == Verdict.PASS, t.equivalence
    assert _eq(knn["fixed"]).equivalence.verdict == Verdict.FAIL
    d = _eq(knn["matched"], "d").equivalence
    assert d.bounds == pytest.approx((-0.3125, -0.1875))
    # beside, never deciding: the exit status is the one-sided test's and the attainment's
    s = knn["matched"].summary()
    assert "equivalence (slope within -0.625..-0.375" in s and "PASS" in s
    assert "equivalence" in knn["matched"].tables(explain=False)


def test_read_on_request_only_under_the_papers_band(knn, tmp_path):
    """Without a stated rate the reading is made only when a margin is named; a stated rate
    with a log factor has none by default."""
    matched = str(knn["folder"] / "matched.jsonl")

    def read(name, *extra):
        js = tmp_path / f"{name}.json"
        argv = ["--records", matched, "--figures", str(tmp_path / "f"), "--quiet", "--json"]
        assert verify.rates.main([*argv, str(js), *extra]) in (0, 1, 3)
        return js.read_text()

    doc = read("a")
    assert '"equivalence": null' in doc and '"equivalence": {' not in doc
    doc = read("b", "--equivalence-margin", "0.2")
    assert '"equivalence": {' in doc and '"relative": 0.2' in doc
    # never deciding: the exit status is the same with the reading as without it (fixed k:
    # its equivalence FAILs, its status is the theorem test's and the attainment test's)
    fixed = str(knn["folder"] / "fixed.jsonl")
    argv = ["--records", fixed, "--figures", str(tmp_path / "f"), "--quiet"]
    assert verify.rates.main(argv) == verify.rates.main([*argv, "--equivalence-margin", "0.2"])
    # and records written under a protocol keep a margin given for them (an exploratory copy)
    from tests.shipped_verdicts import REFERENCE

    shipped = f"{REFERENCE}/records-confirm4-holder-a05.jsonl.gz"
    js = tmp_path / "d.json"
    verify.rates.main(["--records", shipped, "--figures", str(tmp_path / "f"), "--quiet",
                       "--equivalence-margin", "0.2", "--json", str(js)])  # fmt: skip
    assert '"equivalence": {' in js.read_text()
    assert '"equivalence": {' not in read("c", "--rate", "n**(-1/2)*log(n)")


@pytest.mark.parametrize("value", ["0", "0.5", "-1"])
def test_a_margin_outside_its_range_is_refused(value):
    with pytest.raises(ValueError, match="equivalence-margin"):
        read_command(["--tier", "tiny", "--dry-run", "--equivalence-margin", value])


def test_refused_under_a_confirmatory_protocol():
    with pytest.raises(ValueError, match="confirmatory"):
        read_command(["--tier", "confirm4", "--dry-run", "--equivalence-margin", "0.2"])
