"""Paths every command line reads and writes, shared by every entry point (theory's report
and, downstream, the simulate/verify/figures drivers): one clear ``ValueError`` each.

The rules, each one function:

* **a path is a name** (:func:`path_arg`, the ``type=`` of every command-line option and
  argument that takes a path): an empty or whitespace-only path is refused while the flags
  are parsed, one line, exit 2 -- ``--records ''`` had been read as no records (and trained
  the tier), ``--json ''`` as no report (and written nothing, exit 0);
* **checked before any work** (:func:`check_output_file`, :func:`check_output_dir`):
  nothing is left behind here (a probe file is created and removed at once); a caller
  creates missing folders when it writes;
* **no output names an input** (:func:`check_distinct`): compared by file identity
  (device and inode, links followed), so a hard link, a symbolic link or a relative name
  of a records file cannot be given as the report that would overwrite it;
* **whole or absent** (:func:`write_atomic`, :func:`atomic_path`, :func:`write_json`):
  every file the toolkit rewrites is written to a temporary file in the same folder,
  flushed to disk and renamed over the old one, so a full disk, a file-size limit or a
  kill leaves the old file or the new one, never a cut one; a write that fails names its
  file (``[Errno 27] File too large: 'PATH'``, where the system's message named none);
* **bounded reads** (:func:`read_text_bounded`): a configuration or a Markdown target is
  read only from a regular file and only up to a size bound (a FIFO would hang, a device
  would never end).

Every message names its paths on one line (``theory.plumbing.cli.one_line``: a newline or
an escape sequence in a name is shown escaped).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import stat
import tempfile

from theory.plumbing.cli import one_line

__all__ = [
    "path_arg",
    "check_output_file",
    "check_output_dir",
    "check_distinct",
    "write_json",
    "write_atomic",
    "atomic_path",
    "read_text_bounded",
    "protect_inputs",
    "TEXT_LIMIT",
]

# the identities of the files this process reads (protect_inputs): no atomic write replaces one
_PROTECTED: dict = {}

# the largest configuration or Markdown file read (the largest results page is ~60 KB)
TEXT_LIMIT = 16 * 2**20


def path_arg(text: str) -> str:
    """``text`` unchanged, for argparse's ``type=`` of every option (and positional
    argument) that takes a path, in every command; ``argparse.ArgumentTypeError`` -- one
    line, exit 2, under :class:`theory.plumbing.cli.Parser` -- when it is empty or only
    whitespace (spaces, tabs, newlines): such a path names no file a user meant, and the
    commands had read ``''`` as the option left out.  A name that merely starts or ends
    with a space is a name, and kept."""
    if not text.strip():
        raise argparse.ArgumentTypeError(
            f"empty path {text!r}; give a file or folder name, or leave the option out"
        )
    return text


def _name_the_file(exc: OSError, given: str, ours) -> None:
    """Make ``exc``, an ``OSError`` of a write to ``given``, name ``given`` where it names
    none of the user's: no file (a descriptor's write: ``[Errno 27] File too large``, the
    message a file-size limit or a full disk gave with no file, leaving the user to guess
    which of a report, its JSON and a folder of figures it was) or one of ``ours`` (the
    temporary file, removed by then; the resolved target).  Its class, errno and strerror
    are kept (a caller's ``except`` and errno tests see what they saw), its message becomes
    ``[Errno 27] File too large: 'PATH'`` (a repr: one line); one without an errno reads
    ``PATH: could not write (MESSAGE)``.  An ``OSError`` naming a file of the body's own,
    or a folder, is left as it is, and so is a failed rename's (it names the target
    already)."""
    if exc.filename2 is not None or not (exc.filename is None or exc.filename in ours):
        return  # a rename's names its target; another file is the body's own
    if exc.errno is not None:
        exc.filename = given
    elif len(exc.args) == 1:  # str() shows a filename only beside an errno
        exc.args = (f"{one_line(given)}: could not write ({one_line(exc.args[0])})",)


@contextlib.contextmanager
def atomic_path(path):
    """Yield a temporary path in ``path``'s folder (created if missing) for the body to
    write; on success it is flushed to disk and renamed over ``path`` (``os.replace``:
    atomic on POSIX and Windows), keeping an existing file's permission bits, else the
    umask's; on any error the temporary file is removed and ``path`` is untouched, and an
    ``OSError`` of the write itself (the folder, the temporary file, the body's writes,
    the flush, the rename) is raised naming ``path`` as given (:func:`_name_the_file`).
    For writers that take a path (``savefig``).  A symbolic link is written through (its
    target replaced, the link kept), as an in-place write would."""
    given = os.fspath(path)
    path = os.path.realpath(given)
    ident = _identity(path)
    if ident in _PROTECTED and _identity(_PROTECTED[ident]) != ident:
        # the input is gone and its inode reused by another file: no longer an input
        del _PROTECTED[ident]
    if ident in _PROTECTED:
        raise ValueError(
            f"{one_line(path)} is the same file as the input {one_line(_PROTECTED[ident])}:"
            " an output may not replace an input; give another output path"
        )
    folder = os.path.dirname(os.path.abspath(path))
    base = os.path.basename(path)
    try:
        os.makedirs(folder, exist_ok=True)
        # the temporary name keeps the extension: writers that infer a format from it
        # (savefig)
        fd, tmp = tempfile.mkstemp(
            dir=folder, prefix=f".{base[:40]}.", suffix=os.path.splitext(base)[1]
        )
    except OSError as exc:  # mkstemp's names its temporary file; makedirs' its folder, kept
        made = exc.filename if os.path.dirname(str(exc.filename)) == folder else path
        _name_the_file(exc, given, (path, made))
        raise
    os.close(fd)
    try:
        yield tmp
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode)
        except FileNotFoundError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            _name_the_file(exc, given, (tmp, path))
        raise


def write_atomic(path, data) -> None:
    """Write ``data`` (``str``, as UTF-8, or ``bytes``) to ``path`` whole or not at all
    (:func:`atomic_path`)."""
    raw = data.encode() if isinstance(data, str) else bytes(data)
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(raw)


def write_json(path, obj) -> None:
    """Write ``obj`` as indented JSON to ``path`` (checked before the work by
    :func:`check_output_file`), creating its folder, whole or not at all: every command
    line's ``--json``."""
    write_atomic(path, json.dumps(obj, indent=2))


def _identity(path):
    """What names one file: ``(device, inode)`` of an existing file (links followed), else
    the resolved path the file would be created at."""
    try:
        st = os.stat(path)
    except OSError:
        return ("new", os.path.realpath(path))
    return ("file", st.st_dev, st.st_ino)


def protect_inputs(*paths) -> None:
    """Record the files this process reads (existing ones; None skipped): from then on
    :func:`atomic_path` refuses to replace any of them, by whatever name an output is
    given -- the guard behind outputs whose names are derived (a figure per truth) rather
    than given, where :func:`check_distinct` cannot see them before the work."""
    for p in paths:
        if p and os.path.exists(p):
            _PROTECTED[_identity(p)] = os.fspath(p)


def check_distinct(outputs, inputs=()) -> None:
    """Raise ``ValueError`` (one line) when an output names an input, or two outputs name
    one file, by any name: ``outputs`` and ``inputs`` are ``(what, path)`` pairs (a path
    of None is skipped), compared by :func:`_identity` -- device and inode for existing
    files, so hard links, symbolic links and relative names of one file all meet."""
    outs = [(w, p, _identity(p)) for w, p in outputs if p]
    ins = [(w, p, _identity(p)) for w, p in inputs if p]
    for i, (w, p, ident) in enumerate(outs):
        for w2, p2, ident2 in ins:
            if ident == ident2:
                raise ValueError(
                    f"{w} {one_line(p)} is the same file as {w2} {one_line(p2)}: an output"
                    f" may not name an input (it would be overwritten); give {w} another path"
                )
        for w2, p2, ident2 in outs[i + 1 :]:
            if ident == ident2:
                raise ValueError(
                    f"{w} {one_line(p)} and {w2} {one_line(p2)} are one file; give each its"
                    " own path"
                )


def read_text_bounded(path, what="file", limit: int = TEXT_LIMIT) -> str:
    """The UTF-8 text of ``path``, read only from a regular file (opened without blocking,
    so a FIFO is refused instead of waited on) and only up to ``limit`` bytes; else a
    one-line ``ValueError`` naming ``what`` and the path (``one_line``)."""
    path = os.fspath(path)
    shown = one_line(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise ValueError(f"{what} {shown}: no such file") from None
    except IsADirectoryError:
        raise ValueError(f"{what} {shown} is a directory, not a file") from None
    except OSError as exc:
        raise ValueError(f"{what} {shown}: cannot read it ({exc.strerror})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise ValueError(f"{what} {shown} is a directory, not a file")
        raise ValueError(f"{what} {shown} is not a regular file (a device or a FIFO)")
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{what} {shown} is larger than {limit} bytes; is it the right file?")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{what} {shown} is not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from None


def check_output_file(path, what="output file", read_only_ok: bool = False) -> None:
    """Raise ``ValueError`` (one line) unless ``path`` can be a file we write: not a
    directory and not a device or a FIFO (``/dev/null``, ``/dev/full``), and its folder
    exists or can be created.  Where the file does not exist yet, creating one is tried
    (a hidden probe file, removed at once): ``os.access`` says yes to root everywhere,
    even in ``/proc``, where the write would fail only after the work.  Nothing is left
    behind.  ``read_only_ok``: an existing file that cannot be written is accepted (a
    records file that may hold everything already: the store says whether anything is
    left to write)."""
    path = os.fspath(path)
    if not path:
        raise ValueError(f"{what}: empty path")
    _check_name(path, what)
    if os.path.isdir(path):
        raise ValueError(f"{what} {path} is a directory")
    parent = os.path.dirname(os.path.abspath(path))
    probe = parent
    while not os.path.exists(probe):  # the nearest existing ancestor must be a folder
        probe = os.path.dirname(probe)
    _check_length(path, probe, what)
    if not os.path.isdir(probe):
        raise ValueError(f"{what} {path}: {probe} is not a directory")
    if os.path.exists(path):
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise ValueError(f"{what} {path} is not a regular file (a device or a FIFO)")
        if read_only_ok:
            return
        if not os.access(path, os.W_OK):
            raise ValueError(f"{what} {path} is not writable")
        # rewritten whole (write_atomic): a temporary file is made beside its target
        probe = os.path.dirname(os.path.realpath(path))
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ValueError(f"{what} {path}: cannot create files in {probe} (a file is written"
                         " beside its target and renamed over it)")  # fmt: skip
    try:
        fd, tmp = tempfile.mkstemp(dir=probe, prefix=".asvi-probe-")
    except OSError as exc:
        raise ValueError(
            f"{what} {path}: cannot create files in {probe} ({exc.strerror})"
        ) from None
    os.close(fd)
    os.unlink(tmp)


def _check_name(path: str, what: str) -> None:
    """No control characters (a newline pasted into a name makes a file no one can type),
    and valid UTF-8 (a name of other bytes cannot be printed under a strict output
    encoding: the run would stop after its lock was made)."""
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        raise ValueError(f"{what} {path!r}: the name holds a control character (a newline?)")
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(
            f"{what} {path.encode('utf-8', 'surrogateescape')!r}: the name is not valid UTF-8;"
            " give a UTF-8 name"
        ) from None


def _check_length(path: str, probe: str, what: str) -> None:
    """Within the file system's limits on a path and on each name in it (``PATH_MAX``,
    ``NAME_MAX`` of the nearest existing folder ``probe``), checked before any folder is
    made."""
    full = os.fsencode(os.path.abspath(path))
    try:
        path_max = os.pathconf(probe, "PC_PATH_MAX")
        name_max = os.pathconf(probe, "PC_NAME_MAX")
    except (AttributeError, ValueError, OSError):  # not POSIX: let the write say it
        return
    if len(full) >= path_max:
        raise ValueError(f"{what}: the path is {len(full)} bytes long; the limit is {path_max}")
    longest = max(full.split(b"/"), key=len)
    if len(longest) > name_max:
        raise ValueError(
            f"{what}: a name in the path is {len(longest)} bytes long; the limit is {name_max}"
        )


def check_output_dir(path, what="output folder") -> None:
    """Raise ``ValueError`` (one line) unless ``path`` is a folder or can be created as one
    (not an existing file; its nearest existing ancestor a writable folder)."""
    path = os.fspath(path)
    if not path:
        raise ValueError(f"{what}: empty path")
    _check_name(path, what)
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"{what} {path} is an existing file, not a folder")
    probe = os.path.abspath(path)
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    _check_length(path, probe, what)
    if not os.path.isdir(probe):
        raise ValueError(f"{what} {path}: {probe} is not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ValueError(f"{what} {path}: cannot write in {probe}")
