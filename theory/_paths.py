"""Checks of output paths before any work, shared by every command line (theory's report
and, downstream, the simulate/verify/figures drivers): one clear ``ValueError`` each.
Nothing is left behind here (a probe file is created and removed at once); a caller
creates missing folders when it writes."""

from __future__ import annotations

import json
import os
import stat
import tempfile

__all__ = ["check_output_file", "check_output_dir", "write_json"]


def write_json(path, obj) -> None:
    """Write ``obj`` as indented JSON to ``path`` (checked before the work by
    :func:`check_output_file`), creating its folder: every command line's ``--json``."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as fh:
        json.dump(obj, fh, indent=2)


def check_output_file(path, what="output file") -> None:
    """Raise ``ValueError`` (one line) unless ``path`` can be a file we write: not a
    directory and not a device or a FIFO (``/dev/null``, ``/dev/full``), and its folder
    exists or can be created.  Where the file does not exist yet, creating one is tried
    (a hidden probe file, removed at once): ``os.access`` says yes to root everywhere,
    even in ``/proc``, where the write would fail only after the work.  Nothing is left
    behind."""
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
        if not os.access(path, os.W_OK):
            raise ValueError(f"{what} {path} is not writable")
        return
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ValueError(f"{what} {path}: cannot create files in {probe}")
    try:
        fd, tmp = tempfile.mkstemp(dir=probe, prefix=".asvi-probe-")
    except OSError as exc:
        raise ValueError(
            f"{what} {path}: cannot create files in {probe} ({exc.strerror})"
        ) from None
    os.close(fd)
    os.unlink(tmp)


def _check_name(path: str, what: str) -> None:
    """No control characters (a newline pasted into a name makes a file no one can type)."""
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        raise ValueError(f"{what} {path!r}: the name holds a control character (a newline?)")


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
