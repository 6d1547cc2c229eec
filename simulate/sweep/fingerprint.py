"""A sweep's fingerprint: the fields of a configuration that change a cell's record
(:func:`fingerprint_fields`), and the rules that leave out the bookkeeping fields and the
settings added later at their declared defaults (:func:`_without_later_defaults`)."""

from __future__ import annotations

from dataclasses import fields

from simulate.sweep.config import SweepConfig
from simulate.sweep.records import code_hashes, versions
from simulate.sweep.schema import SCHEMA

__all__ = ["fingerprint_fields"]


# Config fields that say only *which* cells a sweep holds, not what any cell's result is;
# every other field (and the schema, the largest n and the package versions) goes into a
# record's fingerprint.  The largest n counts: each replicate's data is drawn for it
# (nested data), so adding a larger n changes every cell.
# ``replicate_block`` counts too: it changes which models share a batched program, and
# with it the float rounding and the compiled shapes.
_BOOKKEEPING = ("truths", "ns", "replicates")
# Settings added after the first records were written.  At its declared default (the
# SweepConfig field's) such a setting changes nothing, so it is left out of the
# fingerprint and records written before it existed keep theirs; a setting the code does
# not read while another is at its default (the decays' factor with no decay, the risk
# rule's settings with the rule off) is left out with it.  A new setting goes here when
# it is added; the fields before these are always in the fingerprint.
_ADDED_LATER = (
    "max_epochs", "start", "mlp", "protocol", "batch_fraction", "kl_warmup", "restarts",
    "continuation", "lr_inclusion", "lr_inclusion_ramp", "stop_lr_decays", "stop_risk_tol",
)  # fmt: skip
_UNUSED_WITH = {
    "stop_lr_decays": ("stop_lr_factor",),
    "stop_risk_tol": ("stop_val_fraction", "risk_draws"),
}
_DEFAULTS = {f.name: f.default for f in fields(SweepConfig)}


def _without_later_defaults(d: dict) -> dict:
    """``d`` (a configuration's fields) less each of :data:`_ADDED_LATER` at its declared
    default, with the settings :data:`_UNUSED_WITH` it; one rule for every such field."""
    d = dict(d)
    for k in _ADDED_LATER:
        if k in d and d[k] == _DEFAULTS[k]:
            for name in (k, *_UNUSED_WITH.get(k, ())):
                d.pop(name, None)
    return d


def fingerprint_fields(cfg: SweepConfig) -> dict:
    """Everything besides the cell key (truth, n, replicate) that changes a cell's record:
    the config less :data:`_BOOKKEEPING`, the largest n, the schema, the versions and the
    code (``simulate.sweep.records.code_hashes``: an edited module is a new configuration,
    and resuming across it is refused naming the files, unless accepted explicitly)."""
    d = _without_later_defaults({k: v for k, v in cfg.to_dict().items() if k not in _BOOKKEEPING})
    d["n_max"] = max(int(n) for n in cfg.ns)
    d["schema"] = SCHEMA
    d["versions"] = versions()
    d["code"] = code_hashes()  # an edit of the code that computes a cell is a new configuration
    return d  # the records store keeps it as canonical JSON
