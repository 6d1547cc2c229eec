"""A named regressor's power from its own pilot (issue 77, item 2; ``verify.reading.pilot``):
never ASVI's (the protocol's) cv; a pilot block trained first on data seeds of its own, or
a pilot's records given; without one "no pilot: power unknown" and no UNDECIDABLE label
from power; ``verify.sizing`` reads the regressor's records."""

import dataclasses
import json
import re
import subprocess
import sys

import numpy as np
import pytest

import verify
from simulate.sweep.setup.truth_spec import TruthSpec
from simulate.sweep.store.schema import read_records
from verify import protocol as protocols
from verify.cli.rates_args import read_command
from verify.reading import stated_rate
from verify.reading.analysis import analyse
from verify.reading.design import TruthDesign, prospective
from verify.reading.pilot import NO_PILOT, check_pilot_of, pilot_cvs
from verify.report.render import format_results
from verify.sizing import realised

KNN = "sklearn.neighbors:KNeighborsRegressor"
H15 = TruthSpec("holder", p=1, alpha=1.5)
PARAMS = {"n_neighbors": "ceil(n**(2*alpha/(2*alpha+p)))"}
NS = [128, 256, 512, 1024]


def _run(tmp, name, pilot, replicates=3, params=PARAMS):
    run = verify.RunOptions(tier="tiny", out=str(tmp / f"{name}.jsonl"), workers=0, quiet=True,
                            pilot=pilot)  # fmt: skip
    return verify.check_rate(KNN, truths=[H15], ns=NS, replicates=replicates, params=params,
                             run=run)  # fmt: skip


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pilot")
    return tmp, _run(tmp, "none", None), _run(tmp, "block", 3)


def _primary(rc):
    (r,) = [x for x in rc.results if x.primary]
    return r


def test_without_a_pilot_the_power_is_unknown_and_labels_nothing(runs):
    _, none, _ = runs
    r = _primary(none)
    assert r.theorem.power.pilot_cv is None and r.attainment.power.pilot_cv_diff is None
    assert r.theorem.power.separable and r.attainment.power.separable  # unlabelled by power
    assert r.theorem.verdict != "UNDECIDABLE"
    text = format_results(list(none.results))
    assert NO_PILOT in text
    # the power columns say "?" (unknown), never "yes" or "no"
    (row,) = [ln for ln in text.splitlines() if ln.strip().startswith("d2  -0.750")]
    assert re.search(r" (rej|NOT) +\? ", row), row


def test_a_pilot_block_gives_the_power_its_own_spread(runs):
    tmp, none, block = runs
    pilot_file = tmp / "block-pilot.jsonl"
    pilot = read_records(str(pilot_file))
    main = read_records(str(tmp / "block.jsonl"))
    # its own data seeds: not the replicates the verdicts are decided on
    assert {r["config"]["seed"] for r in pilot}.isdisjoint({r["config"]["seed"] for r in main})
    assert len({r["cell"]["replicate"] for r in pilot}) == 3
    cvs = pilot_cvs(pilot, str(pilot_file))
    r = _primary(block)
    own = cvs["KNeighborsRegressor", H15.key, "d2"]
    assert r.theorem.power.pilot_cv == pytest.approx(own.cv)
    assert r.attainment.power.pilot_cv_diff == pytest.approx(own.cv_diff)
    # never the protocol's (ASVI's) cv
    proto = protocols.load(block.protocol.split("@")[0])
    assert own.cv != pytest.approx(proto.cv_for(H15.key, "holder"))
    # the pilot moves the power alone: the run's own cells are those of the run without it
    assert r.theorem.slope == _primary(none).theorem.slope
    assert np.isfinite(r.theorem.power.half_width)


def test_the_pilot_cv_is_the_one_the_records_realise(runs):
    """``pilot_cvs`` reads the cv ``verify.sizing.realised`` reads off the analysis of the
    same records (``SE sqrt(R Sxx)``), per metric."""
    tmp, _, _ = runs
    recs = read_records(str(tmp / "block-pilot.jsonl"))
    cvs = pilot_cvs(recs, "pilot")
    for res in analyse(recs, protocol=protocols.DEFAULT):
        q = realised(res)
        own = cvs[res.estimator, res.truth, res.metric]
        assert own.cv == pytest.approx(q.cv, rel=1e-9)
        assert own.cv_diff == pytest.approx(q.cv_diff, rel=1e-9)


def test_a_given_pilot_is_read_and_checked(runs, tmp_path):
    tmp, _, block = runs
    pilot = str(tmp / "block-pilot.jsonl")
    rerun = verify.rates.main([
        "--records", str(tmp / "block.jsonl"), "--pilot", pilot, "--json", str(tmp_path / "j"),
        "--figures", str(tmp_path / "f"), "--quiet",
    ])  # fmt: skip
    assert rerun == block.status
    doc = json.loads((tmp_path / "j").read_text())
    d2 = [e for e in doc["results"] if e["metric"] == "d2"][0]
    assert d2["theorem"]["power"]["pilot_cv"] == pytest.approx(
        _primary(block).theorem.power.pilot_cv
    )
    run = read_records(str(tmp / "block.jsonl"))
    cfg, keys = run[0]["config"], {H15.key}
    check_pilot_of(read_records(pilot), cfg, keys, "pilot")  # its own data seed: accepted
    # a pilot of another configuration (other parameters) is refused
    other = [dict(r, config={**r["config"], "regressor_params": {"n_neighbors": "5"}})
             for r in read_records(pilot)]  # fmt: skip
    with pytest.raises(ValueError, match="regressor_params"):
        check_pilot_of(other, cfg, keys, "other")
    # the run's own records as its pilot: the decided data (post-hoc power), refused, and
    # the command exits 2 before reading anything further
    with pytest.raises(ValueError, match="own data seed"):
        check_pilot_of(run, cfg, keys, "self")
    argv = ["--records", str(tmp / "block.jsonl"), "--figures", str(tmp_path / "f"), "--quiet"]
    assert verify.rates.main([*argv, "--pilot", str(tmp / "block.jsonl")]) == 2
    # the pilot is an input: no output may overwrite it
    assert verify.rates.main([*argv, "--pilot", pilot, "--json", pilot]) == 2
    assert read_records(pilot)
    # a pilot of ASVI's records gives no cv: ASVI's power is the protocol's
    from tests.shipped_verdicts import REFERENCE, shipped_records

    asvi = read_records(f"{REFERENCE}/{shipped_records()[0]}")
    with pytest.raises(ValueError, match="no entry that takes its own pilot"):
        pilot_cvs(asvi, "asvi")


def test_asvi_and_the_controls_keep_the_protocols_cv():
    proto = protocols.load(protocols.DEFAULT)
    design = TruthDesign(H15, H15.key, NS, [], 4)
    a = prospective(design, "asvi", "d2", proto)
    assert a.pilot_cv == pytest.approx(proto.cv_for(H15.key, "holder"))
    g = prospective(design, "gp-matern-1.5", "d2", proto)
    assert g.pilot_cv == pytest.approx(proto.cv_for(H15.key, "gp"))
    # a named regressor without a pilot: unknown, with one: its own
    r = prospective(design, "KNeighborsRegressor", "d2", proto)
    assert r.pilot_cv is None and not np.isfinite(r.slope_se)
    own = dataclasses.make_dataclass("P", ["cv", "cv_diff"])(0.1, 0.2)
    r = prospective(design, "KNeighborsRegressor", "d2", proto, pilot=own)
    assert r.pilot_cv == 0.1 and r.attainment_power.pilot_cv_diff == 0.2


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--pilot-replicates", "3"], "give --estimator"),
        (["--estimator", KNN, "--pilot-replicates", "1"], ">= 2"),
        (["--estimator", KNN, "--pilot-replicates", "3", "--pilot", "x"], "give one pilot"),
        (["--pilot", "nowhere.jsonl"], "give --estimator or --records"),
        (["--estimator", KNN, "--pilot", "nowhere.jsonl"], "no pilot records file"),
    ],
)
def test_the_pilot_flags_refused_where_they_cannot_act(argv, words, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=re.escape(words)):
        read_command(["--tier", "tiny", "--dry-run", *argv])


def test_sizing_reads_a_named_regressors_records(runs):
    tmp, _, _ = runs
    r = subprocess.run([sys.executable, "-m", "verify.sizing", str(tmp / "block.jsonl"),
                        "--top", "4096"], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr[-1500:]
    assert "KNeighborsRegressor" in r.stdout and "realised cv" in r.stdout


def test_the_results_hold_the_per_replicate_values(runs):
    """Issue 77, item 4: each curve carries the values its fit read, ``[replicate][n]``,
    the replicates in ``replicates.used``'s order; their mean is the curve's mean, and the
    JSON report holds them."""
    _, none, _ = runs
    for r in none.results:
        V = np.asarray(r.curve.values)
        assert V.shape == (len(r.replicates.used), len(r.curve.ns))
        np.testing.assert_allclose(V.mean(0), r.curve.mean, rtol=1e-12)
    doc = json.loads(json.dumps(none.to_json()))
    assert len(doc["results"][0]["curve"]["values"]) == len(none.results[0].replicates.used)


def test_a_pilot_of_another_configuration_is_refused_before_training(runs, tmp_path):
    """``--pilot`` is checked against the plan's configuration before any cell trains."""
    tmp, _, _ = runs
    out = tmp_path / "k5.jsonl"
    with pytest.raises(ValueError, match="regressor_params"):
        _run(tmp_path, "k5", str(tmp / "block-pilot.jsonl"), params={"n_neighbors": 5})
    assert not out.exists()


def test_the_dry_run_names_the_pilot(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ["--tier", "tiny", "--n", "128", "256", "512", "--estimator", KNN, "--dry-run",
            "--estimator-param", "n_neighbors=5"]  # fmt: skip
    assert verify.rates.main([*argv, "--pilot-replicates", "3"]) == 0
    out = capsys.readouterr().out
    assert "pilot block of sweep: 3 replicates" in out and NO_PILOT in out


def test_an_exact_stated_rate_without_a_pilot_stays_undecidable(runs, tmp_path):
    """Power unknown labels nothing only where a design could decide: a stated rate with no
    log factor has no margin to PASS an estimator at e under the confirming rule, at any
    spread, so its non-rejection is UNDECIDABLE with or without a pilot."""
    tmp, _, _ = runs
    recs = read_records(str(tmp / "none.jsonl"))
    proto = stated_rate.with_rate(protocols.load("exploratory-v3"), "n**(-3/4)")
    (r,) = [x for x in analyse(recs, protocol=proto) if x.primary]
    assert r.theorem.power.pilot_cv is None and not r.theorem.power.separable
    if r.theorem.verdict != "FAIL":
        assert r.theorem.verdict == "UNDECIDABLE"
