"""JSON-lines record files: atomic appends and strict reading (shared by every driver).

Each record is one line, appended with a single ``write`` on an ``O_APPEND`` descriptor and
flushed to disk.  Reading refuses anything that is not a JSON object of the expected
schema, naming the line; a last line without its newline (a crash inside a write) is
skipped with a warning and cut off before the next append.
"""

from __future__ import annotations

import json
import os
import sys

__all__ = ["RecordsError", "read_jsonl", "append_jsonl", "drop_incomplete_tail"]


class RecordsError(ValueError):
    """A records file that is not (entirely) ours."""


def read_jsonl(path, schema: str, required=()) -> list[dict]:
    """All records of ``path`` (none if it does not exist), each checked for ``schema`` and
    the ``required`` keys; raises :class:`RecordsError` naming the offending line."""
    if not os.path.exists(path):
        return []
    with open(path, "rb") as fh:
        data = fh.read()
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline
    if tail:
        print(
            f"warning: {path}: ignoring an incomplete last line ({len(tail)} bytes)",
            file=sys.stderr,
        )
    out = []
    for i, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise RecordsError(f"{path}, line {i}: not JSON ({exc})") from exc
        if not isinstance(rec, dict) or rec.get("schema") != schema:
            raise RecordsError(f"{path}, line {i}: not an asvi-rates record of schema {schema!r}")
        for key in required:
            if key not in rec:
                raise RecordsError(f"{path}, line {i}: record lacks {key!r}")
        out.append(rec)
    return out


def append_jsonl(path, records) -> None:
    """Append records, one ``write`` per line on an O_APPEND descriptor, then fsync."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        for rec in records:
            os.write(fd, (json.dumps(rec, sort_keys=True) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def drop_incomplete_tail(path) -> None:
    """Cut a final line that lacks its newline (an interrupted append)."""
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return
    with open(path, "rb+") as fh:
        data = fh.read()
        if not data.endswith(b"\n"):
            fh.truncate(data.rfind(b"\n") + 1)
