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
import hashlib
import json
import os
import platform
import sys

__all__ = [
    "RecordsError",
    "read_jsonl",
    "append_jsonl",
    "drop_incomplete_tail",
    "exclusive_writer",
    "RecordStore",
    "tier_store",
    "fingerprint",
    "fields_differing",
    "versions",
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


# --------------------------------------------------------------------------- configurations
def versions() -> dict:
    """The versions that can change a record's numbers (part of every fingerprint)."""
    from importlib.metadata import PackageNotFoundError, version

    import numpy as np
    import torch

    try:
        own = version("asvi-rates")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        own = "unknown"
    return {
        "asvi-rates": own,
        "torch": torch.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
    }


def fingerprint(fields: dict) -> str:
    """16 hex digits of the SHA-256 of the canonical JSON of a configuration's fields."""
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


def _flat(d: dict, prefix="") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def fields_differing(a: dict, b: dict) -> str:
    """``"lr 0.005 -> 0.01, seed 0 -> 7"``: the fields of two fingerprints that differ."""
    fa, fb = _flat(a), _flat(b)
    keys = sorted(set(fa) | set(fb))
    parts = [
        f"{k} {fa.get(k, '(absent)')} -> {fb.get(k, '(absent)')}"
        for k in keys
        if fa.get(k) != fb.get(k)
    ]
    return ", ".join(parts) or "no field (same fields, different hash)"


class RecordStore:
    """One records file of one configuration, written by one process at a time, resumed by
    record key: the store every driver uses (sweep, teacher / Table 1, UCI, MNIST-1D).

    ``key(record) -> tuple`` identifies a record (a cell, a replicate, a split);
    ``fields`` is the configuration (a JSON-able dict) every record of the file must share:
    :meth:`append` stamps ``fingerprint`` and ``fingerprint_fields`` on records that lack
    them, and :meth:`writing` refuses a file holding another fingerprint, naming the fields
    that differ (``hint`` says what to do instead).  Use::

        store = RecordStore(path, SCHEMA, key, required, fields, hint)
        with store.writing() as st:             # lock, read, check; raises RecordsError
            if ("a", 1) not in st.done:
                st.append(train(...))             # skips keys already present
        records = store.read()
    """

    def __init__(
        self, path, schema: str, key, required=(), fields: dict | None = None, hint: str = ""
    ):
        self.path, self.schema, self.key, self.hint = os.fspath(path), schema, key, hint
        self.fields = None if fields is None else json.loads(json.dumps(fields, sort_keys=True))
        self.fp = None if fields is None else fingerprint(self.fields)
        self.required = tuple(required) + (() if fields is None else ("fingerprint",))
        self.done: set = set()
        self.records: list[dict] = []
        self._writable = False
        self._tail_cut = False

    @property
    def writable(self) -> bool:
        """Inside :meth:`writing`: whether records can be appended."""
        return self._writable

    def read(self) -> list[dict]:
        return read_jsonl(self.path, self.schema, self.required)

    def foreign(self, records) -> dict | None:
        """The first record of another configuration, if any."""
        if self.fp is None:
            return None
        return next((r for r in records if r["fingerprint"] != self.fp), None)

    def mismatch(self, other: dict) -> RecordsError:
        hint = self.hint
        return RecordsError(
            f"{self.path} holds records of another configuration (fingerprint"
            f" {other['fingerprint']}, this one {self.fp};"
            f" {fields_differing(other.get('fingerprint_fields', {}), self.fields)})"
            + (f"; {hint}" if hint else "")
        )

    @contextlib.contextmanager
    def writing(self):
        with exclusive_writer(self.path) as writable:
            recs = self.read()
            other = self.foreign(recs)
            if other is not None:
                raise self.mismatch(other)
            self.records, self.done = recs, {self.key(r) for r in recs}
            self._writable, self._tail_cut = writable, False
            try:
                yield self
            finally:
                self._writable = False

    def append(self, records) -> list[dict]:
        """Append the records whose key is not yet in the file; returns them."""
        if not self._writable:
            raise RecordsError(f"{self.path}: cannot write there (read-only, or not open)")
        if not self._tail_cut:
            drop_incomplete_tail(self.path)
            self._tail_cut = True
        new = []
        for r in records:
            k = self.key(r)
            if k in self.done:
                continue
            if self.fp is not None and "fingerprint" not in r:
                r = {**r, "fingerprint": self.fp, "fingerprint_fields": self.fields}
            new.append(r)
            self.done.add(k)
        append_jsonl(self.path, new)
        self.records.extend(new)
        return new


RECOMPUTE_HINT = "run with --recompute to discard them, or keep the tier's settings"


def tier_store(
    out_dir, stem: str, tier: str, settings: dict, schema: str, key, required, recompute=False
) -> RecordStore:
    """An experiment tier's store, ``OUT_DIR/STEM-TIER.jsonl`` (the folder is created; with
    ``recompute`` the file is discarded first), whose configuration is the tier's
    ``settings`` with the schema and the versions."""
    os.makedirs(out_dir, exist_ok=True)
    fields = {"tier": tier, **settings, "schema": schema, "versions": versions()}
    path = os.path.join(out_dir, f"{stem}-{tier}.jsonl")
    if recompute and os.path.exists(path):
        os.remove(path)
    return RecordStore(path, schema, key, required, fields, RECOMPUTE_HINT)
