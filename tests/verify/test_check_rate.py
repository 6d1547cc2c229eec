"""``verify.check_rate``, the main job from Python: the command line it runs, the
estimator it names, its results against the command's on the same records, its resume
and its refusals."""

import json
import re
import subprocess
import sys

import pytest
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF
from sklearn.neighbors import KNeighborsRegressor

import verify
from simulate.sweep.truth_spec import TruthSpec
from verify.check import command_line, estimator_spec

KNN = "sklearn.neighbors:KNeighborsRegressor"
H05 = TruthSpec("holder", p=1, alpha=0.5)


def test_the_command_line_it_runs():
    argv = command_line(
        KNeighborsRegressor(n_neighbors=7),
        dict(truths=[H05], ns=[100, 200, 400], replicates=3, protocol="exploratory-v1",
             params={"weights": "distance"}, rate="n**(-2*alpha/(2*alpha+p))"),
        verify.RunOptions(tier="tiny", out="x.jsonl", workers=0),
    )  # fmt: skip
    # every value a user gives joined to its flag (--FLAG=VALUE): never read as an option
    assert argv == [
        "--tier", "tiny", "--estimator", KNN, "--estimator-param=n_neighbors=7",
        "--estimator-param=weights=distance", "--truth", "holder", "--p", "1",
        "--alpha", "0.5", "--n", "100", "200", "400", "--replicates=3",
        "--protocol=exploratory-v1", "--rate=n**(-2*alpha/(2*alpha+p))",
        "--out=x.jsonl", "--workers=0",
    ]  # fmt: skip
    assert command_line(None, {}) == ["--tier", "quick"]  # the tier's own estimator


@pytest.mark.parametrize(
    "design, words",
    [
        (dict(ns=[250, 500, "--json=/x"]), "ns: '--json=/x' is not an integer"),
        (dict(ns=[250, 500.0, 1000]), "ns: 500.0 is not an integer"),
        (dict(ns="250 500"), "ns must be a list of integers"),
        (dict(replicates="--recompute"), "replicates: '--recompute' is not an integer"),
        (dict(truths=["--recompute"]), "not a truth's kind"),
        (dict(params={"--json": "1"}), "not a parameter's name"),
    ],
)
def test_a_value_is_never_an_option_of_the_command_line(design, words):
    """``check_rate(ns=[250, 500, "--json=/x"])`` put the string into the command line as
    an option: every value is checked for its type, or joined to its flag."""
    with pytest.raises(ValueError, match=re.escape(words)):
        command_line(KNN, design)
    rate = command_line(None, dict(rate="-n**(-1)"))  # a rate that starts with a minus
    assert rate[-1] == "--rate=-n**(-1)"


def test_the_estimator_given_as_a_string_a_class_or_an_instance():
    assert estimator_spec(KNN) == (KNN, {})
    assert estimator_spec(KNeighborsRegressor) == (KNN, {})
    assert estimator_spec(KNeighborsRegressor(n_neighbors=3, p=1)) == (
        KNN, {"n_neighbors": "3", "p": "1"}
    )  # fmt: skip
    with pytest.raises(ValueError, match="MODULE:CLASS"):
        estimator_spec("KNeighborsRegressor")
    # a parameter the records cannot carry as a literal: refused, naming the way round it
    with pytest.raises(ValueError, match="kernel = RBF.*params="):
        estimator_spec(GaussianProcessRegressor(kernel=RBF(0.5)))
    with pytest.raises(ValueError, match="params are the named estimator's"):
        command_line(None, {"params": {"n_neighbors": 3}})


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    out = tmp_path_factory.mktemp("check") / "knn.jsonl"
    run = verify.RunOptions(tier="tiny", out=str(out), workers=0, quiet=True)
    kw = dict(truths=[H05], ns=[128, 256, 512], replicates=2,
              params={"n_neighbors": "ceil(n**(2*alpha/(2*alpha+p)))"}, run=run)  # fmt: skip
    return out, kw, verify.check_rate(KNN, **kw)


def test_its_results_are_the_commands_on_the_same_records(checked, tmp_path):
    """The typed results are those ``verify.rates --records FILE --json`` writes of the
    records it trained; the exit status the command's."""
    out, _, rc = checked
    js = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "verify.rates", "--records", str(out), "--json", str(js),
           "--figures", str(tmp_path / "f")]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == rc.status, r.stderr[-2000:]
    assert json.loads(js.read_text()) == json.loads(json.dumps(rc.to_json()))
    assert {x.estimator for x in rc.results} == {"KNeighborsRegressor"}
    assert "KNeighborsRegressor" in repr(rc) and f"status {rc.status}" in repr(rc)
    summary = rc.summary()
    assert summary.count("\n") < 25 and "holder-a0.5-p1-s0 KNeighborsRegressor: slope" in summary
    assert "KNeighborsRegressor" in rc.tables()
    (png,) = rc.plot(str(tmp_path / "fig"))
    assert png.endswith("holder-a0.5-p1-s0.png")


def test_a_second_call_resumes_its_records(checked):
    """The same call again trains nothing: the records file is read back whole."""
    out, kw, rc = checked
    before = out.read_bytes()
    again = verify.check_rate(KNN, **kw)
    assert out.read_bytes() == before
    assert json.dumps(again.to_json()) == json.dumps(rc.to_json())


def test_what_the_command_refuses_is_a_value_error(tmp_path):
    run = verify.RunOptions(tier="tiny", out=str(tmp_path / "x.jsonl"), workers=0, quiet=True)
    # a named estimator is exploratory: a confirmatory protocol refuses it
    with pytest.raises(ValueError):
        verify.check_rate(KNN, protocol="confirm-v4", run=run)
    with pytest.raises(ValueError, match="n_neighbours"):
        verify.check_rate(KNN, params={"n_neighbours": 3}, run=run)
    assert not (tmp_path / "x.jsonl").exists()
