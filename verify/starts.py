"""The constructive-start comparison: is ASVI's shortfall the objective or the optimiser?

A sweep run with ``start="both"`` (``simulate.constructive``) holds four arms per cell:
``R`` (the random start, the record's own fields), and under ``arms``: ``W0`` (the
constructive start, untrained), ``W`` (trained from it by the same step and stopping rule)
and ``P`` (plain Adam on squared error from it, early-stopped on validation data).  Each
arm selects its width on its own criterion.  The theorems speak of the ELBO's maximiser;
comparing W with R on the same objective tells which of them is nearer it:

* ``elbo_gap`` per n: ELBO(W) - ELBO(R) of the selected candidates, paired over
  replicates (nats; positive: the constructive start reached a better optimum);
* ``drift`` per n: W's risk against W0's (the mean ratio of d^2) and W's ELBO against
  W0's: training from the spline that *raises* the risk while it raises the ELBO says the
  objective prefers the worse fit;
* the slopes of W and R with their attainment verdicts (``verify.analysis``; the theorem
  test's where a truth has no reference, the teachers);
* one answer per truth (:func:`answer`).
"""

from __future__ import annotations

import numpy as np

from .slopes import paired_mean_diff

__all__ = ["ARM_ESTIMATORS", "answer", "arm_columns", "compare_starts", "primary_estimator"]

# the arms' names as estimators in verify's results
ARM_ESTIMATORS = {
    "R": "asvi",
    "W": "asvi-constructive",
    "W0": "constructive-start",
    "W0s": "constructive-start-scaled",
    "P": "plain-adam",
}
ESTIMATOR_ARMS = {v: k for k, v in ARM_ESTIMATORS.items()}

ANSWERS = {
    "optimiser": "the ELBO's optimum attains the rate and random starts do not find it",
    "objective": "the objective itself prefers a worse fit (W drifts from the spline's risk "
    "while its ELBO improves)",
    "both": "both attain",
    "undecided": "undecided",
}


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


def _verdict(res: dict | None) -> str | None:
    """An entry's decisive verdict: attainment where the truth has a reference, else the
    theorem test's."""
    if res is None:
        return None
    return res["attainment_verdict"] if res["attainment_verdict"] is not None else res["verdict"]


def compare_starts(cells: list, ns, metric: str, by_est: dict) -> dict:
    """The comparison's keys for one truth and metric (module docstring): ``elbo_gap``,
    ``elbo_gap_ci``, ``slope_constructive``, ``slope_random``,
    ``attainment_verdict_constructive``, ``attainment_verdict_random``, per-arm means per n
    (``arms``: ELBO, L1, L2, L3, kept edges, selected width, d2, d, l2sq, steps), the drift
    of W from W0, and the ``answer``.  ``by_est``: this truth and metric's result per
    estimator."""
    arms = [a for a in ("R", "W0", "W", "P") if ARM_ESTIMATORS[a] in by_est]
    table = {}
    for a in arms:
        table[a] = {
            k: arm_columns(cells, a, key).mean(0).tolist()
            for k, key in (
                ("elbo", "elbo"), ("L1", "L1"), ("L2", "L2"), ("L3", "L3"),
                ("edges", "edges_sum_nu"), ("d2", "d2"), ("d", "d"), ("l2sq", "l2sq"),
                ("steps", "steps"),
            )
        }  # fmt: skip
        table[a]["width"] = np.array(
            [[arm_view(c, ARM_ESTIMATORS[a])["selected_width"] for c in row] for row in cells],
            dtype=float,
        ).mean(0).tolist()  # fmt: skip
    gap = paired_mean_diff(arm_columns(cells, "W", "elbo"), arm_columns(cells, "R", "elbo"))
    w_vs_w0 = paired_mean_diff(arm_columns(cells, "W", "elbo"), arm_columns(cells, "W0", "elbo"))
    ratio = np.log(arm_columns(cells, "W", metric)) - np.log(arm_columns(cells, "W0", metric))
    drift = paired_mean_diff(ratio, np.zeros_like(ratio))
    rW, rR = by_est.get("asvi-constructive"), by_est.get("asvi")
    out = {
        "elbo_gap": gap["diff"],
        "elbo_gap_ci": [list(x) for x in zip(gap["ci_low"], gap["ci_high"], strict=True)],
        "elbo_w_minus_w0": w_vs_w0["diff"],
        "elbo_w_minus_w0_ci": [
            list(x) for x in zip(w_vs_w0["ci_low"], w_vs_w0["ci_high"], strict=True)
        ],
        "drift_log_ratio": drift["diff"],
        "drift_log_ratio_ci": [
            list(x) for x in zip(drift["ci_low"], drift["ci_high"], strict=True)
        ],
        "slope_constructive": None if rW is None else rW["slope"],
        "slope_random": None if rR is None else rR["slope"],
        "attainment_verdict_constructive": _verdict(rW),
        "attainment_verdict_random": _verdict(rR),
        "arms": table,
        "ns": list(ns),
    }
    out["answer_key"], out["answer"] = answer(out)
    return out


def answer(c: dict) -> tuple[str, str]:
    """One of :data:`ANSWERS` for a comparison (at the largest n for the paired parts):

    * ``both``: W and R both pass;
    * ``optimiser``: W passes, R does not, and W's ELBO is above R's (interval above 0);
    * ``objective``: training from the start raises the risk (drift interval above 0) while
      it raises the ELBO (interval above 0), or R's ELBO is above W's (interval below 0)
      while R's risk is the higher;
    * else ``undecided``.  The sentence carries the numbers."""
    vW, vR = c["attainment_verdict_constructive"], c["attainment_verdict_random"]
    gap, (glo, ghi) = c["elbo_gap"][-1], c["elbo_gap_ci"][-1]
    dlo = c["drift_log_ratio_ci"][-1][0]
    elo = c["elbo_w_minus_w0_ci"][-1][0]
    risk_R_higher = c["arms"]["R"]["d2"][-1] > c["arms"]["W"]["d2"][-1]
    if vW == "PASS" and vR == "PASS":
        key = "both"
    elif vW == "PASS" and vR != "PASS" and glo > 0:
        key = "optimiser"
    elif (dlo > 0 and elo > 0) or (ghi < 0 and risk_R_higher):
        key = "objective"
    else:
        key = "undecided"
    n = c["ns"][-1]
    s = (
        f"{ANSWERS[key]}: W slope {_f(c['slope_constructive'])} ({vW}), R slope "
        f"{_f(c['slope_random'])} ({vR}); at n = {n} ELBO(W) - ELBO(R) = {gap:+.1f} "
        f"[{glo:+.1f}, {ghi:+.1f}] nats, d2 W {c['arms']['W']['d2'][-1]:.4g} vs W0 "
        f"{c['arms']['W0']['d2'][-1]:.4g} vs R {c['arms']['R']['d2'][-1]:.4g}"
        f" (W/W0 x{np.exp(c['drift_log_ratio'][-1]):.2f}, ELBO(W) - ELBO(W0) = "
        f"{c['elbo_w_minus_w0'][-1]:+.1f})"
    )
    return key, s


def _f(x) -> str:
    return "n/a" if x is None else f"{x:+.3f}"
