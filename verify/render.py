"""What ``python -m verify.rates`` shows: each entry's finding (the report's sentence),
the text table per truth, the Markdown, the power check before training, and the rate and
width panels (shared with ``figures``); all read :class:`verify.results.MetricResult`."""

from __future__ import annotations

import dataclasses
import math
import os
from typing import TYPE_CHECKING

import matplotlib
import matplotlib.pyplot as plt
import matplotlib.ticker
import numpy as np

from theory.exponents import METRICS
from theory.plumbing.paths import atomic_path
from verify.starts import ARM_HEADER, arm_row
from verify.verdict import Verdict

if TYPE_CHECKING:  # the results module imports nothing from here; typing only
    from verify.results import MetricResult

__all__ = [
    "finding", "format_results", "draw_rate_panel", "draw_width_panel", "plot_results",
    "power_lines", "markdown_results",
]  # fmt: skip


def _f(x, fmt="7.3f") -> str:
    return f"{'n/a':>{fmt.split('.')[0]}s}" if x is None else format(x, fmt)


def _range(ns) -> str:
    return f"n = {int(ns[0])}..{int(ns[-1])}"


def finding(r: MetricResult) -> str:
    """The report's sentence for one result of ``verify.analysis``: the attainment
    verdict first, then the theorem test (worded as what it measured: "slower than n^e
    log^c n over n = a..b", "consistent with ..."), the curve's shape, the budget
    control's state and the family-wise adjustment."""
    dec = r.decision
    if dec.refused:
        return f"not decided (verdicts set UNDECIDABLE): {dec.refused}"
    parts = []
    a, ns = r.attainment, r.curve.ns
    if a is None:
        why = dec.attainment_refused or "no reference"
        parts.append(f"attainment not tested ({why})")
    else:
        c, allowed = a.log_power.c_hat, a.allowance_log_power
        if a.verdict == Verdict.PASS:
            parts.append(
                f"attains the reference's rate up to log^{c:.2f} n within the log^{allowed:g} n"
                " allowance"
            )
        elif a.verdict == Verdict.FAIL:
            parts.append(
                f"slower than the class-matched reference beyond the log^{allowed:g} n"
                f" allowance over {_range(ns)} (log^{c:.2f} n)"
            )
        elif a.verdict == Verdict.UNDECIDABLE and a.power.gap <= 0:
            parts.append(
                f"attainment undecidable (log^{c:.2f} n): the log^{allowed:g} n allowance is as"
                " large as half the reference's exponent, so a pass could not tell attainment"
                " from half the rate"
            )
        elif a.verdict == Verdict.UNDECIDABLE:
            parts.append(
                f"attainment undecidable with this design (log^{c:.2f} n; no power against"
                " half the reference's rate)"
            )
        else:
            parts.append(f"attainment inconclusive (log^{c:.2f} n)")
    if a is not None and _fragile(a.replication):
        parts[-1] += f" ({_fragile_words(a.replication)})"
    t = r.theorem
    rate = f"n^{t.predicted:.3f} log^{t.band_log_power:.2f} n"
    slow = "rejects e/2" if t.control_slow_rejected else "e/2 not rejected"
    if t.verdict == Verdict.FAIL:
        parts.append(
            f"slower than {rate} over {_range(ns)} (a FAIL for every band log power"
            f" below {t.c_flip:.2f})"
        )
    elif t.verdict == Verdict.UNDECIDABLE and t.rule == "confirm":
        parts.append(
            "theorem test undecidable with this design (the probability of a PASS at the"
            f" exponent is {t.power.probability:.2f}, below the floor {t.power.floor:g})"
        )
    elif t.verdict == Verdict.UNDECIDABLE:
        parts.append("theorem test undecidable with this design (no power against e/2)")
    elif t.verdict == Verdict.PASS and t.direction == "faster":
        parts.append(
            f"consistent with {rate} over {_range(ns)}, faster than the exponent"
            " (easier than its class at these n, or pre-asymptotic)"
            + (f"; {slow}" if t.rule == "confirm" else "")
        )
    elif t.verdict == Verdict.PASS and t.rule == "confirm":
        parts.append(
            f"consistent with {rate} over {_range(ns)} (the interval below the band's top;"
            f" {slow})"
        )
    elif t.verdict == Verdict.PASS:
        parts.append(f"consistent with {rate} over {_range(ns)} (rejects e/2)")
    else:
        parts.append("theorem test inconclusive")
    if _fragile(t.replication):
        parts[-1] += f" ({_fragile_words(t.replication)})"
    ct = r.class_theorem
    if ct is not None:
        known = dec.expected_theorem
        parts.append(
            f"held to the class band n^{ct.predicted:.3f} log^{ct.band_log_power:.2f} n:"
            f" {verdict_text(ct.verdict, ct.replication)}"
            f" (known: {known or 'none at this design'})"
        )
    if dec.fail_familywise is False:
        parts.append("a FAIL at its own level that does not survive the family-wise adjustment")
    if r.curve.bending:
        parts.append(f"bending (top-half slope {r.curve.top_half_slope:.3f}; stated, not deciding)")
    state = None if r.control is None else r.control.state
    if state == "limited":
        parts.append(
            "optimisation-limited (twice the budget moves the slope beyond the margin: the"
            " verdicts are set INCONCLUSIVE)"
        )
    elif state == "undetermined":
        parts.append("budget control undetermined (the slope change's interval crosses the margin)")
    elif state == "converged":
        parts.append("converged by the budget control")
    return "; ".join(parts)


def _fragile(rep) -> bool:
    return rep is not None and rep.fragile


def _fragile_words(rep) -> str:
    return (
        f"fragile: {100 * rep.share:.0f}% of {rep.resamples} resamples of replicates give it,"
        f" below the floor {100 * rep.floor:.0f}%; {rep.loo_flips} of {rep.loo_sets}"
        f" leave-one-out sets flip it; margin {rep.margin_se:.2f} SE"
    )


def verdict_text(verdict, rep) -> str:
    """A verdict with ``(fragile)`` beside it where its replication is below the floor."""
    return f"{verdict}{' (fragile)' if _fragile(rep) else ''}"


def replication_text(rep) -> str:
    """``share%, flips/sets LOO, margin SE`` of a verdict's replication; ``-`` without."""
    if rep is None:
        return "-"
    margin = f"{rep.margin_se:+.2f} SE" if math.isfinite(rep.margin_se) else "no margin"
    return f"{100 * rep.share:.0f}%, {rep.loo_flips}/{rep.loo_sets} LOO, {margin}"


def format_results(results: list[MetricResult]) -> str:
    """The plain-text report: per truth its cell table, slope and attainment tables,
    findings and budget control; then the input-dimension comparisons and a key to the
    columns."""
    lines = []
    for key in dict.fromkeys(r.truth for r in results):
        rows = [r for r in results if r.truth == key]
        lines += _truth_header(rows[0])
        for est in dict.fromkeys(r.estimator for r in rows):
            er = [r for r in rows if r.estimator == est]
            if er[0].arm is not None and est != "asvi":
                lines.append(f"-- {est} (arm {er[0].arm}: {ARM_LABELS[er[0].arm]})")
            elif est != "asvi":
                lines.append(
                    f"-- {est} (known-answer control: expected attainment "
                    f"{er[0].decision.expected_attainment})"
                )
            lines += _cell_table_lines(er)
            lines += _slope_table_lines(er)
            lines += _attain_table_lines(er)
            lines += [f"  {r.metric}{' (decides)' if r.primary else ''}: {r.finding}" for r in er]
            lines += _power_note(er)
            lines += _budget_lines(er)
        lines += _starts_lines(rows)
    lines += _input_dimension_lines(results)
    lines += [
        "",
        "columns: steps = most steps any candidate used; cands = candidate widths; top = "
        "selections at the largest candidate; band = [e, e + c ell] (c: c_band, the log "
        "power of the result covering the truth); c_flip = the band log power below which "
        "the theorem test FAILs; e/2 ctl = the too-slow control rejected? (it decides a PASS "
        "under the earlier protocols; under the confirming rule, exploratory-v2 on, a PASS "
        "is the interval's upper end below the band's top and e/2 is reported only); power "
        "= computed before the data from the protocol's pilot cv: the probability of a PASS "
        "at the exponent reaching the protocol's floor (the confirming rule) or the design "
        "separating e from e/2 (the earlier rule) (a non-rejection is then INCONCLUSIVE, "
        "else UNDECIDABLE; a rejection stands either way); replication = the share of "
        "bootstrap resamples of replicates giving the verdict, the leave-one-out sets "
        "flipping it and its margin in SE (fragile: a decided verdict below the floor); "
        "top-half = slope over the upper half of log n (bend: differs from the "
        "global slope beyond its CI; stated, never deciding); ref = class-matched reference "
        "(linear spline, mesh by CV) slope; ASVI-ref = paired slope difference over the "
        "whole design, against the log^c allowance; c_hat = the log power it amounts to; "
        "a-pow = can the attainment test tell the allowance from half the reference's rate "
        "(else a PASS is UNDECIDABLE); w-min ctl = the same test for SVI at the smallest "
        "candidate width (must FAIL); dbl shift = the budget control's change of the slope, "
        "an equivalence test against the protocol's margin (converged: verdicts stand; "
        "undetermined: they stand, labelled; limited: INCONCLUSIVE); oracle = oracle-width "
        "SVI's slope; ratio = slope of ASVI/oracle risk.",
    ]
    return "\n".join(lines)


ARM_LABELS = {
    "R": "random start",
    "W": "trained from the constructive start",
    "W0": "the constructive start, untrained",
    "W0s": "the constructive start with its slab sds fitted, untrained",
    "W0f": "the constructive start's network held, its slab sds and inclusions trained",
    "P": "plain Adam on squared error from the constructive start, early-stopped",
}


ARM_SHORT = {"W": "from start", "W0": "start", "W0s": "start, sds fitted",
             "W0f": "start held, sds trained", "P": "plain Adam"}  # fmt: skip


def draw_elbo_gap_panel(ax, r: MetricResult) -> None:
    """The constructive-start comparison's ELBO gaps against n (``verify.starts``): W - R
    and, where it is C, W0s - R, with their paired 95% intervals; the answer's key in the
    title."""
    c = r.starts
    ns = np.array(c.ns, dtype=float)
    series = [("W", c.elbo_gap, c.elbo_gap_ci, "C5")]
    if c.constructive_arm != "W":
        series.append((c.constructive_arm, c.elbo_gap_best, c.elbo_gap_best_ci, "C6"))
    for k, (a, g, ci, color) in enumerate(series):
        g, ci = np.array(g), np.array(ci)
        x = ns * (1.04 if k else 1.0)
        ax.errorbar(x, g, yerr=[g - ci[:, 0], ci[:, 1] - g], fmt="o-", color=color,
                    capsize=3, ms=4, label=f"ELBO({a}) - ELBO(R)")  # fmt: skip
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("n")
    ax.set_ylabel("nats")
    ax.set_title(f"constructive vs random start: {c.answer_key}", fontsize=8)
    ax.legend(fontsize=6)


def _starts_lines(rows: list[MetricResult]) -> list[str]:
    """The constructive-start comparison of one truth (``verify.starts``): per n the four
    arms' ELBO parts, kept edges, selected width, d^2 and steps (means over replicates),
    the paired ELBO gap W - R, and the answer."""
    r = next((r for r in rows if r.starts and r.primary), None)
    if r is None:
        return []
    c = r.starts
    lines = [
        "-- constructive start against random start (means over replicates; W0 = start"
        " untrained, W0s = its sds fitted, W = trained from W0, R = random start, P = plain"
        " Adam from W0)",
        f"{'n':>7s}{ARM_HEADER}",
    ]
    for j, n in enumerate(c.ns):
        lines += [f"{n:7d}{arm_row(a, t, j)}" for a, t in c.arms.items()]
    gaps = ", ".join(
        f"n={n}: {g:+.1f} [{lo:+.1f}, {hi:+.1f}]"
        for n, g, (lo, hi) in zip(c.ns, c.elbo_gap, c.elbo_gap_ci, strict=True)
    )
    lines.append(f"  ELBO(W) - ELBO(R), nats, paired 95% CI: {gaps}")
    if c.constructive_arm != "W":
        best = ", ".join(
            f"n={n}: {g:+.1f} [{lo:+.1f}, {hi:+.1f}]"
            for n, g, (lo, hi) in zip(c.ns, c.elbo_gap_best, c.elbo_gap_best_ci, strict=True)
        )
        lines.append(f"  ELBO({c.constructive_arm}) - ELBO(R): {best}")
    lines.append(f"  answer: {c.answer}")
    return lines


def _truth_header(r0: MetricResult) -> list[str]:
    reps = r0.replicates
    lines = [
        "",
        f"== {r0.truth}  ({len(reps.used)} replicates"
        + (f"; dropped incomplete {list(reps.dropped)}" if reps.dropped else "")
        + (
            f"; {100 * r0.asvi.converged_fraction:.0f}% of candidate models converged)"
            if r0.asvi is not None
            else ")"
        ),
    ]
    if reps.failed_cells:
        lines.append(
            f"   FAILED cells (every candidate diverged), (n, replicate): "
            f"{', '.join(f'({n}, {q})' for n, q in reps.failed_cells)};"
            f" replicates {list(reps.excluded)} excluded from every fit"
        )
    return lines


def _cell_table_lines(rows: list[MetricResult]) -> list[str]:
    """Per n: steps, candidates, selections, and each metric's mean, SE and local slope;
    an optimisation-limited n is starred."""
    r0 = rows[0]
    if r0.estimator != "asvi":
        return _plain_cell_lines(rows)
    a0 = r0.asvi
    limited = {c.n for c in (r0.control.cells if r0.control else ()) if c.moved}
    lines = [
        f"{'n':>7s} {'steps':>6s} {'cands':>9s} {'top':>3s} {'widths (selected)':>18s}  "
        + "  ".join(f"{m + ' mean':>10s} {'se':>8s} {'local':>6s}" for m in METRICS)
    ]
    for j, n in enumerate(r0.curve.ns):
        ws = ",".join(str(w[j]) for w in a0.selected_widths)
        cands = f"{a0.candidate_widths[j][0]}..{a0.candidate_widths[j][-1]}"
        cols = []
        for r in rows:
            c = r.curve
            loc = f"{c.local_slopes[j - 1]:6.3f}" if j else f"{'':6s}"
            cols.append(f"{c.mean[j]:10.4g} {c.se[j]:8.2g} {loc}")
        mark = "*" if n in limited else " "
        lines.append(
            f"{n:6d}{mark} {a0.steps_max[j]:6d} {cands:>9s} {a0.selected_at_top[j]:3d}"
            f" {ws:>18s}  " + "  ".join(cols)
        )
    if limited:
        lines.append(
            "  * moved by more than its SE with twice the budget (per n; the slope's"
            " budget state decides)"
        )
    return lines


def _plain_cell_lines(rows: list[MetricResult]) -> list[str]:
    """Per n each metric's mean, SE and local slope (an estimator with no widths)."""
    lines = [
        f"{'n':>7s}  "
        + "  ".join(f"{r.metric + ' mean':>10s} {'se':>8s} {'local':>6s}" for r in rows)
    ]
    for j, n in enumerate(rows[0].curve.ns):
        cols = [
            f"{r.curve.mean[j]:10.4g} {r.curve.se[j]:8.2g} "
            + (f"{r.curve.local_slopes[j - 1]:6.3f}" if j else f"{'':6s}")
            for r in rows
        ]
        lines.append(f"{n:7d}  " + "  ".join(cols))
    return lines


def _ci(lo, hi) -> str:
    if lo is None or hi is None:
        return f"{'':17s}"
    return f"[{lo:7.3f},{hi:7.3f}]"


def _slope_table_lines(rows: list[MetricResult]) -> list[str]:
    """Per metric: the slope, its CI and band, the e/2 control, the power check, the
    theorem verdict, the top-half slope and the bend flag."""
    lines = [
        f"{'metric':>6s} {'pred':>7s} {'slope':>7s} {'95% CI':>17s} {'band':>17s}"
        f" {'c_band':>6s} {'c_flip':>6s} {'e/2 ctl':>7s} {'power':>5s} {'theorem':>12s}"
        f"   {'top-half':>8s} {'95% CI':>17s} {'bend':>4s}  replication"
    ]
    for r in rows:
        t, c = r.theorem, r.curve
        lines.append(
            f"{r.metric:>6s} {t.predicted:7.3f} {t.slope:7.3f} "
            f"{_ci(t.ci_low, t.ci_high)} {_ci(*t.band)} "
            f"{t.band_log_power:6.2f} {_f(t.c_flip, '6.2f')} "
            f"{('rej' if t.control_slow_rejected else 'NOT'):>7s} "
            f"{('yes' if t.power.separable else 'no'):>5s}"
            f" {verdict_text(t.verdict, t.replication):>12s}   "
            f"{c.top_half_slope:8.3f} {_ci(*c.top_half_ci)} "
            f"{('yes' if c.bending else 'no'):>4s}  {replication_text(t.replication)}"
        )
    return lines


def _attain_table_lines(rows: list[MetricResult]) -> list[str]:
    """Per metric: the reference, the attainment test with its allowance and c_hat, its
    negative control, the budget control's slope shift and the oracle-width columns."""
    lines = [
        f"{'metric':>6s} {'ref':>7s} {'ASVI-ref':>8s} {'95% CI':>17s} {'allow':>6s}"
        f" {'c_hat':>6s} {'c_hat 95% CI':>17s} {'a-pow':>5s} {'attain':>12s} {'w-min ctl':>9s}"
        f" {'dbl shift':>9s} {'95% CI':>17s} {'budget':>12s}  {'oracle':>7s} {'ratio':>6s}"
    ]
    for r in rows:
        a, ctl, sv = r.attainment, r.control, r.asvi
        sh = None if ctl is None or ctl.shift is None else ctl.shift.diff
        lines.append(
            f"{r.metric:>6s} {_f(a and a.reference.slope)} {_f(a and a.diff.diff, '8.3f')} "
            + _ci(*(a.diff.ci if a else (None, None)))
            + f" {_f(a and a.allowance, '6.3f')} {_f(a and a.log_power.c_hat, '6.2f')} "
            + _ci(*(a.log_power.ci if a else (None, None)))
            + f" {_yes(a and a.power):>5s}"
            + f" {verdict_text(a.verdict, a.replication) if a else 'n/a':>12s} "
            + f"{(a.control.verdict if a and a.control else 'n/a'):>9s}"
            + f" {_f(sh and sh.diff, '9.3f')} "
            + _ci(*(sh.ci if sh else (None, None)))
            + f" {(ctl and ctl.state) or 'n/a':>12s}"
            + f"  {_f(sv and sv.oracle_slope)} {_f(sv and sv.oracle_ratio_slope, '6.3f')}"
            + (f"  attainment replication {replication_text(a.replication)}" if a else "")
        )
    return lines


def _yes(power) -> str:
    return "n/a" if power is None else ("yes" if power.separable else "no")


def _power_note(rows: list[MetricResult]) -> list[str]:
    out = []
    for r in rows:
        t = r.theorem
        if r.primary and not t.power.separable and t.verdict == "UNDECIDABLE":
            out.append("  " + _power_sentence(t.power))
    return out


def _power_sentence(pw) -> str:
    """What a design without power would need (``pw``: ``verify.power.Power``)."""
    need = []
    if pw.n_needed is not None:
        need.append(f"n up to {pw.n_needed:.3g}")
    if pw.replicates_needed is not None:
        need.append(f"{pw.replicates_needed} replicates")
    cv = float("nan") if pw.pilot_cv is None else pw.pilot_cv
    if pw.probability is not None:  # the confirming rule's power (verify.power.confirm_power)
        return (
            f"power (before the data, pilot cv {cv:.2g}): a slope at the exponent would PASS"
            f" with probability {pw.probability:.2f}, below the floor {pw.floor:g} (the band's"
            f" log margin {pw.gap:.3f}, expected CI half-width {pw.half_width:.3f}); it would"
            " need " + (" or ".join(need) if need else "a band with a log factor (none has a"
                        " margin to pass an estimator exactly at its exponent)")
        )
    return (
        f"power (before the data, pilot cv {cv:.2g}): this"
        f" design cannot separate e from e/2 (gap {pw.gap:.3f} between the bands,"
        f" expected CI half-width {pw.half_width:.3f}); it would need "
        + (" or ".join(need) if need else "n beyond 1e12 (the log allowance eats the gap)")
    )


def _md_ci(a) -> str:
    if a is None or a[0] is None:
        return ""
    return f" [{a[0]:+.2f}, {a[1]:+.2f}]"


def _md_num(x, fmt="+.3f") -> str:
    return "-" if x is None else format(x, fmt)


def markdown_results(results: list, heading: str | None, metrics=None) -> str:
    """The report as Markdown (``verify.rates --markdown``): one row per (estimator,
    truth, metric) with the slope, the power check and theorem test, the top-half slope,
    the attainment test with its allowance and c_hat, and the budget control's slope
    change; then each d^2 entry's finding and, where the design has no power, what it
    would take.  Generated from the records, so a results file can quote it verbatim
    (``figures.results_md``: without a heading, rows of ``metrics`` only)."""
    lines = [f"## {heading}", ""] if heading else []
    lines += [
        "| estimator | truth | metric | predicted | slope [95% CI] | c (band) | c_flip |"
        " power | theorem | top-half slope [95% CI] | ref. slope | minus ref. [95% CI] |"
        " allowance | c_hat [95% CI] | power (attain.) | attainment |"
        " budget x2: slope change [95% CI] | replication (theorem; attainment) |",
        "|" + "---|" * 18,
    ]
    for r in results:
        if metrics is not None and r.metric not in metrics:
            continue
        t, c, a, ctl, dec = r.theorem, r.curve, r.attainment, r.control, r.decision
        sh = None if ctl is None or ctl.shift is None else ctl.shift.diff
        theorem = verdict_text(t.verdict, t.replication)
        theorem += " (faster)" if t.direction == "faster" else ""
        theorem += " (opt.-limited)" if ctl is not None and ctl.optimisation_limited else ""
        theorem += " (not family-wise)" if dec.fail_familywise is False else ""
        top = f"{c.top_half_slope:.3f}{_md_ci(c.top_half_ci)}"
        top += " (bending)" if c.bending else ""
        att = verdict_text(a.verdict, a.replication) if a else "-"
        if dec.expected_attainment is not None:
            att += f" (known: {dec.expected_attainment})"
        diff = "-" if a is None else f"{a.diff.diff:+.3f}" + _md_ci(a.diff.ci)
        lines.append(
            f"| {r.estimator} | {r.truth} | {r.metric} | {t.predicted:.3f} | "
            f"{t.slope:.3f}{_md_ci([t.ci_low, t.ci_high])} | {t.band_log_power:.2f} | "
            f"{_md_num(t.c_flip, '.2f')} | "
            f"{'yes' if t.power.separable else 'no'} | {theorem} | {top} | "
            f"{_md_num(a and a.reference.slope, '.3f')} | {diff} | "
            f"{_md_num(a and a.allowance, '.3f')} | "
            f"{_md_num(a and a.log_power.c_hat, '.2f')}"
            f"{_md_ci(a and a.log_power.ci)} | {_yes(a and a.power)} | {att} | "
            f"{_md_num(sh and sh.diff)}{_md_ci(sh and sh.ci)}"
            f"{' ' + ctl.state if ctl and ctl.state else ''} | "
            f"{replication_text(t.replication)}; {replication_text(a and a.replication)} |"
        )
    lines.append("")
    for r in results:
        if r.primary:
            t = r.theorem
            note = f"- {r.estimator}, {r.truth}, d2: {r.finding}"
            if not t.power.separable and t.verdict == "UNDECIDABLE":
                note += f"; {_power_sentence(t.power)}"
            lines.append(note)
    if any(r.theorem.replication is not None for r in results):
        lines.append(
            "- replication: the share of bootstrap resamples of replicates (the protocol's"
            " [replication]) that give the verdict, the leave-one-out sets that flip it, and"
            " its margin to the threshold in SE; a decided verdict below the floor is"
            " fragile (verify.replication)"
        )
    for r in results:
        if r.primary and r.starts and r.starts.answer:
            lines.append(f"- {r.truth}, constructive against random start: {r.starts.answer}")
    return "\n".join(lines) + "\n"


def power_lines(rows: list, cfg) -> str:
    """The power check before training (``verify.design.design_power``'s rows for the
    sweep ``cfg``): per truth and estimator, d^2's band, the pilot cv and the slope SE it
    implies, whether the theorem test can separate e from e/2 and the attainment test
    the allowance from half the reference's rate, and a control's known answer."""
    lines = [
        f"power check before training (d^2; n = {list(cfg.ns)}, {cfg.replicates} replicates;"
        " prospective, from the protocol's pilot cv):"
    ]
    for r in rows:
        tp, ap = r.theorem_power, r.attainment_power
        s = (
            f"  {r.truth} {r.estimator}: e = {r.predicted:.3f}, band log^"
            f"{r.band_log_power:.2f} n, pilot cv {r.pilot_cv:.2g}, slope SE"
            f" {r.slope_se:.3f}; theorem: "
            + (
                f"P(PASS at e) {tp.probability:.2f}"
                if tp.separable and tp.probability is not None
                else "separable"
                if tp.separable
                else _power_sentence(dataclasses.replace(tp, pilot_cv=r.pilot_cv))
            )
        )
        if ap is not None:
            s += (
                f"; attainment: allowance {r.allowance:.3f}, gap to half the rate"
                f" {ap.gap:.3f} against 2 x {ap.half_width:.3f} (pilot cv of the"
                f" difference {ap.pilot_cv_diff:.2g}): "
                + (
                    "the allowance eats half the rate (a PASS would be UNDECIDABLE)"
                    if ap.gap <= 0
                    else "separable"
                    if ap.separable
                    else "no power (a non-rejection would be UNDECIDABLE)"
                )
            )
            if r.attainment_probability is not None and ap.gap > 0 and ap.separable:
                s += f", P(PASS at the reference's rate) {r.attainment_probability:.2f}"
        elif r.attainment_refused:
            s += f"; attainment refused: {r.attainment_refused}"
        if r.estimator != "asvi":
            s += f"; known answer: {r.expected_attainment or 'none at this design'}"
        if r.class_power is not None:
            s += (
                f"; held to the class band (P(PASS at e) {r.class_power.probability:.2f}):"
                f" known answer {r.expected_theorem or 'none at this design'}"
            )
        if r.refused:
            s += f"; verdicts refused: {r.refused}"
        lines.append(s)
    return "\n".join(lines)


def _budget_lines(rows: list[MetricResult]) -> list[str]:
    return [
        f"  budget x2 {r.metric:>4s} n={c.n}: {c.base_mean:.4g} -> "
        f"{c.doubled_mean:.4g} (change {c.change:+.3g} +- {c.change_se:.2g}"
        f", cell SE {c.cell_se:.2g}; selection changed in "
        f"{100 * c.selection_changed:.0f}%)" + ("  moved beyond its SE" if c.moved else "")
        for r in rows
        for c in (r.control.cells if r.control else ())
    ]


def _input_dimension_lines(results: list[MetricResult]) -> list[str]:
    lines, seen = [], set()
    for r in results:
        for c in r.input_dimension:
            k = (c.metric, c.p_small, c.p_large)
            if k in seen:
                continue
            seen.add(k)
            lines.append(
                f"teacher p = {c.p_large} vs p = {c.p_small} ({c.metric}): slopes "
                f"{c.slope_large:.3f} vs {c.slope_small:.3f}; ratio of means at "
                f"n = {c.n}: {c.ratio_large_to_small:.2f} (Corollary 6.3: the input "
                "dimension enters only through log factors)"
            )
    return lines


def loglog_axes(ax) -> None:
    """Log-log axes against n without the cluttered minor tick labels."""

    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("n")


def draw_rate_panel(ax, r: MetricResult) -> None:
    """One metric of one truth on log-log axes: the estimator (mean +- SE), for ASVI the
    oracle-width SVI and SVI at the smallest candidate width, the class-matched reference
    (linear spline) and the piecewise-polynomial oracle, and the predicted slope with the
    theorem's log band, drawn through the estimator's centre."""
    t, a, sv = r.theorem, r.attainment, r.asvi
    ns, mean, se = np.array(r.curve.ns), np.array(r.curve.mean), np.array(r.curve.se)
    x0, y0 = np.exp(np.log(ns).mean()), np.exp(np.log(mean).mean())
    grid = np.geomspace(ns[0], ns[-1], 50)
    ax.errorbar(
        ns,
        mean,
        yerr=se,
        fmt="o-",
        color="k",
        capsize=3,
        label=f"{r.estimator} {t.slope:.3f} [{t.ci_low:.2f}, {t.ci_high:.2f}]",
    )
    curves = []
    if sv is not None:
        curves += [
            (sv.oracle_mean, "s--", "C2", f"oracle-width SVI {sv.oracle_slope:.3f}"),
            (sv.fixed_mean, "v:", "C1", f"SVI width {sv.fixed_width} {sv.fixed_slope:.3f}"),
        ]
    if a is not None:
        ref = a.reference
        curves.append((ref.mean, "D-", "C0", f"linear spline (CV) {ref.slope:.3f}"))
        if ref.oracle_mean is not None:
            curves.append(
                (
                    ref.oracle_mean, "x:", "C4",
                    f"piecewise poly. (oracle bins) {ref.oracle_slope:.3f}",
                )
            )  # fmt: skip
    for values, fmt, color, label in curves:
        ax.plot(ns, values, fmt, color=color, ms=4, label=label)
    if r.starts:  # the constructive-start arms on the random start's panel
        c = r.starts
        arms = (("W", "^-", "C5"), ("W0", "P:", "C8"), ("W0s", "h:", "C6"), ("P", "*:", "C9"))
        for arm, fmt, color in arms:
            if arm in c.arms:
                slope = f" {c.slope_constructive:.3f}" if arm == "W" else ""
                ax.plot(ns, getattr(c.arms[arm], r.metric), fmt, color=color, ms=4,
                        label=f"{arm} ({ARM_SHORT[arm]}){slope}")  # fmt: skip
    band = y0 * (grid / x0) ** t.band[0], y0 * (grid / x0) ** t.band[1]
    ax.plot(grid, band[0], "C3--", label=f"predicted {t.predicted:.3f}")
    ax.fill_between(
        grid,
        np.minimum(*band),
        np.maximum(*band),
        color="C3",
        alpha=0.12,
        label="theorem band (log factor)",
    )
    loglog_axes(ax)
    att = a.verdict if a else "n/a"
    ax.set_title(f"{r.metric}: theorem {t.verdict}, attainment {att}", fontsize=8)
    ax.legend(fontsize=5 if r.starts else 6)


def draw_width_panel(ax, r: MetricResult) -> None:
    """Selected widths against n (each replicate a dot, the median a line), the candidate
    range, and the predicted growth ``n^(p/(2 alpha + p))`` (Lemma 6.1's N) through the
    median at the middle n, where the truth has an alpha."""
    ns = np.array(r.curve.ns)
    W = np.array(r.asvi.selected_widths, dtype=float)
    for row in W:
        ax.plot(ns, row, "o", color="k", alpha=0.35, ms=3)
    med = np.median(W, axis=0)
    ax.plot(ns, med, "k-", label="selected (median)")
    lo = [c[0] for c in r.asvi.candidate_widths]
    hi = [c[-1] for c in r.asvi.candidate_widths]
    ax.fill_between(ns, lo, hi, color="C7", alpha=0.15, label="candidates")
    if r.alpha is not None:
        g = r.p / (2 * r.alpha + r.p)
        j = len(ns) // 2
        ax.plot(ns, med[j] * (ns / ns[j]) ** g, "C3--", label=f"n^{g:.2f} (predicted growth)")
    loglog_axes(ax)
    ax.set_ylabel("width")
    ax.set_title("selected width", fontsize=8)
    ax.legend(fontsize=6)


def plot_results(results: list[MetricResult], out_dir: str, note: str | None = None) -> list[str]:
    """One figure per truth: a rate panel per metric and the selected-width panel, each
    written whole or not at all (``theory.plumbing.paths.atomic_path``); ``note`` is added to
    every title (a partial read says so)."""

    matplotlib.use("Agg")

    paths = []
    os.makedirs(out_dir, exist_ok=True)
    for key in dict.fromkeys(r.truth for r in results):
        # the arms are drawn on the random start's panels (draw_rate_panel)
        rows = [r for r in results if r.truth == key and r.role != "arm"]
        widths = rows[0].asvi is not None
        gap = next((r for r in rows if r.starts and r.primary), None)
        extra = widths + (gap is not None)
        fig, axes = plt.subplots(
            1, len(rows) + extra, figsize=(4.4 * (len(rows) + extra), 3.8), squeeze=False
        )
        axes = axes[0]
        for ax, r in zip(axes[: len(rows)], rows, strict=True):
            draw_rate_panel(ax, r)
        if widths:
            draw_width_panel(axes[len(rows)], rows[0])
        if gap is not None:
            draw_elbo_gap_panel(axes[-1], gap)
        fig.suptitle(key if note is None else f"{key} ({note})")
        fig.tight_layout()
        path = os.path.join(out_dir, f"{key}.png")
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=110, format="png")
        plt.close(fig)
        paths.append(path)
    return paths
