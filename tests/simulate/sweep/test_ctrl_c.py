"""Ctrl-C is one line in every entry point: ``interrupted; ...``, exit 130, no traceback
(issue 38, item 7).  A sweep's line says how many cells its records file holds; the file is
whole and the same command resumes it."""

from __future__ import annotations

import json
import os
import re
import resource
import runpy
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import theory.plumbing.cli as cli_mod

ROOT = str(Path(__file__).resolve().parents[3])
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": ROOT}

# four jobs of about a second each (measured 1-2 s beside other work): the first record
# comes early, the rest is still to do when the test's poll (every 0.1 s) sees it
SWEEP = ["--truth", "holder", "--alpha", "0.5", "--p", "1", "--n", "100", "200", "400", "800"]
SWEEP += ["--replicates", "2", "--widths", "2", "4", "--max-steps", "1000", "--stop-tol", "1e-9"]


def _memory_cap() -> None:  # in the child: a runaway run fails instead of swapping
    resource.setrlimit(resource.RLIMIT_AS, (8 * 10**9, 8 * 10**9))


def start(args, cwd) -> subprocess.Popen:
    """A command line in a session of its own, so that SIGINT can go to its whole process
    group, as a terminal's Ctrl-C does."""
    return subprocess.Popen(
        [sys.executable, "-m", *args], cwd=cwd, env=ENV, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, start_new_session=True, preexec_fn=_memory_cap,
    )  # fmt: skip


def wait_for(predicate, proc, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if proc.poll() is not None:
            pytest.fail(f"ended ({proc.returncode}) before {what}: {proc.stderr.read()!r}")
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"no {what} in {seconds} s")
        time.sleep(0.1)


_BAR_FRAME = re.compile(r"sweep: +\d+%\|")


def stderr_lines(raw: bytes) -> list[str]:
    """The lines of stderr that are not progress-bar frames (tqdm's ``\\rsweep:  25%|##5 |
    2/8 [...]``, drawn over each other on one terminal line, which the interrupt closes)."""
    out = []
    for line in raw.decode().split("\n"):
        rest = [f for f in line.split("\r") if f.strip() and not _BAR_FRAME.match(f)]
        out += rest
    return out


def whole_lines(path: Path) -> int:
    text = path.read_text() if path.exists() else ""
    return text.count("\n")


def interrupt(proc) -> bytes:
    """Ctrl-C to ``proc``'s process group, as a terminal sends it; its stderr once it ends
    (killed, and the test failed, if it runs on 60 s after)."""
    os.killpg(proc.pid, signal.SIGINT)
    try:
        return proc.communicate(timeout=60)[1]
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("still running 60 s after Ctrl-C")


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="sends SIGINT to a process group")
@pytest.mark.parametrize("workers", ["0", "2"])
def test_ctrl_c_during_a_sweep_is_one_line_and_the_records_resume(tmp_path, workers):
    """SIGINT to the sweep's process group (a terminal's Ctrl-C: pool processes included)
    once the first records are written printed a 23-49 line traceback; now one line that
    counts the cells recorded, exit 130, the records file whole, and the same command
    resumes it to the end without repeating a cell."""
    out = tmp_path / "r.jsonl"
    args = ["simulate.sweep", *SWEEP, "--workers", workers, "--out", str(out)]
    proc = start(args, tmp_path)
    wait_for(lambda: whole_lines(out) >= 1, proc, 180, "record")
    err = interrupt(proc)
    lines = stderr_lines(err)
    assert proc.returncode == 130, (proc.returncode, err.decode()[-3000:])
    assert len(lines) == 1 and lines[0].startswith("interrupted"), err.decode()[-3000:]
    text = out.read_text()
    assert text.endswith("\n")
    before = [json.loads(line) for line in text.splitlines()]  # every line whole JSON
    assert lines[0] == (
        f"interrupted; {len(before)} cells recorded in {out}, resume with the same command"
    )
    again = subprocess.run(
        [sys.executable, "-m", *args], cwd=tmp_path, env=ENV, capture_output=True, text=True,
        timeout=300, preexec_fn=_memory_cap,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"sweep: {len(before)} cells recorded" in again.stdout
    after = [json.loads(line) for line in out.read_text().splitlines()]
    keys = [(r["cell"]["truth"], r["cell"]["n"], r["cell"]["replicate"]) for r in after]
    assert len(keys) == len(set(keys)) == 8 >= len(before)
    assert after[: len(before)] == before


def test_ctrl_c_in_the_optimiser_benchmark_is_one_line(tmp_path):
    """``verify.optimiser`` (not among the reproducers), interrupted while it trains its
    first sweep: one line saying its records files are whole, exit 130."""
    out_dir = tmp_path / "opt"
    lock = out_dir / "records-baseline.jsonl"  # made when its lock is taken
    proc = start(["verify.optimiser", "--workers", "0", "--replicates", "2", "--n", "2000",
                  "4000", "8000", "--out-dir", str(out_dir)], tmp_path)  # fmt: skip
    wait_for(lock.exists, proc, 180, "records lock (training under way)")
    time.sleep(1.0)
    err = interrupt(proc)
    lines = stderr_lines(err)
    # 130, or (now and then, interrupted inside torch.compile's first graph, the cause not
    # pinned down) death by SIGINT after the line: a shell shows both as $? = 130
    assert proc.returncode in (130, -signal.SIGINT), (proc.returncode, err.decode()[-3000:])
    assert lines == [
        f"interrupted; the records files in {out_dir} are whole, resume with the same command"
    ], err.decode()[-3000:]


# every ``python -m`` entry point, run as ``python -m`` runs it, interrupted while it
# parses its flags (every one parses with theory.plumbing.cli.Parser)
ENTRY_POINTS = [
    "simulate.sweep", "verify.rates", "verify.optimiser", "verify.starts", "verify.results",
    "figures", "theory", "simulate.bench", "simulate.experiments.teacher",
    "simulate.experiments.plain_control", "simulate.experiments.default_fit",
    "simulate.bench.store",
]  # fmt: skip


@pytest.mark.filterwarnings("ignore:.*found in sys.modules:RuntimeWarning")
@pytest.mark.parametrize("module", ENTRY_POINTS)
def test_every_entry_point_says_ctrl_c_in_one_line(module, monkeypatch, capsys):
    def ctrl_c(*_args, **_kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_mod.Parser, "parse_args", ctrl_c)
    monkeypatch.setattr(json, "dumps", ctrl_c)  # verify.results: its one step
    monkeypatch.setattr(sys, "argv", [module])
    monkeypatch.setattr(signal, "signal", lambda *a: None)  # keep pytest's own SIGINT
    try:
        with pytest.raises(SystemExit) as done:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
    except KeyboardInterrupt:  # it escaped: python would print its traceback
        pytest.fail(f"python -m {module}: Ctrl-C escapes main as a traceback")
    assert done.value.code == 130
    assert capsys.readouterr().err == "interrupted; nothing was written\n"


@pytest.mark.parametrize("module", ["verify.rates", "simulate.sweep", "figures"])
def test_ctrl_c_while_the_entry_point_starts_is_one_line(tmp_path, module):
    """A Ctrl-C during the imports (torch, numpy: a second or two), before ``main`` runs,
    was a 57-line traceback; ``theory.plumbing.cli.quiet_start`` makes it one line, exit 130."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", module, "--help"], cwd=tmp_path, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    time.sleep(0.3)  # the interpreter is up, the toolkit's imports are under way
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (proc.returncode, err.decode()[-2000:])
    assert stderr_lines(err) == ["interrupted while starting; nothing was done"]
