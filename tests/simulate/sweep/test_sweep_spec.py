"""``simulate.sweep.run.spec.SweepSpec``: one sweep to run as a value, which every entry point
that trains builds (``python -m simulate.sweep``, the main job's plan, the figures), checked
without opening anything, resolved against its records file in one step, then run."""

from __future__ import annotations

import dataclasses

import pytest

from simulate.sweep.cli import read_command
from simulate.sweep.run.runner import SweepRunOptions
from simulate.sweep.run.spec import SweepSpec
from theory.plumbing.jsonl import RecordsError

ARGV = ["--truth", "holder", "--alpha", "0.5", "--p", "1", "--n", "100", "200",
        "--replicates", "2", "--workers", "0"]  # fmt: skip


def test_the_command_line_is_a_thin_parser_into_it(tmp_path):
    """``read_command`` gives the spec the flags say (the configuration, the records file,
    how it runs), frozen, and opens nothing: a damaged file at ``--out`` is read only by
    ``resolved``, which names it."""
    out = tmp_path / "r.jsonl"
    out.write_text("not a record\n")
    spec = read_command([*ARGV, "--out", str(out), "--new-file"])
    assert isinstance(spec, SweepSpec) and spec.out == str(out) and spec.new_file
    assert list(spec.config.ns) == [100, 200] and spec.config.replicates == 2
    assert spec.options == SweepRunOptions(workers=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.out = "elsewhere"
    with pytest.raises(RecordsError, match="r.jsonl"):
        spec.resolved()


def test_another_configurations_file_stops_it_or_moves_it_beside(recorded, tmp_path):
    """A records file of another configuration at ``out``: ``resolved`` refuses it naming
    the fields that differ, or with ``new_file`` names ``OUT-FINGERPRINT.jsonl`` beside it;
    a file of this configuration resolves to itself."""
    from tests.simulate.sweep.test_records_integrity import cfg

    _, path = recorded
    mine = SweepSpec(cfg(), str(path))
    assert mine.resolved() is mine
    other = SweepSpec(dataclasses.replace(cfg(), lr=cfg().lr * 2), str(path))
    with pytest.raises(RecordsError, match="another configuration"):
        other.resolved()
    beside = dataclasses.replace(other, new_file=True).resolved()
    assert beside.out != str(path) and beside.out.startswith(str(path)[: -len(".jsonl")])


def test_it_refuses_what_is_not_a_configuration():
    with pytest.raises(TypeError, match="SweepConfig"):
        SweepSpec({"ns": [100]}, "r.jsonl")
    spec = read_command([*ARGV, "--out", "r.jsonl"])
    with pytest.raises(TypeError, match="SweepRunOptions"):
        SweepSpec(spec.config, "r.jsonl", {"workers": 0})
