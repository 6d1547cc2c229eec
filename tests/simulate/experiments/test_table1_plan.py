"""The teacher experiment's run plan: width groups, compiled blocks, worker processes, and
Table 1 beside the paper's values (within 2 SE or not)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import simulate.experiments.table1 as t1
from figures.teacher_figures import table1, within_2se

EAGER = {m: {"compile": False, "groups": 1} for m in t1.METHODS}
MIXED = {
    "SVI": {"compile": True, "groups": 3},
    "HS-BNN": {"compile": True, "groups": 2},
    "Dense-BNN": {"compile": False, "groups": 1},
}
QUIET = {"log": lambda *_: None}


@given(st.lists(st.integers(1, 64), min_size=1, max_size=12, unique=True), st.integers(1, 6))
def test_width_groups_partition_the_sorted_widths(widths, groups):
    parts = t1.width_groups(widths, groups)
    assert [w for p in parts for w in p] == sorted(widths)
    assert len(parts) == min(groups, len(widths)) and all(parts)
    assert max(map(len, parts)) - min(map(len, parts)) <= 1


def test_short_tiers_run_eagerly_in_one_program():
    assert t1.block_plan("SVI", t1.COMPILE_FROM_STEPS - 1) == {"compile": False, "groups": 1}
    assert t1.block_plan("SVI", t1.COMPILE_FROM_STEPS) == t1.RUN_PLAN["SVI"]
    assert t1.block_plan("SVI", 4, MIXED) == MIXED["SVI"]  # an explicit plan is taken as is


@pytest.mark.slow  # torch.compile in two fresh worker processes: 20 s warm, 120 s cold
def test_grouped_compiled_worker_records_equal_one_eager_process(tmp_path):
    """Width groups, the compiled step and two worker processes change the tiny tier's
    records by rounding only (each model's noise depends on its seed alone).  Tolerance:
    relative 1e-6, float32 rounding over 4 steps measured at ~1e-9; a changed seed or
    stream moves the numbers by far more (negative control: the other teacher)."""
    a = t1.run_teacher("tiny", str(tmp_path / "a"), plan=EAGER, **QUIET)
    b = t1.run_teacher("tiny", str(tmp_path / "b"), plan=MIXED, workers=2, **QUIET)
    c = t1.run_teacher(
        "tiny", str(tmp_path / "c"), plan=EAGER, variant=t1.TeacherVariant(bias="add"), **QUIET
    )
    key = lambda r: (r["method"], r["replicate"])  # noqa: E731
    a, b, c = (sorted(x, key=key) for x in (a, b, c))
    assert [key(r) for r in a] == [key(r) for r in b] and len(a) == 6
    for x, y, z in zip(a, b, c, strict=True):
        for f in ("rmse", "edges", "elbo"):
            np.testing.assert_allclose(y[f], x[f], rtol=1e-6, atol=1e-9)
        assert not np.allclose(z["rmse"], x["rmse"], rtol=1e-3)
        assert y["compiled"] == MIXED[x["method"]]["compile"]
    assert any(r["graphs_compiled"] > 0 for r in b if r["method"] == "SVI")


def test_svi_alone_gives_the_asvi_row_and_blank_baselines(tmp_path):
    recs = t1.run_teacher("tiny", str(tmp_path), methods=["SVI"], plan=EAGER, **QUIET)
    assert {r["method"] for r in recs} == {"SVI"}
    res = table1(recs, str(tmp_path), "tiny")
    assert res["rows"][0]["Dense-BNN rmse"] is None and res["replicates"]["Dense-BNN"] == 0
    assert res["rows"][0]["SVI rmse"] is not None and "ASVI" in res["text"]


def test_within_2se_by_hand():
    # 2 sqrt(0.03^2 + 0.04^2) = 0.10: a difference of 0.099 is within, 0.101 is not
    assert within_2se(1.099, 0.03, (1.00, 0.04)) is True
    assert within_2se(0.899, 0.03, (1.00, 0.04)) is False
    assert within_2se(1.0, float("nan"), (1.0, 0.0)) is True  # one replicate: paper SE only
    assert within_2se(1.0, 0.0, None) is None
