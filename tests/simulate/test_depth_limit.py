"""Bad inputs refused in one line where they enter, before anything is built (issue 74,
item 8): the C step's depth limit (``simulate.core.native.network.MAX_HIDDEN_LAYERS``, 63
hidden layers) in a sweep's configuration and in the estimators' parameters, the estimators'
sane depth bound on the torch path (``simulate.estimators.inputs.MAX_DEPTH``), and a
non-numeric column of X (``simulate.estimators.inputs.validate_numeric``)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import simulate.core.sizes as sizes
import simulate.estimators.base as base
from simulate.core import Hyper, native
from simulate.core.native.network import MAX_HIDDEN_LAYERS
from simulate.core.steppath import BATCHED, NATIVE, NATIVE_STEP, PATHS
from simulate.estimators import ASVIClassifier, ASVIRegressor
from simulate.estimators.inputs import MAX_DEPTH
from simulate.estimators.policy import _step_options
from simulate.sweep.setup.config import SweepConfig
from simulate.sweep.setup.truth_spec import TruthSpec
from tests.factories import SWEEP_TINY, run_main

C_SOURCE = Path(native.__file__).with_name("fused_mlp.c")


def test_the_declared_limit_is_the_c_codes_own():
    """Both C functions keep depth + 1 activation pointers in ``float *act[N]`` and return 2
    past ``depth + 1 > N``: the constant the checks read is N - 1."""
    text = C_SOURCE.read_text()
    arrays = set(re.findall(r"float \*act\[(\d+)\]", text))
    guards = set(re.findall(r"depth \+ 1 > (\d+)\)", text))
    assert arrays == guards == {str(MAX_HIDDEN_LAYERS + 1)}, (arrays, guards)


@pytest.mark.parametrize("path", [NATIVE, NATIVE_STEP])
def test_a_c_path_refuses_a_deeper_net_naming_the_limit_and_the_way_out(path):
    assert path.max_depth == MAX_HIDDEN_LAYERS
    path.check_depth(MAX_HIDDEN_LAYERS)  # the limit itself is trained
    with pytest.raises(ValueError) as exc:
        path.check_depth(MAX_HIDDEN_LAYERS + 1)
    msg = str(exc.value)
    assert "\n" not in msg and f"at most {MAX_HIDDEN_LAYERS} hidden layers" in msg, msg
    assert f"--mlp {path.name}" in msg and "--mlp batched trains deeper" in msg, msg


def test_the_torch_path_has_no_limit_of_its_own():
    assert BATCHED.max_depth is None
    BATCHED.check_depth(10**6)
    assert [p.name for p in PATHS.values() if p.max_depth is not None] == [
        p.name for p in PATHS.values() if p.runs_c
    ]


def _config(**kw) -> SweepConfig:
    return SweepConfig(truths=[TruthSpec("holder", p=1, alpha=0.5)], **{**SWEEP_TINY, **kw})


@pytest.mark.parametrize("mlp", ["native-step", "native", "batched"])
def test_a_sweep_config_refuses_depth_64_when_made(mlp):
    """Per field, on every path (``steppath.DEPTH_EVERY_PATH`` says why): refused as the
    configuration is made, not in its first job."""
    with pytest.raises(ValueError) as exc:
        _config(depth=MAX_HIDDEN_LAYERS + 1, mlp=mlp)
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("depth must be an integer in [1, 63]"), msg
    assert "MAX_HIDDEN_LAYERS" in msg and msg.endswith("got 64"), msg


def test_a_sweep_config_of_depth_63_is_accepted():
    """The negative control: the limit itself is a valid configuration (made only)."""
    assert _config(depth=MAX_HIDDEN_LAYERS, mlp="native-step").depth == MAX_HIDDEN_LAYERS


def test_simulate_sweep_refuses_a_config_of_depth_64_before_any_file(tmp_path):
    """The issue: a traceback from the first job (exit 1) after the records file was
    opened; now exit 2, one line, nothing made."""
    cfg = {
        "truths": [{"kind": "holder", "p": 1, "alpha": 0.5}],
        **SWEEP_TINY,
        "mlp": "native-step",
        "depth": 64,
    }
    (tmp_path / "c.json").write_text(json.dumps(cfg))
    r = run_main("simulate.sweep", "--config", "c.json", "--out", "res/x.jsonl", cwd=tmp_path)
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.returncode == 2 and len(lines) == 1, r.stderr[-2000:]
    assert lines[0].startswith("error: depth must be an integer in [1, 63]"), lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.json"]


def test_verify_rates_refuses_depth_64_before_any_file(tmp_path):
    """The same from ``verify.rates --depth 64`` (every ASVI tier trains on the C step):
    exit 4 from its first job before; now exit 2, one line, before anything is written."""
    r = run_main("verify.rates", "--tier", "tiny", "--depth", "64", "--out", "res/x.jsonl",
                 "--figures", "figs", cwd=tmp_path)  # fmt: skip
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.returncode == 2 and len(lines) == 1, r.stderr[-2000:]
    assert "depth must be an integer in [1, 63]" in lines[0], lines[0]
    assert list(tmp_path.iterdir()) == []


def _data(n=40, p=2):
    X = np.random.default_rng(0).uniform(-1, 1, (n, p))
    return X, X[:, 0] + 0.1


@pytest.fixture
def no_work(monkeypatch):
    """Any data work or model building fails the test: a refusal must come before it."""

    def touched(*a, **k):
        raise AssertionError("the fit went on past its parameters' checks")

    monkeypatch.setattr(base, "validate_numeric", touched)
    monkeypatch.setattr(base, "train_models", touched)


@pytest.mark.parametrize("mlp", ["native-step", "native"])
@pytest.mark.parametrize("cls", [ASVIRegressor, ASVIClassifier])
def test_an_estimator_on_a_c_path_refuses_depth_64_before_any_data_work(no_work, mlp, cls):
    t0 = time.perf_counter()
    with pytest.raises(ValueError) as exc:
        cls(depth=MAX_HIDDEN_LAYERS + 1, mlp=mlp).fit(*_data())
    assert time.perf_counter() - t0 < 1.0
    msg = str(exc.value)
    assert "\n" not in msg and f"mlp={mlp!r} runs C code" in msg, msg
    assert f"at most {MAX_HIDDEN_LAYERS} hidden layers" in msg and "mlp='batched'" in msg, msg


def test_an_estimator_of_depth_63_passes_its_parameters_checks():
    """The negative control: the limit itself is accepted (checked only, no training)."""
    params = ASVIRegressor(depth=MAX_HIDDEN_LAYERS, mlp="native-step")._checked_params()
    assert params[1] == MAX_HIDDEN_LAYERS


@pytest.mark.parametrize("kw", [{}, {"widths": [2]}, {"mlp": "batched", "widths": [2]}])
def test_a_million_layers_are_refused_at_once_whatever_the_memory(monkeypatch, kw):
    """The issue: ``ASVIRegressor(depth=10**6).fit`` built a million layers for ~200 s
    before the C code refused them (or, on the torch path, trained them for hours) where
    the machine held the fit's memory.  Here the machine holds anything; the refusal comes
    in well under a second, before the starts or the trainer are built."""

    def touched(*a, **k):
        raise AssertionError("built: the depth was not refused first")

    monkeypatch.setattr(sizes, "available_bytes", lambda: 2**62)
    monkeypatch.setattr(base, "train_models", touched)
    monkeypatch.setattr(base._Base, "_start", touched)
    t0 = time.perf_counter()
    with pytest.raises(ValueError) as exc:
        ASVIRegressor(depth=10**6, epochs=1, **kw).fit(*_data())
    assert time.perf_counter() - t0 < 1.0
    msg = str(exc.value)
    assert "\n" not in msg and f"depth 1000000 is past {MAX_DEPTH}" in msg, msg


def test_the_depth_bound_is_lemma_6_1s_deepest_network():
    """L = 8 + (floor(log2 n) + 5)(1 + ceil(log2 p)) at n = 2**63 - 1 and p = 2**32."""
    n, p = 2**63 - 1, 2**32
    assert MAX_DEPTH == 8 + (n.bit_length() - 1 + 5) * (1 + (p - 1).bit_length())


def test_auto_takes_the_torch_path_past_the_c_limit_and_a_c_path_up_to_it():
    """``mlp="auto"`` is the C step where it serves: up to the limit; past it the batched
    pass, without a warning (the C code does not serve that network: nothing is lost)."""
    cpu, f32 = torch.device("cpu"), torch.float32
    deep = _step_options("auto", False, Hyper(), cpu, f32, 10, depth=MAX_HIDDEN_LAYERS + 1)
    assert deep.mlp == "batched"
    at = _step_options("auto", False, Hyper(), cpu, f32, 10, depth=MAX_HIDDEN_LAYERS)
    assert at.mlp == ("native-step" if native.available() else "batched")
    with pytest.raises(ValueError, match="runs C code, which takes at most 63"):
        _step_options("native-step", False, Hyper(), cpu, f32, 10, depth=64)


# ------------------------------------------------------------ a non-numeric column of X

_CATEGORICAL = "X has a non-numeric column ({}): encode categorical columns first, e.g. with" \
    " sklearn.preprocessing.OneHotEncoder"  # fmt: skip


def _mixed(n=20):
    return [[float(i), "ab"[i % 2]] for i in range(n)], np.arange(float(n))


@pytest.mark.parametrize("form", ["list", "object", "unicode"])
@pytest.mark.parametrize("cls", [ASVIRegressor, ASVIClassifier])
def test_a_string_column_of_an_array_is_one_clear_line(form, cls):
    rows, y = _mixed()
    X = {"list": rows, "object": np.array(rows, dtype=object), "unicode": np.array(rows)}[form]
    y = y if cls is ASVIRegressor else (y > 9).astype(int)
    with pytest.raises(ValueError) as exc:
        cls(epochs=1, widths=[2]).fit(X, y)
    assert str(exc.value) == _CATEGORICAL.format("column 1, holds 'a'")


def test_a_category_column_of_a_dataframe_is_named():
    """The issue: a pandas ``category`` column of strings passed scikit-learn's check as an
    object array and the range check said ``bad operand type for abs(): 'str'``."""
    pd = pytest.importorskip("pandas")
    X = pd.DataFrame({"x": np.arange(20.0), "colour": pd.Categorical(["red", "blue"] * 10)})
    with pytest.raises(ValueError) as exc:
        ASVIRegressor(epochs=1, widths=[2]).fit(X, np.arange(20.0))
    assert str(exc.value) == _CATEGORICAL.format("column 1, named 'colour', holds 'red'")
    # a category of numbers is numbers: fitted
    X["colour"] = pd.Categorical([1, 2] * 10)
    ASVIRegressor(epochs=1, widths=[2]).fit(X, np.arange(20.0))


def test_predict_refuses_a_string_column_too():
    m = ASVIRegressor(epochs=1, widths=[2], sigma=0.1).fit(*_data(20))
    with pytest.raises(ValueError) as exc:
        m.predict(np.array([[0.5, "zz"]], dtype=object))
    assert str(exc.value) == _CATEGORICAL.format("column 1, holds 'zz'")


def test_other_refusals_of_the_data_stay_scikit_learns():
    """Only a non-numeric column of X is reworded: a text y is scikit-learn's own message,
    and a dict in X its ``TypeError`` (its estimator checks match that one)."""
    X, _ = _data(20)
    with pytest.raises(ValueError, match="could not convert string to float"):
        ASVIRegressor(epochs=1, widths=[2]).fit(X, np.array(["a", "b"] * 10, dtype=object))
    bad = X.astype(object)
    bad[0, 0] = {"foo": "bar"}
    with pytest.raises(TypeError, match="argument must be a string.* number"):
        ASVIRegressor(epochs=1, widths=[2]).fit(bad, X[:, 0])
