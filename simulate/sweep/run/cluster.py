"""The Dask side of :func:`simulate.sweep.run.parallel.map_unordered`: an existing cluster's
address, reached within a deadline, its workers set up like local pool processes, and its
results handed back as they arrive.

A scheduler address is checked before anything is made (:func:`check_scheduler`),
the connection and handshake share one deadline (``scheduler_timeout``, default
:data:`SCHEDULER_TIMEOUT_S`) enforced by a clock outside ``distributed`` as well as by its
own ``timeout`` (a port that accepts and never answers kept ``Client(timeout=30)``
waiting for more than 420 s), and a cluster without workers is said to be one, on
stderr, every :data:`WORKER_NOTE_S` seconds while it stays so -- for at most
``worker_timeout`` seconds (``--worker-timeout``, default :data:`WORKER_TIMEOUT_S`) in a
row, then :class:`NoWorkersError` (one line; the records written so far resume).  Before,
a cluster whose every worker had died was waited on forever, a line every 30 s.
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
import sys
import threading
import time

from simulate.sweep.run.worker_setup import worker_init

# how long a client waits for an existing scheduler (connection and handshake together)
SCHEDULER_TIMEOUT_S = 30

# how often a sweep waiting on a cluster without workers says so
WORKER_NOTE_S = 30

# how often finished jobs of a cluster are looked for
POLL_S = 0.1

# how long a sweep waits on a cluster that has no worker (none since it connected, or
# every one gone) before it gives up: long enough for a batch system to start workers
# queued with the sweep, short enough that a dead cluster does not hold a job for good
WORKER_TIMEOUT_S = 600

# how often, at most, the scheduler is asked whether it has workers while nothing finishes
WORKER_CHECK_S = 1.0


class NoWorkersError(TimeoutError):
    """The cluster had no worker for ``worker_timeout`` seconds in a row while jobs
    waited (:func:`on_cluster`): one line, which the entry points complete with what
    was recorded and how to resume."""


# the address schemes the sweep can reach a scheduler by: plain TCP.  ``inproc://`` cannot
# reach another process, and ``tls://`` / ``wss://`` need credentials (a ``Security``
# object) the command lines do not take -- given, they failed after the deadline with
# distributed's own traceback; ``ws://`` needs an optional dependency
SCHEDULER_SCHEMES = ("tcp",)

_HOST = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\]")


def local_setup_plugin():
    """A Dask worker plugin (``distributed.WorkerPlugin``) that sets every worker of a
    cluster up like a local pool process: one torch thread and the training allocator
    settings (:func:`simulate.sweep.run.worker_setup.worker_init`).  A worker started with several
    threads would otherwise run torch's default intra-op threads (a Dask worker was
    measured 3.5x slower per job than a pool process; BENCHMARKS.md).  Registered by
    :func:`on_cluster` on the cluster it is given (workers that join later get it too).
    Built on call, so that importing this module does not import ``distributed``."""

    # deferred: dask.distributed is an optional dependency (the [dask] extra)
    from distributed.diagnostics.plugin import WorkerPlugin

    class LocalSetup(WorkerPlugin):
        name = "asvi-rates-local-setup"

        def __init__(self):
            self.client_pid = os.getpid()

        def setup(self, worker=None) -> None:
            if os.getpid() != self.client_pid:  # a worker inside the caller is the caller
                worker_init()

    return LocalSetup()


def add_scheduler_flags(ap) -> None:
    """``--scheduler``, ``--scheduler-timeout`` and ``--worker-timeout`` on a command line
    that runs sweeps (``simulate.sweep``, ``verify.rates``), said once; checked by
    :func:`check_cluster_flags` (both deadlines in (0, :data:`SCHEDULER_TIMEOUT_MAX_S`]
    seconds)."""
    ap.add_argument("--scheduler", help="address of an existing Dask scheduler ([tcp://]HOST:PORT)")
    ap.add_argument(
        "--scheduler-timeout",
        type=float,
        metavar="SECONDS",
        help="give up on the scheduler if it has not answered within SECONDS (default"
        f" {SCHEDULER_TIMEOUT_S})",
    )
    ap.add_argument(
        "--worker-timeout",
        type=float,
        metavar="SECONDS",
        help="give up (exit 2, the records so far resumable) when the scheduler has had no"
        f" worker for SECONDS in a row while jobs wait (default {WORKER_TIMEOUT_S})",
    )


def check_cluster_flags(args) -> None:
    """The checks of :func:`add_scheduler_flags`' flags and ``--workers`` that every command
    line running sweeps makes (``ValueError``, one line): a worker count >= 0 (0: in this
    process), not both ``--scheduler`` and ``--workers``, a reachable-looking scheduler
    address (:func:`check_scheduler`) and both deadlines in range
    (:func:`check_scheduler_timeout`)."""
    if args.workers is not None and args.workers < 0:
        raise ValueError(f"--workers must be >= 0 (0: in this process), got {args.workers}")
    if args.scheduler is not None and args.workers:
        raise ValueError("give either --scheduler or --workers, not both")
    check_scheduler(args.scheduler)
    check_scheduler_timeout(args.scheduler_timeout)
    check_scheduler_timeout(args.worker_timeout, "--worker-timeout")


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


def on_cluster(fn, items, scheduler: str, timeout: float, worker_timeout: float | None = None):
    """:func:`simulate.sweep.run.parallel.map_unordered` on the Dask cluster at ``scheduler``
    (reached within ``timeout`` s).  While nothing finishes and the cluster has no worker,
    one line on stderr at once and then every :data:`WORKER_NOTE_S` s, instead of a silent
    wait; after ``worker_timeout`` s in a row without a worker (default
    :data:`WORKER_TIMEOUT_S`; the scheduler asked at most every :data:`WORKER_CHECK_S` s)
    :class:`NoWorkersError`, the jobs left cancelled.  Finished futures are polled (every
    :data:`POLL_S` s) rather than waited on, so that the wait can speak; the client is this
    function's own (not the process's default), and ``as_completed`` is given its loop."""

    # deferred: dask.distributed is an optional dependency (the [dask] extra)
    from distributed import as_completed

    wait_s = WORKER_TIMEOUT_S if worker_timeout is None else float(worker_timeout)
    client = _connect(scheduler, timeout)
    futures: list = []
    try:
        futures = [client.submit(fn, it, pure=False) for it in items]
        ready = as_completed(futures, loop=client.loop)
        watch = _WorkerWatch(client, scheduler, wait_s)
        while not ready.is_empty():
            batch = ready.next_batch(block=False)
            for fut in batch:
                yield fut.result()
            if batch:
                watch.finished()
                continue
            watch.check()
            time.sleep(POLL_S)
    finally:
        if futures:
            client.cancel(futures)
        client.close()


class _WorkerWatch:
    """The wait on a cluster's workers while nothing finishes: says so while it has none
    (:func:`_note_no_workers`, at once and every :data:`WORKER_NOTE_S` s) and raises
    :class:`NoWorkersError` once it has had none for ``wait_s`` s in a row."""

    def __init__(self, client, scheduler: str, wait_s: float):
        self.client, self.scheduler, self.wait_s = client, scheduler, wait_s
        self.asked = self.quiet_since = time.monotonic()
        self.none_since = None if client.nthreads() else self.asked
        if self.none_since is not None:
            _note_no_workers(scheduler, wait_s)

    def finished(self) -> None:  # a job finished: a worker is there
        self.quiet_since, self.none_since = time.monotonic(), None

    def check(self) -> None:
        now = time.monotonic()
        if now - self.asked >= min(WORKER_CHECK_S, self.wait_s / 4):
            self.asked = now
            if self.client.nthreads():
                self.none_since = None
            elif self.none_since is None:
                self.none_since = now
        if self.none_since is not None and now - self.none_since >= self.wait_s:
            raise NoWorkersError(
                f"the cluster at {self.scheduler} has had no worker for {self.wait_s:g} s"
                f" (start some with dask worker {self.scheduler}, or --worker-timeout"
                " SECONDS waits longer)"
            )
        if now - self.quiet_since >= WORKER_NOTE_S:
            self.quiet_since = now
            if self.none_since is not None:
                _note_no_workers(self.scheduler, self.wait_s)


def _note_no_workers(scheduler: str, wait_s: float) -> None:
    print(
        f"waiting for workers on {scheduler} (the cluster has none; start some with"
        f" dask worker {scheduler}; giving up after {wait_s:g} s without one)",
        file=sys.stderr,
        flush=True,
    )
