"""Progress bars: ``tqdm`` (``tqdm.auto``: a widget in a notebook, text on a terminal)
behind the ``progress(done, total)`` callable the trainer and the drivers call, so that
``simulate.core`` itself never imports a display library."""

from __future__ import annotations

import sys
import time
import weakref

from tqdm.auto import tqdm

# the bars drawn and not yet closed (weak: a bar dropped by its run closes itself)
_open: weakref.WeakSet = weakref.WeakSet()


def end_line() -> None:
    """Close every bar still open (a run stopped mid-way: Ctrl-C), so that what is printed
    next starts a line of its own (``theory.plumbing.cli.interrupted``); a bar still inside its
    ``delay`` was never drawn and prints nothing."""
    for bar in list(_open):
        try:
            bar.close()
        except (OSError, ValueError):  # a closed stream: nothing to end
            pass
    _open.clear()


class Progress:
    """Callable ``progress(done, total)``: a ``tqdm`` bar on ``stream`` (default stderr),
    redrawn at most every ``min_interval`` seconds and closed (its line ended) when
    ``done`` reaches ``total``; a count that starts again (a second run given the same
    callable) closes the bar and opens a new one."""

    def __init__(self, label: str = "", stream=None, min_interval: float = 0.5, delay: float = 0):
        """``delay``: seconds from here before the first line (a run that ends sooner
        prints nothing)."""
        self.label, self.stream = label, stream or sys.stderr
        self.min_interval, self.delay = min_interval, delay
        self.t0 = time.monotonic()
        self.bar: tqdm | None = None

    def __call__(self, done: int, total: int) -> None:
        bar = self.bar
        if bar is not None and (done <= bar.n or total != bar.total):
            self.close()  # another run: its own bar
            bar = None
        if bar is None:
            waited = time.monotonic() - self.t0
            bar = self.bar = tqdm(
                total=total, desc=self.label, file=self.stream,
                mininterval=self.min_interval, delay=max(0.0, self.delay - waited),
            )  # fmt: skip
            _open.add(bar)
        bar.update(done - bar.n)
        if done >= total:
            self.close()

    def close(self) -> None:
        """End the bar's line now (a run that stopped before its total)."""
        if self.bar is not None:
            self.bar.close()
            _open.discard(self.bar)
            self.bar = None
