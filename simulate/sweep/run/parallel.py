"""Run independent jobs here, on a pool of single-threaded worker processes, or on an
existing Dask cluster, and hand back each result as it arrives.

One place for the scale-out of the sweep (``simulate.sweep``) and of the teacher experiment
(``simulate.experiments.table1``).  Only the calling process writes records, so a records
file has one writer whatever the number of workers.

Local workers are a standard-library process pool (``spawn``), each process with one torch
thread and the allocator settings of ``simulate.alloc.tune_malloc``.  Not a local Dask
cluster: its worker trained a Table 1 block 3.5x slower than a pool process did (100 s
against 28-31 s, measured one after the other; BENCHMARKS.md), most likely because
Dask's nanny starts workers with ``MALLOC_TRIM_THRESHOLD_=65536``, the page-refaulting
allocator behaviour ``tune_malloc`` exists to avoid.  An existing Dask cluster
(``scheduler``) gets a worker plugin (:func:`local_setup_plugin`) that sets each of its
workers up like a pool process (one torch thread, ``tune_malloc``); its records are
compared with this process's package versions by the sweep (``simulate.sweep.run.runner``).
Pool processes exit when the process that started them dies
(:func:`simulate.sweep.run.worker_setup.exit_with_parent`).

Interrupts and unreachable clusters end in one line, not a traceback or a hang:

* **Ctrl-C**: the terminal sends SIGINT to the whole process group, pool processes
  included.  They ignore it (from their first instruction: the pool is started with SIGINT
  ignored, which a spawned interpreter keeps, and
  :func:`simulate.sweep.run.worker_setup.worker_init` ignores it again), so
  only the calling process sees ``KeyboardInterrupt``; leaving :func:`map_unordered` early
  (an interrupt, an error, a consumer that stops) then ends the pool processes at once
  (SIGKILL) instead of waiting for the jobs they run, whose results nobody would read.
* **SIGTERM, SIGHUP** (:data:`theory.plumbing.cli.STOP_SIGNALS`: a scheduler's stop, to
  the whole group like Slurm's and ``timeout``'s or to the calling process alone like
  Kubernetes'; a closed terminal's): the pool processes ignore them as they do SIGINT, so a
  signal to the group does not kill them under the pool (a broken pool, its semaphores
  leaked) but reaches the calling process alone, which ends them as for Ctrl-C.
* **A pool process killed** (``kill -9``, the out-of-memory killer): the pool breaks
  (``BrokenProcessPool``); :func:`map_unordered` ends the other pool processes at once
  (the pool's own clean-up sends them SIGTERM, which they ignore, and would then wait on
  them) and raises :class:`WorkerDied`, naming how the process ended, which the command
  lines turn into one line with their resume note (exit 2).
* **A Dask cluster**: :mod:`simulate.sweep.run.cluster` (its address, deadlines and
  waits).
"""

from __future__ import annotations

__all__ = [
    "WorkerDied",
    "map_unordered",
    "shared_pool",
    "SCHEDULER_TIMEOUT_S",
    "add_scheduler_flags",
    "check_cluster_flags",
    "check_scheduler",
    "check_scheduler_timeout",
    "check_workers",
    "local_setup_plugin",
]

import contextlib
import multiprocessing as mp
import os
import signal
import threading
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool

import torch

from simulate import alloc
from simulate.sweep.run import cluster
from simulate.sweep.run.cluster import (  # the command lines' scheduler flags, said here before
    SCHEDULER_TIMEOUT_S,
    add_scheduler_flags,
    check_cluster_flags,
    check_scheduler,
    check_scheduler_timeout,
    local_setup_plugin,
)
from simulate.sweep.run.worker_setup import PARENT_SIGNALS, worker_init


class WorkerDied(BrokenProcessPool):
    """A pool process ended without handing back its job's result: killed by a signal
    (the out-of-memory killer's SIGKILL, a ``kill -9``) or crashed.  The pool is broken
    and its other processes are ended; what was recorded before is whole (single
    appends), so the same command resumes it.  A ``BrokenProcessPool`` (what the standard
    library raises for it, with no word of why or what to do), so that a caller that
    catches that catches this."""


def _how_it_ended(exitcodes) -> str:
    """How a dead pool process ended, from the pool processes' exit codes (None: still
    running): ``killed by SIGKILL, e.g. by the out-of-memory killer``, ``killed by
    SIGSEGV``, ``it exited with status 1``, or -- where none is known yet -- the likeliest
    cause, said as such."""
    for code in exitcodes:
        if code is None or code == 0:
            continue
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            oom = ", e.g. by the out-of-memory killer" if -code == signal.SIGKILL else ""
            return f"killed by {name}{oom}"
        return f"it exited with status {code}"
    return "killed by a signal, e.g. by the out-of-memory killer"


def _threads_and_allocator() -> tuple:
    """What :class:`LocalSetup` sets, read back in a worker: ``(torch threads, tuned)``."""

    return torch.get_num_threads(), alloc.tuned()


def check_workers(workers, scheduler=None) -> None:
    """Raise ``ValueError`` for a negative worker count or for both a scheduler and workers."""
    if scheduler and workers:
        raise ValueError("give either a scheduler address or a number of local workers")
    if workers is not None and int(workers) < 0:
        raise ValueError(f"workers must be >= 1 (or 0: in this process), got {workers}")


def map_unordered(
    fn,
    items,
    workers: int | None = None,
    scheduler: str | None = None,
    scheduler_timeout: float | None = None,
    worker_timeout: float | None = None,
):
    """Yield ``fn(item)`` for every item, in the order they finish: in this process
    (``workers`` 0 or None and no ``scheduler``), on a pool of ``workers`` single-threaded
    processes, or on the Dask cluster at ``scheduler`` (reached within
    ``scheduler_timeout`` seconds, default :data:`SCHEDULER_TIMEOUT_S`, or ``OSError`` /
    ``TimeoutError`` in one line; given up with
    :class:`simulate.sweep.run.cluster.NoWorkersError` once it has had no worker for
    ``worker_timeout`` seconds in a row, default
    :data:`simulate.sweep.run.cluster.WORKER_TIMEOUT_S`).  ``fn`` and the items must pickle (a
    module-level function) for the last two.  Items are submitted in order, so with
    ``workers`` processes the first ``workers`` items run first.  Leaving early (an error, an
    interrupt, a consumer that stops) drops what is queued and ends the pool processes."""
    check_workers(workers, scheduler)
    check_scheduler_timeout(scheduler_timeout, "scheduler_timeout")
    check_scheduler_timeout(worker_timeout, "worker_timeout")
    items = list(items)
    if workers:
        yield from _on_pool(fn, items, int(workers))
        return
    if scheduler:
        timeout = (
            cluster.SCHEDULER_TIMEOUT_S if scheduler_timeout is None else float(scheduler_timeout)
        )
        yield from cluster.on_cluster(fn, items, scheduler, timeout, worker_timeout)
        return
    for it in items:
        yield fn(it)


def _signals_ignored():
    """A context in which the processes spawned start with :data:`PARENT_SIGNALS` out of
    their reach until :func:`simulate.sweep.run.worker_setup.worker_init` ignores them, so a
    pool process cannot take a
    Ctrl-C or a SIGTERM even while it imports.  The signals are blocked in this thread
    (``pthread_sigmask``, as multiprocessing's resource tracker is started): a spawned
    interpreter inherits the mask, and one that comes here meanwhile is not lost but taken
    by another thread, or once the block ends.  Without ``pthread_sigmask`` (Windows) they
    are ignored instead, in the main thread (elsewhere that changes nothing)."""

    @contextlib.contextmanager
    def blocked():
        old = signal.pthread_sigmask(signal.SIG_BLOCK, PARENT_SIGNALS)
        try:
            yield
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)

    @contextlib.contextmanager
    def ignored():
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        old = {sig: signal.signal(sig, signal.SIG_IGN) for sig in PARENT_SIGNALS}
        try:
            yield
        finally:
            for sig, was in old.items():
                signal.signal(sig, was)

    return blocked() if hasattr(signal, "pthread_sigmask") else ignored()


def _new_pool(workers: int) -> ProcessPoolExecutor:
    ctx = mp.get_context("spawn")  # no fork of a process holding torch threads
    return ProcessPoolExecutor(
        workers, mp_context=ctx, initializer=worker_init, initargs=(os.getpid(),)
    )


def _processes(ex: ProcessPoolExecutor) -> list:
    """``ex``'s processes (``multiprocessing.Process``), while it still knows them."""
    return list((getattr(ex, "_processes", None) or {}).values())


# how long a broken pool's dead process is waited for, to say how it ended
DEATH_WAIT_S = 1.0


def _exitcodes(ex: ProcessPoolExecutor, wait_s: float = DEATH_WAIT_S) -> list:
    """The exit code of each of ``ex``'s processes (None: running, or not known), waiting
    up to ``wait_s`` seconds for one to be known: a process killed a moment ago breaks the
    pool as its pipes close, which can come before it has ended (measured: still running,
    or a zombie another thread was reaping, when the pool's futures failed)."""
    deadline = time.monotonic() + wait_s
    while True:
        codes = []
        for proc in _processes(ex):
            try:
                codes.append(proc.exitcode)
            except (ValueError, AssertionError):  # closed, or not this process's child
                codes.append(None)
        if any(c is not None for c in codes) or time.monotonic() >= deadline:
            return codes
        time.sleep(0.02)


def _end_now(ex: ProcessPoolExecutor) -> None:
    """Drop what is queued on ``ex`` and end its processes at once.  Also what a broken
    pool needs: its own clean-up sends the processes left SIGTERM, which pool processes
    ignore (:data:`PARENT_SIGNALS`), and then waits for them."""
    procs = _processes(ex)  # before shutdown
    ex.shutdown(wait=False, cancel_futures=True)  # forgets its processes
    for proc in procs:
        proc.kill()  # they ignore SIGINT and SIGTERM; their results would not be read


# the pool of an open shared_pool context, by its worker count
_SHARED: dict[int, ProcessPoolExecutor] = {}


def _noop() -> None:
    pass


@contextlib.contextmanager
def shared_pool(workers: int | None, warm=None):
    """Inside, every :func:`map_unordered` on ``workers`` local processes uses one pool,
    started at once, instead of starting and ending one each: ``verify.rates`` runs a
    sweep and then its budget-doubling control, and each pool's start (spawned
    interpreters importing torch and the toolkit) and end cost ~3 s of the two workers'
    time.  ``warm``: a picklable function of no arguments submitted once per process, so
    that the processes start and import its module while the caller goes on (which
    process runs which copy is the pool's choice).  ``workers`` 0 or None: nothing
    shared.  A map that stops early (an interrupt, an error) ends the pool, and later
    maps start their own; the pool ends with the context."""
    if not workers or int(workers) in _SHARED:
        yield
        return
    workers = int(workers)
    ex = _new_pool(workers)
    _SHARED[workers] = ex
    try:
        with _signals_ignored():  # the processes start here (one per task up to workers)
            for _ in range(workers):
                ex.submit(warm or _noop)
        yield
    except BaseException:
        if _SHARED.get(workers) is ex:
            _end_now(ex)
        raise
    finally:
        if _SHARED.get(workers) is ex:
            del _SHARED[workers]
        ex.shutdown(wait=True)  # (after _end_now too, as a pool's with-block does)


def _on_pool(fn, items, workers: int):
    """:func:`map_unordered` on a pool of ``workers`` spawned processes (the open
    :func:`shared_pool`'s, if any).  A pool process that dies (killed: the out-of-memory
    killer) is :class:`WorkerDied`, the pool's other processes ended."""

    shared = _SHARED.get(workers)
    ex = shared or _new_pool(workers)
    try:
        try:
            with _signals_ignored():  # submit starts the processes (one per item up to workers)
                futures = [ex.submit(fn, it) for it in items]
            for fut in as_completed(futures):
                yield fut.result()
        except BaseException as exc:  # stopped early (or a pool broken before): drop what
            if shared is not None and _SHARED.get(workers) is shared:  # is queued, end what
                del _SHARED[workers]  # runs; later maps start their own
            broken = isinstance(exc, BrokenProcessPool) and not isinstance(exc, WorkerDied)
            codes = _exitcodes(ex) if broken else []  # how it ended: before the others' kill
            _end_now(ex)
            if broken:
                raise WorkerDied(f"a worker process died ({_how_it_ended(codes)})") from exc
            raise
    finally:
        if shared is None:
            ex.shutdown(wait=True)
