"""Every figure command smoke-tested on tiny records (file written, non-empty, panels)."""

import pytest

from figures.rate_figure import rate_figure
from figures.teacher_figures import figure_1b, table1
from figures.tradeoff import theory_terms, tradeoff_figure
from simulate.experiments.table1 import TeacherVariant, run_teacher
from simulate.sweep.run.runner import run_sweep
from simulate.sweep.setup.config import SweepConfig
from simulate.sweep.setup.truth_spec import TruthSpec
from tests.factories import SWEEP_TINY, run_main


@pytest.fixture(scope="module")
def teacher_recs(tmp_path_factory):
    out = tmp_path_factory.mktemp("teacher")
    return run_teacher("tiny", str(out), log=lambda *_: None), out


@pytest.fixture(scope="module")
def sweep_recs(tmp_path_factory):
    path = tmp_path_factory.mktemp("sweep") / "r.jsonl"
    cfg = SweepConfig(
        truths=[TruthSpec("holder", p=1, alpha=0.5), TruthSpec("holder", p=1, alpha=1.5)],
        **{**SWEEP_TINY, "max_steps": 100, "stop_window": 25, "replicate_block": 2},
    )
    return run_sweep(cfg, path, progress=False, log=lambda *_: None)


def run_figures(*args):
    """``python -m figures --tier tiny ARGS`` in this process (``figures.__main__.main``;
    the real process: ``test_records_integrity``'s one per entry point)."""
    return run_main("figures", "--tier", "tiny", *args)


def nonempty(path):
    with open(path, "rb") as fh:
        return len(fh.read()) > 100


def test_table1_files_and_rows(teacher_recs):
    recs, out = teacher_recs
    assert {r["method"] for r in recs} == {"SVI", "HS-BNN", "Dense-BNN"}
    res = table1(recs, str(out), "tiny")
    assert [row["width"] for row in res["rows"]] == [2, 4, 6]
    assert res["rows"][0]["SVI rmse paper"] == 2.193  # the published value beside ours
    for ext in ("txt", "csv", "tex"):
        assert nonempty(out / f"table1-tiny.{ext}")
    assert "ASVI" in res["text"] and len(res["asvi"]["widths"]) == 2
    # Dense-BNN and HS-BNN count every edge, as in the paper's table
    dense = next(r for r in recs if r["method"] == "Dense-BNN")
    assert dense["edges"] == [51.0, 109.0, 175.0]


def test_figure_1b_panels_and_counts(teacher_recs):
    recs, out = teacher_recs
    res = figure_1b(recs, str(out), "tiny")
    assert res["panels"] == 4 and all(nonempty(p) for p in res["paths"])
    assert all(sum(f.values()) == 2 for f in res["frequencies"].values())


def test_rate_figure_one_row_per_truth(sweep_recs, tmp_path):
    res = rate_figure(sweep_recs, str(tmp_path), "t")  # 2 truths x (3 metrics + widths)
    assert res["panels"] == 8 and all(nonempty(p) for p in res["paths"])


def test_tradeoff_figure(sweep_recs, tmp_path):
    res = tradeoff_figure(sweep_recs, str(tmp_path), "t")
    assert res["panels"] == 2 and all(nonempty(p) for p in res["paths"])
    assert set(res["measured"]) == {64, 128, 256}
    assert res["widths"] == {n: [2, 4] for n in (64, 128, 256)}
    t = theory_terms(10**4, 1, 0.5, 1.0, 3, N_max=50)
    assert t["variational"][-1] > t["variational"][0]  # grows with width
    assert t["approximation"][-1] < t["approximation"][0]  # shrinks with width


def test_figures_cli_reuses_records(tmp_path, sweep_recs):
    import json

    rec = tmp_path / "r.jsonl"
    rec.write_text("".join(json.dumps(r) + "\n" for r in sweep_recs))
    r = run_figures(
        "--only", "rates", "--only", "tradeoff", "--out", str(tmp_path / "f"), "--records", str(rec)
    )
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "f" / "rates-tiny.png").exists()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"x": 1}\n')
    r = run_figures("--only", "rates", "--records", str(bad), "--out", str(tmp_path / "g"))
    assert r.returncode == 2 and bad.read_text() == '{"x": 1}\n'


def _table1_variant(tmp_path, flag, value, records, table):
    """``python -m figures --only table1 FLAG VALUE`` into ``tmp_path``: it exits 0 and writes
    its own ``records`` file and ``table`` text, not the default's records."""
    r = run_figures("--only", "table1", flag, value, "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert nonempty(tmp_path / records)
    assert nonempty(tmp_path / table)
    assert not (tmp_path / "teacher-subtract-tiny.jsonl").exists()


def test_teacher_bias_convention_writes_its_own_records_and_table(teacher_recs, tmp_path):
    """``--teacher-bias add``: the ``relu(h W + b)`` teacher, its own records file (the
    name it had as the default) and outputs (``TIER-add``); the default's (eq. (eqmod2)'s)
    records are another truth's, so the RMSEs differ."""
    recs_sub, _ = teacher_recs
    _table1_variant(tmp_path, "--teacher-bias", "add", "teacher-tiny.jsonl", "table1-tiny-add.txt")
    size = (tmp_path / "teacher-tiny.jsonl").stat().st_size
    recs_add = run_teacher(
        "tiny", str(tmp_path), log=lambda *_: None, variant=TeacherVariant(bias="add")
    )
    assert len(recs_sub) == len(recs_add)  # reused, not retrained: the file is unchanged
    assert (tmp_path / "teacher-tiny.jsonl").stat().st_size == size
    a = next(x for x in recs_add if x["method"] == "SVI" and x["replicate"] == 0)
    s = next(x for x in recs_sub if x["method"] == "SVI" and x["replicate"] == 0)
    assert a["rmse"] != s["rmse"]
    bad = run_figures("--only", "table1", "--teacher-bias", "minus", "--out", str(tmp_path))
    assert bad.returncode == 2


def test_teacher_with_the_fused_pass_writes_its_own_records_and_table(teacher_recs, tmp_path):
    """``--teacher-mlp native``: Table 1 trained with the fused network pass (one program
    per block), its own records (``mlp`` in the configuration and in each record) and
    outputs (``TIER-native``); the same numbers as the batched pass's to float rounding
    (tiny tier: 2 epochs, 20 steps, not yet chaotic: 1e-4 relative is ~100x what rounding
    gives here)."""
    import numpy as np

    recs_bat, _ = teacher_recs
    records = "teacher-subtract-native-tiny.jsonl"
    _table1_variant(tmp_path, "--teacher-mlp", "native", records, "table1-tiny-native.txt")
    recs_nat = run_teacher(
        "tiny", str(tmp_path), log=lambda *_: None, variant=TeacherVariant(mlp="native")
    )
    key = lambda x: (x["method"], x["replicate"])  # noqa: E731
    bat = {key(x): x for x in recs_bat}
    assert len(recs_nat) == len(recs_bat)
    for x in recs_nat:
        assert x["mlp"] == "native" and x["programs"] == 1
        np.testing.assert_allclose(x["rmse"], bat[key(x)]["rmse"], rtol=1e-4)
    with pytest.raises(ValueError, match="mlp must be"):
        run_teacher("tiny", str(tmp_path), log=lambda *_: None, variant=TeacherVariant(mlp="fused"))


def test_a_table1_block_of_results_md_is_the_table_figures_writes(teacher_recs, tmp_path):
    """``figures.results_md``'s ``table1`` kind: a block naming the teacher store (here
    compressed, as shipped) is rewritten with the text table ``python -m figures --only
    table1`` writes to ``table1-TIER.txt`` for the same records, the tier read from the
    records; an option the kind does not take is refused."""
    import gzip
    import shutil

    from figures.results_md import regenerate

    recs, out = teacher_recs
    store = next(out.glob("teacher-*tiny.jsonl"))
    with open(store, "rb") as src, gzip.open(tmp_path / "t.jsonl.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    table1(recs, str(out), "tiny")
    written = (out / "table1-tiny.txt").read_text()
    doc = tmp_path / "R.md"
    doc.write_text(
        "x\n<!-- generated: table1 records=t.jsonl.gz -->\nold\n<!-- end generated -->\n"
    )
    res = regenerate(str(doc), str(tmp_path), log=lambda *_: None)
    assert res["regenerated"] == ["table1 records=t.jsonl.gz"]
    assert doc.read_text() == (
        "x\n<!-- generated: table1 records=t.jsonl.gz -->\n```\n" + written
        + "```\n<!-- end generated -->\n"
    )  # fmt: skip
    doc.write_text(
        "<!-- generated: table1 records=t.jsonl.gz metric=d2 -->\n<!-- end generated -->\n"
    )
    with pytest.raises(ValueError, match=r"\[tier=VALUE\]"):
        regenerate(str(doc), str(tmp_path), log=lambda *_: None)
