"""What a sweep is (``simulate.sweep.setup.config``, ``simulate.sweep.setup.widths``): the candidate
widths growing with n, the defaults."""

import math

from hypothesis import given
from hypothesis import strategies as st

from simulate.sweep.setup.widths import candidate_widths, group_widths


def test_candidate_widths_grow_with_n():
    assert candidate_widths(250) == [2, 4, 8, 16]
    assert candidate_widths(1000) == [2, 4, 8, 16, 32]
    assert candidate_widths(16000) == [2, 4, 8, 16, 32, 64, 128]
    assert candidate_widths(10**6, width_max=64)[-1] == 64
    for n in (100, 777, 5000, 40000):
        top = candidate_widths(n)[-1]
        assert top >= math.sqrt(n) > top / 2


def test_the_sweep_s_defaults_are_hyper_s_but_the_batch():
    """Each training setting's default is said once (``HYPER_DEFAULTS``, ``STOP_DEFAULTS``,
    ``StepOptions``): the sweep's equal them except its batch (128) and lambda_s (None:
    the rule at n), named here."""
    from dataclasses import fields, replace

    from simulate.core import Hyper, StepOptions
    from simulate.core.hyper import HYPER_DEFAULTS, LAMBDA_S_A, lambda_s_at
    from simulate.core.stopping import STOP_DEFAULTS, StopRule
    from simulate.sweep.setup.config import SweepConfig
    from simulate.sweep.setup.recipes import RECIPE_DEFAULTS
    from simulate.sweep.setup.truth_spec import TruthSpec

    overrides = {"batch_size": 128, "lambda_s": None}
    sweep = {f.name: f.default for f in fields(SweepConfig)}
    shared = set(sweep) & set(HYPER_DEFAULTS)
    assert shared >= {"lr", "sigma", "sigma_0", "lam", "l3", "init_nu", "init_sigma"}
    assert {k: sweep[k] for k in shared} == {k: overrides.get(k, HYPER_DEFAULTS[k]) for k in shared}
    stop = {"max_steps": "max_steps", **{f"stop_{k}": k for k in STOP_DEFAULTS}}
    assert {k: sweep[k] for k in stop if k in sweep} == {
        k: STOP_DEFAULTS[v] for k, v in stop.items() if k in sweep
    }
    assert (sweep["compile"], sweep["mlp"]) == (StepOptions().compile, StepOptions().mlp)
    assert sweep["lambda_s_a"] == LAMBDA_S_A["gaussian"]
    assert RECIPE_DEFAULTS == {k: sweep[k] for k in RECIPE_DEFAULTS}
    # a cell's Hyper is Hyper's defaults but the batch and the rule's lambda_s at n
    cfg = SweepConfig(truths=[TruthSpec("holder", 1, 0.5)], ns=[1000])
    rule = lambda_s_at(1000, 2, 0.1)
    assert cfg.hyper_at(1000) == replace(Hyper(), batch_size=128, lambda_s=rule)
    assert cfg.stop_rule_at(1000) == StopRule()


def test_every_estimator_a_config_accepts_is_one_the_runner_runs():
    """The kinds' registry (``simulate.sweep.setup.kinds.KINDS``), the runner's job functions
    (``simulate.sweep.run.runner.RUNNERS``) and the config's ``estimator`` options name the same
    estimators, so a config that validates has a kind and a job function."""
    from simulate.sweep.run.runner import RUNNERS
    from simulate.sweep.setup.config import SWEEP_CONSTRAINTS
    from simulate.sweep.setup.kinds import KINDS
    from simulate.sweep.train.asvi_job import run_asvi_job
    from simulate.sweep.train.foreign import run_regressor_job
    from simulate.sweep.train.gp import run_gp_job
    from simulate.sweep.train.knn import run_knn_job

    (options,) = SWEEP_CONSTRAINTS["estimator"]
    assert set(options.values) == set(RUNNERS) == set(KINDS) == {"asvi", "gp", "regressor", "knn"}
    assert RUNNERS == {
        "asvi": run_asvi_job, "gp": run_gp_job, "regressor": run_regressor_job, "knn": run_knn_job
    }  # fmt: skip


def test_a_compiled_sweep_without_a_cpp_compiler_is_refused_before_any_work(tmp_path):
    """``check_compile``: a sweep that compiles its step (the quick and full tiers) on a
    machine where ``torch.compile`` finds no C++ compiler is refused in one line naming
    ``--no-compile``; an eager sweep, or the GP control, needs none.  Negative control:
    with the machine's own compiler the same config passes."""
    import pytest
    from torch._inductor import config as inductor_config

    from simulate.sweep.run.runner import check_compile
    from simulate.sweep.setup.config import SweepConfig
    from simulate.sweep.setup.truth_spec import TruthSpec

    def cfg(**kw):
        return SweepConfig(truths=[TruthSpec("holder", 1, 0.5)], ns=[1000], **kw)

    from simulate.core.training_step import compile_unavailable
    from simulate.sweep.run.runner import run_sweep

    if compile_unavailable() is None:  # negative control, where this machine compiles
        check_compile(cfg(compile=True))
    # torch's own patch, not monkeypatch.setattr: inductor's settings are thread-local
    # overrides that a setattr/undo pair did not give back as they were (a compiled test
    # after this one in the same process failed: "cpp.cxx does not exist")
    with inductor_config.patch({"cpp.cxx": ("/no/such/c++",)}):
        with pytest.raises(ValueError, match="no working C\\+\\+ compiler.*--no-compile"):
            check_compile(cfg(compile=True))
        with pytest.raises(ValueError, match="no working C\\+\\+ compiler"):  # before any file
            run_sweep(cfg(compile=True), tmp_path / "r.jsonl", progress=False)
    assert not list(tmp_path.iterdir())
    check_compile(cfg(compile=True), scheduler="tcp://127.0.0.1:8786")  # the cluster's
    check_compile(cfg(compile=False))
    check_compile(cfg(compile=True, estimator="gp", gp_nus=[1.5]))


@given(st.lists(st.integers(1, 512), min_size=1, max_size=12), st.floats(1.0, 4.0))
def test_group_widths_is_a_partition_within_its_waste_bound(widths, waste):
    groups = group_widths(widths, waste)
    flat = [w for g in groups for w in g]
    assert sorted(flat) == sorted(set(widths))  # every distinct width exactly once
    for g in groups:
        assert g == sorted(g, reverse=True)
        assert len(g) == 1 or len(g) * g[0] ** 2 <= waste * sum(w * w for w in g)
