"""A stop signal (SIGTERM, what Slurm, Kubernetes and ``timeout`` send first) that comes
while a file is written leaves it whole (issue 61, item 4, a case the issue did not list):
a record's line is finished before the signal takes effect
(``theory.plumbing.cli.signals_deferred`` in ``append_jsonl``), and a whole-or-absent
rewrite (RESULTS.md, every report: ``write_atomic``) leaves the old file and no temporary
one.  The signal is real (``os.kill`` to this process) and handled as ``run_main`` handles
it, so the test runs the path a scheduler's SIGTERM takes."""

from __future__ import annotations

import json
import os
import signal
import threading

import pytest

import theory.plumbing.cli as cli
from theory.plumbing import jsonl, paths

pytestmark = pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGTERM"),
    reason="signal handlers run in the main thread",
)


@pytest.fixture
def default_sigterm():
    """SIGTERM at its default for the test (whatever the runner set), as in a fresh
    ``python -m`` process, where ``run_main`` takes it; it and SIGINT put back after (the
    line's ``interrupted`` leaves both ending the process at once, as it is ending); SIGHUP,
    the other stop signal, put back too."""
    was = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, *cli.STOP_SIGNALS)}
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    for sig, handler in was.items():
        signal.signal(sig, handler)


def _term_midway(real_write, calls: list):
    """An ``os.write`` that writes half of what it is given, the first time, and then gets
    SIGTERM: the moment a signal cut a line before."""

    def write(fd, data):
        calls.append(len(data))
        if len(calls) == 1:
            done = real_write(fd, bytes(data[: len(data) // 2]))
            os.kill(os.getpid(), signal.SIGTERM)
            return done
        return real_write(fd, data)

    return write


def test_sigterm_while_a_record_is_written_leaves_its_line_whole(
    tmp_path, monkeypatch, capsys, default_sigterm
):
    """Before: the ``Stopped`` raised inside the write left half a JSON line at the end of
    the records file; now the line (and the next record of the same append) is written and
    synced first, then the run ends as for any SIGTERM: one line, exit 143."""
    path = tmp_path / "r.jsonl"
    jsonl.append_jsonl(path, [{"cell": 0}])
    calls: list = []
    monkeypatch.setattr(os, "write", _term_midway(os.write, calls))

    def main(_argv):
        jsonl.append_jsonl(path, [{"cell": 1, "pad": "x" * 1000}, {"cell": 2}])
        return 0

    status = cli.run_main(main, [], detail="the records are whole")
    monkeypatch.undo()
    assert status == 143 and len(calls) >= 2
    assert capsys.readouterr().err == "terminated (SIGTERM); the records are whole\n"
    text = path.read_text()
    assert text.endswith("\n")
    assert [json.loads(line)["cell"] for line in text.splitlines()] == [0, 1, 2]


def test_sigterm_while_a_file_is_rewritten_keeps_the_old_one(
    tmp_path, monkeypatch, capsys, default_sigterm
):
    """RESULTS.md's rewrite (``write_atomic``) cut by SIGTERM half-way: the old file is
    untouched, no temporary file is left, and the run ends in one line, exit 143."""
    path = tmp_path / "RESULTS.md"
    path.write_text("# old results\n")
    calls: list = []
    monkeypatch.setattr(os, "write", _term_midway(os.write, calls))

    def main(_argv):
        with paths.atomic_path(path) as tmp:
            fd = os.open(tmp, os.O_WRONLY | os.O_TRUNC)
            try:
                os.write(fd, b"# new results\n" * 1000)
            finally:
                os.close(fd)
        return 0

    status = cli.run_main(main, [])
    monkeypatch.undo()
    assert status == 143 and calls
    assert capsys.readouterr().err == "terminated (SIGTERM); nothing was written\n"
    assert path.read_text() == "# old results\n" and os.listdir(tmp_path) == ["RESULTS.md"]


def test_a_deferred_block_outside_run_main_changes_nothing(tmp_path):
    """With SIGTERM at its default (no handler of Python's to hold) ``signals_deferred``
    leaves it alone, and Ctrl-C's own handler is back after the block."""
    before = signal.getsignal(signal.SIGINT)
    with cli.signals_deferred():
        jsonl.append_jsonl(tmp_path / "r.jsonl", [{"a": 1}])
    assert signal.getsignal(signal.SIGINT) is before
    assert (tmp_path / "r.jsonl").read_text() == '{"a": 1}\n'
