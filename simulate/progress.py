"""A dependency-free progress bar with an ETA, written to stderr at most twice a second."""

from __future__ import annotations

import sys
import time


class Progress:
    """Callable ``progress(done, total)``; prints ``label [####   ] 45% 450/1000 ETA 12s``."""

    def __init__(self, label: str = "", stream=None, min_interval: float = 0.5):
        self.label, self.stream = label, stream or sys.stderr
        self.min_interval = min_interval
        self.t0 = time.monotonic()
        self.last = -1e9

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - self.last < self.min_interval:
            return
        self.last = now
        frac = done / total if total else 1.0
        elapsed = now - self.t0
        eta = elapsed / frac - elapsed if frac > 0 else float("nan")
        bar = "#" * int(30 * frac)
        self.stream.write(
            f"\r{self.label} [{bar:<30s}] {100 * frac:5.1f}% {done}/{total} "
            f"elapsed {elapsed:6.1f}s ETA {eta:6.1f}s"
        )
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()
