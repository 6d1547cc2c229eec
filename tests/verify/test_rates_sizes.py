"""``verify.rates`` and ``figures`` refuse sizes no machine here holds before anything is
allocated, with the estimate printed, and ``--dry-run`` applies the same checks (issue 61,
item 2)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

import simulate.core.sizes as sizes
from tests.factories import run_main

ROOT = str(Path(__file__).resolve().parents[2])
GIB = 2**30


@pytest.fixture
def machine(monkeypatch):
    """A machine of 16 GiB whatever this one has."""
    monkeypatch.setattr(sizes, "available_bytes", lambda: 16 * GIB)


def _one_line(r) -> str:
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.returncode == 2 and len(lines) == 1, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    assert lines[0].startswith("error: "), lines
    return lines[0]


def test_a_hundred_million_replicates_dry_run_is_refused(machine, tmp_path):
    """Its --dry-run returned 0 at once (and the run itself built its job list for
    minutes): the records alone, all held at once, are 3 TB."""
    r = run_main(
        "verify.rates", "--replicates", "100000000", "--dry-run", "--out", tmp_path / "r.jsonl"
    )
    line = _one_line(r)
    assert "this sweep's 800,000,000 records" in line and "need at least" in line, line
    assert "GiB" in line and line.endswith("use fewer --replicates (or fewer --n or truths)")
    assert "need at least 3,052 GiB" in line and "e+" not in line, line  # 8e8 x 4096 bytes
    assert "from the measured costs, about" in line and "years of one worker" in line, line
    assert os.listdir(tmp_path) == []


def _cap() -> None:  # what `ulimit -v 6000000` sets (or less where the hard limit is less)
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    cap = 6_000_000 * 1024 if hard == resource.RLIM_INFINITY else min(6_000_000 * 1024, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))


def test_a_hundred_million_replicates_are_refused_before_any_file_or_pool(tmp_path):
    """The run (not the dry run), in a process of its own under the reproducer's limit: it
    held 4.6 GB at 40 s and left an empty records file and leaked semaphores; now one line,
    exit 2, nothing made."""
    r = subprocess.run(
        [sys.executable, "-m", "verify.rates", "--replicates", "100000000",
         "--out", "res/r.jsonl"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, preexec_fn=_cap,
        env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": ROOT},
    )  # fmt: skip
    line = _one_line(r)
    assert "records" in line and "--replicates" in line, line
    assert "leaked" not in r.stderr and os.listdir(tmp_path) == []


def test_a_hundred_million_points_dry_run_is_refused(machine, tmp_path):
    """Not in the issue: the sweep's reproducer through verify.rates' --dry-run, which
    passed it (exit 0) with the data alone counted."""
    r = run_main(
        "verify.rates", "--n", "64", "128", "100000000", "--dry-run",
        "--out", tmp_path / "r.jsonl",
    )  # fmt: skip
    line = _one_line(r)
    assert "the truth's values at 100000000 points" in line, line
    assert "use smaller --n or --n-test (or fewer --workers)" in line, line


def test_figures_refuses_more_workers_than_the_machine_holds(machine, tmp_path):
    """Not in the issue: ``figures --workers 100000`` would spawn 100,000 interpreters with
    torch (256 MiB each, measured)."""
    r = run_main("figures", "--only", "table1", "--workers", "100000", "--out", tmp_path / "f")
    line = _one_line(r)
    assert line.startswith("error: 100000 worker processes need at least"), line
    assert line.endswith("use fewer --workers"), line
    assert os.listdir(tmp_path) == []


def test_the_quick_tier_s_dry_run_still_passes(machine, tmp_path):
    r = run_main("verify.rates", "--dry-run", "--out", tmp_path / "r.jsonl")
    assert r.returncode == 0, r.stderr
