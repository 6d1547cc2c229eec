"""Issue 74, items 3 and 8: no silent unconverged results, a bounded ``--config``, a killed
worker named with the resume command.

* A sweep that leaves candidates at the step cap unconverged says so in one note (how
  many, at which n, which flag raises the cap): ``simulate.sweep`` on stderr, and
  ``verify.rates`` after its sweep and in its report (``simulate.sweep.cli.capped_note``).
  Before, a sweep at n = 512,000 left 5 of its 8 candidates at the 20,000-step cap and
  printed nothing.  Without ``--config`` the command line's cap grows with n as the
  confirmatory tiers' does (``max_epochs`` 160); ``SweepConfig``'s own default stays None.
* ``--config`` is read within the records' bounds (``theory.plumbing.parse.parse_line``):
  5,000 nested ``[`` were a ``RecursionError`` traceback, exit 1; now one line, exit 2.
* A pool worker killed (``kill -9``, as the out-of-memory killer does) was a
  ``BrokenProcessPool`` traceback (exit 1; ``verify.rates``: its crash, exit 4); now one line
  naming the death and the records file to resume, exit 2, and no worker left behind.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

import verify
from simulate.sweep.cli import (
    DEFAULT_MAX_EPOCHS,
    build_parser,
    capped_note,
    config_from_args,
    parse_truths,
)
from simulate.sweep.run.parallel import WorkerDied
from simulate.sweep.setup import tiers
from simulate.sweep.setup.config import SweepConfig
from tests.factories import run_main
from tests.simulate.sweep.test_ctrl_c import _child_setup
from tests.simulate.sweep.test_workers import alive, children

ROOT = str(Path(__file__).resolve().parents[3])
TRUTH = ["--truth", "holder", "--alpha", "0.5", "--p", "1"]


# ------------------------------------------------------------------ the capped note
def _asvi(n, converged, cap=20_000, failed=None, steps=None):
    """A hand-made ASVI record: what :func:`capped_note` reads of one."""
    k = len(converged)
    return {
        "cell": {"truth": "holder-a1.5-p1-s0", "n": n, "replicate": 0},
        "config": {"stop_rule": {"max_steps": cap}},
        "per_width": {
            "converged": list(converged),
            "failed": list(failed or [False] * k),
            "steps": list(steps or [cap if not c else cap // 2 for c in converged]),
        },
    }


def test_the_note_counts_the_capped_candidates_their_cells_their_n_and_the_flags():
    recs = [
        _asvi(512_000, [True, False, False, True, False, False, True, False]),
        # a GP control's or a regressor's record: no per_width, not counted
        {"cell": {"truth": "t", "n": 512_000, "replicate": 1}, "per_estimator": {}},
    ]
    assert capped_note(recs) == (
        "note: 5 of 8 candidates (1 of 1 cells) stopped at the step cap unconverged, at"
        " n = 512000 (cap 20000 steps); raise it with --max-steps or --max-epochs"
    )


def test_the_note_names_each_n_and_its_cap_and_leaves_out_failures():
    recs = [
        _asvi(500, [True, True]),  # converged: its cell counts, none of it is capped
        _asvi(500, [False, True], cap=20_000),
        _asvi(32_000, [False, False], cap=40_000),
        # diverged (failed), not a budget: not capped, its cell says so itself
        _asvi(32_000, [False, True], cap=40_000, failed=[True, False]),
    ]
    note = capped_note(recs, remedy="REMEDY", label="LABEL")
    assert note == (
        "note (LABEL): 3 of 8 candidates (2 of 4 cells) stopped at the step cap unconverged,"
        " at n = 500 (cap 20000 steps), 32000 (cap 40000 steps); REMEDY"
    )
    # the same cap at every n: said once
    same = capped_note([_asvi(64, [False]), _asvi(128, [False, True])])
    assert "at n = 64, 128 (cap 20000 steps);" in same and "2 of 3 candidates (2 of 2" in same
    # a record without the cell's cap (an older config): the most steps a capped one took
    old = _asvi(64, [False], steps=[777])
    del old["config"]
    assert "(cap 777 steps)" in capped_note([old])


@pytest.mark.parametrize(
    "records",
    [[], [_asvi(500, [True, True])], [_asvi(500, [False], failed=[True])], [{"cell": {}}]],
)
def test_no_capped_candidate_no_note(records):
    assert capped_note(records) is None


# ------------------------------------------------------------------ the default cap
def _found(doc, key) -> set:
    """Every value of ``key`` anywhere in the nested tables of ``doc``."""
    if isinstance(doc, dict):
        here = {doc[key]} if key in doc else set()
        return here.union(*(_found(v, key) for v in doc.values()))
    if isinstance(doc, list):
        return set().union(*(_found(v, key) for v in doc))
    return set()


def _config(*argv):
    truths, rest = parse_truths(list(argv))
    return config_from_args(truths, build_parser().parse_args(rest))


def test_the_command_lines_cap_grows_with_n_as_the_tiers_unless_a_config_file_says(tmp_path):
    """Without ``--config``: ``max_epochs`` 160, the confirmatory tiers' (a recipe's own
    kept, ``--max-epochs`` over both); with ``--config``: the file's own value, or
    ``SweepConfig``'s default None (a fixed cap), which stays None."""
    assert DEFAULT_MAX_EPOCHS == 160
    for tier in ("full", "constructive"):
        assert tiers.RATES[tier]["sweep"]["max_epochs"] == DEFAULT_MAX_EPOCHS
    for path in sorted((Path(verify.__file__).parent / "protocols").glob("confirm-*.toml")):
        with open(path, "rb") as fh:  # the confirm tiers' designs
            assert _found(tomllib.load(fh), "max_epochs") == {DEFAULT_MAX_EPOCHS}, path.name
    assert {f.name: f.default for f in dataclasses.fields(SweepConfig)}["max_epochs"] is None
    assert _config(*TRUTH, "--n", "64").max_epochs == DEFAULT_MAX_EPOCHS
    assert _config(*TRUTH, "--n", "64", "--max-epochs", "7").max_epochs == 7
    assert _config(*TRUTH, "--n", "64", "--recipe", "epochs").max_epochs == 320
    cap = _config(*TRUTH, "--n", "512000").steps_cap(512_000)
    assert cap == 640_000 > 20_000  # ceil(160 x 512,000 / 128)
    base = {"truths": [{"kind": "holder", "alpha": 0.5, "p": 1}], "ns": [64]}
    plain, own = tmp_path / "plain.json", tmp_path / "own.json"
    plain.write_text(json.dumps(base))
    own.write_text(json.dumps({**base, "max_epochs": 40}))
    assert _config("--config", str(plain)).max_epochs is None
    assert _config("--config", str(own)).max_epochs == 40
    assert _config("--config", str(own), "--max-epochs", "3").max_epochs == 3
    # said where --help says it (the flag's own help is generated from its declaration)
    words = " ".join(build_parser().format_help().split())
    assert f"--max-epochs is {DEFAULT_MAX_EPOCHS} unless given" in words


# ------------------------------------------------------------------ the note, end to end
def test_a_sweep_at_a_tiny_cap_says_how_many_at_which_n_and_the_flags(tmp_path):
    r = run_main(
        "simulate.sweep", *TRUTH, "--n", "64", "128", "256", "--replicates", "1", "--widths",
        "2", "--max-steps", "20", "--max-epochs", "0.001", "--out", tmp_path / "r.jsonl",
        "--workers", "0", "--no-compile", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    notes = [line for line in r.stderr.splitlines() if line.startswith("note:")]
    assert notes == [
        "note: 3 of 3 candidates (3 of 3 cells) stopped at the step cap unconverged, at"
        " n = 64, 128, 256 (cap 20 steps); raise it with --max-steps or --max-epochs"
    ], r.stderr[-2000:]


def test_a_sweep_whose_candidates_converge_prints_no_note(tmp_path):
    """The negative control: a cap no candidate reaches (a loose tolerance, the recipe
    that stops at the first plateau)."""
    out = tmp_path / "r.jsonl"
    r = run_main(
        "simulate.sweep", *TRUTH, "--n", "64", "128", "--replicates", "1", "--widths", "2",
        "--max-steps", "20000", "--stop-tol", "0.5", "--recipe", "baseline", "--out", out,
        "--workers", "0", "--no-compile", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(recs) == 2 and all(all(x["per_width"]["converged"]) for x in recs)
    assert "note" not in r.stderr and "step cap" not in r.stdout + r.stderr


# ------------------------------------------------------------------ a bounded --config
@pytest.mark.parametrize(
    "text, words",
    [
        ("[" * 5_000, "nested deeper than 64 levels"),
        ("[" * 100_000, "nested deeper than 64 levels"),
        ('{"ns": [' + "[" * 70 + "1" + "]" * 70 + "]}", "nested deeper than 64 levels"),
        ('{"seed": ' + "9" * 5_000 + "}", "a number 5000 characters long (at most 100"),
    ],
    ids=["5000-deep", "100000-deep", "72-deep-inside", "5000-digits"],
)
def test_a_config_past_the_bounds_is_one_line_exit_2(tmp_path, text, words):
    path = tmp_path / "c.json"
    path.write_text(text)
    r = run_main("simulate.sweep", "--config", path, "--out", tmp_path / "res" / "r.jsonl",
                 cwd=tmp_path)  # fmt: skip
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.returncode == 2 and len(lines) == 1, r.stderr[-2000:]
    assert lines[0].startswith(f"error: --config {path}: {words}"), lines[0]
    assert "Traceback" not in r.stderr and not (tmp_path / "res").exists()


def test_a_config_within_the_bounds_still_reads_and_not_json_is_said(tmp_path):
    """A long number inside a string is no number; text that is not JSON keeps its line."""
    ok = tmp_path / "ok.json"
    ok.write_text(json.dumps({"truths": [{"kind": "holder", "alpha": 0.5, "p": 1}],
                              "ns": [64], "protocol": "p@" + "9" * 150}))  # fmt: skip
    c = _config("--config", str(ok))
    assert list(c.ns) == [64] and c.protocol.endswith("9" * 150)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    r = run_main("simulate.sweep", "--config", bad, "--out", tmp_path / "r.jsonl", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.startswith(f"error: --config {bad}: not JSON")


# ------------------------------------------------------------------ a killed worker
def test_a_worker_that_dies_is_a_named_broken_pool():
    """The exception itself: a ``BrokenProcessPool`` still (callers that catch that catch
    it), with how the process ended read from its exit code."""
    from concurrent.futures.process import BrokenProcessPool

    from simulate.sweep.run.parallel import _how_it_ended

    assert issubclass(WorkerDied, BrokenProcessPool)
    assert _how_it_ended([None, -signal.SIGKILL]) == (
        "killed by SIGKILL, e.g. by the out-of-memory killer"
    )
    assert _how_it_ended([-signal.SIGSEGV]) == "killed by SIGSEGV"
    assert _how_it_ended([None, 1]) == "it exited with status 1"
    assert _how_it_ended([None, None]) == "killed by a signal, e.g. by the out-of-memory killer"


def test_verify_rates_says_a_dead_worker_in_one_line_with_its_resume_note(tmp_path, monkeypatch):
    """``verify.rates``' own handling, in this process: the sweep's ``WorkerDied`` is one
    line naming the records file being written, exit 2."""
    from simulate.sweep.run import spec

    def dies(*_, **__):
        raise WorkerDied("a worker process died (killed by SIGKILL, e.g. by the out-of-memory"
                         " killer)")  # fmt: skip

    monkeypatch.setattr(spec, "run_sweep", dies)
    r = run_main("verify.rates", "--tier", "tiny", "--workers", "0", cwd=tmp_path)
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.returncode == 2 and len(lines) == 1, r.stderr[-2000:]
    assert lines[0] == (
        "error: a worker process died (killed by SIGKILL, e.g. by the out-of-memory killer);"
        " 0 cells recorded in results/records-tiny.jsonl, resume with the same command"
    )


def _descendants(pid: int) -> set[int]:
    out, todo = set(), [pid]
    while todo:
        kids = children(todo.pop())
        out |= kids
        todo += kids
    return out


def _is_worker(pid: int) -> bool:
    """A pool process (spawned: ``... -c 'from multiprocessing.spawn import spawn_main;
    ...'``), not the pool's resource tracker."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return b"spawn_main" in fh.read()
    except OSError:
        return False


# jobs of minutes (a tolerance no candidate meets, a cap far away): the kill lands mid-job
LONG_SWEEP = [*TRUTH, "--n", "100", "200", "--replicates", "1", "--widths", "2",
              "--max-steps", "100000", "--stop-tol", "1e-12", "--no-compile",
              "--workers", "2", "--out", "r.jsonl"]  # fmt: skip
DEATH = re.compile(
    r"error: a worker process died \(killed by SIGKILL, e\.g\. by the out-of-memory killer\);"
    r" (\d+) cells recorded in (\S+), resume with the same command"
)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="finds the workers through /proc")
@pytest.mark.parametrize(
    "module, args, records",
    [
        ("simulate.sweep", LONG_SWEEP, "r.jsonl"),
        # the tiny tier on a shared pool (its jobs of seconds: killed right at its start)
        ("verify.rates", ["--tier", "tiny", "--workers", "2"], "results/records-tiny.jsonl"),
    ],
)
def test_a_worker_killed_mid_sweep_is_one_line_exit_2_and_no_worker_left(
    tmp_path, module, args, records
):
    """``kill -9`` of one pool worker while the sweep trains (the out-of-memory killer):
    the command ends with one line naming the death, the records so far and the resume,
    exit 2 -- not a ``BrokenProcessPool`` traceback (exit 1; ``verify.rates``: exit 4) --
    and the other worker and the pool's tracker are gone."""
    out_path = tmp_path / "stdout.txt"
    with open(out_path, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", module, *args], cwd=tmp_path, stdout=out,
            stderr=subprocess.PIPE, start_new_session=True, preexec_fn=_child_setup,
            env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": ROOT,
                 "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
    seen: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        workers: list[int] = []
        while time.monotonic() < deadline and proc.poll() is None:  # the sweep started,
            seen |= _descendants(proc.pid)  # and its pool's two workers
            workers = sorted(p for p in seen if alive(p) and _is_worker(p))
            if "jobs to run" in out_path.read_text() and len(workers) >= 2:
                break
            time.sleep(0.1)
        assert proc.poll() is None and len(workers) >= 2, out_path.read_text()[-2000:]
        time.sleep(0.5)  # into the jobs
        os.kill(workers[0], signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    err = err.decode()
    lines = [x for x in re.split(r"[\r\n]", err) if x.strip() and not x.startswith("sweep:")]
    assert proc.returncode == 2, (proc.returncode, err[-3000:])
    assert len(lines) == 1 and "Traceback" not in err, err[-3000:]
    m = DEATH.fullmatch(lines[0])
    assert m and m.group(2) == records, lines[0]
    written = tmp_path / records  # whole records, as many as said
    lines = written.read_bytes().splitlines(keepends=True) if written.exists() else []
    assert sum(1 for line in lines if line.endswith(b"\n")) == int(m.group(1))
    deadline = time.monotonic() + 10  # every process it started is gone
    while time.monotonic() < deadline and any(alive(p) for p in seen):
        time.sleep(0.1)
    assert not [p for p in seen if alive(p)]


# ------------------------------------------------------------------ verify.rates' report
REFERENCE = os.path.join(ROOT, "figures", "reference", "records-quick.jsonl.gz")


def test_verify_rates_report_carries_the_note_with_its_own_remedy(tmp_path):
    """The shipped quick-tier records (some candidates at n = 1,600 and 4,000 at the
    20,000-step cap): the printed report says how many, where, and what raises the cap
    here (``verify.rates`` has no cap flag: a recipe), beside its other notes."""
    r = run_main("verify.rates", "--records", REFERENCE, cwd=tmp_path)
    assert r.returncode in (0, 1, 3), r.stderr[-2000:]
    notes = [x for x in r.stdout.splitlines() if "stopped at the step cap" in x]
    assert len(notes) == 1, r.stdout[:3000]
    assert re.fullmatch(
        r"note: \d+ of \d+ candidates \(\d+ of \d+ cells\) stopped at the step cap unconverged,"
        r" at n = [\d, ]+ \(cap 20000 steps\); raise it with --recipe epochs or --recipe budget"
        r" \(simulate\.sweep\.setup\.recipes\); the budget-doubling control measures what twice the"
        r" cap changes",
        notes[0],
    ), notes[0]


def test_verify_rates_notes_say_a_confirmatory_cap_is_the_protocols():
    from verify.rates import capped_notes

    recs = [_asvi(512_000, [False, True])]
    (note,) = capped_notes(recs, [], control=False, confirm=True)
    assert note.endswith("; the cap is the protocol's pre-registered design")
    sweep, control = capped_notes(recs, recs, control=True)
    assert sweep.endswith("(simulate.sweep.setup.recipes); the budget-doubling control measures"
                          " what twice the cap changes")  # fmt: skip
    assert control.startswith("note (budget-doubling control): 1 of 2 candidates")
    assert capped_notes([], [], control=True) == []
