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
compared with this process's package versions by the sweep (``simulate.sweep.runner``).
Pool processes exit when the process that started them dies (:func:`_exit_with_parent`).

Interrupts and unreachable clusters end in one line, not a traceback or a hang:

* **Ctrl-C**: the terminal sends SIGINT to the whole process group, pool processes
  included.  They ignore it (from their first instruction: the pool is started with SIGINT
  ignored, which a spawned interpreter keeps, and :func:`_worker_init` ignores it again), so
  only the calling process sees ``KeyboardInterrupt``; leaving :func:`map_unordered` early
  (an interrupt, an error, a consumer that stops) then ends the pool processes at once
  (SIGKILL) instead of waiting for the jobs they run, whose results nobody would read.
* **SIGTERM, SIGHUP** (:data:`theory.plumbing.cli.STOP_SIGNALS`: a scheduler's stop, to
  the whole group like Slurm's and ``timeout``'s or to the calling process alone like
  Kubernetes'; a closed terminal's): the pool processes ignore them as they do SIGINT, so a
  signal to the group does not kill them under the pool (a broken pool, its semaphores
  leaked) but reaches the calling process alone, which ends them as for Ctrl-C.
* **A scheduler address** is checked before anything is made (:func:`check_scheduler`),
  the connection and handshake share one deadline (``scheduler_timeout``, default
  :data:`SCHEDULER_TIMEOUT_S`) enforced by a clock outside ``distributed`` as well as by its
  own ``timeout`` (a port that accepts and never answers kept ``Client(timeout=30)``
  waiting for more than 420 s), and a cluster without workers is said to be one, on
  stderr, every :data:`WORKER_NOTE_S` seconds while it stays so.
"""

from __future__ import annotations

__all__ = [
    "map_unordered",
    "shared_pool",
    "SCHEDULER_TIMEOUT_S",
    "check_scheduler",
    "check_scheduler_timeout",
    "check_workers",
    "local_setup_plugin",
]

import contextlib
import importlib.util
import math
import multiprocessing as mp
import os
import re
import signal
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

import torch

from simulate import alloc
from simulate.alloc import tune_malloc
from theory.plumbing.cli import STOP_SIGNALS

# how long a client waits for an existing scheduler (connection and handshake together)
SCHEDULER_TIMEOUT_S = 30

# how often a sweep waiting on a cluster without workers says so
WORKER_NOTE_S = 30

# how often finished jobs of a cluster are looked for
POLL_S = 0.1

# the address schemes the sweep can reach a scheduler by: plain TCP.  ``inproc://`` cannot
# reach another process, and ``tls://`` / ``wss://`` need credentials (a ``Security``
# object) the command lines do not take -- given, they failed after the deadline with
# distributed's own traceback; ``ws://`` needs an optional dependency
SCHEDULER_SCHEMES = ("tcp",)

_HOST = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\]")


# how often a pool process checks that the process that started it is alive
PARENT_POLL_S = 0.5


# the signals a pool process leaves to the process that started it (Ctrl-C and the stop
# signals, which that process turns into one line: theory.plumbing.cli)
PARENT_SIGNALS = (signal.SIGINT, *STOP_SIGNALS)


def _worker_init(parent_pid: int | None = None) -> None:
    """Each pool process: SIGINT, SIGTERM and SIGHUP ignored (:data:`PARENT_SIGNALS`: the
    calling process's to handle; a pool process that took SIGINT would print its own
    traceback, one killed by SIGTERM broke the pool under the caller), one torch thread,
    the training allocator settings, and a watch on its parent (:func:`_exit_with_parent`,
    which ends it when the caller dies however it dies)."""

    for sig in PARENT_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):  # blocked while it was spawned (_signals_ignored)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, PARENT_SIGNALS)
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

    # deferred: dask.distributed is an optional dependency (the [dask] extra)
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

    return torch.get_num_threads(), alloc.tuned()


def check_workers(workers, scheduler=None) -> None:
    """Raise ``ValueError`` for a negative worker count or for both a scheduler and workers."""
    if scheduler and workers:
        raise ValueError("give either a scheduler address or a number of local workers")
    if workers is not None and int(workers) < 0:
        raise ValueError(f"workers must be >= 1 (or 0: in this process), got {workers}")


def add_scheduler_flags(ap) -> None:
    """``--scheduler`` and ``--scheduler-timeout`` on a command line that runs sweeps
    (``simulate.sweep``, ``verify.rates``), said once; checked by :func:`check_scheduler`
    and :func:`check_scheduler_timeout`."""
    ap.add_argument("--scheduler", help="address of an existing Dask scheduler ([tcp://]HOST:PORT)")
    ap.add_argument(
        "--scheduler-timeout",
        type=float,
        metavar="SECONDS",
        help="give up on the scheduler if it has not answered within SECONDS (default"
        f" {SCHEDULER_TIMEOUT_S})",
    )


def check_scheduler(address: str | None, flag: str = "--scheduler") -> None:
    """``ValueError`` (one line) unless ``address`` is None or a Dask scheduler address
    another process can reach: ``[SCHEME://]HOST:PORT``, SCHEME one of
    :data:`SCHEDULER_SCHEMES` (tcp when left out), HOST a name, an IPv4 address or a
    bracketed IPv6 one, PORT in 1..65535; and unless ``distributed`` can be imported.
    Checked while the flags are parsed: ``--scheduler foo`` used to pass them, lock the
    records file and end in distributed's 48-line traceback, and port 99999 in a 30 s wait
    for a connection that could not be made."""
    if address is None:
        return
    text = str(address)
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "tcp", text
    shape = "[tcp://]HOST:PORT, PORT in 1..65535"
    if scheme.lower() not in SCHEDULER_SCHEMES:
        raise ValueError(
            f"{flag} {text!r}: unknown scheme {scheme!r} (one of"
            f" {', '.join(SCHEDULER_SCHEMES)}; the address is {shape})"
        )
    host, colon, port = rest.rpartition(":")
    if not colon or not _HOST.fullmatch(host) or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"{flag} {text!r} is not a scheduler address ({shape})")

    if importlib.util.find_spec("distributed") is None:
        raise ValueError(
            f"{flag} needs dask.distributed, not installed here (pip install distributed)"
        )


# the longest deadline accepted: a day (a larger one overflows the clock's arithmetic --
# 1e300 s was an OverflowError traceback -- and waits on nothing a sweep needs)
SCHEDULER_TIMEOUT_MAX_S = 86400.0


def check_scheduler_timeout(seconds, flag: str = "--scheduler-timeout") -> None:
    """``ValueError`` (one line) unless ``seconds`` is None or a number in (0,
    :data:`SCHEDULER_TIMEOUT_MAX_S`]."""

    if seconds is not None and not (
        math.isfinite(seconds) and 0 < seconds <= SCHEDULER_TIMEOUT_MAX_S
    ):
        raise ValueError(
            f"{flag} must be a number of seconds in (0, {SCHEDULER_TIMEOUT_MAX_S:g}], got {seconds}"
        )


def map_unordered(
    fn,
    items,
    workers: int | None = None,
    scheduler: str | None = None,
    scheduler_timeout: float | None = None,
):
    """Yield ``fn(item)`` for every item, in the order they finish: in this process
    (``workers`` 0 or None and no ``scheduler``), on a pool of ``workers`` single-threaded
    processes, or on the Dask cluster at ``scheduler`` (reached within
    ``scheduler_timeout`` seconds, default :data:`SCHEDULER_TIMEOUT_S`, or ``OSError`` /
    ``TimeoutError`` in one line).  ``fn`` and the items must pickle (a module-level
    function) for the last two.  Items are submitted in order, so with ``workers`` processes
    the first ``workers`` items run first.  Leaving early (an error, an interrupt, a
    consumer that stops) drops what is queued and ends the pool processes."""
    check_workers(workers, scheduler)
    check_scheduler_timeout(scheduler_timeout, "scheduler_timeout")
    items = list(items)
    if workers:
        yield from _on_pool(fn, items, int(workers))
        return
    if scheduler:
        timeout = SCHEDULER_TIMEOUT_S if scheduler_timeout is None else float(scheduler_timeout)
        yield from _on_cluster(fn, items, scheduler, timeout)
        return
    for it in items:
        yield fn(it)


def _signals_ignored():
    """A context in which the processes spawned start with :data:`PARENT_SIGNALS` out of
    their reach until :func:`_worker_init` ignores them, so a pool process cannot take a
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
        workers, mp_context=ctx, initializer=_worker_init, initargs=(os.getpid(),)
    )


def _end_now(ex: ProcessPoolExecutor) -> None:
    """Drop what is queued on ``ex`` and end its processes at once."""
    procs = list((getattr(ex, "_processes", None) or {}).values())  # before shutdown
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
    :func:`shared_pool`'s, if any)."""

    shared = _SHARED.get(workers)
    ex = shared or _new_pool(workers)
    try:
        try:
            with _signals_ignored():  # submit starts the processes (one per item up to workers)
                futures = [ex.submit(fn, it) for it in items]
            for fut in as_completed(futures):
                yield fut.result()
        except BaseException:  # stopped early (or a pool broken before): drop what is
            if shared is not None and _SHARED.get(workers) is shared:  # queued, end what
                del _SHARED[workers]  # runs; later maps start their own
            _end_now(ex)
            raise
    finally:
        if shared is None:
            ex.shutdown(wait=True)


def _connect(scheduler: str, timeout: float):
    """A ``distributed.Client`` of ``scheduler`` with :func:`local_setup_plugin`
    registered, within ``timeout`` seconds all told.  The connection runs in a daemon
    thread and this one waits at most ``timeout`` for it: ``Client(timeout=...)`` alone
    bounds each step of its handshake but not the whole (a listener that accepts and never
    answers held it for more than 420 s); a connection abandoned so closes its client if it
    ever completes.  ``TimeoutError`` / ``OSError`` in one line otherwise."""

    try:  # deferred: dask.distributed is an optional dependency (the [dask] extra)
        from distributed import Client
    except ImportError:
        raise OSError("a scheduler needs dask.distributed, not installed here") from None
    done, lock, box = threading.Event(), threading.Lock(), {}

    def connect():
        try:
            client = Client(scheduler, timeout=timeout, set_as_default=False)
            client.register_plugin(local_setup_plugin())  # named by its ``name``
        except BaseException as exc:
            box["error"] = exc
        else:
            with lock:
                box["client"] = client
                late = box.get("late")
            if late:
                client.close()
        done.set()

    threading.Thread(target=connect, name="dask-connect", daemon=True).start()
    finished = False
    try:
        finished = done.wait(timeout)
    finally:
        if not finished:  # out of time or interrupted: a client made later closes itself
            with lock:
                box["late"] = True
                client = box.pop("client", None)
            if client is not None and sys.exc_info()[0] is not None:
                client.close()
    if "error" in box:
        exc = box["error"]
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise OSError(f"cannot use the scheduler at {scheduler}: {first}") from None
    if finished:
        client = box["client"]
    if client is None:
        raise TimeoutError(
            f"the scheduler at {scheduler} did not answer within {timeout:g} s"
            " (a Dask scheduler there? --scheduler-timeout SECONDS waits longer)"
        )
    return client


def _on_cluster(fn, items, scheduler: str, timeout: float):
    """:func:`map_unordered` on the Dask cluster at ``scheduler``; while nothing finishes
    and the cluster has no worker, one line on stderr at once and then every
    :data:`WORKER_NOTE_S` s, instead of a silent wait.  Finished futures are polled
    (every :data:`POLL_S` s) rather than waited on, so that the wait can speak; the client
    is this function's own (not the process's default), and ``as_completed`` is given its
    loop."""

    # deferred: dask.distributed is an optional dependency (the [dask] extra)
    from distributed import as_completed

    client = _connect(scheduler, timeout)
    futures: list = []
    try:
        futures = [client.submit(fn, it, pure=False) for it in items]
        ready = as_completed(futures, loop=client.loop)
        quiet_since = time.monotonic()
        if futures and not client.nthreads():
            _note_no_workers(scheduler)
        while not ready.is_empty():
            batch = ready.next_batch(block=False)
            for fut in batch:
                yield fut.result()
            now = time.monotonic()
            if batch:
                quiet_since = now
                continue
            if now - quiet_since >= WORKER_NOTE_S:
                quiet_since = now
                if not client.nthreads():
                    _note_no_workers(scheduler)
            time.sleep(POLL_S)
    finally:
        if futures:
            client.cancel(futures)
        client.close()


def _note_no_workers(scheduler: str) -> None:
    print(
        f"waiting for workers on {scheduler} (the cluster has none; start some with"
        f" dask worker {scheduler})",
        file=sys.stderr,
        flush=True,
    )
