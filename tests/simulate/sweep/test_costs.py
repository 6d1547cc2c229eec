"""The measured per-cell costs and a design's estimated cost (``simulate.sweep.costs``)."""

from __future__ import annotations

import pytest

from simulate.sweep.costs import estimate, load_table, rows_from_records
from simulate.sweep.setup.config import SweepConfig
from simulate.sweep.setup.truth_spec import TruthSpec

ROWS = [
    {"truth": "holder-a1.5-p1", "estimator": "asvi", "step": "native-step", "n": 1000,
     "cell_s": 2.0},
    {"truth": "holder-a1.5-p1", "estimator": "asvi", "step": "native-step", "n": 4000,
     "cell_s": 8.0},
    {"truth": "holder-a0.5-p1", "estimator": "gp", "step": "exact", "n": 1000, "cell_s": 1.0,
     "gp_nus": 2},
]  # fmt: skip


def _cfg(ns, **kw):
    return SweepConfig(truths=[TruthSpec("holder", p=1, alpha=1.5)], ns=ns, replicates=3,
                       mlp="native-step", compile=False, **kw)  # fmt: skip


def test_a_cell_is_priced_at_its_n_between_and_beyond_the_measured_ones():
    e = estimate(_cfg([1000, 2000, 4000, 16000]), workers=2, rows=ROWS)
    by_n = {n: s for _, n, s, _ in e.priced}
    assert by_n[1000] == pytest.approx(3 * 2.0) and by_n[4000] == pytest.approx(3 * 8.0)
    assert by_n[2000] == pytest.approx(3 * 4.0)  # log-log between 1000 and 4000 (n^1)
    assert by_n[16000] == pytest.approx(3 * 32.0)  # beyond: at most linear in n
    assert e.total_s == pytest.approx(sum(by_n.values()) / 2) and not e.unpriced
    # another truth of the same kind and p borrows its rows, and says so
    other = SweepConfig(truths=[TruthSpec("holder", p=1, alpha=0.5)], ns=[1000, 2000, 4000],
                        replicates=1, mlp="native-step", compile=False)  # fmt: skip
    assert all("holder-a1.5-p1" in how for *_, how in estimate(other, rows=ROWS).priced)
    # a GP row is scaled by its number of priors; a truth no row prices is named
    gp = SweepConfig(truths=[TruthSpec("holder", p=1, alpha=0.5)], ns=[1000, 2000, 4000],
                     replicates=1, estimator="gp", gp_nus=[0.5, 1.5, 2.5])  # fmt: skip
    g = {n: s for _, n, s, _ in estimate(gp, rows=ROWS).priced}
    assert g[1000] == pytest.approx(1.5) and g[2000] == pytest.approx(1.5 * 8)  # n^3 beyond
    none = estimate(_cfg([1000, 2000, 4000]), rows=[ROWS[2]])
    assert none.total_s == 0 and len(none.unpriced) == 3


def test_rows_from_records_divide_a_job_by_its_replicates_and_the_table_loads():
    rec = lambda q: {  # noqa: E731
        "cell": {"truth": "holder-a1.5-p1-s0", "n": 500, "replicate": q},
        "truth": {"kind": "holder", "p": 1, "alpha": 1.5, "seed": 0},
        "config": {"mlp": "native-step", "widths": [2, 4]},
        "timing": {"job_train_s": 6.0, "job_eval_s": 2.0, "job_models": 4},
        "per_width": {}, "failed": False,
    }  # fmt: skip
    (row,) = rows_from_records([rec(0), rec(1)], "x")
    assert row["cell_s"] == 4.0 and row["train_s"] == 3.0 and row["cells"] == 2
    rows = load_table()
    assert rows and all(r["cell_s"] > 0 and r["source"] for r in rows)
    assert max(r["n"] for r in rows if r["estimator"] == "asvi") == 512_000


def test_the_dry_run_prints_the_designs_estimated_cost(tmp_path):
    from tests.factories import run_main

    r = run_main("verify.rates", "--tier", "confirm3", "--dry-run", "--out", tmp_path / "r.jsonl")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith("estimated cost"))
    assert any(line.strip().startswith("holder:") for line in lines[i:])
    assert "in all:" in lines[-1] and "on 2 workers" in lines[-1]


def test_extrapolation_is_anchored_at_the_nearest_n_and_clamped_and_other_steps_are_named():
    rows = [
        {"truth": "holder-a1.5-p1", "estimator": "asvi", "step": "native-step", "n": 1000,
         "cell_s": 1.0, "cells": 1},
        {"truth": "holder-a1.5-p1", "estimator": "asvi", "step": "native-step", "n": 2000,
         "cell_s": 4.0, "cells": 1},  # n^2 between them: clamped to n^1 beyond
        {"truth": "holder-a1.5-p1", "estimator": "asvi", "step": "native-step", "n": 2000,
         "cell_s": 7.0, "cells": 3},  # a second source at 2000: the mean weighted by cells
    ]  # fmt: skip
    e = estimate(_cfg([1000, 2000, 8000]), rows=rows)
    by_n = {n: (s, how) for _, n, s, how in e.priced}
    assert by_n[2000][0] == pytest.approx(3 * (4.0 + 3 * 7.0) / 4)
    assert by_n[8000][0] == pytest.approx(3 * (25.0 / 4) * 4)  # from the nearest n, at n^1
    assert by_n[8000][0] >= by_n[2000][0]
    assert "extrapolated from n = 2000 (n^1.00)" in by_n[8000][1]
    # a compiled design priced from C-step rows says so
    compiled = estimate(_cfg([1000, 2000, 4000]).__class__(
        truths=[TruthSpec("holder", p=1, alpha=1.5)], ns=[1000, 2000, 4000], replicates=1,
        compile=True), rows=rows)  # fmt: skip
    assert all("measured on native-step" in how for *_, how in compiled.priced)
    # another teacher is priced from a teacher's rows, not from a Hoelder truth's
    mixed = rows + [{"truth": "teacher-p20", "estimator": "asvi", "step": "native-step",
                     "n": 1000, "cell_s": 9.0, "cells": 1}]  # fmt: skip
    t200 = SweepConfig(truths=[TruthSpec("teacher", p=200)], ns=[1000, 2000, 4000],
                       replicates=1, mlp="native-step", compile=False)  # fmt: skip
    assert all(how.startswith("teacher-p20") for *_, how in estimate(t200, rows=mixed).priced)
