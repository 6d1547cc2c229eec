"""The class's floor (issue 78, item 1; ``simulate.experiments.class_floor``): least squares
on f0 itself from the constructive and random starts, one row per start, the floor the
smallest; resumed from its records; where it binds against the reference's curve."""

import json
import math
from pathlib import Path

import numpy as np
import pytest

from simulate.experiments import class_floor as cf
from simulate.references.classical import fit_linear_spline
from simulate.sweep.setup.truth_spec import TruthSpec

H05 = TruthSpec("holder", p=1, alpha=0.5, seed=3)
TINY = cf.FloorSettings(n_design=512, n_test=1024, steps=150, random_starts=1)


def test_one_row_per_start_and_the_constructive_start_is_kept_at_worst():
    rows = cf.floor_rows(H05, 0, 2, 8, TINY)
    assert [r["start"] for r in rows] == ["constructive", "random-0"]
    assert {r["schema"] for r in rows} == {cf.SCHEMA}
    # training keeps the lowest training error, the start included: never above the
    # least-squares spline it encodes (float32 arithmetic: a relative 1e-4)
    _, X, y, _, _ = cf._design(H05, 0, TINY)
    spline_mse = float(np.mean((fit_linear_spline(X, y, 8)(X) - y) ** 2))
    assert rows[0]["train_mse"] <= spline_mse * (1 + 1e-4)
    assert all(0 < r["d2"] < 1 and r["l2sq"] > 0 for r in rows)


def test_the_floor_falls_with_width():
    """A wider class holds a finer spline: its floor is lower (alpha = 0.5: the width-32
    spline's error is about a quarter of the width-4 one's; asked: below half)."""
    f4 = min(r["l2sq"] for r in cf.floor_rows(H05, 0, 2, 4, TINY))
    f32 = min(r["l2sq"] for r in cf.floor_rows(H05, 0, 2, 32, TINY))
    assert f32 < 0.5 * f4


def test_a_curve_resumes_from_its_records(tmp_path, capsys):
    out = tmp_path / "floor.jsonl"
    argv = ["--alpha", "0.5", "--truth-seed", "3", "--widths", "4", "8", "--steps", "100",
            "--n-design", "256", "--out", str(out)]  # fmt: skip
    assert cf.main(argv) == 0
    first = out.read_text()
    assert len(first.splitlines()) == 6  # two widths, three starts each
    assert cf.main(argv) == 0
    assert out.read_text() == first  # nothing trained again
    text = capsys.readouterr().out
    assert "width    4: d2" in text and "width    8: d2" in text
    # another setting is another row set, beside
    assert cf.main([*argv[:-4], "--n-design", "300", "--out", str(out)]) == 0
    assert len(out.read_text().splitlines()) == 12
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"schema": "other"}) + "\n")
    assert cf.main([*argv[:-1], str(bad)]) == 2  # another schema: one line, exit 2


def test_where_a_floor_binds_against_the_reference():
    """The reference at ``C n^-1/2``: it reaches a floor f at ``n = (C / f)^2``."""
    ref = {n: 2.0 * n**-0.5 for n in (500, 2000, 8000, 32000)}
    assert cf.binding_n(ref, 0.01) == pytest.approx((2.0 / 0.01) ** 2, rel=1e-9)
    assert cf.binding_n({500: 0.1, 2000: 0.2}, 0.01) is None  # the reference does not fall
    assert cf.binding_n({500: 0.1}, 0.01) is None
    assert math.isfinite(cf.binding_n(ref, 1.0))


def test_no_sweep_imports_the_floor():
    """The floor reads f0: it must never reach a sweep's training, stopping or selection."""
    import ast
    from pathlib import Path

    root = Path(cf.__file__).resolve().parents[1] / "sweep"
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text())
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert not any("class_floor" in m for m in names), path


PILOT = (
    Path(__file__).resolve().parents[2]
    / "figures"
    / "reference"
    / ("records-starts-a05-s20261203.jsonl.gz")
)


def test_a_sweeps_selected_classes_are_its_floors_work(tmp_path, capsys):
    classes = cf.classes_of(str(PILOT))
    # the shipped pilot: 8 replicates, each its selected widths over 4 n (23 classes)
    assert len(classes) == 23
    assert {(c[1], c[3]) for c in classes} >= {(0, 8), (0, 64), (5, 64)}
    assert all(c[0].key == "holder-a0.5-p1-s20261203" and c[2] == 2 for c in classes)
    out = tmp_path / "floors.jsonl"
    args = ["--records", str(PILOT), "--shard", "1/23", "--steps", "20", "--n-design", "256",
            "--out", str(out)]  # fmt: skip
    assert cf.main(args) == 0
    rows = cf.read_rows(str(out))
    assert {(r["replicate"], r["width"]) for r in rows} == {(classes[0][1], classes[0][3])}
    assert cf.main(args) == 0  # resumed: nothing recomputed
    assert len(cf.read_rows(str(out))) == len(rows)
    assert cf.main(["--records", str(PILOT), "--shard", "24/23", "--out", str(out)]) == 2
    assert cf.main(["--out", str(out)]) == 2  # neither a truth nor records
    assert "--records" in capsys.readouterr().err
