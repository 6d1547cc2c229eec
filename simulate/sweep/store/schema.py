"""The sweep record's schema and its reading: :data:`SCHEMA` (said in the leaf
``simulate.sweep.store.rules``, which the writers and checks import too), the check every record
must pass (:data:`record_problem`, ``simulate.sweep.store.validate``), all records of a file
(:func:`read_records`) and the records of one configuration (:func:`one_configuration`)."""

from __future__ import annotations

from simulate.sweep.store.records import fields_differing
from simulate.sweep.store.rules import SCHEMA
from simulate.sweep.store.validate import RECORD_CHECK
from theory.plumbing.jsonl import RecordsError, read_jsonl

__all__ = ["SCHEMA", "RECORD_KEYS", "read_records", "record_problem", "one_configuration"]

RECORD_KEYS = ("cell", "metrics", "selected_width", "truth", "failed", "config")

# every reader's check of a sweep record (``simulate.sweep.store.validate``): its types and
# ranges, itself, and -- as ``read_jsonl``'s check -- the records before it in the file;
# called on one record, what is wrong with it (its field named), or None
record_problem = RECORD_CHECK


def read_records(path) -> list[dict]:
    """All sweep records of a JSON-lines file (``theory.plumbing.jsonl.read_jsonl``),
    each checked as data (:data:`record_problem`: ``simulate.sweep.store.validate``); a cell
    recorded
    twice under one configuration (a hand-merged file: which one would count?) is a
    :class:`RecordsError` naming both records."""
    recs = read_jsonl(path, SCHEMA, (*RECORD_KEYS, "fingerprint"), record_problem)
    seen: dict = {}
    for i, r in enumerate(recs, 1):
        c = r["cell"]
        key = (r["fingerprint"], c["truth"], c["n"], c["replicate"])
        if key in seen:
            raise RecordsError(
                f"{path}: the cell {c['truth']}, n = {c['n']}, replicate {c['replicate']} is"
                f" recorded twice (records {seen[key]} and {i}); keep one"
            )
        seen[key] = i
    return recs


def one_configuration(
    records: list[dict],
    choose: str | None = None,
    source="records",
    hint: str = "choose one with --fingerprint",
):
    """The records of one fingerprint: all of them when the file holds one; else those
    whose fingerprint starts with ``choose``.  A file mixing fingerprints with no
    ``choose`` (or a ``choose`` matching none or several) is a :class:`RecordsError` that
    lists each fingerprint, its record count and how it differs from the first, then
    ``hint`` (what the caller's command line offers)."""
    fps: dict[str, list[dict]] = {}
    for r in records:
        fps.setdefault(r["fingerprint"], []).append(r)
    if choose is not None:
        hit = [fp for fp in fps if fp.startswith(choose)]
        if len(hit) != 1:
            raise RecordsError(
                f"{source}: fingerprint {choose!r} matches {len(hit)} of {sorted(fps)}"
            )
        return fps[hit[0]]
    if len(fps) <= 1:
        return records
    first = next(iter(fps.values()))[0]
    desc = "; ".join(
        f"{fp} ({len(rs)} records"
        + (
            ""
            if rs[0] is first
            else ", "
            + fields_differing(
                first.get("fingerprint_fields") or {}, rs[0].get("fingerprint_fields") or {}
            )
        )
        + ")"
        for fp, rs in fps.items()
    )
    raise RecordsError(f"{source} mixes {len(fps)} configurations: {desc}; {hint}")
