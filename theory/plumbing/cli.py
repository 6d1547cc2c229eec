"""The command lines' shared parts: ``argparse`` with one-line errors, and every stop signal
as one line.

Every ``python -m ...`` entry point of the toolkit parses its flags with :class:`Parser`, so
a malformed flag (``--n 1e3`` for an integer) is one line on stderr and exit 2, like every
other bad input, instead of argparse's usage block followed by the error.

Every entry point runs its ``main`` through :func:`run_main`, so Ctrl-C is one line on
stderr (``interrupted; WHAT IS SAFE``) and exit 130 (128 + SIGINT, the shell's own code for
it) instead of a 23-49 line traceback that hid what the user needs to know: whether what
was written survives.  An entry point that writes records says how many, where
(:func:`interrupted` from its own ``except KeyboardInterrupt``).

The other stop signals are handled like Ctrl-C (:data:`STOP_SIGNALS`): SIGTERM, what a
scheduler (Slurm, Kubernetes, ``timeout``) sends before SIGKILL, and SIGHUP, a closed
terminal's.  Each raises :class:`Stopped`, a ``KeyboardInterrupt``, so every clean-up that
Ctrl-C runs (worker pools ended, a cluster's client closed, semaphores released) runs for it
too; the line is ``terminated (SIGTERM); WHAT IS SAFE`` (``hung up (SIGHUP); ...``) and the
exit status 128 + the signal's number (143, 129), the status a scheduler expects.  Before,
SIGTERM ended a sweep with exit 143, no word, and "5 leaked semaphore objects" from
multiprocessing's resource tracker.  A signal ignored when the process started (``nohup``
ignores SIGHUP) stays ignored.

Every message is one line (:func:`one_line`, :func:`print_error`): what a user typed -- a
path with a newline, a tab or an escape sequence -- is shown escaped (``a\\nb``), so an
``error: ...`` is one line whatever it quotes, as the command lines promise (exit 2, one
line)."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading

from theory.plumbing.installation import refuse_imported

__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_TERMINATED",
    "STOP_SIGNALS",
    "Parser",
    "Stopped",
    "interrupted",
    "one_line",
    "print_error",
    "quiet_start",
    "run_main",
    "signals_deferred",
]

EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_TERMINATED = 143  # 128 + SIGTERM

# the stop signals handled like Ctrl-C, by name -> what the line calls them (where the
# platform has them: Windows has no SIGHUP)
STOP_SIGNALS = {
    getattr(signal, name): words
    for name, words in (("SIGTERM", "terminated (SIGTERM)"), ("SIGHUP", "hung up (SIGHUP)"))
    if hasattr(signal, name)
}


class Stopped(KeyboardInterrupt):
    """A stop signal other than Ctrl-C (one of :data:`STOP_SIGNALS`, its number
    ``signum``), raised in the main thread as a ``KeyboardInterrupt`` so that every
    ``except KeyboardInterrupt`` and ``finally`` that Ctrl-C's clean-up runs through runs
    for it too; :func:`interrupted` tells them apart."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = int(signum)


# how one_line shows the control characters that have a short escape of their own
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def one_line(text) -> str:
    """``text`` (any value, through ``str``) as one line of a terminal: every character
    that is not printable (``str.isprintable``: control characters -- newline, carriage
    return, tab, escape, NUL --, the line and paragraph separators, a lone surrogate of an
    undecodable file name) shown escaped as Python writes it in a string literal (``\\n``,
    ``\\r``, ``\\t``, ``\\x1b``, ``\\u2028``, ``\\udcff``); printable text, non-ASCII
    letters included, unchanged.  Why: the messages quote what a user typed, and a path
    with a newline split ``error: no records file a`` from its ``b`` (a line of its own,
    which a script reading the first line never saw); an escape sequence in a name recoloured
    or cleared the terminal.  A backslash is not doubled (a Windows path stays readable), so
    a name holding a backslash and an ``n`` reads like one holding a newline: the message
    is for a person, who has the name."""
    s = str(text)
    if s.isprintable():
        return s
    return "".join(c if c.isprintable() else _ESCAPES.get(c) or _escaped(c) for c in s)


def _escaped(c: str) -> str:
    o = ord(c)
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}"


def print_error(message) -> None:
    """``error: MESSAGE`` on one line of stderr (:func:`one_line`): what every command
    line prints for a bad input before its exit status 2 (``print_error(exc)`` in its
    ``except ValueError as exc``)."""
    print(f"error: {one_line(message)}", file=sys.stderr)


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose errors are ``error: MESSAGE (see PROG --help)``
    on one line (:func:`one_line`: argparse quotes what was typed), exit status 2."""

    def error(self, message: str):
        self.exit(2, f"error: {one_line(message)} (see {self.prog} --help)\n")


def _say(line: str) -> None:
    """``line`` on stderr as one line (:func:`one_line`: a detail may name a path), if
    stderr can still take it (a closed terminal's cannot)."""
    try:
        print(one_line(line), file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def interrupted(detail: str | None = None) -> int:
    """Say ``interrupted[; DETAIL]`` on one line of stderr and return
    :data:`EXIT_INTERRUPTED` -- or, while a :class:`Stopped` is being handled (SIGTERM,
    SIGHUP), ``terminated (SIGTERM)[; DETAIL]`` and 128 + its number.  A progress bar left
    mid-line (``simulate.progress``, if loaded) is ended first, so the line starts a line of
    its own.  A second Ctrl-C or stop signal from here on ends the process at once, quietly
    (``os._exit``, 128 + its number), rather than as a traceback from whatever clean-up it
    lands in; what is written is written by single appends, so it is whole either way."""
    stop = sys.exc_info()[1]
    signum = stop.signum if isinstance(stop, Stopped) else signal.SIGINT
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _exit_at_once)
        for sig in STOP_SIGNALS:
            if signal.getsignal(sig) is _raise_stopped:
                signal.signal(sig, _exit_at_once)
    progress = sys.modules.get("simulate.progress")
    if progress is not None and hasattr(progress, "end_line"):
        try:
            progress.end_line()
        except (OSError, ValueError):
            pass
    words = STOP_SIGNALS.get(signum, "interrupted")
    _say(words + (f"; {detail}" if detail else ""))
    return 128 + int(signum)


def _exit_at_once(signum, frame) -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(128 + int(signum))


def _raise_stopped(signum, frame) -> None:
    raise Stopped(signum)


def quiet_start() -> None:
    """For a ``python -m`` start (the packages' ``__init__`` call it while the module is
    being located, ``sys.argv[0] == "-m"``): until :func:`run_main` runs, a Ctrl-C ends the
    process with one line and exit 130, a SIGTERM (SIGHUP) with one line and 143 (129) --
    the imports (torch, numpy, sympy) take seconds, and a Ctrl-C in them was a 57-line
    traceback, a SIGTERM no word at all.  Nothing has been done then, so the process ends
    at once (``os._exit``).  Only signals at their defaults are taken (an ignored one stays
    ignored)."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _stopped_while_starting)
    for sig in STOP_SIGNALS:
        if signal.getsignal(sig) is signal.SIG_DFL:
            signal.signal(sig, _stopped_while_starting)


def _stopped_while_starting(signum, frame) -> None:
    words = STOP_SIGNALS.get(signum, "interrupted")
    _say(f"{words} while starting; nothing was done")
    os._exit(128 + int(signum))


def run_main(main, argv=None, detail: str | None = "nothing was written") -> int:
    """``main(argv)``, with Ctrl-C or a stop signal (:data:`STOP_SIGNALS`) anywhere in it
    (parsing, imports it does, work) :func:`interrupted` with ``detail``, what is safe at
    any point of this entry point.  Python's own Ctrl-C handling is put back first where
    :func:`quiet_start` held it; each stop signal at its default (or held by
    :func:`quiet_start`) raises :class:`Stopped` while ``main`` runs, and its earlier
    handling is put back after.  First, the toolkit's packages this process imported must
    be this installation's (:func:`theory.plumbing.installation.refuse_imported`: else one
    line, exit 2)."""
    refuse_imported()
    if signal.getsignal(signal.SIGINT) is _stopped_while_starting:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    held = {}
    if threading.current_thread() is threading.main_thread():
        for sig in STOP_SIGNALS:
            was = signal.getsignal(sig)
            if was in (signal.SIG_DFL, _stopped_while_starting):
                held[sig] = signal.SIG_DFL if was is _stopped_while_starting else was
                signal.signal(sig, _raise_stopped)
    try:
        return main(argv)
    except KeyboardInterrupt:
        return interrupted(detail)
    finally:
        for sig, was in held.items():
            if signal.getsignal(sig) is _raise_stopped:
                signal.signal(sig, was)


@contextlib.contextmanager
def signals_deferred():
    """A block that Ctrl-C and the stop signals (:data:`STOP_SIGNALS`) do not cut: one that
    comes inside it is held, and its handler runs (``KeyboardInterrupt``, :class:`Stopped`)
    once the block ends, at most one a signal.  For the few instructions that must finish
    together (a record's line and its ``fsync``: ``theory.plumbing.jsonl.append_jsonl``),
    where the exception at any instruction that a handled signal means would leave half a
    line.  Only Python-level handlers are held, in the main thread (where they run); an
    ignored or default signal, or a block in another thread, is as without it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came: list[int] = []
    held = {}
    for sig in (signal.SIGINT, *STOP_SIGNALS):
        was = signal.getsignal(sig)
        if callable(was):
            held[sig] = was
            signal.signal(sig, lambda signum, frame: came.append(signum))
    try:
        yield
    finally:
        for sig, was in held.items():
            signal.signal(sig, was)
        for signum in dict.fromkeys(came):  # in the order they came, each once
            held[signum](signum, None)
