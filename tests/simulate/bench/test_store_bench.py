"""The store benchmark (``python -m simulate.bench.store``): every store written and read
back on the same records, grouped as a sweep appends them."""

import json

from simulate.bench.store import STORES, main, store_costs
from simulate.sweep.store.schema import SCHEMA
from tests.factories import fake_records


def test_every_store_is_measured_on_the_records_grouped_by_job(tmp_path, capsys):
    recs = fake_records(-0.5, -0.5)
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps({**r, "schema": SCHEMA}) + "\n" for r in recs))
    res = store_costs(str(path), repeats=1)
    jobs = {(json.dumps(r["cell"]["truth"]), r["cell"]["n"]) for r in recs}
    assert res["records"] == len(recs) and res["appends"] == len(jobs)
    for s in STORES:
        assert res[s]["write_ms"] > 0 and res[s]["read_ms"] > 0 and res[s]["bytes"] > 0
    assert main([str(path), "--repeats", "1"]) == 0
    assert "sqlite-wal" in capsys.readouterr().out
    assert main([str(tmp_path / "absent.jsonl")]) == 2
