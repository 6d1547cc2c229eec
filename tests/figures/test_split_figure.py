"""``python -m figures --only split``: the risk split of the shipped constructive-start pilot
drawn and tabled from the shipped records and floors alone (no training), its CSV's shares
adding up to one at every n."""

import csv

import numpy as np

from figures.__main__ import main


def test_the_split_figure_and_table_come_from_the_shipped_records(tmp_path, capsys):
    assert main(["--only", "split", "--out", str(tmp_path)]) == 0
    stem = tmp_path / "split-pilot-holder-a0.5-p1-s20261203"
    assert (tmp_path / f"{stem.name}.png").stat().st_size > 0
    assert (tmp_path / f"{stem.name}.pdf").stat().st_size > 0
    with open(f"{stem}.csv") as fh:
        rows = list(csv.DictReader(fh))
    ns = sorted({int(r["n"]) for r in rows})
    assert {2000, 8000, 32000, 128000} <= set(ns)
    assert {r["term"] for r in rows} == {"class", "objective", "optimiser"}
    for n in ns:
        share = sum(float(r["share"]) for r in rows if int(r["n"]) == n)
        assert np.isclose(share, 1.0, atol=1e-12)
    assert "split holder-a0.5-p1-s20261203 (exploratory)" in capsys.readouterr().out
