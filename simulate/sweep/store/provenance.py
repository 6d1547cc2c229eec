"""A sweep record's provenance checked as data (``simulate.sweep.store.validate`` checks every
record read through it), from the record's own fields and the schema's rules alone: nothing
of the configuration machinery that wrote it is imported or run.

* ``fingerprint`` is the hash of ``fingerprint_fields`` (``simulate.sweep.store.rules``);
* ``fingerprint_fields.schema`` is this schema, and the record's n is at most the largest n
  of its configuration (``fingerprint_fields.n_max``);
* the record's estimator (``config.estimator``, ASVI's where absent) is the one its
  fingerprint fields name;
* every field of ``config`` that is a setting as given (not one the cell derives at its n,
  :data:`~simulate.sweep.store.rules.CELL_DERIVED`) and that the fingerprint fields name holds
  their value.

What only re-deriving the configuration can check -- that the fingerprint fields are those
the fingerprint's rule gives the configuration they describe, and that ``config`` is that
configuration's cell at the record's n (its candidate widths, batch, stopping rule,
lambda_s) -- is the opt-in audit, ``python -m simulate.sweep.audit``
(``simulate.sweep.store.audit``)."""

from __future__ import annotations

from simulate.sweep.store.rules import (
    ASVI,
    CELL_DERIVED,
    SCHEMA,
    fail,
    fingerprint,
    need,
    need_dict,
)

__all__ = ["check_provenance"]


def check_provenance(rec: dict) -> None:
    """The rules of this module's docstring, the first one ``rec`` breaks named
    (:class:`~simulate.sweep.store.rules.BadRecord`)."""
    ff = need_dict("fingerprint_fields", rec["fingerprint_fields"])
    fp = fingerprint(ff)
    need(
        rec["fingerprint"] == fp,
        "fingerprint",
        rec["fingerprint"],
        f"the hash of the record's fingerprint_fields is {fp}",
    )
    need(ff.get("schema", SCHEMA) == SCHEMA, "fingerprint_fields.schema", ff.get("schema"), SCHEMA)
    n, n_max = rec["cell"]["n"], ff.get("n_max")
    need(
        type(n_max) is int and n <= n_max,
        "cell.n",
        n,
        f"at most its configuration's largest n (fingerprint_fields.n_max = {n_max!r})",
    )
    cfg = rec["config"]
    mine, theirs = cfg.get("estimator", ASVI), ff.get("estimator", ASVI)
    need(
        mine == theirs,
        "config.estimator",
        mine,
        f"the estimator its fingerprint fields name is {theirs!r}",
    )
    derived = CELL_DERIVED if mine == ASVI else ()
    for k, v in cfg.items():
        if k in ff and k not in derived and not (type(v) is type(ff[k]) and v == ff[k]):
            fail(f"config.{k}", v, f"its fingerprint fields hold {ff[k]!r}")
