"""How a process that runs sweep jobs for another is set up: the local pool's processes
(:mod:`simulate.sweep.run.parallel`) and an existing Dask cluster's workers
(:func:`simulate.sweep.run.cluster.local_setup_plugin`) alike -- the caller's signals ignored,
one torch thread, the training allocator settings and, for a pool process, a watch on the
process that started it.  A leaf of the sweep: both the pool and the cluster side import it,
neither of them the other for it."""

from __future__ import annotations

import os
import signal
import threading
import time

import torch

from simulate.alloc import tune_malloc
from theory.plumbing.cli import STOP_SIGNALS

__all__ = ["PARENT_POLL_S", "PARENT_SIGNALS", "exit_with_parent", "worker_init"]

# how often a pool process checks that the process that started it is alive
PARENT_POLL_S = 0.5


# the signals a pool process leaves to the process that started it (Ctrl-C and the stop
# signals, which that process turns into one line: theory.plumbing.cli)
PARENT_SIGNALS = (signal.SIGINT, *STOP_SIGNALS)


def worker_init(parent_pid: int | None = None) -> None:
    """Each pool process: SIGINT, SIGTERM and SIGHUP ignored (:data:`PARENT_SIGNALS`: the
    calling process's to handle; a pool process that took SIGINT would print its own
    traceback, one killed by SIGTERM broke the pool under the caller), one torch thread,
    the training allocator settings, and a watch on its parent (:func:`exit_with_parent`,
    which ends it when the caller dies however it dies)."""

    for sig in PARENT_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):  # blocked while it was spawned (_signals_ignored)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, PARENT_SIGNALS)
    torch.set_num_threads(1)
    tune_malloc()
    if parent_pid is not None:
        exit_with_parent(parent_pid)


def exit_with_parent(parent_pid: int) -> None:
    """End this process when ``parent_pid`` is no longer its parent (the sweep was killed:
    SIGKILL gives the pool no chance to stop its workers, which would otherwise train on
    for good, adopted by PID 1).  A daemon thread polls ``os.getppid()`` every
    :data:`PARENT_POLL_S` seconds; portable, and a dead parent's orphan is reparented at
    once, so the check cannot miss it."""

    def watch():
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()
