"""A sweep's fingerprint: the fields of a configuration that change a cell's record
(:func:`fingerprint_fields`), and the one rule, read from each setting's declaration
(``simulate.sweep.setup.settings``), that leaves out the bookkeeping fields and the settings added
later at their declared defaults (:func:`_without_later_defaults`); and back, the
configuration a record's fingerprint fields describe (:func:`configuration_of`), so a
reader recomputes the fields from it (:func:`configuration_fields`)."""

from __future__ import annotations

from simulate.sweep.setup.config import SweepConfig
from simulate.sweep.setup.settings import declared
from simulate.sweep.setup.truth_spec import TruthSpec
from simulate.sweep.store.records import code_hashes, versions
from simulate.sweep.store.rules import SCHEMA

__all__ = ["PROVENANCE_FIELDS", "configuration_fields", "configuration_of", "fingerprint_fields"]


# How each setting enters the fingerprint is said where it is declared
# (simulate.sweep.setup.parts; simulate.sweep.setup.settings): "bookkeeping" -- which cells a sweep
# holds,
# not what any cell's result is (truths, ns, replicates); "later" -- added after the first
# records were written: at its declared default it changes nothing, so it is left out and
# records written before it existed keep their fingerprints (with the settings the code does
# not read while it is at its default, its ``silences``: the decays' factor with no decay,
# the risk rule's settings with the rule off); every other setting is always in.  The
# largest n counts: each replicate's data is drawn for it (nested data), so adding a larger
# n changes every cell.
_DECLARED = declared(SweepConfig)
_BOOKKEEPING = tuple(k for k, (_, s) in _DECLARED.items() if s.fingerprint == "bookkeeping")
_ADDED_LATER = {k: (d, s.silences) for k, (d, s) in _DECLARED.items() if s.fingerprint == "later"}


def _without_later_defaults(d: dict) -> dict:
    """``d`` (a configuration's fields) less each setting added later at its declared
    default, with the settings it silences; one rule for every such field."""
    d = dict(d)
    for k, (default, silences) in _ADDED_LATER.items():
        if k in d and d[k] == default:
            for name in (k, *silences):
                d.pop(name, None)
    return d


# the fingerprint's fields that are not the configuration's settings: what they are read
# from (its largest n, the schema, the versions, the code; a named regressor's class and
# version)
PROVENANCE_FIELDS = ("n_max", "schema", "versions", "code", "regressor_identity")


def configuration_fields(cfg: SweepConfig) -> dict:
    """The settings that enter ``cfg``'s fingerprint, by the declared rule: the config less
    its bookkeeping fields and the settings added later at their defaults
    (:func:`fingerprint_fields` less :data:`PROVENANCE_FIELDS`)."""
    return _without_later_defaults(
        {k: v for k, v in cfg.to_dict().items() if k not in _BOOKKEEPING}
    )


def configuration_of(fields: dict, truth: TruthSpec) -> SweepConfig:
    """The sweep configuration a record's fingerprint ``fields`` describe, for its
    ``truth`` at its largest n (``n_max``): its settings as given, the rest at their
    defaults.  ``ValueError`` (or ``TypeError`` for a field no setting has, ``KeyError``
    without ``n_max``) when they make none.  A record is whole when
    ``configuration_fields(configuration_of(f, t))`` gives back ``f``'s settings."""
    stored = {k: v for k, v in fields.items() if k not in PROVENANCE_FIELDS}
    return SweepConfig(truths=[truth], ns=[fields["n_max"]], **stored)


def fingerprint_fields(cfg: SweepConfig) -> dict:
    """Everything besides the cell key (truth, n, replicate) that changes a cell's record:
    the config less its bookkeeping fields, the largest n, the schema, the versions and the
    code (``simulate.sweep.store.records.code_hashes``: an edited module is a new configuration,
    and resuming across it is refused naming the files, unless accepted explicitly); for a
    named regressor also its class's qualified name and its package's installed version
    (``regressor_identity``: ``simulate.sweep.setup.kinds``), beside its parameters as
    given."""
    d = configuration_fields(cfg)
    d["n_max"] = max(int(n) for n in cfg.ns)
    d["schema"] = SCHEMA
    d["versions"] = versions()
    d["code"] = code_hashes()  # an edit of the code that computes a cell is a new configuration
    own = cfg.kind.identity(cfg)  # a named regressor's class and its installed version
    if own is not None:
        d["regressor_identity"] = own
    return d  # the records store keeps it as canonical JSON
