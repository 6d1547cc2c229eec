"""``python -m verify.split RECORDS --floors FILE [FILE ...]``: ASVI's risk in every cell split
into the class's floor, the objective's share and the optimiser's, with their intervals and
slopes over n -- which term makes a curve flatten.

In a cell (one truth, n and replicate) of a sweep run with ``start="both"``
(``verify.starts``), ASVI's random start R selects a width w by its penalised ELBO.  At that
width three risks are known (``metric``: d^2 at the cell's sigma, or the squared L2 error):

* the **floor** F(w): the smallest risk a network of that depth and width reaches on the
  replicate's f0 itself, noiseless (``simulate.experiments.class_floor``'s records: least
  squares from the constructive and random starts, the best kept);
* the **optimum's** risk O(w): the risk of the best point of the objective known at width w,
  the candidate of width w of highest ELBO among R and the constructive posteriors (W0s,
  the spline's network with its slab sds fitted; W0f, its sds and inclusions trained with
  the locations held; W, trained from it by the same step) -- the ELBO decides which, as
  it decides everything in training; R itself where no constructive point is higher;
* R's own risk.

ASVI's risk = F + (O - F) + (R - O): the **class** term F, the **objective** term O - F (what
the objective's best known point at the class gives up against the class's best network:
its per-edge price, the posterior's spread), the **optimiser** term R - O (what the random
start's training gives up against a better point of its own objective; 0 where R is the
best known point).  O is a lower bound on the objective's value only as far as the
constructive points reach: the objective term can hold some optimiser shortfall that no
start found, never the reverse.  Each term's mean over replicates with its t interval per
n, its share of R's mean risk, and each level's (F, O, R) log-log slope, top-half slope
and bend (``verify.stats.slopes.curvature``) are reported: a term whose level bends where R
bends is the flattening's candidate cause.  Read, not decided: a decision on it is a
protocol's (confirm-v5).  Per width (item "the objective's optimum against the
optimiser"): the best constructive candidate's ELBO gap to R's candidate of the same width
and their log risk ratio, paired over replicates with intervals.

The floor is at the records' depth, at the selected width, for each replicate's own truth;
a missing floor is an error naming the command that computes it."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass, field

import numpy as np
from scipy.special import ndtr

from simulate.experiments import class_floor
from simulate.sweep.store.schema import read_records
from theory.plumbing.cli import Parser, print_error, run_main
from theory.plumbing.jsonl import RecordsError
from theory.plumbing.paths import atomic_path, check_distinct, check_output_file, path_arg
from verify import protocol as protocols
from verify.reading.pilot import realised_cv
from verify.reading.records import TruthCells, cells_of, records_protocol, truth_cells
from verify.report.split_render import decision, render
from verify.stats.slopes import (
    _t_quantile,
    curvature,
    expected_slope_se,
    fit_slope,
    paired_mean_diff,
    paired_slope_diff,
    top_half,
)

__all__ = [
    "CellSplit", "Split", "best_constructive", "cell_split", "flattening_tests", "optimum_arm",
    "replicates_for", "risk_split", "width_gaps",
]  # fmt: skip

METRICS = ("d2", "l2sq")  # the floor records hold these two
CONSTRUCTIVE = ("W0s", "W0f", "W")  # the constructive points the optimum is sought among
TERMS = ("class", "objective", "optimiser")
LEVELS = ("floor", "optimum", "random")


@dataclass(frozen=True)
class CellSplit:
    """One cell's split: R's selected ``width``, the three risks (``floor``, ``optimum``,
    ``random``), which arm is the optimum (``optimum_arm``: "R" or a constructive letter) and
    its ELBO above R's at that width (``elbo_gain``, 0 for R)."""

    n: int
    replicate: int
    width: int
    floor: float
    optimum: float
    random: float
    optimum_arm: str
    elbo_gain: float
    reference: float | None = None  # the class-matched reference's risk in the cell

    @property
    def terms(self) -> dict[str, float]:
        return {
            "class": self.floor,
            "objective": self.optimum - self.floor,
            "optimiser": self.random - self.optimum,
        }


def best_constructive(cell, width: int) -> str | None:
    """The constructive arm (one of :data:`CONSTRUCTIVE` the cell has) whose candidate of
    ``width`` has the highest finite ELBO, failed candidates excluded; None if there is
    none."""
    best, best_elbo = None, -np.inf
    for a in CONSTRUCTIVE:
        arm = cell.arms.get(a)
        if arm is None or bool(arm.at_width("failed", width)):
            continue
        e = float(arm.at_width("elbo", width))
        if np.isfinite(e) and e > best_elbo:
            best, best_elbo = a, e
    return best


def optimum_arm(cell, width: int) -> str:
    """The arm ("R" or one of :data:`CONSTRUCTIVE`) whose candidate of ``width`` has the
    highest finite ELBO (failed candidates excluded): the best point of the objective known
    at that width."""
    a = best_constructive(cell, width)
    if a is None or not cell.arms[a].at_width("elbo", width) > cell.at_width("elbo", width):
        return "R"
    return a


def cell_split(cell, floors: dict, metric: str = "d2") -> CellSplit:
    """:class:`CellSplit` of one cell (a ``verify.reading.records.Cell`` with its arms)
    against ``floors`` (``simulate.experiments.class_floor.floors``).  Raises KeyError naming
    the floor it lacks."""
    w = int(cell.selected_width)
    key = (cell.truth, cell.replicate, cell.depth, w)
    if key not in floors:
        raise KeyError(key)
    a = optimum_arm(cell, w)
    O = cell if a == "R" else cell.arms[a]
    return CellSplit(
        n=cell.n, replicate=cell.replicate, width=w, floor=float(floors[key][metric]),
        optimum=float(O.at_width(metric, w)), random=float(cell.selected(metric)),
        optimum_arm=a,
        elbo_gain=float(O.at_width("elbo", w)) - float(cell.at_width("elbo", w)),
        reference=None if cell.reference is None else cell.reference.metrics.get(metric),
    )  # fmt: skip


@dataclass(frozen=True)
class Split:
    """One truth's split over its n: per term and n the mean, its interval and its share of
    R's mean risk; per level its slope (interval), top-half slope (interval) and bend
    (interval); how often each arm was the optimum; the cells; the per-width gaps."""

    truth: str
    metric: str
    ns: tuple[int, ...]
    replicates: int
    term_mean: dict
    term_ci: dict
    term_share: dict
    level_slope: dict
    optimum_arms: dict
    cells: tuple[CellSplit, ...]
    width_gaps: tuple[dict, ...]
    flattening: dict  # term -> its test (flattening_tests), or {} without a reference
    # the replicates the split leaves out (verify.reading.records.Replicates): "incomplete"
    # (not recorded at every n), "failed" (a failed cell: (n, replicate) pairs)
    left_out: dict = field(default_factory=dict)


def _level_fit(ns, V) -> dict | None:
    """A level's slope, top-half slope and bend; None where a value is not positive (no
    log-log fit: a floor of 0, a term's level can be no lower)."""
    if not np.all(np.isfinite(V)) or np.any(V <= 0):
        return None
    fit, bend = fit_slope(ns, V), curvature(ns, V)
    return {
        "slope": fit.slope, "ci": (fit.ci_low, fit.ci_high),
        "top_half_slope": bend.top_half_slope, "top_half_ci": bend.top_half_ci,
        "bend": bend.bend, "bend_ci": bend.bend_ci,
    }  # fmt: skip


def risk_split(cells, floors: dict, metric: str = "d2", level: float = 0.95,
               replicates=None) -> Split:  # fmt: skip
    """:class:`Split` of one truth's cells (``cells[replicate][n]``, every replicate at
    every n, ascending n, or a :class:`verify.reading.records.TruthCells`, whose left-out
    replicates the split then carries); ``level``: the flattening tests' family-wise
    level."""
    if isinstance(cells, TruthCells):
        cells, replicates = cells.cells, cells.replicates
    left = {} if replicates is None else {
        "incomplete": list(replicates.dropped), "failed": [list(k) for k in replicates.failed_cells]
    }  # fmt: skip
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    S = [[cell_split(c, floors, metric) for c in row] for row in cells]
    ns = tuple(c.n for c in S[0])
    V = {lv: np.array([[getattr(s, lv) for s in row] for row in S]) for lv in LEVELS}
    T = {t: np.array([[s.terms[t] for s in row] for row in S]) for t in TERMS}
    zero = np.zeros_like(V["random"])
    mean, ci, share = {}, {}, {}
    for t in TERMS:
        d = paired_mean_diff(T[t], zero)
        mean[t], ci[t] = d.diff, d.cis
        share[t] = tuple((T[t].mean(0) / V["random"].mean(0)).tolist())
    arms: dict = {}
    for s in (s for row in S for s in row):
        arms[s.optimum_arm] = arms.get(s.optimum_arm, 0) + 1
    return Split(
        truth=cells[0][0].truth, metric=metric, ns=ns, replicates=len(S), term_mean=mean,
        term_ci=ci, term_share=share, level_slope={lv: _level_fit(ns, V[lv]) for lv in LEVELS},
        optimum_arms=arms, cells=tuple(s for row in S for s in row),
        width_gaps=width_gaps(cells, metric), flattening=flattening_tests(ns, V, S, level),
        left_out={k: v for k, v in left.items() if v},
    )  # fmt: skip


def flattening_tests(ns, V: dict, S, level: float = 0.95) -> dict:
    """Which term makes a flattening (module docstring): over the top half of the n
    (``verify.stats.slopes.top_half``), three paired slope differences, each with its
    interval at family-wise ``level`` (Bonferroni over the three, two-sided):

    * ``class``: the floor's slope minus the reference's -- the class cannot keep pace;
    * ``objective``: the optimum's slope minus the floor's -- the objective's best point
      falls behind what its class holds;
    * ``optimiser``: R's slope minus the optimum's -- training falls behind its objective.

    A term *flattens* where its interval lies wholly above 0 (its level falls more slowly
    than the one below it), *keeps pace* where it lies wholly at or below 0, and is
    undetermined otherwise.  Each test's ``cv`` (``SE sqrt(R Sxx)`` over the top half, the
    inverse of ``verify.stats.slopes.expected_slope_se``: what sizes a design) is given.
    Empty where a cell has no reference (the class test needs it); a term is None where a
    level is not positive."""
    refs = np.array([[s.reference for s in row] for row in S], dtype=float)
    if not np.all(np.isfinite(refs)) or np.any(refs <= 0):
        return {}
    top = top_half(ns)
    R = refs.shape[0]
    lv = 1 - (1 - level) / 3
    pairs = {"class": ("floor", refs), "objective": ("optimum", V["floor"]),
             "optimiser": ("random", V["optimum"])}  # fmt: skip
    out = {}
    for term, (upper, lower) in pairs.items():
        A, B = V[upper][:, top], np.asarray(lower)[:, top]
        if np.any(A <= 0) or np.any(B <= 0):
            out[term] = None
            continue
        d = paired_slope_diff(np.asarray(ns, dtype=float)[top], A, B, level=lv)
        verdict = "flattens" if d.ci_low > 0 else "keeps_pace" if d.ci_high <= 0 else "undetermined"
        out[term] = {"diff": d.diff, "ci": d.ci, "se": d.se, "level": lv,
                     "cv": realised_cv(d.se, np.asarray(ns)[top], R),
                     "verdict": verdict}  # fmt: skip
    return out


def replicates_for(cv: float, ns, effect: float, level: float = 1 - 0.05 / 3,
                   power: float = 0.9, limit: int = 10_000) -> int | None:  # fmt: skip
    """The fewest replicates at which a flattening test over the top half of ``ns`` says
    "flattens" with probability at least ``power`` when a term's slope difference is
    ``effect`` (> 0): ``Phi(effect / SE - t_{R-1}) >= power`` with ``SE = cv / sqrt(R Sxx)``
    over the top half (``verify.stats.slopes.expected_slope_se``) and ``t`` the two-sided
    ``level``'s quantile; None past ``limit``."""
    top = np.asarray(ns, dtype=float)[top_half(ns)]
    for R in range(2, limit + 1):
        se = expected_slope_se(top, R, cv)
        if ndtr(effect / se - _t_quantile(level, R - 1)) >= power:
            return R
    return None


def width_gaps(cells, metric: str = "d2") -> tuple[dict, ...]:
    """Per n and candidate width: the best constructive candidate's (highest ELBO of
    :data:`CONSTRUCTIVE` at that width, per replicate) ELBO minus R's and log risk ratio
    to R's, paired over the replicates that hold the width with t intervals (``n``,
    ``width``, ``replicates``: how many hold it, ``elbo_gap``, ``elbo_ci``,
    ``log_risk_ratio``, ``risk_ci``, ``constructive_higher``: the replicates whose
    constructive candidate has the higher ELBO).  Where the class grows at its edge a
    width past the ladder is held by the replicates whose ELBO grew it, not by all: its
    row is over those (at least 2) and says how many.  A width where some holder has no
    constructive candidate is not compared."""
    out = []
    for j, c0 in enumerate(cells[0]):
        for w in sorted(set().union(*(row[j].widths for row in cells))):
            e_R, r_R, e_C, r_C = [], [], [], []
            holders = [row[j] for row in cells if w in row[j].widths]
            for c in holders:
                best = best_constructive(c, w)
                if best is None:  # no constructive candidate of this width: not compared
                    break
                e_R.append(c.at_width("elbo", w))
                r_R.append(c.at_width(metric, w))
                e_C.append(c.arms[best].at_width("elbo", w))
                r_C.append(c.arms[best].at_width(metric, w))
            if len(e_C) < max(len(holders), 2):
                continue
            de = paired_mean_diff(np.array(e_C)[:, None], np.array(e_R)[:, None])
            dr = paired_mean_diff(np.log(r_C)[:, None], np.log(r_R)[:, None])
            out.append({
                "n": c0.n, "width": int(w), "replicates": len(holders),
                "elbo_gap": de.diff[0], "elbo_ci": de.cis[0],
                "log_risk_ratio": dr.diff[0], "risk_ci": dr.cis[0],
                "constructive_higher": int(np.sum(np.array(e_C) > np.array(e_R))),
            })  # fmt: skip
    return tuple(out)


def truth_grids(records: list[dict]) -> dict[str, TruthCells]:
    """The records' ASVI cells per truth as ``verify.reading.records.truth_cells`` reads them
    for every verdict: the replicates recorded at every n the truth has, less any replicate
    with a failed cell; who is left out, and why, is kept (``.replicates``) and printed.  An
    incomplete replicate never drops an n (the top half the tests read stays the design's).
    A truth without constructive arms, or not a Hoelder truth, is an error: the class
    floor (``simulate.experiments.class_floor``) is fitted for Hoelder truths only, and for
    a teacher the constructive start embeds the teacher network itself, so its optimum O
    would be seeded by the truth."""
    by: dict = {}
    for c in cells_of(records):
        if c.source != "asvi":
            continue
        if c.spec.kind != "holder":
            raise ValueError(f"{c.truth}: the split reads Hoelder truths only (a {c.spec.kind}"
                             " truth has no class floor, and a teacher's constructive start"
                             " embeds the truth)")  # fmt: skip
        if not c.failed and not c.arms:
            raise ValueError(f"{c.truth}: records without constructive arms (run start='both')")
        by.setdefault(c.truth, []).append(c)
    return {truth: truth_cells(truth, cells) for truth, cells in sorted(by.items())}


def short_of(truth: str, recorded, p) -> str | None:
    """What one truth's records lack of protocol ``p``'s design (its sweeps' n and
    replicates, ``verify.protocol.design_tier``): None where every (n, replicate) of the
    design is recorded (a failed cell is recorded: its replicate is left out, as every
    verdict leaves it out, and said), else what is missing -- the split on such records is
    read under the rule, never the protocol's decision.  ``recorded``: the (n, replicate)
    pairs of the truth's records."""
    want = {
        t.key: (tuple(int(n) for n in s["sweep"]["ns"]), int(s["sweep"]["replicates"]))
        for s in protocols.design_tier(p)["sweeps"]
        for t in s["truths"]
    }
    if truth not in want:
        return f"{truth} is not a truth of protocol {p.name}"
    ns, R = want[truth]
    missing = {(n, r) for n in ns for r in range(R)} - set(recorded)
    if not missing:
        return None
    by_n = sorted({n for n, _ in missing})
    return f"{len(missing)} of its {len(ns) * R} cells unrecorded (at n = {by_n})"


SPLIT_KEYS = ("metric", "level", "terms", "floor")  # what a protocol's [split] may hold


def _rules(args, p) -> tuple[str, float, dict | None, int | None]:
    """The split's metric, level, floors' settings and floors' depth: the protocol's
    ``[split]`` (a metric given beside it must agree; only floor rows of its
    ``[split.floor]`` settings are read, and the records' depth must be its ``depth``),
    else the flag's (d2), 0.95, any and the records'.  A key the split does not read, or
    terms other than :data:`TERMS`, is an error: nothing a protocol states is passed over.
    ``p`` is the loaded protocol (None without ``--protocol``)."""
    if p is None:
        return args.metric or "d2", 0.95, None, None
    if not p.split:
        raise ValueError(f"protocol {p.name} has no [split]")
    unknown = sorted(set(p.split) - set(SPLIT_KEYS))
    if unknown:
        raise ValueError(f"protocol {p.name}: [split] holds {unknown}, which the split does"
                         f" not read (it reads {list(SPLIT_KEYS)})")  # fmt: skip
    if tuple(p.split.get("terms", TERMS)) != TERMS:
        raise ValueError(f"protocol {p.name}: [split] terms {p.split['terms']}; the split"
                         f" tests {list(TERMS)}")  # fmt: skip
    metric = str(p.split.get("metric", "d2"))
    if args.metric is not None and args.metric != metric:
        raise ValueError(f"protocol {p.name} splits {metric}, not --metric {args.metric}")
    floor = dict(p.split.get("floor", {}))
    depth = floor.pop("depth", None)
    return metric, float(p.split.get("level", 0.95)), floor or None, depth


def _missing_floor_error(key, records: str) -> str:
    truth, rep, depth, w = key
    alpha = truth.split("-a")[1].split("-")[0] if "-a" in truth else "A"
    seed = truth.rsplit("-s", 1)[-1]
    return (
        f"no class floor of {truth}, replicate {rep}, depth {depth}, width {w} in the floors"
        f" given; compute it: python -m simulate.experiments.class_floor --alpha {alpha}"
        f" --truth-seed {seed} --replicate {rep} --depth {depth} --widths {w} --out FILE"
        f" (the records: {records})"
    )


def _short(protocol, truth: str, records: list[dict]) -> str | None:
    """:func:`short_of` the ``protocol`` for ``truth``'s cells of ``records`` (None if none)."""
    if protocol is None:
        return None
    got = {(c.n, c.replicate) for c in cells_of(records) if c.truth == truth}
    return short_of(truth, got, protocol)


def main(argv=None) -> int:
    ap = Parser(prog="python -m verify.split", description=__doc__.split("\n\n")[0])
    ap.add_argument("records", type=path_arg, nargs="+",
                    help="a sweep's records with start='both' (several: their cells together,"
                    " each (truth, n, replicate) once)")  # fmt: skip
    ap.add_argument("--floors", type=path_arg, nargs="+", required=True, metavar="FILE",
                    help="class-floor records (simulate.experiments.class_floor)")  # fmt: skip
    ap.add_argument("--metric", choices=METRICS, default=None,
                    help="the risk split (d2 unless a --protocol names it)")  # fmt: skip
    ap.add_argument("--protocol", default=None, metavar="NAME",
                    help="a protocol with a [split] (confirm-v5): its metric, level and"
                    " decision")  # fmt: skip
    ap.add_argument("--json", type=path_arg, metavar="PATH", default=None,
                    help="write every truth's split as JSON")  # fmt: skip
    args = ap.parse_args(argv)
    try:
        if missing := [p for p in [*args.records, *args.floors] if not os.path.isfile(p)]:
            raise ValueError(f"no file {missing[0]}")
        if args.json:
            check_output_file(args.json, "--json")
            ins = [("RECORDS", r) for r in args.records] + [("--floors", f) for f in args.floors]
            check_distinct([("--json", args.json)], ins)
        proto = None if args.protocol is None else protocols.load(args.protocol)
        metric, level, floor_settings, depth = _rules(args, proto)
        rows = [r for f in args.floors for r in class_floor.read_rows(f)]
        floors = class_floor.floors([r for r in rows if floor_settings in (None, r["settings"])])
        records = [r for path in args.records for r in read_records(path)]
        grids = truth_grids(records)
        if depth is not None and any(c.depth != depth for g in grids.values()
                                     for c in g.cells_used):  # fmt: skip
            raise ValueError(f"the records' depth is not the protocol's floors' ({depth})")
        splits = [risk_split(g, floors, metric, level) for g in grids.values()]
        tag = records_protocol(cells_of(records))
        own = proto is not None and tag == proto.tag
        shorts = [_short(proto, sp.truth, records) if own else None for sp in splits]
    except KeyError as exc:
        print_error(_missing_floor_error(exc.args[0], " ".join(args.records)))
        return 2
    except (ValueError, OSError, RecordsError) as exc:
        print_error(exc)
        return 2
    said = [decision(sp, args.protocol, own, s) for sp, s in zip(splits, shorts, strict=True)]
    print("\n\n".join(render(sp) + "\n" + d for sp, d in zip(splits, said, strict=True)))
    if args.json:
        out = [{**asdict(sp), "decision": d} for sp, d in zip(splits, said, strict=True)]
        with atomic_path(args.json) as tmp, open(tmp, "w") as fh:
            json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
