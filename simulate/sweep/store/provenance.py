"""A sweep record's provenance recomputed (``simulate.sweep.store.validate`` checks every record
read through it): its ``fingerprint`` the hash of its ``fingerprint_fields``, those fields
the ones the fingerprint's rule gives the configuration they describe
(``simulate.sweep.store.fingerprint.configuration_of``), and its ``config`` that configuration's
cell config at the record's n.  A record equal (``==``) to one that passed, of the same
fingerprint, truth and n, passes without recomputing (a file holds tens of records per
configuration and cell size); numerically equal values of another JSON type (1 for 1.0)
are then taken as the same."""

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
from simulate.sweep.store.records import fields_differing, fingerprint
from simulate.sweep.store.rules import SCHEMA, BadRecord, fail, need, need_dict

__all__ = ["check_provenance"]


# the provenance this process has recomputed: (fingerprint, truth, n) -> the fingerprint
# fields and config of a record that passed; a later record equal to both (``==``) passes
# without recomputing (a file holds tens of records per configuration and cell size)
_PASSED: dict = {}
_PASSED_LIMIT = 1024


def check_provenance(rec: dict, spec: TruthSpec) -> None:
    """The fingerprint, its fields and the record's config, recomputed."""
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
    fp = fingerprint(ff)
    need(
        rec["fingerprint"] == fp,
        "fingerprint",
        rec["fingerprint"],
        f"the hash of the record's fingerprint_fields is {fp}",
    )
    need(ff.get("schema", SCHEMA) == SCHEMA, "fingerprint_fields.schema", ff.get("schema"), SCHEMA)
    cfg, again, stored = _configuration(blob, spec)
    if again != stored:
        fail(
            "fingerprint_fields",
            "{...}",
            "not the fields of the configuration they describe"
            f" ({fields_differing(stored, again)})",
        )
    n = rec["cell"]["n"]
    need(n <= ff["n_max"], "cell.n", n, f"above the configuration's largest n {ff['n_max']}")
    want = _cell_config(blob, spec, n)
    _same_config("config", rec["config"], want)


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
