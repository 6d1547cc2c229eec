"""Sweep records as ``verify`` reads them: typed views built once, at the edge.

``simulate.sweep.store.schema.read_records`` returns each record as the dict its JSON line holds
(schema ``asvi-rates/sweep-record/4``, checked there for the fields and types the
analysis reads).  :meth:`Cell.from_record` turns one into a frozen :class:`Cell`, and
:func:`truth_cells` one truth's cells into the replicate-by-n table the fits use
(:class:`TruthCells`); nothing past this module indexes a record's nested dicts.
Re-selection under another width prior (``verify.rates --lam``, :func:`reselect`) acts on
the records themselves, before they are read into cells, so it equals a sweep run with
that prior.

A record's per-candidate columns (``per_width``: one list per quantity, in the order of
the candidate widths) and its selected candidate's metrics stay mappings from their
names: they are tables whose columns differ between estimators (a plain arm has
``val_mse``, ASVI's candidates ``converged``), read by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from simulate.sweep.setup.kinds import ASVI, ASVI_ARMS
from simulate.sweep.setup.truth_spec import TruthSpec
from simulate.sweep.setup.widths import cell_selection
from theory import METRICS

__all__ = [
    "ARM_ESTIMATORS",
    "ESTIMATOR_ARMS",
    "Cell",
    "Reference",
    "Replicates",
    "TruthCells",
    "cells_of",
    "estimators_of",
    "records_protocol",
    "reselect",
    "truth_cells",
]

# the constructive-start arms' names as estimators in verify's results (verify.starts)
ARM_ESTIMATORS = ASVI_ARMS
ESTIMATOR_ARMS = {v: k for k, v in ARM_ESTIMATORS.items()}


def _frozen(d: Mapping) -> Mapping:
    return MappingProxyType(dict(d))


@dataclass(frozen=True)
class Reference:
    """The class-matched reference fitted on a cell's data: its ``metrics`` (d2, d,
    l2sq), its mesh ``k`` (None where not recorded) and the piecewise-polynomial oracle's
    metrics (None where the record has none)."""

    metrics: Mapping[str, float]
    k: float | None
    oracle: Mapping[str, float] | None

    @classmethod
    def from_record(cls, ref: dict) -> Reference:
        oracle = ref.get("oracle")
        return cls(
            metrics=_frozen({m: ref[m] for m in METRICS if m in ref}),
            k=ref.get("k"),
            oracle=None if oracle is None else _frozen(oracle),
        )


@dataclass(frozen=True)
class Cell:
    """One sweep record (one truth, n and replicate) as the analysis reads it; an arm's
    view (:meth:`arm`) is a Cell too, the arm's fields in place of the record's own."""

    truth: str
    n: int
    replicate: int
    failed: bool
    spec: TruthSpec
    n_edges: int | None  # the teacher's non-zero edges (None for other truths)
    holder_norm: float | None  # the Hoelder truth's norm (None for other truths)
    widths: tuple[int, ...]  # the candidate widths
    lambda_s: float | None
    start: str | None
    protocol: str | None
    depth: int | None  # hidden layers (None for a record without a network)
    seed: int | None  # the data seed
    max_steps: int | None  # the stopping rule's step cap
    job_train_s: float | None  # the job's training and evaluation seconds (every record
    job_eval_s: float | None  # of a job holds its job's)
    metrics: Mapping[str, float]  # the selected candidate's (or the estimator's)
    selected_width: int | None
    selected_at_top: bool
    per_width: Mapping[str, tuple] | None  # column name -> one value per candidate width
    reference: Reference | None
    per_estimator: Mapping[str, Mapping[str, float]]  # the known-answer control's
    arms: Mapping[str, Cell]  # the constructive-start arms (verify.starts), by letter

    @classmethod
    def from_record(cls, rec: dict) -> Cell:
        cfg, cell, t = rec.get("config", {}), rec["cell"], rec["truth"]
        fn, timing = t.get("function") or {}, rec.get("timing") or {}
        arms = {a: cls.from_record({**rec, **arm, "arms": {}}) for a, arm in
                sorted((rec.get("arms") or {}).items())}  # fmt: skip
        pw = rec.get("per_width")
        return cls(
            truth=cell["truth"],
            n=int(cell["n"]),
            replicate=int(cell["replicate"]),
            failed=bool(rec.get("failed")),
            spec=TruthSpec(
                kind=t["kind"], p=int(t["p"]), alpha=t.get("alpha"), seed=int(t["seed"])
            ),  # fmt: skip
            n_edges=fn.get("n_edges") or None,
            holder_norm=fn.get("holder_norm", t.get("holder_norm")),
            widths=tuple(cfg.get("widths") or ()),
            lambda_s=cfg.get("lambda_s"),
            start=cfg.get("start"),
            protocol=cfg.get("protocol"),
            depth=cfg.get("depth"),
            seed=cfg.get("seed"),
            max_steps=(cfg.get("stop_rule") or {}).get("max_steps"),
            job_train_s=timing.get("job_train_s"),
            job_eval_s=timing.get("job_eval_s"),
            metrics=_frozen(rec.get("metrics") or {}),
            selected_width=rec.get("selected_width"),
            selected_at_top=bool(rec.get("selected_at_top")),
            per_width=None if pw is None else _frozen({k: tuple(v) for k, v in pw.items()}),
            reference=Reference.from_record(rec["reference"]) if rec.get("reference") else None,
            per_estimator=_frozen(
                {e: _frozen(m) for e, m in (rec.get("per_estimator") or {}).items()}
            ),  # fmt: skip
            arms=_frozen(arms),
        )

    @property
    def source(self) -> str:
        """Which run wrote the record: ``"known-answer"`` (a known-answer control, or a
        named regressor: its estimators in ``per_estimator``) or ``"asvi"`` (a sweep of
        ASVI, its arms and its budget control).  A tier may hold both on one truth
        (confirm-v4: the GP control on the ASVI sweeps' alpha = 0.5 and 1.5 truths, with
        other n and replicates), so one truth's cells are analysed per source
        (:func:`verify.reading.analysis.analyse`)."""
        return "known-answer" if self.per_estimator else "asvi"

    @property
    def primary_estimator(self) -> str:
        """The estimator the record's own fields hold: ASVI from a random start, or from
        the constructive start when that was the only ASVI run (``start="constructive"``)."""
        return "asvi-constructive" if self.start == "constructive" else "asvi"

    def arm(self, estimator: str) -> Cell:
        """The cell as if ``estimator``'s arm were its own fields (per_width, selection,
        metrics), so every fit runs on it unchanged."""
        if estimator == self.primary_estimator:
            return self
        return self.arms[ESTIMATOR_ARMS[estimator]]

    def at_width(self, key: str, width: int) -> float:
        """``per_width[key]`` of the candidate of ``width``."""
        return self.per_width[key][self.widths.index(width)]

    def selected(self, key: str) -> float:
        """``per_width[key]`` of the selected candidate."""
        return float(self.at_width(key, self.selected_width))

    def value(self, estimator: str, metric: str) -> float:
        """The cell's ``metric`` for ``estimator``: the record's own (ASVI's selected
        candidate) or a known-answer control prior's."""
        if ASVI.owns(estimator):
            return self.metrics[metric]
        return self.per_estimator[estimator][metric]


def cells_of(records: list[dict]) -> list[Cell]:
    """Every record as a :class:`Cell`."""
    return [Cell.from_record(r) for r in records]


def estimators_of(cell: Cell) -> list[str]:
    """The estimators a cell holds: ``["asvi"]`` for a sweep record (``"asvi"`` is the
    random start; ``"asvi-constructive"`` when only the constructive start ran), its arms'
    (:data:`ARM_ESTIMATORS`) after it when the record has them, the names in
    ``per_estimator`` for a known-answer control's (``"gp-matern-NU"``, ``"knn-matched"``,
    ``"knn-kK"``) or a named regressor's."""
    if cell.per_estimator:
        return sorted(cell.per_estimator)
    return [cell.primary_estimator] + [ARM_ESTIMATORS[a] for a in sorted(cell.arms)]


def records_protocol(cells: list[Cell]) -> str | None:
    """The protocol the records were written under (``"NAME@DIGEST"``, the sweep's
    ``protocol`` setting), ``"mixed: A, B"`` when they differ, None when none carries one
    (records written before protocols, or outside one)."""
    tags = sorted({str(c.protocol) for c in cells} - {"None"})
    if not tags:
        return None
    return tags[0] if len(tags) == 1 else "mixed: " + ", ".join(tags)


@dataclass(frozen=True)
class Replicates:
    """Which replicates one truth's fits use: those complete at every n (``used``),
    those ``dropped`` as incomplete, the ``failed_cells`` (n, replicate) and the
    replicates they ``excluded`` from every fit."""

    used: tuple[int, ...]
    dropped: tuple[int, ...]
    failed_cells: tuple[tuple[int, int], ...]
    excluded: tuple[int, ...]


@dataclass(frozen=True)
class TruthCells:
    """One truth's cells as the fits need them: ``cells[replicate][n]`` over the
    replicates complete at every n; ``first``: one cell per n (its configuration);
    ``cells_used``: every cell of the replicates kept; ``w_fixed``: the smallest candidate
    width every cell has (ASVI's non-adaptive control; None for other estimators)."""

    key: str
    spec: TruthSpec
    ns: tuple[int, ...]
    replicates: Replicates
    cells_used: tuple[Cell, ...]
    first: tuple[Cell, ...]
    cells: tuple[tuple[Cell, ...], ...]
    w_fixed: int | None

    def widths_at(self, j: int) -> tuple[int, ...]:
        """The candidate widths any kept replicate held at the ``j``-th n (sorted): the
        ladder, and past it the rungs a class grown at its edge added for some replicates
        (``simulate.sweep.train.edge``), which the first cell alone would not show."""
        return tuple(sorted(set().union(*(row[j].widths for row in self.cells))))

    def through(self, estimator: str) -> TruthCells:
        """Every cell seen through ``estimator``'s arm (:meth:`Cell.arm`)."""
        return TruthCells(
            key=self.key, spec=self.spec, ns=self.ns, replicates=self.replicates,
            cells_used=tuple(c.arm(estimator) for c in self.cells_used),
            first=tuple(c.arm(estimator) for c in self.first),
            cells=tuple(tuple(c.arm(estimator) for c in row) for row in self.cells),
            w_fixed=self.w_fixed,
        )  # fmt: skip

    @property
    def edges(self) -> list[int]:
        """The teachers' non-zero edge counts (each replicate its own teacher)."""
        return [c.n_edges for c in self.cells_used if c.n_edges]

    @property
    def norms(self) -> list[float]:
        """The Hoelder truths' norms (each replicate its own truth)."""
        return [c.holder_norm for c in self.cells_used if c.holder_norm is not None]


def truth_cells(key: str, cells: list[Cell]) -> TruthCells:
    """One truth's cells (:class:`TruthCells`) over the replicates complete at every n,
    less any replicate with a failed cell (every candidate diverged: no metric; slopes
    pair replicates across n, so it leaves every fit of this truth and the report says
    so)."""
    failed = sorted((c.n, c.replicate) for c in cells if c.failed)
    excluded = sorted({q for _, q in failed})
    used = [c for c in cells if c.replicate not in excluded]
    if not used:
        raise ValueError(f"{key}: every replicate has a failed cell (n, replicate) {failed}")
    ns = sorted({c.n for c in used})
    table: dict[tuple[int, int], Cell] = {}
    for c in cells:
        if (c.replicate, c.n) in table:  # two designs of one truth would overwrite
            raise ValueError(
                f"{key}: the cell n = {c.n}, replicate {c.replicate} is recorded twice"
                " (records of two sweeps of this truth read together: read each on its own)"
            )
        table[c.replicate, c.n] = c
    table = {k: c for k, c in table.items() if c.replicate not in excluded}
    reps = sorted({c.replicate for c in used})
    complete = [q for q in reps if all((q, n) in table for n in ns)]
    dropped = sorted(set(reps) - set(complete))
    if len(ns) < 3:
        raise ValueError(f"{key}: need at least 3 sample sizes, the records have {ns}")
    if not complete:
        raise ValueError(f"{key}: no replicate has records at every n {ns}")
    w_fixed = None
    if used[0].per_width is not None:
        common = set.intersection(*(set(c.widths) for c in used))
        if not common:
            raise ValueError("the cells share no candidate width (no non-adaptive control)")
        w_fixed = min(common)
    return TruthCells(
        key=key,
        spec=cells[0].spec,
        ns=tuple(ns),
        replicates=Replicates(tuple(complete), tuple(dropped), tuple(failed), tuple(excluded)),
        cells_used=tuple(used),
        first=tuple(table[(complete[0], n)] for n in ns),
        cells=tuple(tuple(table[(q, n)] for n in ns) for q in complete),
        w_fixed=w_fixed,
    )


def columns(cells, fn) -> np.ndarray:
    """``[replicate, n]``: ``fn(cell)`` over a table of cells."""
    return np.array([[fn(c) for c in row] for row in cells])


def reselect(records: list[dict], lam: float) -> list[dict]:
    """The records with the width re-selected under the width prior's ``lam`` from their
    recorded ELBOs (``simulate.sweep.setup.widths.cell_selection``, eq. (13)); ``lam`` enters
    nothing else, so this equals a sweep run with it."""
    out = []
    for r in records:
        W = r["config"]["widths"]
        out.append({**r, "config": {**r["config"], "lam": lam}, **_reselected(r, W, lam)})
        if r.get("arms"):  # the arms that select by the ELBO (the plain arm does not)
            out[-1]["arms"] = {
                a: arm if "val_mse" in arm["per_width"] else {**arm, **_reselected(arm, W, lam)}
                for a, arm in r["arms"].items()
            }
    return out


def _reselected(r: dict, widths, lam: float) -> dict:
    sel = cell_selection(r["per_width"], widths, lam)
    return {
        **{k: sel[k] for k in ("selected_width", "selected_at_top", "metrics")},
        "per_width": {**r["per_width"], "penalized_elbo": sel["penalized_elbo"]},
    }
