"""The sweeps' records' provenance: the versions and the digest of the code that computes a
record (the fingerprint's hash and what differs between two fingerprints,
:func:`fingerprint` and :func:`fields_differing`, are the leaf ``simulate.sweep.store.rules``',
re-exported here), and :class:`RecordStore`, a records file resumed only by the
configuration that began it.  The file format itself (strict JSON lines, whole appends,
one writer per file) is ``theory.plumbing.jsonl``'s."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import pathlib
import platform
from importlib.metadata import PackageNotFoundError, version

import numpy as np
import torch

from simulate.sweep.store.rules import fields_differing, fingerprint
from theory.plumbing.jsonl import (
    RecordsError,
    append_jsonl,
    drop_incomplete_tail,
    exclusive_writer,
    file_identity,
    read_jsonl,
)
from theory.plumbing.paths import protect_inputs

__all__ = [
    "RecordStore",
    "tier_store",
    "fingerprint",
    "fields_differing",
    "versions",
    "code_hashes",
    "code_digest",
]


# --------------------------------------------------------------------------- configurations
# the code a sweep record's numbers come from: every module of these packages but the
# drivers that compute no sweep record
CODE_PACKAGES = ("simulate", "theory")
_CODE_SKIP = ("simulate/bench/", "simulate/experiments/")


@functools.cache
def code_hashes() -> dict:
    """``{path: hash}`` of the source the records' computation runs: every ``.py`` and
    ``.c`` file (the fused network pass, ``simulate.core.native``) of
    :data:`CODE_PACKAGES` (less the benchmark and the experiments' drivers), its path
    relative to the repository root, the first 12 hex digits of its SHA-256.  Part of the
    sweep's fingerprint, so a records file is resumed only by the code that began it, and
    a refusal names the files that changed (``fields_differing``).  Read once per
    process."""

    here = pathlib.Path(__file__).resolve()
    base = here.parents[3]  # the folder holding the packages
    out = {}
    for pkg in CODE_PACKAGES:
        for f in sorted([*(base / pkg).rglob("*.py"), *(base / pkg).rglob("*.c")]):
            rel = f.relative_to(base).as_posix()
            if not rel.startswith(_CODE_SKIP):
                out[rel] = hashlib.sha256(f.read_bytes()).hexdigest()[:12]
    return out


def code_digest() -> str:
    """One hash of :func:`code_hashes` (16 hex digits): what a worker stamps on the records
    it computes, so the sweep can refuse records computed by other code than its own."""
    blob = json.dumps(code_hashes(), sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def versions() -> dict:
    """The versions that can change a record's numbers (part of every fingerprint)."""

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
        self, path, schema: str, key, required=(), fields: dict | None = None, hint: str = "",
        check=None, accept_code_change: bool = False,
    ):  # fmt: skip
        self.path, self.schema, self.key, self.hint = os.fspath(path), schema, key, hint
        self.check = check  # read_jsonl's per-record check
        # resume a file whose records differ from this configuration in "code" only
        self.accept_code_change = bool(accept_code_change)
        self.code_change: str | None = None  # the accepted change, stamped on new records
        self.fields = None if fields is None else json.loads(json.dumps(fields, sort_keys=True))
        self.fp = None if fields is None else fingerprint(self.fields)
        self.required = tuple(required) + (() if fields is None else ("fingerprint",))
        self.done: set = set()
        self.records: list[dict] = []
        self.discard = False  # cut the file's records once its lock is held (--recompute)
        self._writable = False
        self._tail_cut = False
        self._identity = None  # the file locked by writing(), checked before each append

    @property
    def writable(self) -> bool:
        """Inside :meth:`writing`: whether records can be appended."""
        return self._writable

    def read(self) -> list[dict]:
        return read_jsonl(self.path, self.schema, self.required, self.check)

    def foreign(self, records) -> dict | None:
        """The first record of another configuration, if any (with
        ``accept_code_change``, one that differs in more than the ``code`` field)."""
        if self.fp is None:
            return None
        return next(
            (r for r in records if r["fingerprint"] != self.fp and not self._code_only(r)), None
        )

    def _code_only(self, rec) -> bool:
        """Whether ``rec``'s configuration differs from this one in ``code`` alone, and
        such a change is accepted."""
        if not self.accept_code_change:
            return False
        theirs = {k: v for k, v in (rec.get("fingerprint_fields") or {}).items() if k != "code"}
        return theirs == {k: v for k, v in self.fields.items() if k != "code"}

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
        with exclusive_writer(self.path, discard=self.discard) as writable:
            recs = self.read()
            other = self.foreign(recs)
            if other is not None:
                raise self.mismatch(other)
            older = next(
                (r for r in recs if self.fp is not None and r["fingerprint"] != self.fp), None
            )
            if older is not None:  # a code change, accepted: resume under the file's fingerprint
                self.code_change = fields_differing(older["fingerprint_fields"], self.fields)
                self.fp, self.fields = older["fingerprint"], older["fingerprint_fields"]
            self.records, self.done = recs, {self.key(r) for r in recs}
            self._writable, self._tail_cut = writable, False
            self._identity = file_identity(self.path)
            protect_inputs(self.path)  # no report of this process may be written over it
            try:
                yield self
            finally:
                self._writable = False

    def append(self, records) -> list[dict]:
        """Append the records whose key is not yet in the file; returns them."""
        if not self._writable:
            raise RecordsError(f"{self.path}: cannot write there (read-only, or not open)")
        if file_identity(self.path) != self._identity:
            raise RecordsError(
                f"{self.path} was replaced or removed while this run wrote it (by another"
                " program); its records so far are in the file it replaced: run again to"
                " resume into the file now there"
            )
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
                if self.code_change is not None:  # recorded: which code wrote this record
                    r["code_change_accepted"] = self.code_change
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
    ``recompute`` its records are discarded when :meth:`RecordStore.writing` holds the
    file's lock, never before), whose configuration is the tier's ``settings`` with the
    schema and the versions."""
    os.makedirs(out_dir, exist_ok=True)
    fields = {"tier": tier, **settings, "schema": schema, "versions": versions()}
    path = os.path.join(out_dir, f"{stem}-{tier}.jsonl")
    store = RecordStore(path, schema, key, required, fields, RECOMPUTE_HINT)
    store.discard = bool(recompute)
    return store
