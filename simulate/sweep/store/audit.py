"""The opt-in audit of a sweep record (``python -m simulate.sweep.audit``): what only
re-deriving the configuration that wrote it can check, beyond the reader's checks as data
(``simulate.sweep.store.validate``, ``simulate.sweep.store.provenance``).  Its
``fingerprint_fields`` are the ones the fingerprint's rule gives the configuration they
describe (``simulate.sweep.store.fingerprint.configuration_of``: the configuration is made,
and its checks run), and its ``config`` is that configuration's cell config at the record's n
(the candidate widths, batch, stopping rule and lambda_s the cell derives).  A record equal
(``==``) to one that passed, of the same fingerprint, truth and n, passes without
recomputing (a file holds tens of records per configuration and cell size); numerically
equal values of another JSON type (1 for 1.0) are then taken as the same.  It imports the
configuration machinery (and, through it, the kinds' checks; never a named regressor's
class), which no reader does."""

from __future__ import annotations

import copy
import functools
import json

from simulate.sweep.setup.truth_spec import TruthSpec
from simulate.sweep.store.fingerprint import (
    PROVENANCE_FIELDS,
    configuration_fields,
    configuration_of,
)
from simulate.sweep.store.records import fields_differing
from simulate.sweep.store.rules import BadRecord, fail, need_dict

__all__ = ["audit_record", "audit_records", "record_truth"]


# the provenance this process has recomputed: (fingerprint, truth, n) -> the fingerprint
# fields and config of a record that passed; a later record equal to both (``==``) passes
# without recomputing (a file holds tens of records per configuration and cell size)
_PASSED: dict = {}
_PASSED_LIMIT = 1024


def record_truth(rec: dict) -> TruthSpec:
    """The truth a record (its checks as data passed) was drawn from."""
    t = rec["truth"]
    return TruthSpec(kind=t["kind"], p=t["p"], alpha=t.get("alpha"), seed=t["seed"])


def audit_records(records) -> list[tuple[int, str]]:
    """``(k, problem)`` for each of ``records`` (read, so checked as data) that
    :func:`audit_record` refuses, ``k`` its 1-based position; empty when all pass."""
    out = []
    for k, rec in enumerate(records, 1):
        try:
            audit_record(rec)
        except BadRecord as exc:
            out.append((k, str(exc)))
    return out


def audit_record(rec: dict, spec: TruthSpec | None = None) -> None:
    """``rec``'s fingerprint fields and config re-derived from the configuration they
    describe (``spec`` its truth, by default the record's own); :class:`~simulate.sweep.
    store.rules.BadRecord` naming the first field that differs.  The reader's checks
    (``validate.check_record``) are assumed passed."""
    spec = record_truth(rec) if spec is None else spec
    ff = need_dict("fingerprint_fields", rec["fingerprint_fields"])
    key = (rec["fingerprint"], spec, rec["cell"]["n"])
    seen = _PASSED.get(key)
    if seen is not None and seen[0] == ff and seen[1] == rec["config"]:
        return
    _recompute_provenance(rec, spec, ff)
    if len(_PASSED) >= _PASSED_LIMIT:
        _PASSED.clear()
    _PASSED[key] = copy.deepcopy((ff, rec["config"]))


def _recompute_provenance(rec: dict, spec: TruthSpec, ff: dict) -> None:
    blob = json.dumps(ff, sort_keys=True)
    cfg, again, stored = _configuration(blob, spec)
    if again != stored:
        fail(
            "fingerprint_fields",
            "{...}",
            "not the fields of the configuration they describe"
            f" ({fields_differing(stored, again)})",
        )
    n = rec["cell"]["n"]
    want = _cell_config(blob, spec, n)
    cap = _configuration(blob, spec)[0].width_edge_max
    if cap is not None:  # the ladder grown at its edge (simulate.sweep.train.edge)
        want = {**want, "widths": _grown(rec["config"].get("widths"), want["widths"], cap)}
    _same_config("config", rec["config"], want)


def _grown(got, ladder: list, cap: int) -> list:
    """A grown ladder's widths: the configuration's ladder, then each next power of two
    (doubling its widest), none past ``cap``; else the ladder (the record then fails the
    comparison, naming its widths)."""
    if not isinstance(got, list) or got[: len(ladder)] != ladder:
        return ladder
    w, out = ladder[-1], list(ladder)
    for x in got[len(ladder) :]:
        w *= 2
        if x != w or w > cap:
            return ladder
        out.append(w)
    return out


@functools.lru_cache(maxsize=64)
def _configuration(blob: str, spec: TruthSpec):
    """The configuration of a fingerprint's fields (canonical JSON ``blob``) and its
    settings as the fingerprint's rule gives them and as stored."""
    ff = json.loads(blob)
    try:
        cfg = configuration_of(ff, spec)
    except (ValueError, TypeError, KeyError) as exc:
        raise BadRecord(
            f"'fingerprint_fields' describe no sweep configuration ({str(exc)[:200]})"
        ) from None
    stored = {k: v for k, v in ff.items() if k not in PROVENANCE_FIELDS}
    return cfg, json.loads(json.dumps(configuration_fields(cfg), sort_keys=True)), stored


@functools.lru_cache(maxsize=256)
def _cell_config(blob: str, spec: TruthSpec, n: int) -> dict:
    cfg = _configuration(blob, spec)[0]
    widths = cfg.widths_at(n) if cfg.kind.trains_network else None
    return json.loads(json.dumps(cfg.cell_config(n, widths)))


def _same_config(at: str, got, want) -> None:
    """The first field where the record's ``config`` differs from the one its fingerprint's
    configuration gives its cell."""
    if isinstance(got, dict) and isinstance(want, dict):
        for k in sorted(set(got) | set(want)):
            if k not in got:
                fail(at, "{...}", f"lacks {k!r}, which its fingerprint's configuration sets")
            if k not in want:
                fail(f"{at}.{k}", got[k], "a setting its fingerprint's configuration has not")
            _same_config(f"{at}.{k}", got[k], want[k])
    elif not (type(got) is type(want) and got == want):
        fail(at, got, f"the configuration its fingerprint fingerprints gives {want!r}")
