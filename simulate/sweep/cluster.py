"""The Dask side of :func:`simulate.sweep.parallel.map_unordered`: an existing cluster's
address, reached within a deadline, its workers set up like local pool processes, and its
results handed back as they arrive.

A scheduler address is checked before anything is made (:func:`check_scheduler`),
the connection and handshake share one deadline (``scheduler_timeout``, default
:data:`SCHEDULER_TIMEOUT_S`) enforced by a clock outside ``distributed`` as well as by its
own ``timeout`` (a port that accepts and never answers kept ``Client(timeout=30)``
waiting for more than 420 s), and a cluster without workers is said to be one, on
stderr, every :data:`WORKER_NOTE_S` seconds while it stays so.
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
import sys
import threading
import time

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


def local_setup_plugin():
    """A Dask worker plugin (``distributed.WorkerPlugin``) that sets every worker of a
    cluster up like a local pool process: one torch thread and the training allocator
    settings (:func:`simulate.sweep.parallel._worker_init`).  A worker started with several
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
                from simulate.sweep.parallel import _worker_init  # (imports this module)

                _worker_init()

    return LocalSetup()


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


def on_cluster(fn, items, scheduler: str, timeout: float):
    """:func:`simulate.sweep.parallel.map_unordered` on the Dask cluster at ``scheduler``;
    while nothing finishes and the cluster has no worker, one line on stderr at once and then every
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
