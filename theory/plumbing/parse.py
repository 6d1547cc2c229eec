"""Bounded parsing of one JSON line (``theory.plumbing.jsonl`` reads every records file
through :func:`parse_line`): a line nested deeper than :data:`DEPTH_LIMIT` levels, or
holding a number literal longer than :data:`NUMBER_LIMIT` characters, is refused before
Python's parser sees it, so that neither its recursion limit (``RecursionError``) nor its
4,300-digit limit on integers speaks, naming no file or line.  Both scans are C-speed on
every line (a byte count, a translate and a substring search); only a line that might break
a bound has its strings blanked and is measured exactly."""

from __future__ import annotations

import json
import re

__all__ = ["DEPTH_LIMIT", "NUMBER_LIMIT", "BoundsError", "parse_line"]


class BoundsError(ValueError):
    """A line past a bound (``theory.plumbing.jsonl`` names its file and line)."""


# the deepest nesting of arrays and objects read (a record nests at most 5 levels: a
# constructive-start arm's per-width column; Python's parser would raise RecursionError
# near 1,000) and the longest number literal (a seed has 19 digits, a float's repr at most
# 24 characters; Python refuses an integer past 4,300 digits, naming neither line nor file)
DEPTH_LIMIT = 64
NUMBER_LIMIT = 100

# a JSON string (its escapes included): what the bounds' scan of a line skips
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_LONG_NUMBER = re.compile(rb"[-+0-9.eE]{%d,}" % (NUMBER_LIMIT + 1))
_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")
# a number literal's characters, each made "0" (the rest kept): a run of "0"s as long as a
# literal may be is then a plain substring search
_AS_NUMBER = bytes.maketrans(b"0123456789-+.eE", b"0" * 15)


def _long_number(raw: bytes) -> int:
    """The length of a number literal of ``raw`` (outside its strings) longer than
    :data:`NUMBER_LIMIT` characters, or 0: a line without a run of more than that many of
    a number's characters is one (a single C-speed translate and search), and only one
    that has such a run has its strings blanked and its literals measured."""
    if b"0" * (NUMBER_LIMIT + 1) not in raw.translate(_AS_NUMBER):
        return 0
    long = _LONG_NUMBER.search(_STRING.sub(b'""', raw))
    return len(long.group()) if long else 0


def _too_deep(raw: bytes) -> bool:
    """Whether ``raw``'s arrays and objects nest deeper than :data:`DEPTH_LIMIT` levels
    (outside its strings): counted only for a line with more brackets opening than that
    (no other can), and only up to the first level past it."""
    if raw.count(b"[") + raw.count(b"{") <= DEPTH_LIMIT:
        return False
    depth = 0
    for c in _STRING.sub(b'""', raw).translate(None, _NOT_BRACKETS):
        depth += 1 if c in b"[{" else -1
        if depth > DEPTH_LIMIT:
            return True
    return False


def parse_line(raw: bytes):
    """One line's JSON value, parsed within bounds: a line nested deeper than
    :data:`DEPTH_LIMIT` levels, or holding a number literal longer than
    :data:`NUMBER_LIMIT` characters, is a :class:`BoundsError` before the parser sees it
    (so neither Python's recursion limit nor its 4,300-digit limit on integers speaks);
    text that is not JSON raises the parser's ``json.JSONDecodeError`` or
    ``UnicodeDecodeError``.  A number that overflows a float (``1e999``) is read as
    infinity, as JSON parsers do: the record's own check names the field it breaks."""
    long = _long_number(raw)
    if long:
        raise BoundsError(
            f"a number {long} characters long (at most {NUMBER_LIMIT}: a record's numbers"
            " are seeds and floats); the line is damaged -- restore the file or write a new one"
        )
    if _too_deep(raw):
        raise BoundsError(
            f"nested deeper than {DEPTH_LIMIT} levels (a record nests 5); the line is damaged"
            " -- restore the file or write a new one"
        )
    return json.loads(raw)
