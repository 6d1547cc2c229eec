"""Pool workers do not outlive the sweep that started them."""

from __future__ import annotations

import os
import re
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


def test_a_real_cluster_is_set_up_like_the_local_pool_and_gives_its_records(tmp_path):
    """A scheduler and two single-threaded worker processes started apart, as a user would
    (``dask scheduler`` / ``dask worker``, on 127.0.0.1): every worker gets the local pool's
    set-up (one torch thread, the allocator settings) and the sweep's records equal the
    local pool's."""
    distributed = pytest.importorskip("distributed")
    from simulate.sweep.run.parallel import _threads_and_allocator
    from simulate.sweep.run.runner import SweepRunOptions, run_sweep
    from tests.simulate.sweep.test_records_integrity import cfg, quiet
    from tests.simulate.sweep.test_sweep_run import stable

    sched_file = tmp_path / "scheduler.json"
    env = {**os.environ, "OMP_NUM_THREADS": "2"}  # the plugin, not the environment, sets 1
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
             "--port", "0", "--no-dashboard", "--scheduler-file", str(sched_file)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
        )
    ]  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not sched_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert sched_file.exists(), "the scheduler did not start"
        for _ in range(2):
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "distributed.cli.dask_worker", "--scheduler-file",
                     str(sched_file), "--nthreads", "1", "--nworkers", "1", "--no-dashboard",
                     "--host", "127.0.0.1"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                )
            )  # fmt: skip
        with distributed.Client(scheduler_file=str(sched_file), timeout=60) as client:
            client.wait_for_workers(2, timeout=120)
            address = client.scheduler.address
            remote = run_sweep(cfg(), tmp_path / "d.jsonl", SweepRunOptions(scheduler=address),
                               progress=False, log=quiet)  # fmt: skip
            setups = client.run(_threads_and_allocator)
        assert len(setups) == 2 and all(s == (1, True) for s in setups.values()), setups
        local = run_sweep(cfg(), tmp_path / "l.jsonl", SweepRunOptions(workers=2), progress=False,
                          log=quiet)  # fmt: skip
        assert stable(remote) == stable(local)
    finally:
        for p in procs[::-1]:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


def test_records_computed_with_other_versions_are_refused_by_name(tmp_path, monkeypatch):
    """A worker whose packages differ from this process's (here: this process pretends
    another torch) computes other numbers: its records are refused, naming the package."""
    import simulate.sweep.run.runner as runner
    from simulate.sweep.store.records import versions
    from tests.simulate.sweep.test_records_integrity import cfg, quiet
    from theory.plumbing.jsonl import RecordsError

    mine = {**versions(), "torch": "0.0-other"}
    monkeypatch.setattr(runner, "versions", lambda: mine)
    with pytest.raises(RecordsError, match=re.escape("torch 0.0-other -> " + versions()["torch"])):
        runner.run_sweep(cfg(), tmp_path / "r.jsonl", progress=False, log=quiet)


def test_records_computed_by_other_code_are_refused(tmp_path, monkeypatch):
    """A worker running an edited checkout stamps another code digest on its records: the
    sweep refuses them instead of appending them under its own fingerprint."""
    import simulate.sweep.run.runner as runner
    from tests.simulate.sweep.test_records_integrity import cfg, quiet
    from theory.plumbing.jsonl import RecordsError

    monkeypatch.setattr(runner, "code_digest", lambda: "0" * 16)
    with pytest.raises(RecordsError, match="with other code"):
        runner.run_sweep(cfg(), tmp_path / "r.jsonl", progress=False, log=quiet)
    assert not (tmp_path / "r.jsonl").exists() or not (tmp_path / "r.jsonl").read_text()
