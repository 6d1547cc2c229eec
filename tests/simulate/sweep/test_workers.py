"""Pool workers do not outlive the sweep that started them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.simulate.sweep.test_records_integrity import SWEEP


def children(pid: int) -> set[int]:
    """The processes whose parent is ``pid`` (from /proc)."""
    out = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    stat = fh.read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.add(int(entry))
    return out


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="finds the workers through /proc")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_killed_sweep_leaves_no_worker_alive(tmp_path, sig):
    """A sweep with one pool worker, killed while the worker trains: the worker (and the
    pool's resource tracker) are gone within seconds instead of training on for good."""
    args = [a for a in SWEEP if a not in ("30",)]
    args[args.index("--max-steps") + 1 :] = ["200000", *args[args.index("--max-steps") + 1 :]]
    sweep = subprocess.Popen(
        [sys.executable, "-m", "simulate.sweep", *args, "--workers", "1",
         "--out", str(tmp_path / "r.jsonl")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        kids: set[int] = set()
        while time.monotonic() < deadline and len(kids) < 2:  # the tracker and the worker
            kids = children(sweep.pid)
            time.sleep(0.2)
        assert len(kids) >= 2, "the pool never started"
        time.sleep(3)  # the worker imports torch and starts its job
        os.kill(sweep.pid, sig)
        sweep.wait(timeout=30)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(alive(k) for k in kids):
            time.sleep(0.2)
        assert not any(alive(k) for k in kids), [k for k in kids if alive(k)]
    finally:
        for k in children(sweep.pid) | {sweep.pid}:
            try:
                os.kill(k, signal.SIGKILL)
            except OSError:
                pass
