"""The results as a tidy table (issue 77, item 4): one row per cell and estimator, for pandas,
R or a spreadsheet (``verify.rates --csv FILE``, ``RateCheck.to_rows()`` and
``RateCheck.to_frame()``).

A row is one estimator's numbers in one cell (truth, n, replicate) of one run: ``run`` is
``sweep`` or ``budget-control`` (the budget-doubling control's records); ``role`` is
``estimator`` (ASVI's selected candidate, or a named regressor), ``arm`` (a constructive-
start arm, ``asvi-constructive``, ``plain-adam`` and so on), ``member`` (a known-answer
control's member, ``gp-matern-NU``, ``knn-matched``), ``reference`` (the class-matched
linear spline, its mesh in ``reference_k``) or ``oracle`` (the piecewise-polynomial oracle);
every metric (d2, d, l2sq; empty where the cell failed), the selected width and the
candidate widths (ASVI's), the sweep's ``seed`` (``config.seed``: each cell's data, test and
model seeds derive from it and the cell's key,
``simulate.sweep.setup.truth_spec.stable_seed``), the depth and lambda_s, the job's training
and evaluation seconds (every record of a job holds its job's), the protocol the records
were written under and the one they are decided under. Read from the records' cells
(``verify.reading.records.Cell``), never re-derived."""

from __future__ import annotations

import csv
import io

from simulate.sweep.setup.kinds import kind_of_name
from theory import METRICS
from verify.reading.records import Cell, cells_of, estimators_of

__all__ = ["COLUMNS", "tidy_rows", "csv_text"]

COLUMNS = (
    "run", "truth", "kind", "p", "alpha", "n", "replicate", "estimator", "role", *METRICS,
    "failed", "selected_width", "candidate_widths", "reference_k", "seed", "depth",
    "lambda_s", "job_train_s", "job_eval_s", "records_protocol", "decided_under",
)  # fmt: skip


def _row(c: Cell, run: str, estimator: str, role: str, metrics, decided: str, **extra) -> dict:
    return {
        "run": run, "truth": c.truth, "kind": c.spec.kind, "p": c.spec.p, "alpha": c.spec.alpha,
        "n": c.n, "replicate": c.replicate, "estimator": estimator, "role": role,
        **{m: metrics.get(m) for m in METRICS},
        "failed": c.failed, "selected_width": None, "candidate_widths": None,
        "reference_k": None, "seed": c.seed, "depth": c.depth, "lambda_s": c.lambda_s,
        "job_train_s": c.job_train_s, "job_eval_s": c.job_eval_s,
        "records_protocol": c.protocol, "decided_under": decided, **extra,
    }  # fmt: skip


def tidy_rows(records, control_records=(), decided_under: str | None = None) -> list[dict]:
    """The rows (:data:`COLUMNS`, module docstring) of a run's ``records`` and its budget
    control's ``control_records``, in file order; ``decided_under``: the protocol's tag."""
    rows = []
    for run, recs in (("sweep", records), ("budget-control", control_records)):
        for c in cells_of(list(recs)):
            for est in estimators_of(c):
                if c.per_estimator:
                    role = "member" if kind_of_name(est).known_answer else "estimator"
                    rows.append(_row(c, run, est, role, c.per_estimator[est], decided_under))
                    continue
                own = c.arm(est)
                widths = " ".join(map(str, own.widths or c.widths)) or None
                arm = est != c.primary_estimator
                rows.append(_row(c, run, est, "arm" if arm else "estimator",
                                 own.metrics, decided_under,
                                 selected_width=own.selected_width,
                                 candidate_widths=widths))  # fmt: skip
            if c.reference is not None:
                rows.append(_row(c, run, "linear-spline", "reference", c.reference.metrics,
                                 decided_under, reference_k=c.reference.k))  # fmt: skip
                if c.reference.oracle is not None:
                    rows.append(_row(c, run, "piecewise-poly-oracle", "oracle",
                                     c.reference.oracle, decided_under))  # fmt: skip
    return rows


def csv_text(rows) -> str:
    """``rows`` as CSV text (a header of :data:`COLUMNS`; an undefined value empty)."""
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: "" if r[k] is None else r[k] for k in COLUMNS})
    return out.getvalue()
