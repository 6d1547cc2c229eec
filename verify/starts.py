"""The constructive-start comparison: is ASVI's shortfall the objective or the optimiser?

A sweep run with ``start="both"`` (``simulate.references.constructive``) holds five arms per cell:
``R`` (the random start, the record's own fields), and under ``arms``: ``W0`` (the
constructive start, untrained), ``W0s`` (the same network with its slab sds fitted, still
untrained), ``W`` (trained from W0 by the same step and stopping rule) and ``P`` (plain
Adam on squared error from it, early-stopped on validation data).  Each arm selects its
width on its own criterion.  The theorems speak of the ELBO's maximiser; comparing the
constructive posteriors with R on the same objective tells which is nearer it:

* ``elbo_gap`` per n: ELBO(W) - ELBO(R) of the selected candidates, paired over
  replicates (nats; positive: the constructive start reached a better optimum), and
  ``elbo_gap_scaled``: ELBO(W0s) - ELBO(R);
* ``drift`` per n: W's risk against its start's (the mean log ratio of the metric) and
  W's ELBO against the start's -- the start with its scales fitted (W0s) where the records
  have it, else W0: training from the spline that *raises* the risk while it raises the
  ELBO above the start's says the objective prefers the worse fit;
* the slopes of W, W0s and R with their attainment verdicts (``verify.reading.analysis``; the
  theorem test's where a truth has no reference, the teachers);
* one answer per truth (:func:`answer`) from one criterion fixed before the run: the
  paired ELBO gap ``ELBO(C) - ELBO(R)`` at the largest n with its interval, ``C`` the
  protocol's constructive arm (``starts_arm``: W0s, the start with its slab sds fitted, in
  the shipped protocols; W where a record has no W0s).  It measures whether the random
  start stops below a point of higher ELBO, not whether the ELBO's optimum attains the
  rate (C is a better point than R, not the optimum); the risks, slopes and the
  objective's evidence are reported beside it and do not decide.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from simulate.sweep.store.schema import read_records
from theory.plumbing.cli import Parser, print_error, run_main
from theory.plumbing.jsonl import RecordsError
from theory.plumbing.paths import path_arg
from verify.reading.records import ARM_ESTIMATORS, cells_of
from verify.stats.slopes import paired_mean_diff
from verify.stats.verdict import Verdict

__all__ = [
    "ARM_ESTIMATORS", "ArmMeans", "Evidence", "Starts", "answer", "arm_columns", "arms_table",
    "compare_starts",
]  # fmt: skip

# the answer's one pre-specified criterion: the paired ELBO gap ELBO(C) - ELBO(R) at the
# largest n, C the protocol's constructive arm (verify.protocol: starts_arm); each key says
# what that measured, nothing more
ANSWERS = {
    "optimiser": "the random start stops below the objective's value at the constructive "
    "posterior (ELBO(C) > ELBO(R)): the optimiser misses a better point of its own "
    "objective",
    "no-better-start": "the random start's ELBO is above the constructive posterior's "
    "(ELBO(R) > ELBO(C)): no better point of the objective was found near the constructive "
    "start",
    "undecided": "the ELBO gap's interval contains 0: the criterion does not decide",
}
EVIDENCE_LEVEL = 0.95  # family-wise, Bonferroni over the (arm, width) pairs examined


def arm_columns(cells, arm: str, key: str) -> np.ndarray:
    """``[replicate, n]``: the selected candidate's ``per_width[key]`` of ``arm`` in every
    cell (``cells[replicate][n]``, :class:`verify.reading.records.Cell`)."""
    est = ARM_ESTIMATORS[arm]
    return np.array([[c.arm(est).selected(key) for c in row] for row in cells])


@dataclass(frozen=True)
class ArmMeans:
    """Per n, one arm's means over the replicates of its selected candidate's ELBO, L1,
    L2, L3, kept edges, d2, d, l2sq and steps, and of the selected width."""

    elbo: tuple[float, ...]
    L1: tuple[float, ...]
    L2: tuple[float, ...]
    L3: tuple[float, ...]
    edges: tuple[float, ...]
    d2: tuple[float, ...]
    d: tuple[float, ...]
    l2sq: tuple[float, ...]
    steps: tuple[float, ...]
    width: tuple[float, ...]


def arm_means(cells, arm: str) -> ArmMeans:
    """:class:`ArmMeans` of ``arm`` over ``cells[replicate][n]``."""

    def mean(key: str) -> tuple[float, ...]:
        return tuple(arm_columns(cells, arm, key).mean(0).tolist())

    est = ARM_ESTIMATORS[arm]
    widths = [[c.arm(est).selected_width for c in row] for row in cells]
    return ArmMeans(
        elbo=mean("elbo"), L1=mean("L1"), L2=mean("L2"), L3=mean("L3"),
        edges=mean("edges_sum_nu"), d2=mean("d2"), d=mean("d"), l2sq=mean("l2sq"),
        steps=mean("steps"), width=tuple(np.array(widths, dtype=float).mean(0).tolist()),
    )  # fmt: skip


ARM_HEADER = (
    f"{'arm':>4s} {'-ELBO':>10s} {'L1':>10s} {'L2':>9s} {'L3':>8s} {'edges':>7s}"
    f" {'width':>6s} {'d2':>9s} {'l2sq':>9s} {'steps':>7s}"
)


def arm_row(arm: str, t: ArmMeans, j: int) -> str:
    """One arm's row of :data:`ARM_HEADER` at position j of :func:`arm_means`' columns."""
    return (
        f"{arm:>4s} {-t.elbo[j]:10.1f} {t.L1[j]:10.1f} {t.L2[j]:9.1f}"
        f" {t.L3[j]:8.1f} {t.edges[j]:7.1f} {t.width[j]:6.1f} {t.d2[j]:9.4g}"
        f" {t.l2sq[j]:9.4g} {t.steps[j]:7.0f}"
    )


def _verdict(res) -> Verdict | None:
    """An entry's (``verify.results.MetricResult``) decisive verdict: attainment where the
    truth has a reference, else the theorem test's."""
    if res is None:
        return None
    return res.attainment.verdict if res.attainment is not None else res.theorem.verdict


@dataclass(frozen=True)
class Evidence:
    """A constructive candidate whose risk is below R's selected posterior while its
    ELBO is also below it (:func:`objective_evidence`): the arm, the width, the paired
    ELBO difference and log risk ratio against R's selected, with their intervals."""

    arm: str
    width: int
    elbo_diff: float
    elbo_ci: tuple[float, float]
    log_risk_ratio: float
    risk_ci: tuple[float, float]


@dataclass(frozen=True)
class Starts:
    """The constructive-start comparison of one truth and metric (module docstring), on
    the random start's entry: per n the paired ELBO gap W - R with its intervals; the
    protocol's constructive arm C (``constructive_arm``) with its ELBO gap C - R and log
    risk ratio C/R per n, its slope and attainment verdict; W's drift from its start
    (``drift_from``: W0s or W0) in ELBO and log risk; the slopes and verdicts of W and R;
    the arms' means per n (``arms``, by letter); the n; the objective's evidence; and the
    answer (its key and its sentence)."""

    elbo_gap: tuple[float, ...]
    elbo_gap_ci: tuple[tuple[float, float], ...]
    constructive_arm: str
    elbo_gap_best: tuple[float, ...]
    elbo_gap_best_ci: tuple[tuple[float, float], ...]
    log_risk_ratio_best: tuple[float, ...]
    log_risk_ratio_best_ci: tuple[tuple[float, float], ...]
    slope_best: float | None
    attainment_verdict_best: Verdict | None
    drift_from: str
    elbo_w_minus_w0: tuple[float, ...]
    elbo_w_minus_w0_ci: tuple[tuple[float, float], ...]
    drift_log_ratio: tuple[float, ...]
    drift_log_ratio_ci: tuple[tuple[float, float], ...]
    slope_constructive: float | None
    slope_random: float | None
    attainment_verdict_constructive: Verdict | None
    attainment_verdict_random: Verdict | None
    arms: Mapping[str, ArmMeans]  # read-only (types.MappingProxyType)
    ns: tuple[int, ...]
    objective_evidence: tuple[Evidence, ...]
    answer_key: str
    answer: str


def compare_starts(cells, ns, metric: str, by_est: dict, arm: str = "W0s") -> Starts:
    """The comparison (:class:`Starts`) for one truth and metric (module docstring) over
    ``cells[replicate][n]``.  ``by_est``: this truth and metric's result per estimator;
    ``arm``: the protocol's constructive arm C (W where the records lack it)."""
    arms = [a for a in ("R", "W0", "W0s", "W0f", "W", "P") if ARM_ESTIMATORS[a] in by_est]
    table = {a: arm_means(cells, a) for a in arms}
    elbo = {a: arm_columns(cells, a, "elbo") for a in arms}
    risk = {a: arm_columns(cells, a, metric) for a in arms}
    gap = paired_mean_diff(elbo["W"], elbo["R"])
    C = arm if arm in arms else "W"
    gap_c = paired_mean_diff(elbo[C], elbo["R"])
    risk_c = paired_mean_diff(np.log(risk[C]), np.log(risk["R"]))
    # the drift is measured from the start with its scales fitted where there is one: W0's
    # sds (the core's initial 0.0025) make its ELBO low for a reason training fixes first,
    # so "W's ELBO above W0's" would credit the objective with the widening of the sds
    S = "W0s" if "W0s" in arms else "W0"
    w_vs_w0 = paired_mean_diff(elbo["W"], elbo[S])
    drift = paired_mean_diff(np.log(risk["W"]), np.log(risk[S]))
    rW, rR = by_est.get("asvi-constructive"), by_est.get("asvi")
    rC = by_est.get(ARM_ESTIMATORS[C])
    evidence = objective_evidence(cells, metric, arms)
    key, sentence = _answer(AnswerValues(
        C=C, n=ns[-1], gap_best=gap_c.diff[-1], gap_best_ci=gap_c.cis[-1],
        log_risk_ratio_best=risk_c.diff[-1], elbo_gap=gap.diff[-1], drift_from=S,
        drift_log_ratio=drift.diff[-1], elbo_w_minus_w0=w_vs_w0.diff[-1],
        slope_best=_slope(rC), slope_random=_slope(rR), slope_constructive=_slope(rW),
        verdict_best=_verdict(rC), verdict_random=_verdict(rR),
        verdict_constructive=_verdict(rW), d2={a: t.d2[-1] for a, t in table.items()},
        evidence=evidence,
    ))  # fmt: skip
    return Starts(
        elbo_gap=gap.diff,
        elbo_gap_ci=gap.cis,
        constructive_arm=C,
        elbo_gap_best=gap_c.diff,
        elbo_gap_best_ci=gap_c.cis,
        log_risk_ratio_best=risk_c.diff,
        log_risk_ratio_best_ci=risk_c.cis,
        slope_best=_slope(rC),
        attainment_verdict_best=_verdict(rC),
        drift_from=S,
        elbo_w_minus_w0=w_vs_w0.diff,
        elbo_w_minus_w0_ci=w_vs_w0.cis,
        drift_log_ratio=drift.diff,
        drift_log_ratio_ci=drift.cis,
        slope_constructive=_slope(rW),
        slope_random=_slope(rR),
        attainment_verdict_constructive=_verdict(rW),
        attainment_verdict_random=_verdict(rR),
        arms=MappingProxyType(table),
        ns=tuple(ns),
        objective_evidence=evidence,
        answer_key=key,
        answer=sentence,
    )


def objective_evidence(cells, metric: str, arms) -> tuple[Evidence, ...]:
    """At the largest n: every candidate of the constructive posteriors (W0s and W, each
    width) whose risk is below R's selected posterior while its ELBO is also below it, both
    paired over replicates with intervals at family-wise level :data:`EVIDENCE_LEVEL`
    (Bonferroni over every (arm, width) pair examined): posteriors the objective ranks
    below the worse fit it selects.  Returns one :class:`Evidence` per such candidate.

    The widths examined are those every replicate holds at the largest n.  Where the class
    grows at its edge (``simulate.sweep.train.edge``) a replicate's own candidates run past
    the ladder only while its ELBO selects its widest, so a grown width is held by a
    subset chosen by R's own selection: pairing over it would not be the replicates' mean,
    and it is left out here (``verify.split.width_gaps`` reports each width with the
    replicates that hold it)."""
    last = [row[-1] for row in cells]
    widths = sorted(set.intersection(*(set(c.widths) for c in last)))
    pairs = [(a, w) for a in ("W0s", "W") if a in arms for w in widths]
    if not pairs:
        return ()
    level = 1 - (1 - EVIDENCE_LEVEL) / len(pairs)
    sel = [[c] for c in last]
    e_R, r_R = arm_columns(sel, "R", "elbo")[:, 0], arm_columns(sel, "R", metric)[:, 0]
    out = []
    for a, w in pairs:
        e = np.array([c.arms[a].at_width("elbo", w) for c in last])
        r = np.array([c.arms[a].at_width(metric, w) for c in last])
        de = paired_mean_diff(e[:, None], e_R[:, None], level)
        dr = paired_mean_diff(np.log(r)[:, None], np.log(r_R)[:, None], level)
        if de.ci_high[0] < 0 and dr.ci_high[0] < 0:
            out.append(
                Evidence(
                    arm=a,
                    width=int(w),
                    elbo_diff=de.diff[0],
                    elbo_ci=de.cis[0],
                    log_risk_ratio=dr.diff[0],
                    risk_ci=dr.cis[0],
                )
            )
    return tuple(out)


def answer(c: Starts) -> tuple[str, str]:
    """One of :data:`ANSWERS` for a comparison, from its one criterion: the paired ELBO gap
    ``ELBO(C) - ELBO(R)`` at the largest n (module docstring) -- ``optimiser`` when its
    interval lies above 0, ``no-better-start`` when below, else ``undecided``.  The
    sentence carries the criterion's numbers first, then what is reported beside it.
    :func:`compare_starts` derives the same from the values it computes, before it builds
    the comparison; this reads them back from a built one."""
    return _answer(AnswerValues(
        C=c.constructive_arm, n=c.ns[-1], gap_best=c.elbo_gap_best[-1],
        gap_best_ci=c.elbo_gap_best_ci[-1], log_risk_ratio_best=c.log_risk_ratio_best[-1],
        elbo_gap=c.elbo_gap[-1], drift_from=c.drift_from,
        drift_log_ratio=c.drift_log_ratio[-1], elbo_w_minus_w0=c.elbo_w_minus_w0[-1],
        slope_best=c.slope_best, slope_random=c.slope_random,
        slope_constructive=c.slope_constructive, verdict_best=c.attainment_verdict_best,
        verdict_random=c.attainment_verdict_random,
        verdict_constructive=c.attainment_verdict_constructive,
        d2={a: t.d2[-1] for a, t in c.arms.items()}, evidence=c.objective_evidence,
    ))  # fmt: skip


@dataclass(frozen=True)
class AnswerValues:
    """The comparison's values at the largest n that :func:`answer` words (``C``: the
    constructive arm compared; ``d2``: each arm's mean d^2 there, by letter): what
    :func:`compare_starts` computes and a built :class:`Starts` holds."""

    C: str
    n: int
    gap_best: float
    gap_best_ci: tuple[float, float]
    log_risk_ratio_best: float
    elbo_gap: float
    drift_from: str
    drift_log_ratio: float
    elbo_w_minus_w0: float
    slope_best: float | None
    slope_random: float | None
    slope_constructive: float | None
    verdict_best: Verdict | None
    verdict_random: Verdict | None
    verdict_constructive: Verdict | None
    d2: Mapping[str, float]
    evidence: tuple[Evidence, ...]


def _answer(v: AnswerValues) -> tuple[str, str]:
    """:func:`answer` from the comparison's values at the largest n (:class:`AnswerValues`)."""
    C, n, gap_best, gap_best_ci = v.C, v.n, v.gap_best, v.gap_best_ci
    log_risk_ratio_best, elbo_gap, drift_from = v.log_risk_ratio_best, v.elbo_gap, v.drift_from
    drift_log_ratio, elbo_w_minus_w0 = v.drift_log_ratio, v.elbo_w_minus_w0
    slope_best, slope_random = v.slope_best, v.slope_random
    slope_constructive = v.slope_constructive
    verdict_best, verdict_random = v.verdict_best, v.verdict_random
    verdict_constructive, d2, evidence = v.verdict_constructive, v.d2, v.evidence
    glo, ghi = gap_best_ci
    key = "optimiser" if glo > 0 else "no-better-start" if ghi < 0 else "undecided"
    s = (
        f"{ANSWERS[key]}: at n = {n} ELBO({C}) - ELBO(R) = {gap_best:+.1f} [{glo:+.1f},"
        f" {ghi:+.1f}] nats.  Beside it, not deciding: risk {C}/R"
        f" x{np.exp(log_risk_ratio_best):.2f}; {C} slope {_f(slope_best)} ({verdict_best})"
        f"; R slope {_f(slope_random)} ({verdict_random}); W slope {_f(slope_constructive)}"
        f" ({verdict_constructive}), ELBO(W) - ELBO(R) = {elbo_gap:+.1f}; risk W/{drift_from}"
        f" x{np.exp(drift_log_ratio):.2f} while ELBO(W) - ELBO({drift_from}) ="
        f" {elbo_w_minus_w0:+.1f}; d2 R {d2['R']:.4g}, W0 {d2['W0']:.4g}, W {d2['W']:.4g}"
        + (f", W0s {d2['W0s']:.4g}" if "W0s" in d2 else "")
        + "".join(
            f"; {e.arm} at width {e.width}: ELBO {e.elbo_diff:+.0f} nats and risk"
            f" x{np.exp(e.log_risk_ratio):.2f} against R's selected"
            for e in evidence
        )
    )
    return key, s


def _slope(res) -> float | None:
    """An entry's (``verify.results.MetricResult``) theorem slope (None: no entry)."""
    return None if res is None else res.theorem.slope


def _f(x) -> str:
    return "n/a" if x is None else f"{x:+.3f}"


# --------------------------------------------------------------------------- any n
def arms_table(records: list[dict]) -> str:
    """Per truth and n of constructive-start records (any number of n, so a single-n run
    such as the deep students' can be read): each arm's mean ELBO parts, kept edges,
    selected width, d^2 and steps over the replicates, and the paired ELBO gaps W - R and
    W0s - R with their 95% intervals."""
    by: dict = {}
    for c in cells_of(records):
        if c.arms and not c.failed:
            by.setdefault((c.truth, c.depth, c.n), []).append(c)
    if not by:
        raise ValueError("no records with constructive-start arms (a sweep with start='both')")
    lines = []
    for (truth, depth, n), recs in sorted(by.items()):
        recs.sort(key=lambda c: c.replicate)
        cells = [[c] for c in recs]
        arms = [a for a in ("R", "W0", "W0s", "W0f", "W", "P")
                if a == "R" or a in recs[0].arms]  # fmt: skip
        lines.append(f"== {truth}, depth {depth}, n = {n}, {len(recs)} replicates")
        lines.append(ARM_HEADER)
        lines += [arm_row(a, arm_means(cells, a), 0) for a in arms]
        if recs[0].reference is not None:
            ref = {m: np.mean([c.reference.metrics[m] for c in recs]) for m in ("d2", "l2sq")}
            lines.append(f" ref {'':>58s} {ref['d2']:9.4g} {ref['l2sq']:9.4g}")
        for a in [x for x in ("W", "W0s", "W0f") if x in arms]:
            d = paired_mean_diff(arm_columns(cells, a, "elbo"), arm_columns(cells, "R", "elbo"))
            lines.append(
                f"  ELBO({a}) - ELBO(R) = {d.diff[0]:+.1f} [{d.ci_low[0]:+.1f},"
                f" {d.ci_high[0]:+.1f}] nats"
            )
    return "\n".join(lines)


def main(argv=None) -> int:
    """``python -m verify.starts RECORDS``: :func:`arms_table` of a records file."""

    ap = Parser(
        prog="python -m verify.starts",
        description="The constructive-start arms of a records file, per truth, depth and n.",
    )
    ap.add_argument("records", type=path_arg)
    args = ap.parse_args(argv)
    try:
        if not os.path.isfile(args.records):
            raise ValueError(f"no records file {args.records}")
        print(arms_table(read_records(args.records)))
    except (ValueError, OSError, RecordsError) as exc:
        print_error(exc)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main))
