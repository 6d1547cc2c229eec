"""An entry's own pilot: the spread a named regressor's prospective power is computed from.

Power is a property of the design, computed before its data from a pilot coefficient of
variation (``verify.stats.power``; a slope's SE is ``cv / sqrt(R Sxx)``,
``verify.stats.slopes.expected_slope_se``).  A protocol's ``[pilot_cv]`` tables are ASVI's
(and the known-answer families'): they say nothing of another estimator's spread -- a
regressogram at alpha = 1.5 was labelled "undecidable (expected half-width 0.608)" from
ASVI's cv while its realised half-width was 0.08.  So an estimator whose kind does not take
the protocol's pilot (``simulate.sweep.setup.kinds.EstimatorKind.pilot_from_protocol``: a
named regressor) takes its power from **its own pilot**: records of replicates of the same
estimator on the same truths, either a pilot block the run trains first on data seeds of
its own (``verify.rates --pilot-replicates K``: never the replicates it decides on) or a
records file the user gives (``--pilot FILE``).  Without one its power is **unknown**: the
report says "no pilot: power unknown" and a non-rejection stands INCONCLUSIVE, not
labelled UNDECIDABLE by power (:data:`NO_PILOT`).

The cvs a pilot realises (:func:`pilot_cvs`), per estimator, truth and metric, in the
metric's own scale: ``cv = SE sqrt(R Sxx)`` of its slope fit over its n (the SE its interval
is built on: ``verify.stats.slopes.fit_slope``, as ``verify.sizing.realised`` reads a run),
and ``cv_diff`` the same of its paired slope difference with the class-matched reference
(``verify.stats.slopes.paired_slope_diff``; None where a cell has no reference).  A pilot
needs at least 2 replicates complete at 3 or more n (the fits' own minimum).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from simulate.sweep.setup.kinds import kind_of_name
from simulate.sweep.store.schema import one_configuration, read_records
from theory import METRICS
from verify.reading.records import cells_of, columns, estimators_of, truth_cells
from verify.stats.slopes import expected_slope_se, fit_slope, paired_slope_diff

__all__ = [
    "NO_PILOT",
    "PILOT_REMEDY",
    "PilotCv",
    "check_pilot_of",
    "given_pilot",
    "own_pilot",
    "pilot_cvs",
    "pilot_line",
    "read_pilot",
    "realised_cv",
]

# what the report says of an entry that needs its own pilot and has none, and how to give one
NO_PILOT = "no pilot: power unknown"
PILOT_REMEDY = "give --pilot-replicates K or --pilot RECORDS (check_rate: pilot=)"


@dataclass(frozen=True)
class PilotCv:
    """One entry's pilot cvs (module docstring): of a cell's metric (``cv``) and of the
    paired difference with the reference (``cv_diff``, None without one), realised by
    ``replicates`` replicates at ``ns``, read from ``source``."""

    cv: float
    cv_diff: float | None
    replicates: int
    ns: tuple[int, ...]
    source: str


def own_pilot(estimator: str) -> bool:
    """Whether an entry's power comes from its own pilot, not the protocol's (its kind's
    ``pilot_from_protocol``: False for a named regressor)."""
    return not kind_of_name(estimator).pilot_from_protocol


def pilot_cvs(records: list[dict], source: str) -> dict[tuple[str, str, str], PilotCv]:
    """``{(estimator, truth key, metric): PilotCv}`` for every entry of the pilot
    ``records`` whose power comes from its own pilot (:func:`own_pilot`); ValueError (one
    line, naming ``source``) for a pilot with no such entry or too few replicates."""
    by_truth: dict[str, list] = {}
    for c in cells_of(records):
        by_truth.setdefault(c.truth, []).append(c)
    out: dict[tuple[str, str, str], PilotCv] = {}
    for key, cells in sorted(by_truth.items()):
        tc = truth_cells(key, cells)
        R, ns = len(tc.cells), tc.ns
        if R < 2:
            raise ValueError(f"pilot {source}: {key} has {R} complete replicate; a cv needs 2")
        refs = all(c.reference is not None for row in tc.cells for c in row)
        for est in estimators_of(tc.cells_used[0]):
            if not own_pilot(est):
                continue
            for metric in METRICS:
                V = columns(tc.cells, lambda c, e=est, m=metric: c.value(e, m))
                cv = realised_cv(fit_slope(ns, V).se_slope, ns, R)
                cv_diff = None
                if refs:
                    Ref = columns(tc.cells, lambda c, m=metric: c.reference.metrics[m])
                    cv_diff = realised_cv(paired_slope_diff(ns, V, Ref).se, ns, R)
                if not (math.isfinite(cv) and cv > 0):
                    raise ValueError(f"pilot {source}: {key} {est} {metric}: cv {cv}")
                out[est, key, metric] = PilotCv(
                    float(cv), None if cv_diff is None else float(cv_diff), R,
                    tuple(int(n) for n in ns), source,
                )  # fmt: skip
    if not out:
        raise ValueError(
            f"pilot {source}: no entry that takes its own pilot (a named regressor's);"
            " ASVI's and the known-answer controls' power is the protocol's"
        )
    return out


def realised_cv(se: float, ns, replicates: int) -> float:
    """The cv a slope SE realises over ``ns`` with ``replicates`` replicates:
    ``SE sqrt(R Sxx)`` (the inverse of ``expected_slope_se``)."""
    return float(se) / expected_slope_se(np.asarray(ns, dtype=float), replicates, 1.0)


# what a pilot shares with the run it powers: the estimator and its settings, the noise and
# the test design (its seed, replicates and n are its own)
PILOT_SHARED = ("estimator", "regressor", "regressor_params", "sigma", "n_test")


def read_pilot(path: str) -> list[dict]:
    """A pilot's records file (``--pilot``; one configuration: ``one_configuration``)."""
    return one_configuration(read_records(path), None, path, "give the pilot of one configuration")


def check_pilot_of(pilot: list[dict], config: dict, truths, source: str) -> None:
    """A pilot powers a run only if it is of the same estimator, with the same settings
    (:data:`PILOT_SHARED`), on truths of the run (``truths``: their keys), and on data of its
    own: a pilot with the run's data seed (``config["seed"]``: the same replicates' data, as
    a pilot read off the run's own records would be) is post-hoc power and refused.
    ``config``: a cell configuration of the run (a record's ``config``, or
    ``kind.cell_config`` of the sweep about to train); ValueError (one line) naming the
    first difference."""
    if not pilot:
        raise ValueError(f"pilot {source} holds no records")
    a = pilot[0]["config"]
    for k in PILOT_SHARED:
        if a.get(k) != config.get(k):
            raise ValueError(
                f"pilot {source} is of another configuration: {k} {a.get(k)!r} against the"
                f" run's {config.get(k)!r}"
            )
    if a.get("seed") == config.get("seed"):
        raise ValueError(
            f"pilot {source} has the run's own data seed ({a.get('seed')}): its replicates'"
            " data are the run's, and a power read off the decided data is post-hoc; give a"
            " pilot of data seeds of its own (--pilot-replicates K trains one)"
        )
    ours = set(truths)
    if not ours & {r["cell"]["truth"] for r in pilot}:
        raise ValueError(f"pilot {source} holds none of the run's truths ({sorted(ours)})")


def pilot_line(cvs: dict) -> str:
    """What a run's power is computed from, one line: each entry's own pilot (d^2's cv, its
    replicates and n, the file)."""
    parts = [
        f"{est} on {key}: cv {p.cv:.2g} (R = {p.replicates}, n = {p.ns[0]}..{p.ns[-1]},"
        f" {os.path.basename(p.source)})"
        for (est, key, metric), p in sorted(cvs.items())
        if metric == "d2"
    ]
    return "own pilot (realised cv of d^2): " + "; ".join(parts)


def given_pilot(args, config: dict | None = None, truths=()) -> dict:
    """The pilot cvs of a run's ``--pilot RECORDS`` (``args.pilot``; empty without it),
    checked against the run's cell ``config`` and ``truths`` where given
    (:func:`check_pilot_of`: the same estimator and settings, data of its own)."""
    if not args.pilot:
        return {}
    pilot = read_pilot(args.pilot)
    if config is not None:
        check_pilot_of(pilot, config, truths, args.pilot)
    return pilot_cvs(pilot, args.pilot)
