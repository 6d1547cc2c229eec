"""One rule for paths: an empty or whitespace-only path is refused, one line, exit 2, by every
option and argument that takes a path, in every command (``theory.plumbing.paths.path_arg``).

The commands are found, not listed: every ``python -m`` module of the four packages (a
``__main__.py``, or a module with an ``if __name__ == "__main__"`` block) is run up to its
``parse_args`` and its parser taken there; an option whose name, metavar or help says it
takes a path must parse with :func:`path_arg` and refuse ``''`` and ``'  '`` -- so a new
path option that forgets the rule fails here."""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import runpy
import sys

import pytest

from tests.factories import run_main
from theory.plumbing.paths import path_arg

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("theory", "simulate", "verify", "figures")
REFERENCE = os.path.join(str(ROOT), "figures", "reference", "records-quick.jsonl.gz")

# what says an option takes a path: a word of its destination, its metavar, or its help
_DEST_WORDS = {"records", "json", "markdown", "md", "figures", "out", "dir", "config", "path",
               "file", "folder", "csv", "tex", "cache", "log"}  # fmt: skip
_METAVARS = {"PATH", "DIR", "FILE", "FOLDER", "RECORDS"}
_HELP = re.compile(r"\b(file|folder|directory|path)s?\b", re.IGNORECASE)
# options whose help speaks of files but that take no path (each said why)
_NOT_PATHS = {
    ("verify.rates", "--fingerprint"),  # a fingerprint's prefix, of the records' configuration
}


def _commands() -> list[str]:
    """Every ``python -m`` module of the packages."""
    out = []
    for pkg in PACKAGES:
        for f in sorted((ROOT / pkg).rglob("*.py")):
            rel = f.relative_to(ROOT).with_suffix("")
            if f.name == "__main__.py":
                out.append(".".join(rel.parts[:-1]))
            elif 'if __name__ == "__main__"' in f.read_text(encoding="utf-8"):
                out.append(".".join(rel.parts))
    return out


COMMANDS = _commands()


class _Parsed(BaseException):  # past every "except Exception" of a main
    def __init__(self, parser):
        self.parser = parser


def _parser_of(module: str, monkeypatch) -> argparse.ArgumentParser:
    """The parser ``python -m MODULE`` parses its flags with, taken as it starts parsing."""

    def capture(self, *_a, **_kw):
        raise _Parsed(self)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", capture)
    monkeypatch.setattr(sys, "argv", [module])
    with pytest.raises(_Parsed) as got:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    monkeypatch.undo()
    return got.value.parser


def _takes_path(module: str, action: argparse.Action) -> bool:
    if action.nargs == 0 or action.choices is not None or action.type in (int, float):
        return False
    name = action.option_strings[0] if action.option_strings else action.dest
    if (module, name) in _NOT_PATHS:
        return False
    words = set(action.dest.split("_"))
    return bool(
        words & _DEST_WORDS or action.metavar in _METAVARS or _HELP.search(action.help or "")
    )


def test_the_commands_are_found():
    """A negative control of the discovery: the commands every user knows are among them."""
    for m in ("theory", "simulate.sweep", "simulate.bench", "figures", "verify.rates",
              "verify.starts", "verify.optimiser", "verify.decided", "verify.sizing",
              "simulate.sweep.costs", "simulate.experiments.teacher"):  # fmt: skip
        assert m in COMMANDS


@pytest.mark.filterwarnings("ignore:.*found in sys.modules:RuntimeWarning")
@pytest.mark.parametrize("module", COMMANDS)
def test_every_path_option_refuses_an_empty_path(module, monkeypatch, capsys):
    parser = _parser_of(module, monkeypatch)
    positionals = [a for a in parser._actions if not a.option_strings]
    paths = [a for a in parser._actions if _takes_path(module, a)]
    for action in paths:
        name = action.option_strings[0] if action.option_strings else action.dest
        assert action.type is path_arg, f"python -m {module} {name}: not parsed by path_arg"
        for bad in ("", "  ", "\t\n"):
            if action.option_strings:  # the positionals given, then the option
                argv = ["x" for _ in positionals] + [name, bad]
            else:
                argv = [bad if a is action else "x" for a in positionals]
            with pytest.raises(SystemExit) as done:
                parser.parse_args(argv)
            err = capsys.readouterr().err
            assert done.value.code == 2, (module, name, bad)
            assert err.count("\n") == 1 and "empty path" in err and name in err, err


def test_a_path_option_is_found_by_its_name_metavar_or_help():
    """The detection itself: a path option added without the rule is caught (negative
    control), a number or a switch is not."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--report-json")
    ap.add_argument("--where", metavar="DIR")
    ap.add_argument("--target", help="the file to write")
    ap.add_argument("--count", type=int, help="files to write")
    ap.add_argument("--force", action="store_true", help="overwrite the file")
    found = [a.dest for a in ap._actions if _takes_path("x", a)]
    assert found == ["report_json", "where", "target"]


@pytest.mark.parametrize(
    ("module", "args"),
    [
        ("verify.rates", ["--records", "", "--dry-run"]),  # trained the whole tier
        ("verify.rates", ["--records", REFERENCE, "--json", ""]),
        ("verify.rates", ["--records", REFERENCE, "--markdown", ""]),
        ("verify.rates", ["--records", REFERENCE, "--figures", " "]),
        ("verify.rates", ["--records", REFERENCE, "--control-records", ""]),
        ("theory", ["--json", ""]),
        # variants: a folder option, a positional argument, a whitespace-only name
        ("verify.optimiser", ["--tabulate", "--out-dir", ""]),
        ("verify.starts", ["  "]),
        ("simulate.sweep", ["--config", "\t"]),
    ],
)
def test_the_reported_empty_paths_are_one_line_exit_2(module, args):
    done = run_main(module, *args)
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert done.stderr.count("\n") == 1 and "empty path" in done.stderr, done.stderr
    assert done.stdout == ""


def test_path_arg_keeps_a_name():
    assert path_arg(" a name.json") == " a name.json"
    with pytest.raises(argparse.ArgumentTypeError, match="empty path"):
        path_arg(" \n")
