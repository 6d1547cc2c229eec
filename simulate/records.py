"""JSON-lines record files: atomic appends and strict reading (shared by every driver).

Each record is one line, appended with a single ``write`` on an ``O_APPEND`` descriptor and
flushed to disk.  Reading refuses anything that is not a JSON object of the expected
schema, naming the line; a last line without its newline (a crash inside a write) is
skipped with a warning and cut off before the next append.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import sys

from theory._paths import check_output_dir, check_output_file

__all__ = [
    "RecordsError",
    "read_jsonl",
    "append_jsonl",
    "drop_incomplete_tail",
    "exclusive_writer",
    "check_output_file",
    "check_output_dir",
]


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
            found = rec.get("schema") if isinstance(rec, dict) else None
            hint = (
                f" (it is {found!r}: written by another version; write a new file)"
                if isinstance(found, str) and found.startswith("asvi-rates/")
                else ""
            )
            raise RecordsError(
                f"{path}, line {i}: not an asvi-rates record of schema {schema!r}{hint}"
            )
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


@contextlib.contextmanager
def exclusive_writer(path):
    """Hold an exclusive lock (``fcntl.flock``) on the sidecar ``PATH.lock`` while the body
    runs: a second writer of the same records file fails at once with a
    :class:`RecordsError` naming it, instead of appending the same cells twice.  Yields
    whether ``path`` can be written: False when neither the file nor its folder is
    writable (then no lock is needed -- nobody can write -- and a caller with nothing to
    write may still read).  The lock file stays (empty): removing it would let a third
    writer lock a fresh file while the second still holds the old one."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise RecordsError(f"records file {path} is a directory")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise RecordsError(f"records file {path}: folder {parent} does not exist")
    writable = os.access(path, os.W_OK) if os.path.exists(path) else os.access(parent, os.W_OK)
    try:
        fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EROFS, errno.EPERM) and not writable:
            yield False
            return
        raise RecordsError(f"{path}: cannot create its lock file ({exc.strerror})") from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RecordsError(
                f"{path} is being written by another run (lock {path}.lock); wait for it or"
                " give another output file"
            ) from None
        try:
            yield writable
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
