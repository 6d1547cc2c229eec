"""One pool of workers for several sweeps (``simulate.sweep.run.parallel.shared_pool``): the
maps inside it run on the same processes, the processes end with it, and a map that stops
early ends it without breaking the maps after it."""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures.process import BrokenProcessPool

import pytest

from simulate.sweep.run import parallel
from simulate.sweep.run.parallel import map_unordered, shared_pool
from tests.simulate.sweep.test_workers import alive


def _pid(x):
    time.sleep(0.05)  # long enough that both processes take items
    return os.getpid(), x * x


def _fails(x):
    if x == 1:
        raise RuntimeError("job 1 failed")
    return x


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="looks the workers up in /proc")
def test_maps_inside_share_the_processes_which_end_with_it():
    with shared_pool(2):
        first = list(map_unordered(_pid, range(6), workers=2))
        second = list(map_unordered(_pid, range(6), workers=2))
    assert sorted(v for _, v in first) == sorted(v for _, v in second) == [0, 1, 4, 9, 16, 25]
    pids = {p for p, _ in first}
    assert {p for p, _ in second} <= pids and len(pids) <= 2
    assert os.getpid() not in pids
    assert not parallel._SHARED
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.1)
    assert not any(alive(p) for p in pids)
    # negative control: without it, each map starts its own processes
    a = {p for p, _ in map_unordered(_pid, range(4), workers=2)}
    b = {p for p, _ in map_unordered(_pid, range(4), workers=2)}
    assert not a & b


def test_a_map_that_fails_ends_the_shared_pool_and_later_maps_start_their_own():
    with shared_pool(2):
        with pytest.raises(RuntimeError, match="job 1 failed"):
            list(map_unordered(_fails, range(4), workers=2))
        assert not parallel._SHARED
        assert sorted(v for _, v in map_unordered(_pid, range(3), workers=2)) == [0, 1, 4]
    assert not parallel._SHARED


def test_no_workers_shares_nothing():
    with shared_pool(0):
        assert not parallel._SHARED
        assert [v for _, v in map_unordered(_pid, [3], workers=0)] == [9]


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="kills a worker")
def test_a_pool_broken_between_maps_is_dropped_and_later_maps_start_their_own():
    """A worker killed while the pool idles between two maps (the OOM killer, say): the
    next map fails (the pool is broken) and the one after it runs on a pool of its own."""
    with shared_pool(1):
        ((pid, _),) = map_unordered(_pid, [2], workers=1)
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and alive(pid):
            time.sleep(0.05)
        time.sleep(0.5)  # the pool's manager sees the death
        with pytest.raises(BrokenProcessPool):
            list(map_unordered(_pid, [3], workers=1))
        assert not parallel._SHARED
        ((other, v),) = map_unordered(_pid, [4], workers=1)
        assert v == 16 and other != pid
