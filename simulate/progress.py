"""A dependency-free progress bar with an ETA, written to stderr at most twice a second."""

from __future__ import annotations

import sys
import time

# the stream of the bar whose last line is unfinished (no newline yet), if any
_open = None


def end_line() -> None:
    """End the line a bar left unfinished (a run stopped mid-way: Ctrl-C), so that what is
    printed next starts a line of its own (``theory.cli.interrupted``)."""
    global _open
    if _open is not None:
        try:
            _open.write("\n")
            _open.flush()
        except (OSError, ValueError):  # a closed stream: nothing to end
            pass
        _open = None


class Progress:
    """Callable ``progress(done, total)``; prints ``label [####   ] 45% 450/1000 ETA 12s``."""

    def __init__(self, label: str = "", stream=None, min_interval: float = 0.5, delay: float = 0):
        """``delay``: seconds before the first line (a run that ends sooner prints nothing)."""
        self.label, self.stream = label, stream or sys.stderr
        self.min_interval, self.delay = min_interval, delay
        self.t0 = time.monotonic()
        self.last = -1e9
        self.shown = False

    def __call__(self, done: int, total: int) -> None:
        global _open
        now = time.monotonic()
        if not self.shown and now - self.t0 < self.delay:
            return
        if done < total and now - self.last < self.min_interval:
            return
        self.shown = True
        self.last = now
        frac = done / total if total else 1.0
        elapsed = now - self.t0
        eta = elapsed / frac - elapsed if frac > 0 else float("nan")
        bar = "#" * int(30 * frac)
        self.stream.write(
            f"\r{self.label} [{bar:<30s}] {100 * frac:5.1f}% {done}/{total} "
            f"elapsed {elapsed:6.1f}s ETA {eta:6.1f}s"
        )
        _open = self.stream
        if done >= total:
            self.stream.write("\n")
            _open = None
        self.stream.flush()
