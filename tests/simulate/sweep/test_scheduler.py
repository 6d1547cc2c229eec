"""A Dask scheduler address: malformed ones are one line before anything is made, the
connection and its handshake share one deadline, and a cluster without workers says so
(issue 38, item 6)."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import simulate.sweep.run.cluster as cluster_mod
from simulate.sweep.run.parallel import map_unordered
from tests.factories import run_main

ROOT = str(Path(__file__).resolve().parents[3])
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": ROOT}
HAVE_DISTRIBUTED = importlib.util.find_spec("distributed") is not None

SW = ["--truth", "holder", "--alpha", "0.5", "--p", "1", "--n", "100", "200", "400"]
SW += ["--replicates", "2", "--widths", "2", "4", "--max-steps", "50"]


def cli(module, *args, cwd, timeout=120):
    """In a process of its own: what the deadline covers includes the start-up."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True, text=True, check=False, cwd=cwd, env=ENV, timeout=timeout,
    )  # fmt: skip


def one_line_error(r) -> str:
    """The one line of a bad-input exit (2), or an assertion naming what came instead."""
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), (
        r.returncode,
        r.stderr[-2000:],
    )
    return lines[0]


def silent_listener() -> socket.socket:
    """A TCP port that accepts connections (the kernel completes them) and never says a
    word: not a Dask scheduler, though it looks reachable."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    return s


def command(module: str) -> list[str]:
    if module == "simulate.sweep":
        return [*SW, "--workers", "0", "--out", "res/x.jsonl"]
    return ["--tier", "tiny", "--out", "res/x.jsonl"]


BAD_ADDRESSES = ["foo", "tcp://127.0.0.1:99999", "127.0.0.1:0", "udp://127.0.0.1:8786", ""]
BAD_ADDRESSES += ["tls://127.0.0.1:9"]  # no credentials taken: was a traceback after the deadline


@pytest.mark.parametrize("module", ["simulate.sweep", "verify.rates"])
@pytest.mark.parametrize("address", BAD_ADDRESSES)
def test_a_malformed_scheduler_is_one_line_before_anything_is_made(tmp_path, module, address):
    """``--scheduler foo`` was a 48-line traceback (sweep, exit 1) or a crash (verify.rates,
    exit 4) after the results folder and the records lock were made, and port 99999 a 30 s
    wait: now one line, exit 2, nothing made."""
    r = run_main(module, *command(module), "--scheduler", address, cwd=tmp_path)
    line = one_line_error(r)
    assert line.startswith("error: --scheduler ") and ("address" in line or "scheme" in line)
    assert os.listdir(tmp_path) == []  # no results folder, no .lock, no records file


@pytest.mark.parametrize("module", ["simulate.sweep", "verify.rates"])
@pytest.mark.parametrize("seconds", ["0", "-1", "nan", "inf", "1e300", "86401"])
def test_a_bad_scheduler_timeout_is_one_line(tmp_path, module, seconds):
    """1e300 was accepted as finite and ended in an OverflowError traceback."""
    r = run_main(module, *command(module), "--scheduler-timeout", seconds, cwd=tmp_path)
    line = one_line_error(r)
    assert line.startswith("error: --scheduler-timeout must be a number of seconds in"), line
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("module", ["simulate.sweep", "verify.rates"])
def test_a_listener_that_never_answers_gives_up_at_the_deadline(tmp_path, module):
    """A port that accepts and never answers held ``Client(timeout=30)`` for more than
    420 s; with ``--scheduler-timeout 2`` the run ends in one line, exit 2, seconds later."""
    with silent_listener() as s:
        address = f"tcp://127.0.0.1:{s.getsockname()[1]}"
        t0 = time.monotonic()
        r = cli(module, *command(module), "--scheduler", address, "--scheduler-timeout", "2",
                cwd=tmp_path)  # fmt: skip
        took = time.monotonic() - t0
    line = one_line_error(r)
    if HAVE_DISTRIBUTED:
        assert "did not answer within 2 s" in line and address in line, line
    else:
        assert "needs dask.distributed" in line, line
    assert took < 60, took  # imports included; the deadline itself is 2 s


def _in_thread(call):
    """``call()`` started in a daemon thread: ``(thread, box)``, where ``box`` gets
    ``"out"`` (what it returned) or ``"error"`` (what it raised) once it ends."""
    box: dict = {}

    def go():
        try:
            box["out"] = call()
        except BaseException as exc:  # handed to the test
            box["error"] = exc

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    return thread, box


@pytest.mark.skipif(not HAVE_DISTRIBUTED, reason="needs dask.distributed")
def test_the_deadline_holds_in_process_whatever_distributed_does(monkeypatch):
    """The deadline is kept by a clock outside ``distributed``: :func:`map_unordered` on a
    silent listener with a 1 s deadline raises ``TimeoutError`` (one line) in about 1 s."""
    monkeypatch.setattr(cluster_mod, "SCHEDULER_TIMEOUT_S", 1)
    with silent_listener() as s:
        address = f"tcp://127.0.0.1:{s.getsockname()[1]}"
        t0 = time.monotonic()
        worker, box = _in_thread(lambda: list(map_unordered(abs, [-1], scheduler=address)))
        worker.join(30)
        took = time.monotonic() - t0
    assert not worker.is_alive(), "still waiting 30 s after a 1 s deadline"
    assert isinstance(box.get("error"), TimeoutError), box
    assert len(str(box["error"]).splitlines()) == 1 and took < 10, (str(box["error"]), took)


@pytest.mark.skipif(not HAVE_DISTRIBUTED, reason="needs dask.distributed")
def test_a_cluster_without_workers_says_so_while_it_waits(monkeypatch, capsys):
    """A scheduler with no workers was waited on without a word; now a line on stderr at
    once and every ``WORKER_NOTE_S`` s, and the jobs run once a worker joins."""
    from distributed import LocalCluster

    monkeypatch.setattr(cluster_mod, "WORKER_NOTE_S", 0.5)
    with LocalCluster(n_workers=0, processes=False, dashboard_address=None) as cluster:
        address = cluster.scheduler_address
        worker, box = _in_thread(lambda: sorted(map_unordered(abs, [-1, -2], scheduler=address)))
        said = ""
        deadline = time.monotonic() + 20
        while said.count("waiting for workers") < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
            said += capsys.readouterr().err
        cluster.scale(1)
        worker.join(60)
    assert said.count(f"waiting for workers on {address}") >= 2, said
    assert box.get("out") == [1, 2], box


# a scheduler in this process that other processes reach (tcp, not inproc), no dashboard
QUIET = {"dashboard_address": ":0", "host": "127.0.0.1"}


_BAR_FRAME = re.compile(r"sweep: +\d+%\|[^\r\n]*?(?:it/s\]|s/it\]|\?it/s\])")


def _no_workers_line(r) -> str:
    """The last line of a run given up for want of workers: exit 2, and before it only the
    notes of the wait (``waiting for workers ...``); progress-bar frames left out."""
    text = _BAR_FRAME.sub("", r.stderr.replace("\r", ""))
    lines = [x for x in text.splitlines() if x.strip()]
    assert r.returncode == 2 and lines and lines[-1].startswith("error: "), r.stderr[-3000:]
    assert all(x.startswith("waiting for workers on ") for x in lines[:-1]), r.stderr[-3000:]
    return lines[-1]


@pytest.mark.skipif(not HAVE_DISTRIBUTED, reason="needs dask.distributed")
def test_a_cluster_without_workers_is_given_up_at_the_worker_deadline():
    """A scheduler with no worker was waited on forever (a line every 30 s): now, with
    ``worker_timeout=1``, :class:`NoWorkersError` (one line naming the flag) in seconds."""
    from distributed import LocalCluster

    from simulate.sweep.run.cluster import NoWorkersError

    with LocalCluster(n_workers=0, processes=False, protocol="tcp", **QUIET) as cluster:
        address = cluster.scheduler_address
        t0 = time.monotonic()
        waiter, box = _in_thread(
            lambda: list(map_unordered(abs, [-1], scheduler=address, worker_timeout=1))
        )
        waiter.join(20)
        took = time.monotonic() - t0
    assert not waiter.is_alive(), "still waiting 20 s after a 1 s worker deadline"
    exc = box.get("error")
    assert isinstance(exc, NoWorkersError), box
    assert len(str(exc).splitlines()) == 1 and "--worker-timeout" in str(exc), str(exc)
    assert address in str(exc) and 1 <= took < 10, (str(exc), took)


@pytest.mark.skipif(not HAVE_DISTRIBUTED, reason="needs dask.distributed")
@pytest.mark.parametrize("module", ["simulate.sweep", "verify.rates"])
def test_a_sweep_on_a_cluster_without_workers_exits_2_resumable(tmp_path, module):
    """Both command lines on a scheduler with zero workers and ``--worker-timeout 2``: one
    error line naming the flag and the records file (resumable), exit 2, in seconds."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=0, processes=False, protocol="tcp", **QUIET) as cluster:
        address = cluster.scheduler_address
        t0 = time.monotonic()
        r = cli(module, *command(module), "--scheduler", address, "--worker-timeout", "2",
                cwd=tmp_path)  # fmt: skip
        took = time.monotonic() - t0
    line = _no_workers_line(r)
    assert "has had no worker for 2 s" in line and "--worker-timeout" in line, line
    assert "cells recorded in" in line and "resume with the same command" in line, line
    assert took < 60, took  # imports included; the deadline itself is 2 s


@pytest.mark.parametrize("module", ["simulate.sweep", "verify.rates"])
@pytest.mark.parametrize("seconds", ["0", "-1", "nan", "inf", "1e300"])
def test_a_bad_worker_timeout_is_one_line(tmp_path, module, seconds):
    """``--worker-timeout`` holds to the scheduler deadline's bounds, checked before
    anything is made."""
    r = run_main(module, *command(module), "--worker-timeout", seconds, cwd=tmp_path)
    line = one_line_error(r)
    assert line.startswith("error: --worker-timeout must be a number of seconds in"), line
    assert os.listdir(tmp_path) == []


def _kill_session(proc) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)


@pytest.mark.skipif(not HAVE_DISTRIBUTED, reason="needs dask.distributed")
def test_a_sweep_whose_every_worker_dies_gives_up_and_resumes(tmp_path):
    """The issue's case: a cluster whose one worker is killed (SIGKILL, no nanny to
    restart it) once the sweep has recorded a cell.  Before, "waiting for workers" every
    30 s for good; now exit 2 at the worker deadline, the line counting the cells recorded,
    and the same sweep run here resumes them to the end without repeating a cell."""
    from distributed import LocalCluster

    out = tmp_path / "r.jsonl"
    sweep = [*SW[:-1], "1000", "--stop-tol", "1e-9", "--out", str(out)]  # jobs of ~1 s
    with LocalCluster(n_workers=0, processes=False, protocol="tcp", **QUIET) as cluster:
        address = cluster.scheduler_address
        worker = subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_worker", address, "--no-nanny",
             "--nthreads", "1", "--no-dashboard"], cwd=tmp_path, env=ENV,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        try:
            run = subprocess.Popen(
                [sys.executable, "-m", "simulate.sweep", *sweep, "--scheduler", address,
                 "--worker-timeout", "3"], cwd=tmp_path, env=ENV, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True, start_new_session=True,
            )  # fmt: skip
            try:
                deadline = time.monotonic() + 120
                while not (out.exists() and out.read_text().count("\n") >= 1):
                    assert run.poll() is None, run.communicate()[1][-3000:]
                    assert time.monotonic() < deadline, "no record in 120 s"
                    time.sleep(0.1)
                _kill_session(worker)  # every worker of the cluster dead
                _, err = run.communicate(timeout=60)
            finally:
                if run.poll() is None:
                    _kill_session(run)
        finally:
            _kill_session(worker)
    r = subprocess.CompletedProcess(run.args, run.returncode, "", err)
    line = _no_workers_line(r)
    before = [json.loads(x) for x in out.read_text().splitlines()]
    assert line.endswith(
        f"; {len(before)} cells recorded in {out}, resume with the same command"
    ), line
    assert 1 <= len(before) < 6, len(before)
    again = cli("simulate.sweep", *sweep, "--workers", "0", cwd=tmp_path, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    after = [json.loads(x) for x in out.read_text().splitlines()]
    keys = [(x["cell"]["n"], x["cell"]["replicate"]) for x in after]
    assert len(keys) == len(set(keys)) == 6 and after[: len(before)] == before
