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
* the slopes of W, W0s and R with their attainment verdicts (``verify.analysis``; the
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

import numpy as np

from theory.cli import Parser
from verify.slopes import paired_mean_diff

__all__ = [
    "ARM_ESTIMATORS", "answer", "arm_columns", "arms_table", "compare_starts", "primary_estimator",
]  # fmt: skip

# the arms' names as estimators in verify's results
ARM_ESTIMATORS = {
    "R": "asvi",
    "W": "asvi-constructive",
    "W0": "constructive-start",
    "W0s": "constructive-start-scaled",
    "W0f": "constructive-start-fitted",
    "P": "plain-adam",
}
ESTIMATOR_ARMS = {v: k for k, v in ARM_ESTIMATORS.items()}

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


def primary_estimator(rec: dict) -> str:
    """The estimator a sweep record's own fields hold: ASVI from a random start, or from
    the constructive start when that was the only ASVI run (``start="constructive"``)."""
    return "asvi-constructive" if rec.get("config", {}).get("start") == "constructive" else "asvi"


def arm_view(rec: dict, estimator: str) -> dict:
    """The record as if ``estimator``'s arm were its own fields (per_width, selection,
    metrics), so every fit of ``verify.analysis`` runs on it unchanged."""
    if estimator == primary_estimator(rec):
        return rec
    arm = rec["arms"][ESTIMATOR_ARMS[estimator]]
    return {**rec, **arm}


def arm_columns(cells, arm: str, key: str) -> np.ndarray:
    """``[replicate, n]``: the selected candidate's ``per_width[key]`` of ``arm`` in every
    cell (``cells[replicate][n]``)."""
    est = ARM_ESTIMATORS[arm]
    out = []
    for row in cells:
        vals = []
        for c in row:
            v = arm_view(c, est)
            w = v["per_width"]
            k = c["config"]["widths"].index(v["selected_width"])
            vals.append(float(w[key][k]))
        out.append(vals)
    return np.array(out)


def arm_means(cells, arm: str) -> dict:
    """Per n, ``arm``'s means over the replicates of its selected candidate's ELBO, L1, L2,
    L3, kept edges, d2, d, l2sq and steps, and of the selected width."""
    keys = (
        ("elbo", "elbo"), ("L1", "L1"), ("L2", "L2"), ("L3", "L3"), ("edges", "edges_sum_nu"),
        ("d2", "d2"), ("d", "d"), ("l2sq", "l2sq"), ("steps", "steps"),
    )  # fmt: skip
    out = {k: arm_columns(cells, arm, key).mean(0).tolist() for k, key in keys}
    est = ARM_ESTIMATORS[arm]
    widths = [[arm_view(c, est)["selected_width"] for c in row] for row in cells]
    out["width"] = np.array(widths, dtype=float).mean(0).tolist()
    return out


ARM_HEADER = (
    f"{'arm':>4s} {'-ELBO':>10s} {'L1':>10s} {'L2':>9s} {'L3':>8s} {'edges':>7s}"
    f" {'width':>6s} {'d2':>9s} {'l2sq':>9s} {'steps':>7s}"
)


def arm_row(arm: str, t: dict, j: int) -> str:
    """One arm's row of :data:`ARM_HEADER` at position j of :func:`arm_means`' lists."""
    return (
        f"{arm:>4s} {-t['elbo'][j]:10.1f} {t['L1'][j]:10.1f} {t['L2'][j]:9.1f}"
        f" {t['L3'][j]:8.1f} {t['edges'][j]:7.1f} {t['width'][j]:6.1f} {t['d2'][j]:9.4g}"
        f" {t['l2sq'][j]:9.4g} {t['steps'][j]:7.0f}"
    )


def _verdict(res: dict | None) -> str | None:
    """An entry's decisive verdict: attainment where the truth has a reference, else the
    theorem test's."""
    if res is None:
        return None
    return res.attainment_verdict if res.attainment_verdict is not None else res.verdict


def compare_starts(cells: list, ns, metric: str, by_est: dict, arm: str = "W0s") -> dict:
    """The comparison's keys for one truth and metric (module docstring): ``elbo_gap``,
    ``elbo_gap_ci``, ``slope_constructive``, ``slope_random``,
    ``attainment_verdict_constructive``, ``attainment_verdict_random``, per-arm means per n
    (``arms``: ELBO, L1, L2, L3, kept edges, selected width, d2, d, l2sq, steps), the drift
    of W from W0, and the ``answer``.  ``by_est``: this truth and metric's result per
    estimator; ``arm``: the protocol's constructive arm C (W where the records lack it)."""
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

    def cis(d):
        return [list(x) for x in zip(d["ci_low"], d["ci_high"], strict=True)]

    out = {
        "elbo_gap": gap["diff"],
        "elbo_gap_ci": cis(gap),
        "constructive_arm": C,
        "elbo_gap_best": gap_c["diff"],
        "elbo_gap_best_ci": cis(gap_c),
        "log_risk_ratio_best": risk_c["diff"],
        "log_risk_ratio_best_ci": cis(risk_c),
        "slope_best": None if rC is None else rC.slope,
        "attainment_verdict_best": _verdict(rC),
        "drift_from": S,
        "elbo_w_minus_w0": w_vs_w0["diff"],
        "elbo_w_minus_w0_ci": [
            list(x) for x in zip(w_vs_w0["ci_low"], w_vs_w0["ci_high"], strict=True)
        ],
        "drift_log_ratio": drift["diff"],
        "drift_log_ratio_ci": [
            list(x) for x in zip(drift["ci_low"], drift["ci_high"], strict=True)
        ],
        "slope_constructive": None if rW is None else rW.slope,
        "slope_random": None if rR is None else rR.slope,
        "attainment_verdict_constructive": _verdict(rW),
        "attainment_verdict_random": _verdict(rR),
        "arms": table,
        "ns": list(ns),
    }
    out["objective_evidence"] = objective_evidence(cells, metric, arms)
    out["answer_key"], out["answer"] = answer(out)
    return out


def objective_evidence(cells, metric: str, arms) -> list[dict]:
    """At the largest n: every candidate of the constructive posteriors (W0s and W, each
    width) whose risk is below R's selected posterior while its ELBO is also below it, both
    paired over replicates with intervals at family-wise level :data:`EVIDENCE_LEVEL`
    (Bonferroni over every (arm, width) pair examined): posteriors the objective ranks
    below the worse fit it selects.  Returns ``{arm, width, elbo_diff, elbo_ci,
    log_risk_ratio, risk_ci}`` per such candidate."""
    last = [row[-1] for row in cells]
    widths = last[0]["config"]["widths"]
    pairs = [(a, w) for a in ("W0s", "W") if a in arms for w in widths]
    if not pairs:
        return []
    level = 1 - (1 - EVIDENCE_LEVEL) / len(pairs)
    sel = [[c] for c in last]
    e_R, r_R = arm_columns(sel, "R", "elbo")[:, 0], arm_columns(sel, "R", metric)[:, 0]
    out = []
    for a, w in pairs:
        k = widths.index(w)
        pw = [c["arms"][a]["per_width"] for c in last]
        e = np.array([p["elbo"][k] for p in pw])
        r = np.array([p[metric][k] for p in pw])
        de = paired_mean_diff(e[:, None], e_R[:, None], level)
        dr = paired_mean_diff(np.log(r)[:, None], np.log(r_R)[:, None], level)
        if de["ci_high"][0] < 0 and dr["ci_high"][0] < 0:
            out.append(
                {
                    "arm": a,
                    "width": int(w),
                    "elbo_diff": de["diff"][0],
                    "elbo_ci": [de["ci_low"][0], de["ci_high"][0]],
                    "log_risk_ratio": dr["diff"][0],
                    "risk_ci": [dr["ci_low"][0], dr["ci_high"][0]],
                }
            )
    return out


def answer(c: dict) -> tuple[str, str]:
    """One of :data:`ANSWERS` for a comparison, from its one criterion: the paired ELBO gap
    ``ELBO(C) - ELBO(R)`` at the largest n (module docstring) -- ``optimiser`` when its
    interval lies above 0, ``no-better-start`` when below, else ``undecided``.  The
    sentence carries the criterion's numbers first, then what is reported beside it."""
    gap, (glo, ghi) = c["elbo_gap_best"][-1], c["elbo_gap_best_ci"][-1]
    C = c["constructive_arm"]
    key = "optimiser" if glo > 0 else "no-better-start" if ghi < 0 else "undecided"
    vC, vR = c["attainment_verdict_best"], c["attainment_verdict_random"]
    n, t = c["ns"][-1], c["arms"]
    s = (
        f"{ANSWERS[key]}: at n = {n} ELBO({C}) - ELBO(R) = {gap:+.1f} [{glo:+.1f}, {ghi:+.1f}]"
        f" nats.  Beside it, not deciding: risk {C}/R x{np.exp(c['log_risk_ratio_best'][-1]):.2f}"
        f"; {C} slope {_f(c['slope_best'])} ({vC}); R slope {_f(c['slope_random'])} ({vR})"
        f"; W slope {_f(c['slope_constructive'])} ({c['attainment_verdict_constructive']}),"
        f" ELBO(W) - ELBO(R) = {c['elbo_gap'][-1]:+.1f}; risk W/{c['drift_from']} "
        f"x{np.exp(c['drift_log_ratio'][-1]):.2f} while ELBO(W) - ELBO({c['drift_from']}) = "
        f"{c['elbo_w_minus_w0'][-1]:+.1f}; d2 R {t['R']['d2'][-1]:.4g}, W0 "
        f"{t['W0']['d2'][-1]:.4g}, W {t['W']['d2'][-1]:.4g}"
        + (f", W0s {t['W0s']['d2'][-1]:.4g}" if "W0s" in t else "")
        + "".join(
            f"; {e['arm']} at width {e['width']}: ELBO {e['elbo_diff']:+.0f} nats and risk"
            f" x{np.exp(e['log_risk_ratio']):.2f} against R's selected"
            for e in c["objective_evidence"]
        )
    )
    return key, s


def _f(x) -> str:
    return "n/a" if x is None else f"{x:+.3f}"


# --------------------------------------------------------------------------- any n
def arms_table(records: list[dict]) -> str:
    """Per truth and n of constructive-start records (any number of n, so a single-n run
    such as the deep students' can be read): each arm's mean ELBO parts, kept edges,
    selected width, d^2 and steps over the replicates, and the paired ELBO gaps W - R and
    W0s - R with their 95% intervals."""
    by: dict = {}
    for r in records:
        if r.get("arms") and not r["failed"]:
            by.setdefault((r["cell"]["truth"], r["config"]["depth"], r["cell"]["n"]), []).append(r)
    if not by:
        raise ValueError("no records with constructive-start arms (a sweep with start='both')")
    lines = []
    for (truth, depth, n), recs in sorted(by.items()):
        recs.sort(key=lambda r: r["cell"]["replicate"])
        cells = [[r] for r in recs]
        arms = [a for a in ("R", "W0", "W0s", "W0f", "W", "P")
                if a == "R" or a in recs[0]["arms"]]  # fmt: skip
        lines.append(f"== {truth}, depth {depth}, n = {n}, {len(recs)} replicates")
        lines.append(ARM_HEADER)
        lines += [arm_row(a, arm_means(cells, a), 0) for a in arms]
        if recs[0].get("reference"):
            ref = {m: np.mean([r["reference"][m] for r in recs]) for m in ("d2", "l2sq")}
            lines.append(f" ref {'':>58s} {ref['d2']:9.4g} {ref['l2sq']:9.4g}")
        for a in [x for x in ("W", "W0s", "W0f") if x in arms]:
            d = paired_mean_diff(arm_columns(cells, a, "elbo"), arm_columns(cells, "R", "elbo"))
            lines.append(
                f"  ELBO({a}) - ELBO(R) = {d['diff'][0]:+.1f} [{d['ci_low'][0]:+.1f},"
                f" {d['ci_high'][0]:+.1f}] nats"
            )
    return "\n".join(lines)


def main(argv=None) -> int:
    """``python -m verify.starts RECORDS``: :func:`arms_table` of a records file."""
    import os
    import sys

    from simulate.sweep.records import RecordsError
    from simulate.sweep.spec import read_records

    ap = Parser(
        prog="python -m verify.starts",
        description="The constructive-start arms of a records file, per truth, depth and n.",
    )
    ap.add_argument("records")
    args = ap.parse_args(argv)
    try:
        if not os.path.isfile(args.records):
            raise ValueError(f"no records file {args.records}")
        print(arms_table(read_records(args.records)))
    except (ValueError, OSError, RecordsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    from theory.cli import run_main

    raise SystemExit(run_main(main))
