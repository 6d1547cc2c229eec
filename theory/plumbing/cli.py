"""The command lines' shared parts: ``argparse`` with one-line errors, and Ctrl-C as one line.

Every ``python -m ...`` entry point of the toolkit parses its flags with :class:`Parser`, so
a malformed flag (``--n 1e3`` for an integer) is one line on stderr and exit 2, like every
other bad input, instead of argparse's usage block followed by the error.

Every entry point runs its ``main`` through :func:`run_main`, so Ctrl-C is one line on
stderr (``interrupted; WHAT IS SAFE``) and exit 130 (128 + SIGINT, the shell's own code for
it) instead of a 23-49 line traceback that hid what the user needs to know: whether what
was written survives.  An entry point that writes records says how many, where
(:func:`interrupted` from its own ``except KeyboardInterrupt``)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading

from theory.plumbing.installation import refuse_imported

__all__ = ["EXIT_INTERRUPTED", "Parser", "interrupted", "quiet_start", "run_main"]

EXIT_INTERRUPTED = 130


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose errors are ``error: MESSAGE (see PROG --help)``
    on one line, exit status 2."""

    def error(self, message: str):
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def interrupted(detail: str | None = None) -> int:
    """Say ``interrupted[; DETAIL]`` on one line of stderr and return
    :data:`EXIT_INTERRUPTED`.  A progress bar left mid-line (``simulate.progress``, if
    loaded) is ended first, so the line starts a line of its own.  A second Ctrl-C from
    here on ends the process at once, quietly (``os._exit``), rather than as a traceback
    from whatever clean-up it lands in; what is written is written by single appends, so
    it is whole either way."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _exit_at_once)
    progress = sys.modules.get("simulate.progress")
    if progress is not None and hasattr(progress, "end_line"):
        progress.end_line()
    print("interrupted" + (f"; {detail}" if detail else ""), file=sys.stderr, flush=True)
    return EXIT_INTERRUPTED


def _exit_at_once(signum, frame) -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(EXIT_INTERRUPTED)


def quiet_start() -> None:
    """For a ``python -m`` start (the packages' ``__init__`` call it while the module is
    being located, ``sys.argv[0] == "-m"``): until :func:`run_main` runs, a Ctrl-C ends the
    process with one line and exit 130 -- the imports (torch, numpy, sympy) take seconds,
    and a Ctrl-C in them was a 57-line traceback.  Nothing has been done then, so the
    process ends at once (``os._exit``)."""
    if (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    ):
        signal.signal(signal.SIGINT, _interrupted_while_starting)


def _interrupted_while_starting(signum, frame) -> None:
    print("interrupted while starting; nothing was done", file=sys.stderr, flush=True)
    os._exit(EXIT_INTERRUPTED)


def run_main(main, argv=None, detail: str | None = "nothing was written") -> int:
    """``main(argv)``, with Ctrl-C anywhere in it (parsing, imports it does, work)
    :func:`interrupted` with ``detail``, what is safe at any point of this entry point.
    Python's own Ctrl-C handling is put back first where :func:`quiet_start` held it.
    First, the toolkit's packages this process imported must be this installation's
    (:func:`theory.plumbing.installation.refuse_imported`: else one line, exit 2)."""
    refuse_imported()
    if signal.getsignal(signal.SIGINT) is _interrupted_while_starting:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return main(argv)
    except KeyboardInterrupt:
        return interrupted(detail)
