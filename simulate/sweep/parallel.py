"""Run independent jobs here, on a pool of single-threaded worker processes, or on an
existing Dask cluster, and hand back each result as it arrives.

One place for the scale-out of the sweep (``simulate.sweep``) and of the teacher experiment
(``simulate.experiments.table1``).  Only the calling process writes records, so a records
file has one writer whatever the number of workers.

Local workers are a standard-library process pool (``spawn``), each process with one torch
thread and the allocator settings of ``simulate._alloc.tune_malloc``.  Not a local Dask
cluster: its worker trained a Table 1 block 3.5x slower than a pool process did (100 s
against 28-31 s, measured one after the other; BENCHMARKS.md), most likely because
Dask's nanny starts workers with ``MALLOC_TRIM_THRESHOLD_=65536``, the page-refaulting
allocator behaviour ``tune_malloc`` exists to avoid.  An existing Dask cluster
(``scheduler``) gets a worker plugin (:func:`local_setup_plugin`) that sets each of its
workers up like a pool process (one torch thread, ``tune_malloc``); its records are
compared with this process's package versions by the sweep (``simulate.sweep.runner``).
Pool processes exit when the process that started them dies (:func:`_exit_with_parent`).
"""

from __future__ import annotations

__all__ = ["map_unordered", "SCHEDULER_TIMEOUT_S", "check_workers", "local_setup_plugin"]

# how long a client waits for an existing scheduler before giving up
SCHEDULER_TIMEOUT_S = 30


# how often a pool process checks that the process that started it is alive
PARENT_POLL_S = 0.5


def _worker_init(parent_pid: int | None = None) -> None:
    """Each pool process: one torch thread, the training allocator settings, and a watch
    on its parent (:func:`_exit_with_parent`)."""
    import torch

    from simulate._alloc import tune_malloc

    torch.set_num_threads(1)
    tune_malloc()
    if parent_pid is not None:
        _exit_with_parent(parent_pid)


def _exit_with_parent(parent_pid: int) -> None:
    """End this process when ``parent_pid`` is no longer its parent (the sweep was killed:
    SIGKILL gives the pool no chance to stop its workers, which would otherwise train on
    for good, adopted by PID 1).  A daemon thread polls ``os.getppid()`` every
    :data:`PARENT_POLL_S` seconds; portable, and a dead parent's orphan is reparented at
    once, so the check cannot miss it."""
    import os
    import threading
    import time

    def watch():
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def local_setup_plugin():
    """A Dask worker plugin (``distributed.WorkerPlugin``) that sets every worker of a
    cluster up like a local pool process: one torch thread and the training allocator
    settings (:func:`_worker_init`).  A worker started with several threads would otherwise
    run torch's default intra-op threads (a Dask worker was measured 3.5x slower per job
    than a pool process; BENCHMARKS.md).  Registered by :func:`map_unordered` on the
    cluster it is given (workers that join later get it too).  Built on call, so that
    importing this module does not import ``distributed``."""
    import os

    from distributed.diagnostics.plugin import WorkerPlugin

    class LocalSetup(WorkerPlugin):
        name = "asvi-rates-local-setup"

        def __init__(self):
            self.client_pid = os.getpid()

        def setup(self, worker=None) -> None:
            if os.getpid() != self.client_pid:  # a worker inside the caller is the caller
                _worker_init()

    return LocalSetup()


def _threads_and_allocator() -> tuple:
    """What :class:`LocalSetup` sets, read back in a worker: ``(torch threads, tuned)``."""
    import torch

    from simulate import _alloc

    return torch.get_num_threads(), _alloc._done


def check_workers(workers, scheduler=None) -> None:
    """Raise ``ValueError`` for a negative worker count or for both a scheduler and workers."""
    if scheduler and workers:
        raise ValueError("give either a scheduler address or a number of local workers")
    if workers is not None and int(workers) < 0:
        raise ValueError(f"workers must be >= 1 (or 0: in this process), got {workers}")


def map_unordered(fn, items, workers: int | None = None, scheduler: str | None = None):
    """Yield ``fn(item)`` for every item, in the order they finish: in this process
    (``workers`` 0 or None and no ``scheduler``), on a pool of ``workers`` single-threaded
    processes, or on the Dask cluster at ``scheduler``.  ``fn`` and the items must pickle (a
    module-level function) for the last two.  Items are submitted in order, so with
    ``workers`` processes the first ``workers`` items run first."""
    check_workers(workers, scheduler)
    items = list(items)
    if workers:
        import multiprocessing as mp
        import os
        from concurrent.futures import ProcessPoolExecutor, as_completed

        ctx = mp.get_context("spawn")  # no fork of a process holding torch threads
        with ProcessPoolExecutor(
            int(workers), mp_context=ctx, initializer=_worker_init, initargs=(os.getpid(),)
        ) as ex:
            futures = [ex.submit(fn, it) for it in items]
            try:
                for fut in as_completed(futures):
                    yield fut.result()
            finally:  # stopped early (an error, a consumer that quits): drop what is queued
                for fut in futures:
                    fut.cancel()
        return
    if scheduler:
        from distributed import Client, as_completed

        with Client(scheduler, timeout=SCHEDULER_TIMEOUT_S) as client:
            client.register_plugin(local_setup_plugin())  # named by its ``name``
            futures = [client.submit(fn, it, pure=False) for it in items]
            for fut in as_completed(futures):
                yield fut.result()
        return
    for it in items:
        yield fn(it)
