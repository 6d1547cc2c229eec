"""A named regressor that misbehaves, and records that name one (``simulate.sweep.train.foreign``,
issue 74 items 4-8): reading records runs none of the code they name, its expressions are
bounded as a whole, it gets copies of the harness's data, a prediction that is not finite is
a failed cell the reader accepts, and what it raises (``SystemExit`` included) or returns
out of shape is one line naming the cell."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from simulate.sweep.run.runner import run_sweep
from simulate.sweep.setup.config import SweepConfig
from simulate.sweep.setup.truth_spec import TruthSpec
from simulate.sweep.store.records import fingerprint
from simulate.sweep.store.schema import read_records
from simulate.sweep.train.foreign import RegressorFailed, values_at
from tests.factories import run_main

H05 = TruthSpec("holder", p=1, alpha=0.5)
KNN = "sklearn.neighbors:KNeighborsRegressor"

# classes of the user's own, in a module of the test's folder (importable by name)
USER_MODULE = textwrap.dedent(
    """
    import numpy as np

    class _Base:
        def __init__(self, how="mean"):
            self.how = how
        def get_params(self, deep=True):
            return {"how": self.how}

    class Mean(_Base):
        def fit(self, X, y):
            self.m = float(np.mean(y))
            return self
        def predict(self, X):
            return np.full(len(X), self.m)

    class Meddler(Mean):
        # standardises X and y in place (as a careless pipeline does) and zeroes what it
        # is asked to predict at: the harness's own arrays must not change
        def fit(self, X, y):
            super().fit(X, y)
            X -= X.mean(axis=0)
            X /= X.std(axis=0) + 1.0
            y -= y.mean()
            y *= 0.0
            return self
        def predict(self, X):
            out = super().predict(X)
            X[:] = 0.0
            return out

    class Odd(Mean):
        def predict(self, X):
            m = np.full(len(X), self.m)
            if self.how == "nan":
                m[::2] = np.nan
                return m
            if self.how == "inf":
                return np.full(len(X), np.inf)
            if self.how == "short":
                return m[:-1]
            if self.how == "columns":
                return np.stack([m, m], axis=1)
            if self.how == "strings":
                return np.array(["a"] * len(X))
            return m

    class Quits(Mean):
        def fit(self, X, y):
            raise SystemExit(0)
    """
)


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """The module ``asvi_user_regressors`` (above) importable for this test only."""
    (tmp_path / "asvi_user_regressors.py").write_text(USER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "asvi_user_regressors"
    sys.modules.pop("asvi_user_regressors", None)


def _cfg(spec, params=None, ns=(64, 128), replicates=1):
    return SweepConfig(truths=[H05], ns=list(ns), replicates=replicates, n_test=500,
                       estimator="regressor", regressor=spec,
                       regressor_params=params)  # fmt: skip


def _quiet(*_a, **_k):
    pass


def _without_timing(recs):
    keep = ("cell", "metrics", "per_estimator", "reference", "failed", "seeds")
    return [{k: r.get(k) for k in keep} for r in sorted(recs, key=lambda r: r["cell"]["n"])]


# ----------------------------------------------------------------- reading runs no code
def test_reading_records_never_imports_the_module_they_name(tmp_path, user_module):
    """A records file whose ``config.regressor`` (and fingerprint fields, fingerprint
    recomputed, as anyone can) names a module that writes a marker when imported: every
    reader reads it as data -- ``verify.rates --records`` here -- and the marker is never
    written.  Variant: the run that trains it, from the user's own command, does import it."""
    good = tmp_path / "good.jsonl"
    design = dict(ns=(64, 128, 256), replicates=2)  # what verify.rates needs for a slope
    run_sweep(_cfg(f"{user_module}:Mean", **design), good, progress=False, log=_quiet)
    marker = tmp_path / "imported.txt"
    (tmp_path / "asvi_evil_probe.py").write_text(
        f"with open({str(marker)!r}, 'w') as fh:\n    fh.write('ran')\n"
        f"from {user_module} import Mean\n"
    )
    evil = tmp_path / "evil.jsonl"
    lines = []
    for rec in map(json.loads, good.read_text().splitlines()):
        rec["config"]["regressor"] = "asvi_evil_probe:Mean"
        rec["fingerprint_fields"]["regressor"] = "asvi_evil_probe:Mean"
        rec["fingerprint"] = fingerprint(rec["fingerprint_fields"])
        lines.append(json.dumps(rec, sort_keys=True))
    evil.write_text("\n".join(lines) + "\n")
    recs = read_records(evil)  # the schema's reader: every check, the provenance's too
    assert len(recs) == 6 and not marker.exists()
    r = run_main("verify.rates", "--records", evil, "--no-control", "--figures", tmp_path / "f",
                 cwd=tmp_path)  # fmt: skip
    assert r.returncode in (1, 3), r.stderr  # read and decided
    assert not marker.exists()
    assert "asvi_evil_probe" not in sys.modules
    run_sweep(_cfg("asvi_evil_probe:Mean"), tmp_path / "train.jsonl", progress=False, log=_quiet)
    assert marker.read_text() == "ran"  # a run imports what its user names
    sys.modules.pop("asvi_evil_probe", None)


def test_a_configuration_checks_a_regressor_as_data():
    """The spec's form and the parameters' texts are checked as a configuration is made,
    importing nothing: a module that does not exist is fine as data, a spec that is not
    ``MODULE:CLASS`` of identifiers is not."""
    assert _cfg("no_such_module_anywhere:Thing").regressor == "no_such_module_anywhere:Thing"
    for bad in ("os.system('x'):Y", "a:b:c", "sklearn.neighbors:", ":Y", "a b:C"):
        with pytest.raises(ValueError, match="give MODULE:CLASS"):
            _cfg(bad)
    with pytest.raises(ValueError, match="regressor_params must map names to their text"):
        _cfg(KNN, {"n_neighbors": 5})


# ------------------------------------------------------------------ bounded expressions
@pytest.mark.parametrize(
    "text",
    [
        "ceil(n)**ceil(n)",
        "floor(1e300)*floor(1e300)",
        "ceil(n)**ceil(n)**ceil(n)",
        "2**2**2**2**2**2",
        "(ceil(n)*ceil(n))**(ceil(n)*ceil(n))",
    ],
)
def test_an_expression_is_bounded_as_a_whole(text):
    """Each power was bounded alone, nested powers and products of huge integers were not
    (an ``OverflowError`` traceback, or a hang at 100% CPU): now each is refused in one line,
    ValueError, before the number is made."""
    with pytest.raises(ValueError, match=r"^--estimator-param k=.*(fails at|is )") as exc:
        values_at({"k": text}, frozenset({"k"}), 250, 1, 0.5)
    assert "\n" not in str(exc.value)


def test_a_nested_power_is_refused_in_a_process_that_would_hang(tmp_path):
    """The reproducers that hung, each in a process of its own under a deadline (a
    regression fails here instead of hanging the suite)."""
    code = (
        "from simulate.sweep.train.foreign import values_at\n"
        "for t in ('ceil(n)**ceil(n)**ceil(n)', '(ceil(n)**ceil(n))**ceil(n)'):\n"
        "    try:\n"
        "        values_at({'k': t}, frozenset({'k'}), 250, 1, 0.5)\n"
        "    except ValueError as e:\n"
        "        print(e)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, cwd=tmp_path, check=False)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("fails at n = 250") == 2, r.stdout


def test_ordinary_expressions_keep_their_values():
    """Negative control: the matched k-NN's expression, a power and a ratio as before."""
    rounded = frozenset({"k"})
    assert values_at({"k": "ceil(n**(2*alpha/(2*alpha+p)))"}, rounded, 4000, 1, 0.5) == {"k": 64}
    assert values_at({"k": "2**10"}, rounded, 10, 1, 0.5) == {"k": 1024}
    assert values_at({"k": "n//3"}, rounded, 100, 1, 0.5) == {"k": 33}
    assert values_at({"x": "1/n"}, frozenset(), 400, 1, 0.5) == {"x": 1 / 400}


def test_the_command_line_and_check_rate_refuse_a_huge_parameter_in_one_line(tmp_path):
    """``--estimator-param 'n_neighbors=ceil(n)**ceil(n)'``: an OverflowError traceback,
    exit 4, before; one line, exit 2, now (``check_rate``: ValueError, not OverflowError)."""
    import verify

    out = tmp_path / "r.jsonl"
    r = run_main("verify.rates", "--tier", "quick", "--n", "50", "100", "200",
                 "--replicates", "2", "--estimator", KNN, "--estimator-param",
                 "n_neighbors=ceil(n)**ceil(n)", "--dry-run", "--out", out)  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "n_neighbors" in r.stderr
    with pytest.raises(ValueError, match="n_neighbors"):
        verify.check_rate(KNN, truths=[H05], ns=[50, 100, 200], replicates=2,
                          params={"n_neighbors": "floor(1e300)*floor(1e300)"},
                          run=verify.RunOptions(out=str(out), quiet=True))  # fmt: skip


# ---------------------------------------------------------------- the harness's own data
def test_an_estimator_that_writes_into_its_inputs_changes_nothing_of_the_harness(
    tmp_path, user_module
):
    """A class that standardises X and y in place and zeroes the points it predicts at
    moved the reference's slope (-0.761 -> -0.112) and a cell's d^2 before: given copies,
    its records equal those of the same prediction without the meddling -- the reference,
    the truth's seeds and its metrics alike."""
    honest = run_sweep(_cfg(f"{user_module}:Mean"), tmp_path / "a.jsonl", progress=False,
                       log=_quiet)  # fmt: skip
    meddled = run_sweep(_cfg(f"{user_module}:Meddler"), tmp_path / "b.jsonl", progress=False,
                        log=_quiet)  # fmt: skip
    a, b = _without_timing(honest), _without_timing(meddled)
    for x in b:
        x["per_estimator"] = {"Mean": x["per_estimator"].pop("Meddler")}
    assert a == b


# ----------------------------------------------------------- failed cells, one-line errors
def test_a_prediction_that_overflows_is_a_failed_cell_the_reader_accepts(tmp_path):
    """``DummyRegressor(strategy='constant', constant=1e160)``: its squared error overflows;
    the cell was written with a null metric the reader then called "damaged or edited" (the
    file could be neither read nor resumed).  Now: a failed cell with its reason, read back
    as failed, and a re-run resumes it with nothing to do."""
    cfg = _cfg("sklearn.dummy:DummyRegressor", {"strategy": "'constant'", "constant": "1e160"})
    out = tmp_path / "r.jsonl"
    recs = run_sweep(cfg, out, progress=False, log=_quiet)
    assert [r["failed"] for r in recs] == [True, True]
    assert all("overflows" in r["failure"] for r in recs)
    again = read_records(out)  # the reader's every check
    assert [r["failed"] for r in again] == [True, True]
    assert np.isnan(again[0]["metrics"]["l2sq"]) and again[0]["metrics"]["d2"] == 1.0
    lines: list[str] = []
    run_sweep(cfg, out, progress=False, log=lines.append)
    assert lines == [f"sweep: 2 cells recorded, 0 jobs to run -> {out}"]


def test_a_non_finite_prediction_is_a_failed_cell(tmp_path, user_module):
    for how, words in (("nan", "not finite at 250 of 500"), ("inf", "not finite at 500 of 500")):
        recs = run_sweep(_cfg(f"{user_module}:Odd", {"how": f"'{how}'"}),
                         tmp_path / f"{how}.jsonl", progress=False, log=_quiet)  # fmt: skip
        assert all(r["failed"] and words in r["failure"] for r in recs), recs[0].get("failure")
        read_records(tmp_path / f"{how}.jsonl")


@pytest.mark.parametrize(
    "how, words",
    [
        ("short", "shape (499,) for 500 test points"),
        ("columns", "shape (500, 2) for 500 test points"),
        ("strings", "TypeError: predict returned <U1 values"),
    ],
)
def test_a_prediction_out_of_shape_is_one_line_naming_the_cell(tmp_path, user_module, how, words):
    """A prediction of the wrong length, two columns or strings: a traceback (exit 4)
    before; one line naming the cell now (RegressorFailed; verify.rates says it, exit 2)."""
    with pytest.raises(RegressorFailed, match=r"failed at holder-a0.5-p1-s0, n = \d+") as exc:
        run_sweep(_cfg(f"{user_module}:Odd", {"how": f"'{how}'"}), tmp_path / "r.jsonl",
                  progress=False, log=_quiet)  # fmt: skip
    assert words in str(exc.value) and "\n" not in str(exc.value)


def test_a_system_exit_from_the_users_fit_is_a_failure_never_all_pass(tmp_path, user_module):
    """A ``fit`` that raises ``SystemExit(0)`` made ``verify.rates`` exit 0 ("all pass") with
    no verdicts; now it is the estimator's failure, one line, and never exit 0."""
    with pytest.raises(RegressorFailed, match="SystemExit"):
        run_sweep(_cfg(f"{user_module}:Quits"), tmp_path / "r.jsonl", progress=False,
                  log=_quiet)  # fmt: skip
    r = run_main("verify.rates", "--tier", "quick", "--n", "50", "100", "200",
                 "--replicates", "2", "--estimator", f"{user_module}:Quits", "--out",
                 tmp_path / "q.jsonl", "--figures", tmp_path / "f", cwd=tmp_path)  # fmt: skip
    assert r.returncode not in (0, 1, 3), (r.returncode, r.stdout[-500:])
    assert "SystemExit" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
