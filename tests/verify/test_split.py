"""The risk split (``verify.split``) on the shipped constructive-start pilot (confirm-v4's
alpha = 0.5 truth, 8 replicates, n = 2,000..128,000) with floors written here: the terms add
up to ASVI's risk in every cell, the optimum is the highest-ELBO point known at the
selected width, a floor at the optimum's risk leaves no objective term, and a missing floor
is one line naming the command that computes it."""

import dataclasses
import json
import os

import numpy as np
import pytest

from simulate.sweep.store.schema import read_records
from tests.factories import run_main
from verify.split import CONSTRUCTIVE, cell_split, optimum_arm, risk_split, truth_grids

PILOT = os.path.join(
    os.path.dirname(__file__), "..", "..", "figures", "reference",
    "records-starts-a05-s20261203.jsonl.gz",
)  # fmt: skip


@pytest.fixture(scope="module")
def grid():
    grids = truth_grids(read_records(PILOT))
    assert list(grids) == ["holder-a0.5-p1-s20261203"]
    return grids["holder-a0.5-p1-s20261203"].cells


def _floors(grid, value):
    """A floor for every (truth, replicate, depth, width) of the grid: ``value(cell, w)``."""
    out = {}
    for row in grid:
        for c in row:
            for w in c.widths:
                out[(c.truth, c.replicate, c.depth, w)] = {"d2": value(c, w), "l2sq": value(c, w)}
    return out


def test_the_terms_add_up_to_the_random_starts_risk(grid):
    floors = _floors(grid, lambda c, w: 1e-3 * w**-0.5)
    sp = risk_split(grid, floors)
    assert sp.replicates == 8 and sp.ns == (2000, 8000, 32000, 128000)
    for s in sp.cells:
        assert sum(s.terms.values()) == pytest.approx(s.random, rel=1e-12)
    R = np.array([[c.selected("d2") for c in row] for row in grid]).mean(0)
    total = np.sum([sp.term_mean[t] for t in ("class", "objective", "optimiser")], axis=0)
    np.testing.assert_allclose(total, R, rtol=1e-12)
    np.testing.assert_allclose(np.sum([sp.term_share[t] for t in sp.term_share], 0), 1, 1e-12)
    assert sum(sp.optimum_arms.values()) == 32


def test_the_optimum_is_the_highest_elbo_known_at_the_width(grid):
    seen = set()
    for row in grid:
        for c in row:
            w = c.selected_width
            a = optimum_arm(c, w)
            seen.add(a)
            best = c.at_width("elbo", w) if a == "R" else c.arms[a].at_width("elbo", w)
            for other in CONSTRUCTIVE:
                assert best >= c.arms[other].at_width("elbo", w)
            assert best >= c.at_width("elbo", w)
            s = cell_split(c, _floors(grid, lambda c, w: 0.0))
            assert (s.elbo_gain == 0) == (a == "R") and s.elbo_gain >= 0
    assert len(seen) >= 2  # the pilot has cells of each kind: not a constant choice


def test_a_floor_at_the_optimums_risk_leaves_no_objective_term(grid):
    for row in grid:
        for c in row:  # a floor per cell (a real floor is one per replicate, for every n)
            w = c.selected_width
            a = optimum_arm(c, w)
            risk = (c if a == "R" else c.arms[a]).at_width("d2", w)
            s = cell_split(c, {(c.truth, c.replicate, c.depth, w): {"d2": risk}})
            assert s.terms["objective"] == 0 and s.terms["class"] == risk
    # negative control: a zero floor moves all of it to the objective
    zero = risk_split(grid, _floors(grid, lambda c, w: 0.0))
    assert np.all(np.array(zero.term_mean["objective"]) > 0)
    assert np.allclose(zero.term_mean["class"], 0)


def test_the_per_width_gaps_are_the_paired_differences(grid):
    sp = risk_split(grid, _floors(grid, lambda c, w: 1e-4))
    g = next(x for x in sp.width_gaps if x["n"] == 128000 and x["width"] == 64)
    e_R = np.array([row[-1].at_width("elbo", 64) for row in grid])
    e_C = np.array([max(row[-1].arms[a].at_width("elbo", 64) for a in CONSTRUCTIVE)
                    for row in grid])  # fmt: skip
    assert g["elbo_gap"] == pytest.approx(float(np.mean(e_C - e_R)), rel=1e-12)
    assert g["constructive_higher"] == int(np.sum(e_C > e_R))
    lo, hi = g["elbo_ci"]
    assert lo < g["elbo_gap"] < hi


def test_the_command_prints_the_split_and_refuses_a_missing_floor(grid, tmp_path):
    rows = []
    for (truth, rep, depth, w), v in _floors(grid, lambda c, w: 2e-3 / w).items():
        rows.append({"schema": "asvi-rates/class-floor/1", "truth": truth, "replicate": rep,
                     "depth": depth, "width": w, "start": "constructive", "settings": {},
                     "settings_digest": "x", "l2sq": v["l2sq"], "d2": v["d2"],
                     "train_mse": 0.0, "seconds": 0.0})  # fmt: skip
    path = tmp_path / "floors.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "split.json"
    res = run_main("verify.split", PILOT, "--floors", str(path), "--json", str(out))
    assert res.returncode == 0, res.stderr
    assert "class" in res.stdout and "optimiser" in res.stdout and "bend" in res.stdout
    data = json.loads(out.read_text())
    assert data[0]["truth"] == "holder-a0.5-p1-s20261203" and len(data[0]["cells"]) == 32
    short = tmp_path / "short.jsonl"
    short.write_text("".join(json.dumps(r) + "\n" for r in rows if r["replicate"] != 3))
    res = run_main("verify.split", PILOT, "--floors", str(short))
    assert res.returncode == 2
    assert "replicate 3" in res.stderr and "python -m simulate.experiments.class_floor" in (
        res.stderr
    )
    assert len(res.stderr.strip().splitlines()) == 1


def test_a_protocols_rule_is_read_and_labelled_exploratory_on_records_not_of_it(grid, tmp_path):
    from simulate.experiments.class_floor import FloorSettings

    settings = dataclasses.asdict(FloorSettings())  # the protocol's [split.floor]
    rows = [{"schema": "asvi-rates/class-floor/1", "truth": t, "replicate": r, "depth": d,
             "width": w, "start": "constructive", "settings": settings,
             "settings_digest": "x", "l2sq": 1e-3, "d2": 1e-4, "train_mse": 0.0,
             "seconds": 0.0} for (t, r, d, w) in _floors(grid, lambda c, w: 0.0)]  # fmt: skip
    path = tmp_path / "floors.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = run_main("verify.split", PILOT, "--floors", str(path), "--protocol", "confirm-v5")
    assert res.returncode == 0, res.stderr
    assert "read under protocol confirm-v5's rule (exploratory: records not of it)" in res.stdout
    # floors of other settings are not the protocol's: none is read
    other = tmp_path / "other.jsonl"
    other.write_text("".join(json.dumps({**r, "settings": {**settings, "steps": 10}}) + "\n"
                             for r in rows))  # fmt: skip
    res = run_main("verify.split", PILOT, "--floors", str(other), "--protocol", "confirm-v5")
    assert res.returncode == 2 and "no class floor" in res.stderr
    res = run_main("verify.split", PILOT, "--floors", str(path), "--protocol", "confirm-v4")
    assert res.returncode == 2 and "has no [split]" in res.stderr
    res = run_main("verify.split", PILOT, "--floors", str(path), "--protocol", "confirm-v5",
                   "--metric", "l2sq")  # fmt: skip
    assert res.returncode == 2 and "splits d2" in res.stderr


def test_a_replicate_short_of_an_n_or_failed_is_left_out_and_said_never_an_n():
    """Records missing one replicate's cell at the largest n, and with another replicate's
    cell failed, keep every n (the top half the tests read stays the design's) and leave
    those two replicates out, printed: as every verdict reads a truth's cells."""
    from verify.report.split_render import render

    recs = read_records(PILOT)
    top = max(r["cell"]["n"] for r in recs)
    kept = [r for r in recs if not (r["cell"]["replicate"] == 2 and r["cell"]["n"] == top)]
    kept = [{**r, "failed": True} if (r["cell"]["replicate"], r["cell"]["n"]) == (5, 8000)
            else r for r in kept]  # fmt: skip
    tc = truth_grids(kept)["holder-a0.5-p1-s20261203"]
    assert tc.ns == (2000, 8000, 32000, 128000)
    assert tc.replicates.dropped == (2,) and tc.replicates.excluded == (5,)
    sp = risk_split(tc, _floors(tc.cells, lambda c, w: 1e-4))
    assert sp.replicates == 6 and sp.ns == tc.ns
    assert sp.left_out == {"incomplete": [2], "failed": [[8000, 5]]}
    text = render(sp)
    assert "replicates [2]" in text and "n = 8,000 replicate 5" in text
    # negative control: the whole records leave nobody out and say nothing of it
    every = truth_grids(recs)["holder-a0.5-p1-s20261203"]
    whole = risk_split(every, _floors(every.cells, lambda c, w: 1e-4))
    assert whole.replicates == 8 and whole.left_out == {} and "left out" not in render(whole)


def test_a_truth_other_than_hoelder_is_refused():
    """The split reads Hoelder truths only: a teacher has no class floor and its constructive
    start embeds the truth.  Negative control: the same records as Hoelder are read."""
    recs = read_records(PILOT)
    teacher = [{**r, "truth": {**r["truth"], "kind": "teacher", "alpha": None}} for r in recs]
    with pytest.raises(ValueError, match="Hoelder truths only"):
        truth_grids(teacher)
    assert list(truth_grids(recs)) == ["holder-a0.5-p1-s20261203"]


def test_the_protocols_decision_needs_every_cell_of_its_design():
    """On records of the protocol, the split is its decision only when every (n,
    replicate) of the protocol's design for the truth is recorded; short of that it is a
    partial read, and says what is missing.  An untested term is named."""
    from verify import protocol as protocols
    from verify.report.split_render import decision
    from verify.split import short_of

    p = protocols.load("confirm-v5")
    ns = (500, 2000, 8000, 32000, 128000, 512000)
    truth = "holder-a0.5-p1-s20261206"
    every = {(n, r) for n in ns for r in range(24)}
    assert short_of(truth, every, p) is None
    assert short_of(truth, every - {(512000, 23)}, p) == (
        "1 of its 144 cells unrecorded (at n = [512000])"
    )
    assert short_of("holder-a1.5-p1-s20261206", every, p).startswith("24 of its 168")
    assert "not a truth of protocol confirm-v5" in short_of("holder-a0.5-p1-s1", every, p)

    class Sp:  # the fields decision reads
        flattening = {"class": {"verdict": "flattens"}, "objective": None,
                      "optimiser": {"verdict": "keeps_pace"}}  # fmt: skip

    whole = decision(Sp, "confirm-v5", own=True)
    assert whole == (
        "protocol confirm-v5's decision: the flattening's cause: class (not tested: objective)"
    )
    part = decision(Sp, "confirm-v5", own=True, short="1 of its 144 cells unrecorded")
    assert part.startswith("read under protocol confirm-v5's rule (partial: 1 of its 144")
    assert "not its decision" in part and "protocol confirm-v5's decision" not in part
    Sp.flattening = {"class": {"verdict": "undetermined"}, "objective": None,
                     "optimiser": {"verdict": "keeps_pace"}}  # fmt: skip
    assert decision(Sp, None).endswith("no term is shown to flatten at this design"
                                       " (not tested: objective)")  # fmt: skip


def test_a_split_key_the_split_does_not_read_is_refused():
    """Every key of a protocol's [split] is read or refused: a misspelt key never leaves
    a default in its place."""
    import argparse

    from verify import protocol as protocols
    from verify import split

    real = protocols.load("confirm-v5")
    args = argparse.Namespace(protocol="confirm-v5", metric=None)
    floor = {k: v for k, v in real.split["floor"].items() if k != "depth"}
    assert split._rules(args, real) == ("d2", 0.95, floor, 2)
    for bad, why in [({"levle": 0.9}, "which the split does not read"),
                     ({"terms": ["class"]}, "the split tests")]:  # fmt: skip
        fake = dataclasses.replace(real, split={**real.split, **bad})
        with pytest.raises(ValueError, match=why):
            split._rules(args, fake)


REFERENCE = os.path.join(os.path.dirname(__file__), "..", "..", "figures", "reference")


@pytest.mark.parametrize(
    "alpha, cause",
    [("a05", "class, optimiser"), pytest.param("a15", "objective", marks=pytest.mark.slow)],
)
def test_confirm5s_shipped_printout_is_what_its_shipped_records_and_floors_print(alpha, cause):
    """The confirm-v5 split printouts the results pages quote are recomputed, not trusted:
    ``verify.split`` on the shipped records and floors prints them byte for byte, and the
    protocol's decision line names the cause reported."""
    res = run_main(
        "verify.split", os.path.join(REFERENCE, f"records-confirm5-holder-{alpha}.jsonl.gz"),
        "--floors", os.path.join(REFERENCE, f"class-floor-confirm5-{alpha}.jsonl.gz"),
        "--protocol", "confirm-v5",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    with open(os.path.join(REFERENCE, f"split-confirm5-{alpha}.txt")) as fh:
        assert res.stdout == fh.read()
    assert res.stdout.rstrip().endswith(f"the flattening's cause: {cause}")
