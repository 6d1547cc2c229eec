"""Tidy results (issue 77, item 4): ``verify.rates --csv`` and ``RateCheck.to_rows()`` /
``to_frame()`` give one row per cell and estimator, read from the records themselves."""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import pytest

from tests.factories import run_main
from verify.cli.check import RateCheck
from verify.report.tidy import COLUMNS, tidy_rows

REF = Path(__file__).resolve().parents[2] / "figures" / "reference"
QUICK = REF / "records-quick.jsonl.gz"


def _records(path):
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def test_the_csv_holds_every_cell_and_estimator_as_its_record_says(tmp_path):
    out = tmp_path / "t.csv"
    r = run_main("verify.rates", "--records", str(QUICK), "--csv", str(out), "--quiet",
                 "--figures", str(tmp_path / "f"), cwd=tmp_path)  # fmt: skip
    assert r.returncode == 3, r.stderr
    with open(out, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert tuple(rows[0]) == COLUMNS
    recs = _records(QUICK)
    control = _records(REF / "records-quick-double.jsonl.gz")
    # per sweep record: ASVI, the reference and the oracle; per control record the same
    assert len(rows) == 3 * (len(recs) + len(control))
    asvi = [x for x in rows if x["estimator"] == "asvi" and x["run"] == "sweep"]
    assert len(asvi) == len(recs)
    for rec, row in zip(recs, asvi, strict=True):  # file order, the record's own numbers
        assert (row["truth"], int(row["n"]), int(row["replicate"])) == (
            rec["cell"]["truth"], rec["cell"]["n"], rec["cell"]["replicate"]
        )  # fmt: skip
        assert float(row["d2"]) == rec["metrics"]["d2"]
        assert int(row["selected_width"]) == rec["selected_width"]
        assert float(row["job_train_s"]) == rec["timing"]["job_train_s"]
        assert row["decided_under"].startswith("exploratory-v3@")
    ref = [x for x in rows if x["role"] == "reference" and x["run"] == "sweep"]
    assert [float(x["d2"]) for x in ref] == [rec["reference"]["d2"] for rec in recs]


def test_a_known_answer_controls_members_are_rows_of_their_own():
    recs = _records(REF / "records-confirm4-gp.jsonl.gz")
    rows = tidy_rows(recs, decided_under="t")
    members = [x for x in rows if x["role"] == "member"]
    assert len(members) == sum(len(r["per_estimator"]) for r in recs)
    refs = sum((r.get("reference") is not None) * (1 + bool(r["reference"].get("oracle")))
               for r in recs)  # fmt: skip
    assert len(rows) == len(members) + refs
    assert {x["role"] for x in rows} == {"member", "reference", "oracle"}
    first = recs[0]
    got = {x["estimator"]: x["l2sq"] for x in rows[: len(first["per_estimator"])]}
    assert got == {k: v["l2sq"] for k, v in first["per_estimator"].items()}


def test_to_frame_is_the_rows_as_a_dataframe():
    pd = pytest.importorskip("pandas")
    rows = tuple(tidy_rows(_records(QUICK)[:8], decided_under="t"))
    check = RateCheck((), 3, "t", str(QUICK), None, rows)
    frame = check.to_frame()
    assert isinstance(frame, pd.DataFrame) and list(frame.columns) == list(COLUMNS)
    assert len(frame) == len(rows) == 24
    assert frame.groupby("estimator")["d2"].count().to_dict() == {
        "asvi": 8, "linear-spline": 8, "piecewise-poly-oracle": 8
    }  # fmt: skip
    assert check.to_rows() == [dict(r) for r in rows]
