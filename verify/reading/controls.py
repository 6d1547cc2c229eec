"""The budget-doubling control: its sweep (:func:`control_config`), where it writes
(:func:`control_records_path`), the check that a control file belongs to its records
(:func:`check_control`), and what it says: per n the change of each metric with twice the
budget (:func:`budget_control`) and, per entry, the slope's change as an equivalence test
against the protocol's margin (:func:`budget_shift`; :func:`budget_state`).

**Budget control** (:func:`budget_state`): an equivalence test with a stated margin m on
the slope's change under twice the budget: **converged** when its interval lies inside
``[-m, m]`` (the verdicts stand), **limited** when it lies wholly outside (the analysis
sets the entry's verdicts INCONCLUSIVE), **undetermined** otherwise (they stand,
labelled).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

import numpy as np

from simulate.core.stopping import StopRule
from simulate.sweep.setup.config import SweepConfig
from simulate.sweep.store.records import fields_differing
from simulate.sweep.store.schema import one_configuration, read_records
from theory import METRICS
from theory.plumbing.jsonl import RecordsError
from verify.reading.records import Cell
from verify.stats.slopes import SlopeDiff, paired_slope_diff

__all__ = [
    "BudgetCell",
    "BudgetControl",
    "BudgetShift",
    "SlopeShift",
    "budget_control",
    "budget_shift",
    "budget_state",
    "check_control",
    "control_config",
    "control_fields",
    "control_records_path",
]


@dataclass(frozen=True)
class BudgetCell:
    """One n of the control, one metric: the base and doubled means over the
    ``replicates`` both have, the mean ``change`` with its paired SE, the base cell's SE
    (between replicates), the fraction of replicates whose selected width changed, and
    ``moved`` (the mean moved by more than the cell's SE: descriptive, per n)."""

    n: int
    replicates: int
    base_mean: float
    doubled_mean: float
    change: float
    change_se: float
    cell_se: float
    selection_changed: float
    moved: bool


@dataclass(frozen=True)
class SlopeShift:
    """The slope of the doubled run minus the base run's over the control's ``ns``,
    paired over the ``replicates`` present at every one of them."""

    ns: tuple[int, ...]
    replicates: tuple[int, ...]
    diff: SlopeDiff


@dataclass(frozen=True)
class BudgetControl:
    """One metric's control: per n (:class:`BudgetCell`) and the slope shift (None with
    fewer than two control n or no replicate at all of them)."""

    cells: tuple[BudgetCell, ...]
    shift: SlopeShift | None


@dataclass(frozen=True)
class BudgetShift:
    """An entry's budget control: its per-n ``cells``, the slope ``shift`` and its
    ``state`` as an equivalence test against ``margin`` (converged: the verdicts stand;
    undetermined: they stand, labelled; limited: they become INCONCLUSIVE); ``shift``,
    ``state`` and ``margin`` None where the control has no slope shift."""

    cells: tuple[BudgetCell, ...]
    shift: SlopeShift | None
    state: str | None
    margin: float | None

    @property
    def optimisation_limited(self) -> bool | None:
        """Whether twice the budget moves the slope beyond the margin (None: no shift)."""
        return None if self.shift is None else self.state == "limited"


def budget_control(cells: list[Cell], doubled: list[Cell]) -> dict[str, BudgetControl]:
    """Per metric (those with any pair): the change of the selected metric when the same
    cells are re-trained with twice the cap and half the tolerance, paired over the
    replicates both have, per n present in ``doubled`` (:class:`BudgetCell`), and the
    slope shift over those n (:class:`SlopeShift`)."""
    base = {(c.truth, c.n, c.replicate): c for c in cells}
    pairs: dict[int, list] = {}
    for d in doubled:
        k = (d.truth, d.n, d.replicate)
        if k in base and not (base[k].failed or d.failed):  # failed cells: no metric
            pairs.setdefault(k[1], []).append((base[k], d))
    shifts = _slope_shifts(pairs)
    out = {}
    for metric in METRICS:
        rows = []
        for n in sorted(pairs):
            a = np.array([b.metrics[metric] for b, _ in pairs[n]])
            b = np.array([d.metrics[metric] for _, d in pairs[n]])
            R = len(a)
            cell_se = float(a.std(ddof=1) / np.sqrt(R)) if R > 1 else float("nan")
            ch = b - a
            ch_se = float(ch.std(ddof=1) / np.sqrt(R)) if R > 1 else float("nan")
            change = float(ch.mean())
            rows.append(
                BudgetCell(
                    n=n,
                    replicates=R,
                    base_mean=float(a.mean()),
                    doubled_mean=float(b.mean()),
                    change=change,
                    change_se=ch_se,
                    cell_se=cell_se,
                    selection_changed=float(
                        np.mean([x.selected_width != y.selected_width for x, y in pairs[n]])
                    ),
                    moved=bool(np.isfinite(cell_se) and abs(change) > cell_se),
                )
            )
        if rows:
            out[metric] = BudgetControl(tuple(rows), shifts.get(metric))
    return out


def _slope_shifts(pairs: dict) -> dict[str, SlopeShift]:
    """Per metric, the slope of the doubled run minus the slope of the base run over the
    control's n (at least two), paired over the replicates present at every one of them:
    the budget control in slope units (``verify.stats.slopes.paired_slope_diff``)."""
    ns = sorted(pairs)
    if len(ns) < 2:
        return {}
    reps = set.intersection(*({b.replicate for b, _ in pairs[n]} for n in ns))
    if not reps:
        return {}
    reps = sorted(reps)
    out = {}
    for metric in METRICS:
        base = {n: {b.replicate: b.metrics[metric] for b, _ in pairs[n]} for n in ns}
        dbl = {n: {b.replicate: d.metrics[metric] for b, d in pairs[n]} for n in ns}
        B = np.array([[base[n][q] for n in ns] for q in reps])
        D = np.array([[dbl[n][q] for n in ns] for q in reps])
        out[metric] = SlopeShift(tuple(ns), tuple(reps), paired_slope_diff(ns, D, B))
    return out


def budget_state(shift: SlopeDiff | None, margin: float) -> str | None:
    """The budget control as an equivalence test (module docstring): ``"converged"`` when
    the slope change's interval lies inside ``[-margin, margin]``, ``"limited"`` when it
    lies wholly outside, ``"undetermined"`` otherwise; None without a control."""
    if shift is None:
        return None
    lo, hi = shift.ci_low, shift.ci_high
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "undetermined"
    if -margin <= lo and hi <= margin:
        return "converged"
    if lo > margin or hi < -margin:
        return "limited"
    return "undetermined"


def budget_shift(ctrl: BudgetControl | None, margin: float) -> BudgetShift | None:
    """An entry's budget control (None without one): the slope's change under twice the
    budget (doubled minus base, paired over the replicates both have at every control n)
    and its state as an equivalence test against ``margin``
    (:func:`budget_state`): converged, undetermined or limited; only limited
    makes the verdicts INCONCLUSIVE."""
    if ctrl is None:
        return None
    sh = ctrl.shift
    return BudgetShift(
        cells=ctrl.cells,
        shift=sh,
        state=budget_state(None if sh is None else sh.diff, margin),
        margin=None if sh is None else margin,
    )


def control_fields(fields: dict) -> dict:
    """The fingerprint fields (``simulate.sweep.store.fingerprint.fingerprint_fields``) of the
    budget-doubling control of a sweep with ``fields``: :func:`control_config`'s changes
    applied to the fields themselves (tested equal to the fields of :func:`control_config`),
    so a control file can be checked against the records it controls without rebuilding
    their configuration."""
    out = dict(fields)
    rule = StopRule(
        out["max_steps"], out["stop_window"], out["stop_tol"], out["stop_patience"],
        out["stop_kl_abs"], out.get("stop_risk_tol"),
    ).doubled()  # fmt: skip
    out.update(max_steps=rule.max_steps, stop_tol=rule.tol, stop_kl_abs=rule.kl_abs)
    if rule.risk_tol is not None:
        out["stop_risk_tol"] = rule.risk_tol
    if out.get("max_epochs") is not None:
        out["max_epochs"] = 2 * out["max_epochs"]
    if out.get("start") == "both":  # the control re-trains the random start's run, with
        out.pop("start")  # plain_arm at its default (control_config), which the fields omit
        out.pop("plain_arm", None)
    return out


def check_control(records: list[dict], control: list[dict], source: str, cpath: str) -> None:
    """Raise :class:`~theory.plumbing.jsonl.RecordsError` unless the control records
    ``control`` (file ``cpath``) are the budget-doubling control of ``records`` (file
    ``source``): their fingerprint fields must be :func:`control_fields` of the records'
    (the same data, seeds, truths and code settings; twice the cap, half the tolerance)."""
    if not records or not control:
        return
    # the edge: the two files checked against each other before either is read into cells
    main_fields = records[0].get("fingerprint_fields")
    got = control[0].get("fingerprint_fields")
    if not isinstance(main_fields, dict) or not isinstance(got, dict) or not main_fields:
        raise RecordsError(
            f"{source} or {cpath} carries no fingerprint_fields, so the control cannot be"
            " checked against its records; give --no-control"
        )
    try:
        want = control_fields(main_fields)
    except (KeyError, TypeError) as exc:
        raise RecordsError(f"{source}: fingerprint_fields lack {exc}; give --no-control") from None
    if got != want:
        raise RecordsError(
            f"{cpath} is not the budget-doubling control of {source} ("
            f"{fields_differing(want, got)}); give the control file of those records"
            " (--control-records) or --no-control"
        )


def control_records_path(path: str) -> str:
    """Where a sweep's budget-doubling control writes beside it: ``RECORDS-double.jsonl``
    (of a compressed ``RECORDS.jsonl.gz``, ``RECORDS-double.jsonl.gz``)."""
    gz = path.endswith(".gz")
    root, ext = os.path.splitext(path[:-3] if gz else path)
    return f"{root}-double{ext or '.jsonl'}" + (".gz" if gz else "")


def read_with_control(path: str, hint: str) -> tuple[list[dict], list[dict]]:
    """A records file of one configuration and its budget-doubling control's beside it
    (:func:`control_records_path`; none where there is no such file); ``hint``: what to
    say of a file that mixes configurations (``simulate.sweep.store.schema.one_configuration``)."""
    records = one_configuration(read_records(path), None, path, hint)
    cpath = control_records_path(path)
    if not os.path.isfile(cpath):
        return records, []
    return records, one_configuration(read_records(cpath), None, cpath, hint)


def control_config(cfg: SweepConfig, replicates: int, every_n: bool = False) -> SweepConfig:
    """The budget-doubling control's sweep: the smallest and largest n (every n with
    ``every_n``), the first ``replicates`` replicates, twice the step cap (``max_steps`` and
    ``max_epochs`` both doubled, so the cap doubles at every n), half the tolerance; same
    seeds and the same largest n, so the same data."""
    rule = cfg.stop_rule.doubled()
    return dataclasses.replace(
        cfg,
        # the control re-trains the record's own ASVI run: with both starts, the random one
        # (and so no constructive arm, the plain one included)
        start="random" if cfg.start == "both" else cfg.start,
        plain_arm=True if cfg.start == "both" else cfg.plain_arm,
        ns=list(cfg.ns) if every_n else [min(cfg.ns), max(cfg.ns)],
        replicates=min(replicates, cfg.replicates),
        max_steps=rule.max_steps,
        max_epochs=None if cfg.max_epochs is None else 2 * cfg.max_epochs,
        stop_tol=rule.tol,
        stop_kl_abs=rule.kl_abs,
        stop_risk_tol=rule.risk_tol,
    )
