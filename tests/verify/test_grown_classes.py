"""The readings on records whose class grew at its edge (``simulate.sweep.train.edge``):
a replicate's candidates run past the ladder while its ELBO selects its widest, so the
replicates of one cell hold different widths.  Built from the shipped constructive-start
pilot (every replicate at 2..64) by growing some replicates' largest-n cells to width 128
(the width-64 candidate's numbers copied, its ELBO moved): the starts comparison, the
split's per-width gaps and the whole analysis read them without error, and read a width
held by some replicates only over those replicates."""

import copy
import dataclasses
import os

import numpy as np
import pytest

from simulate.sweep.store.schema import read_records
from verify.split import truth_grids, width_gaps
from verify.starts import objective_evidence

PILOT = os.path.join(
    os.path.dirname(__file__), "..", "..", "figures", "reference",
    "records-starts-a05-s20261203.jsonl.gz",
)  # fmt: skip
TRUTH = "holder-a0.5-p1-s20261203"
ARMS = ("R", "W0", "W0s", "W0f", "W")


def _grow(rec: dict, width: int, shift: float) -> dict:
    """``rec`` with one more candidate, ``width``: every per-width column (the record's
    and each arm's) extended by its last entry, the ELBO moved by ``shift``."""
    out = copy.deepcopy(rec)
    out["config"]["widths"] = [*rec["config"]["widths"], width]
    for table in [out["per_width"], *(a["per_width"] for a in out.get("arms", {}).values())]:
        for key, col in table.items():
            table[key] = [*col, col[-1] + shift if key == "elbo" else col[-1]]
    return out


@pytest.fixture(scope="module")
def grown():
    """The pilot with replicates 5-7 at its largest n grown to width 128 (replicate 0,
    whose cells stand for the configuration, not)."""
    recs = read_records(PILOT)
    top = max(r["cell"]["n"] for r in recs)
    return [
        _grow(r, 128, -10.0 * (1 + r["cell"]["replicate"]))
        if r["cell"]["n"] == top and r["cell"]["replicate"] >= 5 else r
        for r in recs
    ]  # fmt: skip


def test_the_objectives_evidence_examines_the_widths_every_replicate_holds(grown):
    """The evidence at the largest n is examined over the widths every replicate holds: the
    grown width (3 of 8 replicates) is left out, and the ladder's widths read as on the
    ungrown records (negative control: the same evidence)."""
    cells = truth_grids(grown)[TRUTH].cells
    assert {len(row[-1].widths) for row in cells} == {6, 7}
    plain = truth_grids(read_records(PILOT))[TRUTH].cells
    assert objective_evidence(cells, "d2", ARMS) == objective_evidence(plain, "d2", ARMS)


def test_a_width_held_by_some_replicates_is_paired_over_them(grown):
    """The split's per-width gaps: at the largest n the grown width is a row over the 3
    replicates that hold it, its gap their paired mean; every ladder width's row is the
    ungrown records' row."""
    cells = truth_grids(grown)[TRUTH].cells
    top = cells[0][-1].n
    rows = {g["width"]: g for g in width_gaps(cells) if g["n"] == top}
    assert rows[128]["replicates"] == 3 and rows[64]["replicates"] == 8
    want = np.mean([row[-1].arms[_best(row[-1], 128)].at_width("elbo", 128)
                    - row[-1].at_width("elbo", 128) for row in cells[5:]])  # fmt: skip
    assert rows[128]["elbo_gap"] == pytest.approx(want)
    plain = truth_grids(read_records(PILOT))[TRUTH].cells
    after = [g for g in width_gaps(cells) if g["width"] != 128]
    assert after == list(width_gaps(plain))


def _best(cell, w):
    from verify.split import best_constructive

    return best_constructive(cell, w)


def test_the_analysis_reads_grown_records_whole(grown):
    """verify.rates' analysis (every reading, the starts comparison included) runs on
    grown records under confirm-v5's rules: before, the starts' evidence indexed every
    replicate at the first one's widths and raised on a width another lacked."""
    from verify import protocol as protocols
    from verify.reading.analysis import analyse

    proto = protocols.load("confirm-v5")
    proto = dataclasses.replace(proto, replication={**proto.replication, "resamples": 50})
    results = analyse(grown, None, None, proto, {})
    asvi = [r for r in results if r.estimator == "asvi"]
    assert asvi
    for r in asvi:  # the candidates any replicate held, not the first replicate's alone
        assert r.asvi.candidate_widths[-1] == (2, 4, 8, 16, 32, 64, 128)
        assert r.asvi.candidate_widths[0] == (2, 4, 8, 16, 32)  # n = 2,000: its ladder
    premises = [r.theorem.readings.premises for r in asvi if r.metric == "d2"]
    assert premises and all("widths up to 128" in p for p in premises)
