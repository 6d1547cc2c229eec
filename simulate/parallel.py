"""Run independent jobs here, on a local cluster of single-threaded worker processes, or on
an existing Dask cluster, and hand back each result as it arrives.

One place for the scale-out of the sweep (``simulate.sweep``) and of the teacher experiment
(``simulate.experiments.table1``).  Only the calling process writes records, so a records
file has one writer whatever the number of workers.  On the 2-core machine two
single-threaded worker processes beat one two-threaded process (BENCHMARKS.md).
"""

from __future__ import annotations

__all__ = ["map_unordered", "SCHEDULER_TIMEOUT_S", "check_workers"]

# how long a client waits for an existing scheduler before giving up
SCHEDULER_TIMEOUT_S = 30

_ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def check_workers(workers, scheduler=None) -> None:
    """Raise ``ValueError`` for a negative worker count or for both a scheduler and workers."""
    if scheduler and workers:
        raise ValueError("give either a scheduler address or a number of local workers")
    if workers is not None and int(workers) < 0:
        raise ValueError(f"workers must be >= 1 (or 0: in this process), got {workers}")


def map_unordered(fn, items, workers: int | None = None, scheduler: str | None = None):
    """Yield ``fn(item)`` for every item, in the order they finish: in this process
    (``workers`` 0 or None and no ``scheduler``), on a new local cluster of ``workers``
    single-threaded processes, or on the Dask cluster at ``scheduler``.  ``fn`` and the items
    must pickle (a module-level function) for the last two."""
    check_workers(workers, scheduler)
    items = list(items)
    if workers:
        from distributed import LocalCluster

        with LocalCluster(
            n_workers=int(workers),
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
            env=_ONE_THREAD,
        ) as cluster:
            yield from map_unordered(fn, items, scheduler=cluster.scheduler_address)
        return
    if scheduler:
        from distributed import Client, as_completed

        with Client(scheduler, timeout=SCHEDULER_TIMEOUT_S) as client:
            futures = [client.submit(fn, it, pure=False) for it in items]
            for fut in as_completed(futures):
                yield fut.result()
        return
    for it in items:
        yield fn(it)
