"""A Dask scheduler address: malformed ones are one line before anything is made, the
connection and its handshake share one deadline, and a cluster without workers says so
(issue 38, item 6)."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import simulate.sweep.cluster as cluster_mod
from simulate.sweep.parallel import map_unordered
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


@pytest.mark.skipif(not HAVE_DISTRIBUTED, reason="needs dask.distributed")
def test_the_deadline_holds_in_process_whatever_distributed_does(monkeypatch):
    """The deadline is kept by a clock outside ``distributed``: :func:`map_unordered` on a
    silent listener with a 1 s deadline raises ``TimeoutError`` (one line) in about 1 s."""
    monkeypatch.setattr(cluster_mod, "SCHEDULER_TIMEOUT_S", 1)
    box: dict = {}
    with silent_listener() as s:
        address = f"tcp://127.0.0.1:{s.getsockname()[1]}"

        def go():
            try:
                box["out"] = list(map_unordered(abs, [-1], scheduler=address))
            except BaseException as exc:  # handed to the test
                box["error"] = exc

        t0 = time.monotonic()
        worker = threading.Thread(target=go, daemon=True)
        worker.start()
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
    box: dict = {}
    with LocalCluster(n_workers=0, processes=False, dashboard_address=None) as cluster:
        address = cluster.scheduler_address

        def go():
            try:
                box["out"] = sorted(map_unordered(abs, [-1, -2], scheduler=address))
            except BaseException as exc:  # handed to the test
                box["error"] = exc

        worker = threading.Thread(target=go, daemon=True)
        worker.start()
        said = ""
        deadline = time.monotonic() + 20
        while said.count("waiting for workers") < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
            said += capsys.readouterr().err
        cluster.scale(1)
        worker.join(60)
    assert said.count(f"waiting for workers on {address}") >= 2, said
    assert box.get("out") == [1, 2], box
