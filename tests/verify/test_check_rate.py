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
from simulate.sweep.setup.param_values import ObjectParam
from simulate.sweep.setup.truth_spec import TruthSpec
from verify.cli.check import estimator_spec, run_spec
from verify.cli.rates_args import read_command
from verify.cli.runspec import RunSpec

KNN = "sklearn.neighbors:KNeighborsRegressor"
H05 = TruthSpec("holder", p=1, alpha=0.5)


def test_the_spec_it_runs():
    """``check_rate``'s arguments become a ``RunSpec`` directly (no command line): each value
    under its option's name, the instance's parameters as the records carry them."""
    spec = run_spec(
        KNeighborsRegressor(n_neighbors=7),
        dict(truths=[H05], ns=[100, 200, 400], replicates=3, protocol="exploratory-v1",
             params={"weights": "distance"}, rate="n**(-2*alpha/(2*alpha+p))"),
        verify.RunOptions(tier="tiny", out="x.jsonl", workers=0),
    )  # fmt: skip
    assert spec == RunSpec(
        tier="tiny", truths=(H05,), protocol="exploratory-v1", estimator=KNN,
        estimator_params={"n_neighbors": "7", "weights": "distance"}, out="x.jsonl",
        n=(100, 200, 400), replicates=3, rate="n**(-2*alpha/(2*alpha+p))", workers=0,
    )  # fmt: skip
    assert run_spec(None, {}) == RunSpec()  # the tier's own estimator, every default
    # the same spec the command line makes of the same run
    argv = ["--tier", "tiny", "--estimator", KNN, "--estimator-param", "n_neighbors=7",
            "--estimator-param", "weights=distance", "--truth", "holder", "--p", "1",
            "--alpha", "0.5", "--n", "100", "200", "400", "--replicates", "3", "--protocol",
            "exploratory-v1", "--rate", "n**(-2*alpha/(2*alpha+p))", "--out", "x.jsonl",
            "--workers", "0"]  # fmt: skip
    assert read_command(argv).spec == spec


@pytest.mark.parametrize(
    "design, words",
    [
        (dict(ns=[250, 500, "--json=/x"]), "ns: '--json=/x' is not an integer"),
        (dict(ns=[250, 500.0, 1000]), "ns: 500.0 is not an integer"),
        (dict(ns="250 500"), "ns must be a list of integers"),
        (dict(replicates="--recompute"), "replicates: '--recompute' is not an integer"),
        (dict(truths=["--recompute"]), "not a truth's kind"),
        (dict(params={"--json": "1"}), "not a parameter's name"),
        (dict(protocol=3), "protocol must be a string"),
    ],
)
def test_each_value_is_checked_for_its_type(design, words):
    """``check_rate(ns=[250, 500, "--json=/x"])``: every value is checked for its type as
    the spec is made."""
    with pytest.raises(ValueError, match=re.escape(words)):
        run_spec(KNN, design)


def test_the_estimator_given_as_a_string_a_class_or_an_instance():
    assert estimator_spec(KNN) == (KNN, {})
    assert estimator_spec(KNeighborsRegressor) == (KNN, {})
    assert estimator_spec(KNeighborsRegressor(n_neighbors=3, p=1)) == (
        KNN, {"n_neighbors": "3", "p": "1"}
    )  # fmt: skip
    with pytest.raises(ValueError, match="MODULE:CLASS"):
        estimator_spec("KNeighborsRegressor")
    # a parameter with no literal (a kernel) is the object, named in the records by its repr
    spec, params = estimator_spec(GaussianProcessRegressor(kernel=RBF(0.5)))
    assert spec == "sklearn.gaussian_process:GaussianProcessRegressor"
    assert isinstance(params["kernel"], ObjectParam) and params["kernel"].value == RBF(0.5)
    assert params["kernel"] == "@object RBF(length_scale=0.5)"
    with pytest.raises(ValueError, match="params are the named estimator's"):
        run_spec(None, {"params": {"n_neighbors": 3}})

    def make():
        class Local(KNeighborsRegressor):
            pass

        return Local

    with pytest.raises(ValueError, match="inside a function"):
        estimator_spec(make())


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


def test_a_kernel_object_is_run_and_its_records_are_read_as_data(tmp_path):
    """``check_rate(GaussianProcessRegressor(kernel=Matern(nu=0.5)))`` (the issue's case,
    refused before: a kernel is an object): trained with the object, the records naming it by
    its repr, read back by the command without it, and the same call resumes them."""
    from sklearn.gaussian_process.kernels import Matern

    out = tmp_path / "gp.jsonl"
    run = verify.RunOptions(tier="tiny", out=str(out), workers=0, quiet=True)
    gp = GaussianProcessRegressor(kernel=Matern(nu=0.5), optimizer=None, alpha=0.1)
    kw = dict(truths=[H05], ns=[128, 256, 512], replicates=2, run=run)
    rc = verify.check_rate(gp, **kw)
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["config"]["regressor_params"]["kernel"] for r in recs} == {
        "@object Matern(length_scale=1, nu=0.5)"
    }
    assert {r["regressor_values"]["kernel"] for r in recs} == {"Matern(length_scale=1, nu=0.5)"}
    before = out.read_bytes()
    assert verify.check_rate(gp, **kw).to_json() == rc.to_json() and out.read_bytes() == before
    js = tmp_path / "r.json"
    r = subprocess.run([sys.executable, "-m", "verify.rates", "--records", str(out), "--json",
                        str(js), "--figures", str(tmp_path / "f")],
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == rc.status, r.stderr[-2000:]
    assert json.loads(js.read_text()) == json.loads(json.dumps(rc.to_json()))
    # another kernel is another configuration: refused, naming the parameter
    other = GaussianProcessRegressor(kernel=Matern(nu=1.5), optimizer=None, alpha=0.1)
    with pytest.raises(ValueError, match="regressor_params.kernel"):
        verify.check_rate(other, **kw)


SCRIPT = """
import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin

import verify
from simulate.sweep.setup.truth_spec import TruthSpec


class Bins(BaseEstimator, RegressorMixin):  # no _parameter_constraints
    def __init__(self, bins=8):
        self.bins = bins

    def fit(self, X, y):
        self.edges_ = np.linspace(0, 1, self.bins + 1)
        i = np.clip(np.searchsorted(self.edges_, X[:, 0]) - 1, 0, self.bins - 1)
        self.means_ = np.array([y[i == b].mean() if np.any(i == b) else 0.0
                                for b in range(self.bins)])
        return self

    def predict(self, X):
        i = np.clip(np.searchsorted(self.edges_, X[:, 0]) - 1, 0, self.bins - 1)
        return self.means_[i]


if __name__ == "__main__":
    run = verify.RunOptions(tier="tiny", out="bins.jsonl", workers=0, quiet=True)
    rc = verify.check_rate(Bins(bins=6), truths=[TruthSpec("holder", p=1, alpha=0.5)],
                           ns=[128, 256, 512], replicates=2, run=run)
    print("STATUS", rc.status, rc.spec.estimator)
"""


def test_a_class_defined_in_the_calling_script(tmp_path):
    """A regressor class defined in the script that calls ``check_rate`` (a
    ``BaseEstimator`` without ``_parameter_constraints``, which failed before: the harness
    called scikit-learn's private parameter check): trained as ``__main__:Bins``, resumed by
    the same script, its records read by the command alone."""
    (tmp_path / "script.py").write_text(SCRIPT)
    go = lambda *a: subprocess.run([sys.executable, *a], cwd=tmp_path, capture_output=True,  # noqa: E731
                                   text=True, timeout=300)  # fmt: skip
    first = go("script.py")
    assert first.returncode == 0, first.stderr[-2000:]
    assert "__main__:Bins" in first.stdout
    before = (tmp_path / "bins.jsonl").read_bytes()
    again = go("script.py")
    assert again.returncode == 0 and again.stdout == first.stdout
    assert (tmp_path / "bins.jsonl").read_bytes() == before  # resumed: nothing trained
    status = int(first.stdout.split("STATUS ")[1].split()[0])
    read = go("-m", "verify.rates", "--records", "bins.jsonl", "--figures", "f")
    assert read.returncode == status, read.stderr[-2000:]
    assert "Bins" in read.stdout
