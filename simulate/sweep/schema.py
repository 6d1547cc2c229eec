"""The sweep record's schema and its reading: :data:`SCHEMA`, the shape every record
must have (:func:`record_problem`), all records of a file (:func:`read_records`) and the
records of one configuration (:func:`one_configuration`)."""

from __future__ import annotations

from numbers import Integral

from simulate.core.constraints import INT_POSITIVE, Interval
from simulate.sweep.records import fields_differing
from theory.plumbing.jsonl import RecordsError, read_jsonl

__all__ = ["SCHEMA", "RECORD_KEYS", "read_records", "record_problem", "one_configuration"]

SCHEMA = "asvi-rates/sweep-record/4"


RECORD_KEYS = ("cell", "metrics", "selected_width", "truth", "failed", "config")


def read_records(path) -> list[dict]:
    """All sweep records of a JSON-lines file (``theory.plumbing.jsonl.read_jsonl``),
    each checked for the shape the analysis reads (:func:`record_problem`); a cell recorded
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


def record_problem(rec: dict) -> str | None:
    """What is wrong with a sweep record's shape (types of the fields the analysis reads),
    or None: a hand-edited or foreign record is refused at reading, naming its line,
    instead of failing deep inside the analysis."""
    if not isinstance(rec["fingerprint"], str):
        return f"'fingerprint' must be a string, got {rec['fingerprint']!r}"
    if not isinstance(rec.get("fingerprint_fields", {}), dict):
        return f"'fingerprint_fields' must be an object, got {rec['fingerprint_fields']!r}"
    cell = rec["cell"]
    if not isinstance(cell, dict):
        return f"'cell' must be an object, got {cell!r}"
    if not isinstance(cell.get("truth"), str):
        return f"'cell.truth' must be a string, got {cell.get('truth')!r}"
    for key, low in (("n", 1), ("replicate", 0)):
        if not Interval(Integral, low, None, "left").accepts(cell.get(key)):
            return f"'cell.{key}' must be an integer >= {low}, got {cell.get(key)!r}"
    for key in ("metrics", "truth", "config"):
        if not isinstance(rec.get(key), dict):
            return f"{key!r} must be an object, got {rec.get(key)!r}"
    if not isinstance(rec["failed"], bool):
        return f"'failed' must be true or false, got {rec['failed']!r}"
    # the GP control and a named regressor have no candidate widths
    if rec["config"].get("estimator") not in ("gp", "regressor") and not isinstance(
        rec.get("per_width"), dict
    ):
        return f"'per_width' must be an object, got {rec.get('per_width')!r}"
    sw = rec["selected_width"]
    if sw is not None and not INT_POSITIVE.accepts(sw):
        return f"'selected_width' must be an integer >= 1 or null, got {sw!r}"
    return None


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
