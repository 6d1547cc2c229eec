"""JSON-lines record files: whole appends, strict reading, one writer per file (every layer's
records and reports: the sweeps, the experiments, the benchmark, verify and figures).

Each record is one line of strict JSON (non-finite numbers as null, listed under the
record's ``nonfinite`` key and restored on reading), appended on an ``O_APPEND``
descriptor -- short writes completed, a failed write cut back to the last whole record --
and flushed to disk.  Only regular files are read or written.  Reading refuses anything
that is not a JSON object of the expected schema, naming the line; a last line without its
newline (a crash inside a write) is skipped with a warning and cut off before the next
append.  Parsing is bounded before Python's own limits speak (``theory.plumbing.parse``): a line
nested deeper than :data:`DEPTH_LIMIT` levels or holding a number literal longer than
:data:`NUMBER_LIMIT` characters is refused naming its line.  One writer per file: a lock on
the file itself (every name of it meets it), which readers probe (:func:`being_written`)
so that a file still growing is not taken for a finished one.  A line is read only up to
:data:`LINE_LIMIT` bytes.

Why JSON lines and not SQLite (measured on the full tier's 80 records in 20 job appends
and the confirmatory Hoelder sweep's 160 in 4, five runs each, median; exploratory): the
write costs 15 and 24 ms as JSON lines, 11-19 and 13-15 ms as SQLite (WAL or rollback
journal, ``synchronous=FULL``), the read 4-8 ms either way, against a tier's minutes of
training; SQLite's file is 23% larger.  Cost decides nothing, so the format stays the one
every reader, the generated results and the shipped records already use (readable by eye,
appendable, diffable); what SQLite would have brought -- one writer per file whatever its
name, readers that never see a half-written state, whole-or-absent writes -- is here the
lock on the file, :func:`being_written`, and whole-line appends cut back on failure.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import json
import math
import os
import stat
import sys
import tempfile
import time
import zlib

from theory.plumbing.parse import DEPTH_LIMIT, NUMBER_LIMIT, BoundsError, parse_line

try:  # POSIX
    import fcntl
except ImportError:  # Windows: msvcrt's byte-range lock on the lock file's first byte
    fcntl = None
    import msvcrt

__all__ = [
    "RecordsError",
    "read_jsonl",
    "append_jsonl",
    "drop_incomplete_tail",
    "exclusive_writer",
    "being_written",
    "file_identity",
    "strict_json",
    "restore_nonfinite",
    "LINE_LIMIT",
    "DEPTH_LIMIT",
    "NUMBER_LIMIT",
    "NONFINITE_KEY",
    "FileCheck",
    "parse_line",
]


class RecordsError(ValueError):
    """A records file that is not (entirely) ours."""


# the longest records line read (a record is at most tens of KB; a line of gigabytes is
# refused before it is held in memory)
LINE_LIMIT = 64 * 2**20


class FileCheck:
    """A check of a file's records that compares each with the records before it (one
    truth's records agreeing on its parameters): :func:`read_jsonl` makes a fresh one per
    read (:meth:`fresh`) and calls it as ``check(record, line)`` in file order.  Called
    alone, ``check(record)``, it checks the record by itself."""

    def fresh(self) -> FileCheck:
        """A copy of this check with nothing seen yet."""
        return type(self)()

    def __call__(self, rec: dict, line: int | None = None) -> str | None:
        raise NotImplementedError


def read_jsonl(path, schema: str, required=(), check=None) -> list[dict]:
    """All records of ``path`` (none if it does not exist), each parsed within bounds
    (``theory.plumbing.parse``) and checked for ``schema``, the ``required`` keys and ``check``
    (a function of a record returning what is wrong with it, or None; a
    :class:`FileCheck`, fresh for this read, also sees the record's line and those before
    it); raises :class:`RecordsError` naming the offending line.  Only a
    regular file is read (a device or a FIFO is refused before any read: ``/dev/zero``
    would never end)."""
    if not os.path.exists(path):
        return []
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise RecordsError(f"{path}: not a regular file (records are read from files only)")
    lines = []
    try:
        with _open_records(path) as fh:
            while raw := fh.readline(LINE_LIMIT + 1):
                if len(raw) > LINE_LIMIT and not raw.endswith(b"\n"):
                    raise RecordsError(
                        f"{path}, line {len(lines) + 1}: longer than {LINE_LIMIT} bytes (a"
                        " record is tens of KB): not a records file of ours"
                    )
                lines.append(raw)
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:  # a .gz cut short or not gzip
        raise RecordsError(f"{path}: not a whole gzip file ({exc})") from None
    tail = lines.pop() if lines and not lines[-1].endswith(b"\n") else b""
    if tail:
        print(
            f"warning: {path}: ignoring an incomplete last line ({len(tail)} bytes)",
            file=sys.stderr,
        )
    with_line = isinstance(check, FileCheck)
    if with_line:
        check = check.fresh()  # nothing seen by an earlier read
    out = []
    for i, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            rec = restore_nonfinite(parse_line(raw))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise RecordsError(f"{path}, line {i}: not JSON ({exc})") from exc
        except (BoundsError, RecordsError) as exc:
            raise RecordsError(f"{path}, line {i}: {exc}") from None
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
        problem = None if check is None else check(rec, i) if with_line else check(rec)
        if problem:
            raise RecordsError(f"{path}, line {i}: {problem}")
        out.append(rec)
    return out


def _open_records(path):
    """``path`` opened for reading bytes; a ``.gz`` name through ``gzip`` (the shipped,
    compressed reference records: read-only)."""
    if os.fspath(path).endswith(".gz"):
        return gzip.open(path, "rb")
    return open(path, "rb")


def _refuse_compressed(path) -> None:
    if os.fspath(path).endswith(".gz"):
        raise RecordsError(
            f"{path}: compressed records are read-only (a shipped reference set); decompress"
            " it to a .jsonl file to resume or extend it"
        )


# where a record's non-finite numbers were, so that the file is strict JSON
NONFINITE_KEY = "nonfinite"
_NONFINITE_VALUES = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def strict_json(rec: dict) -> dict:
    """``rec`` with every non-finite float (NaN, +-inf: a failed candidate's metrics, an
    undefined change) replaced by null, and the key :data:`NONFINITE_KEY` listing each as
    ``[path, "NaN" | "Infinity" | "-Infinity"]`` (path: the keys and list indices down to
    it).  JSON has no NaN; a bare ``NaN`` token is refused by strict parsers.
    :func:`restore_nonfinite` undoes it.  Records without non-finite numbers are
    unchanged (no key added)."""
    found: list = []

    def walk(x, path):
        if isinstance(x, float) and not math.isfinite(x):  # numpy's floats too
            found.append([path, "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")])
            return None
        if isinstance(x, dict):
            return {k: walk(v, [*path, k]) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [walk(v, [*path, i]) for i, v in enumerate(x)]
        return x

    out = walk(rec, [])
    if found:
        if NONFINITE_KEY in rec:
            raise RecordsError(f"a record may not carry its own {NONFINITE_KEY!r} key")
        out[NONFINITE_KEY] = found
    return out


def restore_nonfinite(rec):
    """The record as it was before :func:`strict_json`: each listed null back to its
    non-finite float, the list removed (records written before it, with bare ``NaN``
    tokens, read as they are)."""
    if not isinstance(rec, dict) or NONFINITE_KEY not in rec:
        return rec
    marks = rec.pop(NONFINITE_KEY)
    try:
        for path, name in marks:
            node = rec
            for k in path[:-1]:
                node = node[k]
            node[path[-1]] = _NONFINITE_VALUES[name]
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise RecordsError(f"a record's {NONFINITE_KEY!r} list does not fit it ({exc})") from None
    return rec


def append_jsonl(path, records) -> None:
    """Append records, one line each on an O_APPEND descriptor, then fsync; every line is
    written whole or not at all.

    ``os.write`` may write fewer bytes than asked (the rest is written by further calls)
    or fail part-way (a full disk: ``ENOSPC``).  On a failure the file is cut back to its
    length before the failed line, so it holds complete records only and a later append
    (when space is back) starts on a fresh line; the error is re-raised as a
    :class:`RecordsError` naming the file (the records from the failed one on are not
    written: a resumed run trains those cells again)."""
    _refuse_compressed(path)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        for rec in records:
            data = (json.dumps(strict_json(rec), sort_keys=True, allow_nan=False) + "\n").encode()
            start = os.fstat(fd).st_size
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            except OSError as exc:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, start)
                raise RecordsError(
                    f"{path}: could not append a record ({exc.strerror or exc}); the file was"
                    " cut back to its last complete record -- free space or give another"
                    " file, then run again to resume"
                ) from exc
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
def exclusive_writer(path, discard: bool = False):
    """Hold an exclusive lock on the records file itself while the body runs (``flock`` on
    an open descriptor of it; on Windows ``msvcrt.locking`` on a byte far past its end):
    a second writer fails at once with a :class:`RecordsError` naming it, instead of
    appending the same cells twice.  Yields whether ``path`` can be written: False when it
    can only be read (a complete file in a read-only folder still serves its records) or
    does not exist and cannot be created.

    The lock lives on the file, not on a name: every name of it -- a relative path, a
    symbolic link, a hard link -- opens the same inode and meets the same lock, and no
    sidecar file is needed (so a read-only folder is no obstacle to reading).  After the
    lock is taken the path is checked to still name the locked file (a file removed or
    replaced meanwhile is opened again).  ``discard``: the file's records are cut (the
    file truncated to nothing) only once the lock is held, so a run that would discard a
    file another run is writing is refused before it touches anything.  A file this call
    created and left empty is removed again when the body ends."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise RecordsError(f"records file {path} is a directory")
    if os.path.exists(path) and not stat.S_ISREG(os.stat(path).st_mode):
        raise RecordsError(
            f"records file {path} is not a regular file (a device or a FIFO); give a file"
        )
    _refuse_compressed(path)
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise RecordsError(f"records file {path}: folder {parent} does not exist")
    for _ in range(8):  # the file may be replaced between the open and the lock: again
        fd, writable, created = _open_for_lock(path)
        if fd is None:  # nothing there and nothing can be made: nothing to read or lock
            if discard:
                raise RecordsError(f"{path}: cannot write there (read-only folder)")
            yield False
            return
        try:
            try:  # a reader's probe holds a shared lock for an instant: ride it out
                _lock_patiently(fd, shared=not writable)
            except BlockingIOError:
                raise RecordsError(
                    f"{path} is being written by another run; wait for it or give another"
                    " output file"
                ) from None
            if not _same_file(fd, path):
                continue
            if discard and os.fstat(fd).st_size:
                if not writable:
                    raise RecordsError(f"{path}: cannot discard its records (read-only)")
                fd, created = _fresh_under_lock(path, fd), True
            try:
                yield writable
            finally:
                if created and _same_file(fd, path) and os.fstat(fd).st_size == 0:
                    with contextlib.suppress(OSError):  # the file made here, not a link to it
                        os.unlink(os.path.realpath(path))
                _unlock(fd)
            return
        finally:
            os.close(fd)
    raise RecordsError(f"{path}: the file kept being replaced while it was being locked")


def _fresh_under_lock(path, old_fd) -> int:
    """Discard ``path``'s records by name, as removing it would: an empty file, made and
    locked beside it, is renamed over the name (atomically; the name is never free for
    another writer), and the old file's lock released -- other names of the old file (a
    hard link, a symbolic link's target) keep its records.  Returns the new descriptor."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".records-", suffix=".jsonl")
    try:
        os.chmod(tmp, 0o644)
        _lock(fd)
        os.replace(tmp, path)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _unlock(old_fd)
    os.close(old_fd)
    return fd


def _open_for_lock(path):
    """``(fd, writable, created)``: the records file opened for its lock (read-write, made
    if missing; read-only where it cannot be written), never blocking on a FIFO put in its
    place; ``(None, False, False)`` when it neither exists nor can be made."""
    nonblock = getattr(os, "O_NONBLOCK", 0)
    path = os.path.realpath(path)  # a link to a file not yet made: make the file
    created = False
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | nonblock, 0o644)
        created = True
    except FileExistsError:
        try:
            fd = os.open(path, os.O_RDWR | nonblock)
        except OSError as exc:
            if exc.errno not in (errno.EACCES, errno.EROFS, errno.EPERM):
                raise RecordsError(f"{path}: cannot open it ({exc.strerror})") from exc
            return os.open(path, os.O_RDONLY | nonblock), False, False
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EROFS, errno.EPERM):
            return None, False, False
        raise RecordsError(f"{path}: cannot create it ({exc.strerror})") from exc
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise RecordsError(f"records file {path} is not a regular file; give a file")
    return fd, True, created


def _same_file(fd, path) -> bool:
    """Whether ``path`` still names the file open on ``fd``."""
    st = os.fstat(fd)
    return file_identity(path) == (st.st_dev, st.st_ino)


def file_identity(path):
    """``(device, inode)`` of the file ``path`` names now (None when there is none)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def being_written(path) -> bool:
    """Whether another process holds ``path``'s writer lock (:func:`exclusive_writer`) now:
    its records are still growing.  False for a missing or unreadable file."""
    try:
        fd = os.open(os.fspath(path), os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        try:
            _lock(fd, shared=True)
        except BlockingIOError:
            return True
        _unlock(fd)
        return False
    finally:
        os.close(fd)


# Windows' byte-range locks are mandatory: the lock takes a byte no record reaches
_WIN_LOCK_OFFSET = 2**40


def _lock_patiently(fd, shared: bool = False, tries: int = 10, wait_s: float = 0.05) -> None:
    """:func:`_lock`, tried ``tries`` times ``wait_s`` apart: a :func:`being_written` probe
    holds its shared lock for an instant, and a writer starting then is not another
    writer.  A run that can only read takes a shared lock (readers coexist; network file
    systems refuse an exclusive lock on a file opened read-only)."""
    for i in range(tries):
        try:
            _lock(fd, shared)
            return
        except BlockingIOError:
            if i == tries - 1:
                raise
            time.sleep(wait_s)


def _lock(fd, shared: bool = False) -> None:
    """Take the lock on ``fd`` without waiting (``BlockingIOError`` when another open file
    holds it): exclusive for a writer, shared for :func:`being_written`'s probe."""
    if fcntl is not None:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        return
    os.lseek(fd, _WIN_LOCK_OFFSET, os.SEEK_SET)
    try:
        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
    except OSError as exc:  # EACCES / EDEADLK: held elsewhere
        raise BlockingIOError(exc.errno, exc.strerror) from exc


def _unlock(fd) -> None:
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_UN)
    else:
        os.lseek(fd, _WIN_LOCK_OFFSET, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
