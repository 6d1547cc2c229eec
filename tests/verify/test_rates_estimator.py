"""``python -m verify.rates --estimator MODULE:CLASS [--estimator-param NAME=VALUE ...]``:
any scikit-learn regressor through the rate harness (``simulate.sweep.train.foreign``) -- trained
on every cell of the tier's design (the quick tier's, shrunk here to seconds), recorded
beside the others and re-read, resumed, fingerprinted with its parameters, its expressions
evaluated per n, decided by the same tests (a stated ``--rate`` too); refusals in one line,
exit 2, before anything is written."""

from __future__ import annotations

import gzip
import json
from importlib import metadata
from pathlib import Path

import pytest

from simulate.sweep.store.schema import read_records
from tests.factories import run_main

KNN = "sklearn.neighbors:KNeighborsRegressor"
MATCHED = "n_neighbors=ceil(n**(2*alpha/(2*alpha+p)))"
SHRUNK = ("--tier", "quick", "--n", "50", "100", "200", "--replicates", "2")
QUICK = str(
    Path(__file__).resolve().parents[2] / "figures" / "reference" / "records-quick.jsonl.gz"
)


def _cli(tmp_path, *args):
    return run_main("verify.rates", *args, "--figures", tmp_path / "figs")


@pytest.fixture(scope="module")
def knn(tmp_path_factory):
    """The matched k-NN on the shrunk quick design: ``(run, records path, JSON, tmp)``."""
    tmp = tmp_path_factory.mktemp("knn")
    out, rep = tmp / "knn.jsonl", tmp / "knn.json"
    r = _cli(tmp, *SHRUNK, "--estimator", KNN, "--estimator-param", MATCHED, "--out", out,
             "--json", rep)  # fmt: skip
    return r, out, (json.loads(rep.read_text()) if rep.exists() else None), tmp


def test_knn_trains_on_the_tiers_cells_and_is_decided_by_the_same_tests(knn):
    """Every cell of the design (2 truths x 3 n x 2 replicates) recorded with the k-NN's
    metrics under per_estimator, on ASVI's data (the same data seeds as the shipped quick
    records', replicate by replicate), with the class-matched reference; the report holds
    its d2, d and l2sq entries held to the class's band (e = -2 alpha / (2 alpha + p)) with
    the attainment test against the reference."""
    r, out, doc, _ = knn
    assert r.returncode in (0, 1, 3), r.stderr
    recs = read_records(out)  # re-read through the schema's checks
    assert len(recs) == 12
    assert {(x["cell"]["truth"], x["cell"]["n"]) for x in recs} == {
        (t, n) for t in ("holder-a0.5-p1-s0", "holder-a1.5-p1-s0") for n in (50, 100, 200)
    }
    with gzip.open(QUICK, "rt") as f:
        asvi = [json.loads(line) for line in f]
    asvi_seeds = {(a["cell"]["truth"], a["cell"]["replicate"]): a["seeds"] for a in asvi}
    for x in recs:
        m = x["per_estimator"]["KNeighborsRegressor"]
        assert set(m) == {"d2", "d", "l2sq"} and m == x["metrics"]
        assert m["d"] == pytest.approx(m["d2"] ** 0.5)  # a point mass: every draw is f_hat
        assert {"d2", "d", "l2sq", "oracle"} <= set(x["reference"])
        assert x["config"]["regressor"] == KNN and x["config"]["estimator"] == "regressor"
        theirs = asvi_seeds[x["cell"]["truth"], x["cell"]["replicate"]]
        assert x["seeds"] == {k: theirs[k] for k in ("data", "test")}
    entries = [e for e in doc["results"] if e["estimator"] == "KNeighborsRegressor"]
    assert len(entries) == 6 and len(doc["results"]) == 6
    d2 = {e["truth"]: e for e in entries if e["metric"] == "d2"}
    assert d2["holder-a0.5-p1-s0"]["theorem"]["predicted"] == pytest.approx(-0.5)
    assert d2["holder-a1.5-p1-s0"]["theorem"]["predicted"] == pytest.approx(-0.75)
    for e in entries:
        assert e["theorem"]["verdict"] in ("PASS", "FAIL", "INCONCLUSIVE", "UNDECIDABLE")
        assert e["attainment"]["verdict"] in ("PASS", "FAIL", "INCONCLUSIVE", "UNDECIDABLE")
    assert "KNeighborsRegressor (a named regressor's point prediction" in r.stdout


def test_the_expression_is_evaluated_at_each_n(knn):
    """n_neighbors = ceil(n^(2 alpha / (2 alpha + p))): at alpha = 0.5, p = 1 that is
    ceil(sqrt(n)) -- 8 at n = 50, 15 at n = 200; at alpha = 1.5, ceil(n^0.75) -- 19 and
    54; the records keep the expression as given."""
    _, out, _, _ = knn
    k = {(x["cell"]["truth"], x["cell"]["n"]): x["regressor_values"]["n_neighbors"]
         for x in read_records(out)}  # fmt: skip
    assert k["holder-a0.5-p1-s0", 50] == 8 and k["holder-a0.5-p1-s0", 200] == 15
    assert k["holder-a1.5-p1-s0", 50] == 19 and k["holder-a1.5-p1-s0", 200] == 54
    for x in read_records(out):
        assert x["config"]["regressor_params"] == {"n_neighbors": MATCHED.split("=", 1)[1]}


def test_a_rerun_resumes_and_skips_every_done_cell(knn):
    """The same command again trains nothing: every cell is recorded, the file unchanged."""
    r0, out, _, tmp = knn
    before = out.read_bytes()
    r = _cli(tmp, *SHRUNK, "--estimator", KNN, "--estimator-param", MATCHED, "--out", out)
    assert r.returncode == r0.returncode, r.stderr
    assert "12 cells recorded, 0 jobs to run" in r.stdout
    assert out.read_bytes() == before


def test_another_parameter_is_another_configuration(knn):
    """A fixed k on the matched k's records file is another fingerprint: refused, exit 2,
    naming regressor_params, the file untouched."""
    _, out, _, tmp = knn
    before = out.read_bytes()
    r = _cli(tmp, *SHRUNK, "--estimator", KNN, "--estimator-param", "n_neighbors=5", "--out", out)
    assert r.returncode == 2 and "regressor_params" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert out.read_bytes() == before


def test_the_fingerprint_holds_the_class_its_version_and_the_expression(knn):
    """The records' fingerprint fields: the class's qualified name, scikit-learn's installed
    version and the parameters as given (the expression, not its values)."""
    _, out, _, _ = knn
    ff = read_records(out)[0]["fingerprint_fields"]
    ident = ff["regressor_identity"]
    assert ident["qualname"] == "sklearn.neighbors._regression.KNeighborsRegressor"
    assert ident["version"] == f"scikit-learn {metadata.version('scikit-learn')}"
    assert ff["regressor_params"] == {"n_neighbors": MATCHED.split("=", 1)[1]}


def test_a_stated_rate_decides_the_regressors_records(knn, tmp_path):
    """``--records`` of the k-NN with ``--rate``: its entries are held to the stated band
    (n^-2: e = -2, log power 0), shown in the JSON's stated_rate object."""
    _, out, _, _ = knn
    rep = tmp_path / "rate.json"
    r = _cli(tmp_path, "--records", out, "--rate", "n**(-2)", "--json", rep)
    assert r.returncode in (0, 1, 3), r.stderr
    doc = json.loads(rep.read_text())
    d2 = [e for e in doc["results"] if e["metric"] == "d2"]
    assert {e["theorem"]["predicted"] for e in d2} == {-2.0}
    assert [t["exponent"] for t in doc["stated_rate"]["truths"]] == [-2.0, -2.0]
    assert "stated rate (--rate): n**(-2)" in r.stdout


def test_the_dry_run_does_not_price_an_unknown_estimator(tmp_path):
    """``--dry-run`` prints the design and its power for the regressor (under a stated rate
    too: its band) and says the cost table cannot price it; nothing is written."""
    out = tmp_path / "knn.jsonl"
    r = _cli(tmp_path, *SHRUNK, "--estimator", KNN, "--estimator-param", MATCHED, "--out", out,
             "--dry-run", "--rate", "n**(-2*alpha/(2*alpha+p))")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert f"regressor {KNN}(n_neighbors=ceil(" in r.stdout
    assert "holder-a0.5-p1-s0 KNeighborsRegressor: e = -0.500, band log^0.00 n" in r.stdout
    assert "not priced: regressor" in r.stdout and "cost table does not know" in r.stdout
    # no total of 0.0 min where nothing is priced
    assert "in all: not priced" in r.stdout and "in all: 0.0 min" not in r.stdout
    assert not out.exists()


@pytest.mark.parametrize(
    "args, words",
    [
        (("--estimator", "no_such_module_x:Reg"), "module 'no_such_module_x' does not import"),
        (("--estimator", "sklearn.neighbors:NoSuchRegressor"), "has no class 'NoSuchRegressor'"),
        (("--estimator", "sklearn.preprocessing:StandardScaler"), "has no predict"),
        (("--estimator", "sklearn.neighbors"), "give MODULE:CLASS"),
        (("--estimator", KNN, "--estimator-param", "n_neighbour=5"),
         "has no parameter 'n_neighbour'"),
        (("--estimator", KNN, "--estimator-param", "n_neighbors=__import__('os')"),
         "unknown function '__import__'"),
        (("--estimator", KNN, "--estimator-param", "n_neighbors=n^2"), "BinOp is not allowed"),
        (("--estimator", KNN, "--estimator-param", "n_neighbors=m+1"), "unknown name 'm'"),
        (("--estimator", KNN, "--estimator-param", "n_neighbors=10.0**10**10"), "fails at n ="),
        (("--estimator", KNN, "--estimator-param", "n_neighbors"), "give NAME=VALUE"),
        (("--estimator", KNN, "--estimator-param", "n_neighbors=3", "--estimator-param",
          "n_neighbors=4"), "given twice"),
        (("--estimator-param", "n_neighbors=3"), "give it"),
        # the class's own check of a value, at every cell before anything trains
        (("--estimator", KNN, "--estimator-param", "n_neighbors=floor(n/100)"),
         "KNeighborsRegressor(n_neighbors=0) at holder-a0.5-p1-s0, n = 50: InvalidParameterError"),
        (("--estimator", KNN, "--truth", "teacher", "--p", "2", "--estimator-param", MATCHED),
         "uses alpha, but a truth of p = 2 has none"),
    ],
)  # fmt: skip
def test_refusals_are_one_line_exit_2_before_anything_is_written(tmp_path, args, words):
    out = tmp_path / "r.jsonl"
    r = _cli(tmp_path, *SHRUNK, *args, "--out", out)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert words in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    "args, words",
    [
        (("--tier", "confirm", "--estimator", KNN), "confirmatory"),
        (("--protocol", "confirm-v1", "--estimator", KNN), "confirmatory"),
        (("--records", QUICK, "--estimator", KNN), "--records verifies"),
    ],
)
def test_refused_under_a_confirmatory_protocol_and_with_records(tmp_path, args, words):
    r = _cli(tmp_path, *args)
    assert r.returncode == 2 and words in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_a_fit_failing_on_a_cells_data_is_one_line_exit_2(tmp_path):
    """A value valid for the class but not for a cell's data (100 neighbours of 50 points)
    fails while the sweep runs: one error line naming the cell, exit 2, no traceback."""
    r = _cli(tmp_path, *SHRUNK, "--estimator", KNN, "--estimator-param", "n_neighbors=100",
             "--out", tmp_path / "r.jsonl")  # fmt: skip
    errors = [x for x in r.stderr.splitlines() if "error:" in x]
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert len(errors) == 1 and "failed at holder-a0.5-p1-s0, n = 50, replicate" in errors[0]
    assert "Expected n_neighbors <= n_samples_fit" in errors[0]


def test_a_seeded_regressor_gets_the_cells_own_seed(tmp_path):
    """Variant: a random forest (``random_state`` left to the harness) trained twice into
    two files writes the same metrics (each cell's seed, ``stable_seed`` of the cell): a
    resumed sweep repeats an uninterrupted one."""
    args = ("--tier", "quick", "--n", "60", "120", "240", "--replicates", "2", "--no-control",
            "--estimator", "sklearn.ensemble:RandomForestRegressor", "--estimator-param",
            "n_estimators=5", "--estimator-param", "max_depth=ceil(log(n))")  # fmt: skip
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    assert _cli(tmp_path, *args, "--out", a).returncode in (0, 1, 3)
    assert _cli(tmp_path, *args, "--out", b).returncode in (0, 1, 3)
    ra, rb = read_records(a), read_records(b)
    key = lambda x: (x["cell"]["truth"], x["cell"]["n"], x["cell"]["replicate"])  # noqa: E731
    assert [x["metrics"] for x in sorted(ra, key=key)] == [
        x["metrics"] for x in sorted(rb, key=key)
    ]
    depth = {x["cell"]["n"]: x["regressor_values"]["max_depth"] for x in ra}
    assert depth == {60: 5, 120: 5, 240: 6}  # ceil(log n): an int kept as computed
