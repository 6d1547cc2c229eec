"""Every message one line, naming its file (issue 74, item 8): what a user typed is shown
escaped (``theory.plumbing.cli.one_line``: a newline in a path had split an ``error:`` line
in two), and a write that fails names the file it was writing
(``theory.plumbing.paths.atomic_path``: ``[Errno 27] File too large`` had named none)."""

from __future__ import annotations

import contextlib
import io
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.factories import run_main
from theory.plumbing.cli import Parser, one_line, print_error
from theory.plumbing.paths import atomic_path, check_distinct, read_text_bounded, write_atomic

ROOT = Path(__file__).resolve().parents[2]
RECORDS = ROOT / "figures" / "reference" / "records-quick.jsonl.gz"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("a\nb", r"a\nb"),
        ("a\r\nb\tc", r"a\r\nb\tc"),
        ("x\x1b[31mred\x00", r"x\x1b[31mred\x00"),
        ("\x7f\x85", r"\x7f\x85"),
        ("line\u2028sep", r"line\u2028sep"),
        ("undecodable\udcff", r"undecodable\udcff"),
    ],
)
def test_one_line_escapes_what_a_terminal_would_not_print(text, shown):
    assert one_line(text) == shown
    assert one_line(text).isprintable()


@pytest.mark.parametrize("text", ["plain", "données/été.json", r"C:\Users\x", "a b", ""])
def test_one_line_leaves_printable_text_as_it_is(text):
    assert one_line(text) == text


def test_print_error_is_one_line():
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        print_error(ValueError("no records file a\nb"))
    assert err.getvalue() == "error: no records file a\\nb\n"


def test_the_parsers_errors_quote_what_was_typed_on_one_line():
    """argparse joins unrecognised arguments as typed."""
    ap = Parser(prog="prog")
    ap.add_argument("--n", type=int)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exc:
        ap.parse_args(["--bogus", "x\ny"])
    assert exc.value.code == 2
    assert err.getvalue().splitlines() == [
        r"error: unrecognized arguments: --bogus x\ny (see prog --help)"
    ]


def test_a_path_read_names_itself_on_one_line(tmp_path):
    with pytest.raises(ValueError) as exc:
        read_text_bounded(tmp_path / "a\nb", "--config")
    assert "\n" not in str(exc.value) and str(exc.value).endswith("a\\nb: no such file")


def test_a_config_path_with_a_newline_is_one_line(tmp_path):
    """Through a command line whose message comes from ``theory.plumbing.paths``."""
    r = run_main("simulate.sweep", "--config", "a\nb", "--out", "x.jsonl", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.splitlines() == [r"error: --config a\nb: no such file"]


def test_an_output_naming_an_input_is_one_line(tmp_path):
    (tmp_path / "r\n.jsonl").write_text("")
    same = str(tmp_path / "r\n.jsonl")
    with pytest.raises(ValueError) as exc:
        check_distinct([("--json", same)], [("--records", same)])
    assert "\n" not in str(exc.value) and "r\\n.jsonl is the same file" in str(exc.value)


def test_records_with_a_newline_in_the_path_is_one_line(tmp_path):
    """The issue's reproducer: ``verify.rates --records $'a\\nb'`` printed its error over
    two lines."""
    r = run_main("verify.rates", "--records", "a\nb", cwd=tmp_path)
    lines = r.stderr.splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "a\\nb" in lines[0], r.stderr


def test_no_command_line_prints_an_error_without_print_error():
    """Every ``error: ...`` a command line prints goes through ``print_error`` (one line):
    a scan of the package code for an f-string starting ``error: `` printed directly."""
    root = Path(__file__).resolve().parents[2]
    direct = [
        f"{f.relative_to(root)}:{i}"
        for pkg in ("theory", "simulate", "verify", "figures")
        for f in sorted((root / pkg).rglob("*.py"))
        for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1)
        if 'print(f"error: ' in line and "one_line(" not in line
    ]
    assert not direct, direct


# ------------------------------------------------------------ a failed write names its file
def test_a_failed_write_names_the_file_and_keeps_the_old_one(tmp_path):
    path = tmp_path / "out" / "report.json"
    write_atomic(path, "old")
    given = os.fspath(path)
    with pytest.raises(OSError) as exc:
        with atomic_path(given) as tmp:
            Path(tmp).write_text("half")
            raise OSError(27, "File too large")  # what a descriptor's write raises: no file
    assert type(exc.value) is OSError and exc.value.errno == 27  # its class and errno kept
    assert str(exc.value) == f"[Errno 27] File too large: {given!r}"
    assert path.read_text() == "old" and os.listdir(path.parent) == ["report.json"]


def test_a_failed_write_without_an_errno_names_the_file_too(tmp_path):
    """An image writer's own ``OSError("encoder error -2")``: no errno, no file."""
    given = os.fspath(tmp_path / "fig.png")
    with pytest.raises(OSError) as exc:
        with atomic_path(given):
            raise OSError("encoder error -2")
    assert str(exc.value) == f"{given}: could not write (encoder error -2)"


def test_an_error_about_another_file_is_left_as_it_is(tmp_path):
    with pytest.raises(FileNotFoundError) as exc:
        with atomic_path(tmp_path / "out.json"):
            open(tmp_path / "missing-input")  # noqa: SIM115 (the body's own read)
    assert exc.value.filename == str(tmp_path / "missing-input")


def _file_size_limit(limit: int):
    def cap():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past it fail: EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return cap


@pytest.mark.skipif(not hasattr(signal, "SIGXFSZ"), reason="POSIX file-size limits")
def test_verify_rates_under_a_file_size_limit_names_the_file(tmp_path):
    """The issue's reproducer: ``verify.rates --records ... --json OUT.json --figures DIR``
    under ``ulimit -f`` printed ``error: [Errno 27] File too large``.  Its first write past
    4 KB is a figure; the one line now names it, and nothing cut is left."""
    r = subprocess.run(
        [sys.executable, "-m", "verify.rates", "--records", str(RECORDS), "--json", "OUT.json",
         "--figures", "DIR"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300, check=False,
        env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"},
        preexec_fn=_file_size_limit(4096),
    )  # fmt: skip
    lines = r.stderr.splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr[-3000:]
    assert lines[0].startswith("error: [Errno 27] File too large: 'DIR/"), lines[0]
    assert lines[0].endswith(".png'"), lines[0]
    assert os.listdir(tmp_path / "DIR") == [] and not (tmp_path / "OUT.json").exists()
