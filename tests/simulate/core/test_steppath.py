"""The step-path registry (``simulate.core.steppath``): each path's checks are the ones the
string tests made before it (an oracle written out here), and no package module compares a
step path's name any more."""

import ast
import pathlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulate.core import native
from simulate.core.options import StepOptions
from simulate.core.steppath import BATCHED, MLP_KINDS, NATIVE, NATIVE_STEP, PATHS, path_of

ROOT = pathlib.Path(__file__).resolve().parents[3]


def _old_post_init_refuses(mlp, compile, autograd) -> bool:
    """StepOptions' checks as they were written with string tests (the oracle)."""
    return (mlp in ("native", "native-step") and autograd) or (mlp == "native-step" and compile)


@given(st.sampled_from(MLP_KINDS), st.booleans(), st.booleans())
def test_the_options_refuse_exactly_what_the_string_tests_refused(mlp, compile, autograd):
    try:
        opts = StepOptions(mlp=mlp, compile=compile, autograd=autograd)
    except ValueError:
        assert _old_post_init_refuses(mlp, compile, autograd)
    else:
        assert not _old_post_init_refuses(mlp, compile, autograd)
        assert opts.path is PATHS[mlp]


@given(st.sampled_from(MLP_KINDS), st.booleans())
def test_the_kernel_check_is_the_old_one(mlp, hand):
    refused = mlp in ("native", "native-step") and not hand
    if refused:
        with pytest.raises(ValueError, match="hand-written step"):
            path_of(mlp).check_kernel(hand)
    else:
        path_of(mlp).check_kernel(hand)


def test_each_path_says_what_it_is():
    # the old tests: "native" fused the torch step's pass, "native-step" was the whole step
    # (its own noise draws, nothing to compile), both C
    assert (BATCHED.runs_c, NATIVE.runs_c, NATIVE_STEP.runs_c) == (False, True, True)
    assert [p.fused_pass for p in PATHS.values()] == [False, True, False]
    assert [p.whole_step for p in PATHS.values()] == [False, False, True]
    assert [p.compilable for p in PATHS.values()] == [True, True, False]
    assert MLP_KINDS == ("batched", "native", "native-step")  # the records' names


def test_an_unknown_name_is_refused_naming_the_paths():
    with pytest.raises(ValueError, match="mlp must be one of batched, native, native-step"):
        path_of("fused")
    with pytest.raises(ValueError, match="got None"):
        path_of(None)


def test_require_names_the_torch_path_when_the_c_code_cannot_load(monkeypatch):
    BATCHED.require()  # the torch path needs nothing

    def fail():
        raise native.NativeUnavailable("no C compiler found (tried cc)\nmore")

    monkeypatch.setattr(native, "load", fail)
    monkeypatch.setattr(native, "available", lambda: False)
    for path in (NATIVE, NATIVE_STEP):
        with pytest.raises(ValueError) as info:
            path.require("--teacher-mlp")
        assert str(info.value) == (
            f"--teacher-mlp {path.name}: no C compiler found (tried cc)"
            " (--teacher-mlp batched runs without one)"
        )
        assert not path.available()
    assert BATCHED.available()


def _name_comparisons(tree) -> list:
    """Comparisons (==, !=, in, not in) with a step path's name as a literal operand."""
    hits = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        for operand in [node.left, *node.comparators]:
            lits = (
                operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) else [operand]
            )
            if any(isinstance(c, ast.Constant) and c.value in MLP_KINDS for c in lits):
                hits.append(node.lineno)
    return hits


def test_no_package_module_compares_a_step_path_name():
    """Downstream code asks the path object; a name is compared nowhere (a negative
    control: the detector finds the string tests of the code before the registry)."""
    assert _name_comparisons(ast.parse('if mlp == "native-step":\n    pass\n')) == [1]
    assert _name_comparisons(ast.parse('x = mlp in ("native", "native-step")\n')) == [1]
    found = {}
    for pkg in ("theory", "simulate", "verify", "figures"):
        for f in sorted((ROOT / pkg).rglob("*.py")):
            hits = _name_comparisons(ast.parse(f.read_text()))
            if hits:
                found[f.relative_to(ROOT).as_posix()] = hits
    assert found == {}
