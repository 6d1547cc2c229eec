"""The progress bar (``simulate.progress``, over ``tqdm.auto``): silent within its delay,
a finished bar ends its line, and ``end_line`` closes the bars a Ctrl-C left open."""

from __future__ import annotations

import io

from simulate.progress import Progress, end_line


def test_a_bar_is_silent_within_its_delay_and_ends_its_line_when_done():
    out = io.StringIO()
    bar = Progress("fit", stream=out, delay=60.0)
    bar(1, 10), bar(10, 10)
    assert out.getvalue() == ""  # ended before its delay: silent
    bar = Progress("fit", stream=out, delay=0.0)
    bar(10, 10)
    assert "100%" in out.getvalue() and "10/10" in out.getvalue()
    assert out.getvalue().endswith("\n")  # a finished bar ends its line


def test_an_interrupted_bar_is_closed_by_end_line():
    """``theory.plumbing.cli.interrupted`` calls ``end_line`` after Ctrl-C: a bar left mid-way ends
    its line (the interrupt message starts one of its own); one still inside its delay was
    never drawn and stays silent; a second run on the same callable opens a new bar."""
    drawn, waiting = io.StringIO(), io.StringIO()
    bar = Progress("sweep", stream=drawn)
    bar(3, 8)
    Progress("fit", stream=waiting, delay=60.0)(1, 10)
    assert not drawn.getvalue().endswith("\n")
    end_line()
    assert drawn.getvalue().endswith("\n") and "3/8" in drawn.getvalue()
    assert waiting.getvalue() == ""
    again = io.StringIO()
    bar = Progress("fit", stream=again, min_interval=0.0)
    bar(2, 4)  # a run that stopped early (fit_until) ...
    bar(1, 3)  # ... then the next one
    bar(3, 3)
    text = again.getvalue()
    assert "2/4" in text and "3/3" in text.rsplit("\n", 2)[1]  # the second line: its own
    assert text.count("\n") == 2  # each run's bar ends its own line
