"""What ``python -m verify.rates`` shows: the plain-text report (its tables per truth in
``verify.report.tables``, each entry's finding from ``verify.report.findings``), the Markdown, the
power
check before training, and one figure per truth (its panels, shared with ``figures``, in
``verify.report.panels``); all read :class:`verify.results.MetricResult`."""

from __future__ import annotations

import dataclasses
import os
import textwrap
from typing import TYPE_CHECKING

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

from simulate.sweep.setup.kinds import is_asvi
from theory.plumbing.paths import atomic_path
from verify.reading.design import is_control
from verify.reading.pilot import NO_PILOT, PILOT_REMEDY, own_pilot
from verify.report.findings import (
    SCREEN_WIDTH,
    equivalence_words,
    readings_lines,
    replication_text,
    verdict_text,
)
from verify.report.panels import draw_elbo_gap_panel, draw_rate_panel, draw_width_panel
from verify.report.tables import (
    _attain_table_lines,
    _budget_lines,
    _cell_table_lines,
    _input_dimension_lines,
    _slope_table_lines,
    _starts_lines,
    _truth_header,
    _yes,
)

if TYPE_CHECKING:  # the results module imports nothing from here; typing only
    from verify.results import MetricResult

__all__ = ["format_results", "plot_results", "power_brief", "power_lines", "markdown_results"]


def format_results(results: list[MetricResult], explain: bool = True) -> str:
    """The plain-text report: per truth its cell table, slope and attainment tables,
    findings and budget control; then the input-dimension comparisons and, with
    ``explain``, the key to the columns (:data:`LEGEND`), else a line saying how to get
    it."""
    lines = []
    for key in dict.fromkeys(r.truth for r in results):
        rows = [r for r in results if r.truth == key]
        lines += _truth_header(rows[0])
        for est in dict.fromkeys(r.estimator for r in rows):
            er = [r for r in rows if r.estimator == est]
            if er[0].arm is not None and not is_asvi(est):
                lines.append(f"-- {est} (arm {er[0].arm}: {ARM_LABELS[er[0].arm]})")
            elif is_control(est):
                lines.append(
                    f"-- {est} (known-answer control: expected attainment "
                    f"{er[0].decision.expected_attainment})"
                )
            elif not is_asvi(est):  # a named regressor (verify.rates --estimator)
                lines.append(f"-- {est} (a named regressor's point prediction; no known answer)")
            lines += _cell_table_lines(er)
            lines += _slope_table_lines(er)
            lines += _attain_table_lines(er)
            lines += [f"  {r.metric}{' (decides)' if r.primary else ''}: {r.finding}" for r in er]
            lines += [f"  {r.metric}: {w}" for r in er if r.primary for w in readings_lines(r)]
            lines += [f"  {r.metric}: {equivalence_words(r.theorem.equivalence)}"
                      for r in er if r.theorem.equivalence is not None]  # fmt: skip
            lines += _power_note(er)
            lines += _budget_lines(er)
        lines += _starts_lines(rows)
    lines += _input_dimension_lines(results)
    if explain:
        lines += ["", "columns:", *[ln for col, text in LEGEND
                                    for ln in _wrap(f"{col} = {text}", "  ")]]  # fmt: skip
    else:
        lines += ["", "columns: explained with --explain (RateCheck.tables(explain=True))"]
    return "\n".join(lines)


def _wrap(text: str, indent: str) -> list[str]:
    return textwrap.wrap(text, 100, initial_indent=indent, subsequent_indent=indent + "  ",
                         break_on_hyphens=False)  # fmt: skip


# the key to the report's columns, one entry per column: what it is and the rule behind it
# (tests/verify/test_legend.py holds the sentences that state a rule against the rule)
LEGEND = (
    ("steps", "most steps any candidate used"),
    (
        "cands",
        "candidate widths (any replicate's: a class grown at its edge adds rungs past"
        " the ladder for some replicates)",
    ),
    (
        "top",
        "selections at the replicate's own largest candidate (of a class grown at its"
        " edge: at its cap)",
    ),
    (
        "band",
        "[e, e + c ell] (c: c_band, the log power of the result covering the truth at"
        " its sharp reading; the proved bound's reading, delta_flip / delta_pass and the"
        " log-factor-or-power test are on each d2 entry's lines)",
    ),
    ("c_flip", "the band log power below which the theorem test FAILs"),
    (
        "e/2 ctl",
        "the too-slow control rejected? (it decides a PASS under the earlier"
        " protocols; under the confirming rule, exploratory-v2 on, a PASS is the interval's"
        " upper end below the band's top and e/2 is reported only)",
    ),
    (
        "power",
        "computed before the data from the protocol's pilot cv: the probability of a"
        " PASS at the exponent reaching the protocol's floor (the confirming rule) or the design"
        " separating e from e/2 (the earlier rule); without power a non-rejection is"
        " UNDECIDABLE, with it INCONCLUSIVE; a rejection stands either way",
    ),
    (
        "replication",
        "the share of bootstrap resamples of replicates giving the verdict, the"
        " leave-one-out sets flipping it and its margin in SE (fragile: a decided verdict below"
        " the floor)",
    ),
    (
        "top-half",
        "slope over the upper half of log n (bend: differs from the global slope"
        " beyond its CI; stated, never deciding)",
    ),
    ("ref", "class-matched reference (linear spline, mesh by CV) slope"),
    (
        "ASVI-ref",
        "paired slope difference over the whole design, against the log^c allowance"
        " (est-ref for another estimator: a control or a named regressor)",
    ),
    ("c_hat", "the log power it amounts to"),
    (
        "a-pow",
        "computed before the data from the pilot cv: can the attainment test tell the"
        " allowance from half the reference's rate? no: a non-rejection (the interval across"
        " the allowance) is UNDECIDABLE, not INCONCLUSIVE; a PASS or a FAIL stands either way."
        " Where the allowance eats the half-rate gap no interval can PASS: within it, the"
        " verdict is UNDECIDABLE",
    ),
    (
        "w-min ctl",
        "the same test for SVI at the smallest candidate width (must FAIL; a PASS"
        " whose control does not FAIL is INCONCLUSIVE)",
    ),
    (
        "dbl shift",
        "the budget control's change of the slope, an equivalence test against the"
        " protocol's margin (converged: verdicts stand; undetermined: they stand, labelled;"
        " limited: INCONCLUSIVE)",
    ),
    ("oracle", "oracle-width SVI's slope"),
    ("ratio", "slope of ASVI/oracle risk"),
)


ARM_LABELS = {
    "R": "random start",
    "W": "trained from the constructive start",
    "W0": "the constructive start, untrained",
    "W0s": "the constructive start with its slab sds fitted, untrained",
    "W0f": "the constructive start's network held, its slab sds and inclusions trained",
    "P": "plain Adam on squared error from the constructive start, early-stopped",
}


# what a design that cannot decide at any spread is, whatever its pilot (gap <= 0)
NO_MARGIN = (
    "and the theorem test cannot decide at any spread here (the band has no margin to PASS"
    " an estimator at e, or the log allowance eats the gap to e/2): UNDECIDABLE"
)


def _power_note(rows: list[MetricResult]) -> list[str]:
    out = []
    for r in rows:
        t = r.theorem
        if r.primary and t.power.pilot_cv is None:  # an entry with no pilot of its own
            out.append(f"  {NO_PILOT} (power ? in the tables; {PILOT_REMEDY})"
                       + ("" if t.power.separable else f"; {NO_MARGIN}"))  # fmt: skip
        elif r.primary and not t.power.separable and t.verdict == "UNDECIDABLE":
            out.append("  " + _power_sentence(t.power))
    return out


def _power_sentence(pw) -> str:
    """What a design without power would need (``pw``: ``verify.stats.power.Power``)."""
    need = []
    if pw.n_needed is not None:
        need.append(f"n up to {pw.n_needed:.3g}")
    if pw.replicates_needed is not None:
        need.append(f"{pw.replicates_needed} replicates")
    cv = float("nan") if pw.pilot_cv is None else pw.pilot_cv
    if pw.probability is not None:  # the confirming rule's power (verify.stats.power.confirm_power)
        return (
            f"power (before the data, pilot cv {cv:.2g}): a slope at the exponent would PASS"
            f" with probability {pw.probability:.2f}, below the floor {pw.floor:g} (the band's"
            f" log margin {pw.gap:.3f}, expected CI half-width {pw.half_width:.3f}); it would"
            " need "
            + (
                " or ".join(need)
                if need
                else "a band with a log factor (none has a"
                " margin to pass an estimator exactly at its exponent)"
            )
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
            lines += [f"- {r.estimator}, {r.truth}, d2, {w}" for w in readings_lines(r)]
            lines.append(f"- {r.estimator}, {r.truth}, d2, {_curve_words(r)}")
    if any(r.theorem.replication is not None for r in results):
        lines.append(
            "- replication: the share of bootstrap resamples of replicates (the protocol's"
            " [replication]) that give the verdict, the leave-one-out sets that flip it, and"
            " its margin to the threshold in SE; a decided verdict below the floor is"
            " fragile (verify.stats.replication)"
        )
    for r in results:
        if r.primary and r.starts and r.starts.answer:
            lines.append(f"- {r.truth}, constructive against random start: {r.starts.answer}")
    return "\n".join(lines) + "\n"


def _curve_words(r) -> str:
    """The curve per n in words: the arithmetic mean over replicates (what every slope is
    fitted on), the local slopes between consecutive n and, where the entry has a
    reference, the ratio of the two means."""
    c, a = r.curve, r.attainment
    ref = None if a is None else a.reference.mean
    per_n = ", ".join(
        f"{int(n)}: {m:.4g}" + ("" if ref is None else f" ({m / ref[i]:.1f}x the reference's)")
        for i, (n, m) in enumerate(zip(c.ns, c.mean, strict=True))
    )
    local = ", ".join(f"{s:+.3f}" for s in c.local_slopes)
    out = f"mean over replicates (arithmetic) per n: {per_n}; local slopes {local}"
    if ref is not None:
        x, y = np.log(np.asarray(c.ns, dtype=float)), np.log(np.asarray(ref, dtype=float))
        out += "; the reference's " + ", ".join(f"{s:+.3f}" for s in np.diff(y) / np.diff(x))
    return out


def power_brief(rows: list) -> str:
    """The power check in one line, said before a sweep trains (:func:`power_lines` is
    printed whole after the decision block): how many entries, how many a non-rejection
    would leave UNDECIDABLE for want of power, how many have no pilot of their own."""
    short = sum(
        not r.theorem_power.separable
        or (r.attainment_power is not None and not r.attainment_power.separable)
        for r in rows
        if r.pilot_cv is not None
    )
    unknown = sum(r.pilot_cv is None for r in rows)
    text = (
        f"power check (d^2): {len(rows)} entries, {short} short of power"
        + (f", {unknown} without a pilot (power unknown)" if unknown else "")
        + "; in full after the answer"
    )
    return "\n".join(textwrap.wrap(text, SCREEN_WIDTH, subsequent_indent="  "))


def power_lines(rows: list, cfg) -> str:
    """The power check before training (``verify.reading.design.design_power``'s rows for the
    sweep ``cfg``): per truth and estimator, d^2's band, the pilot cv and the slope SE it
    implies, whether the theorem test can separate e from e/2 and the attainment test
    the allowance from half the reference's rate, and a control's known answer."""
    own = [r for r in rows if own_pilot(r.estimator)]
    whose = (
        "the protocol's pilot cv" if not own
        else "its own pilot's cv" if all(r.pilot_cv is not None for r in own)
        else "its own pilot's cv where one is given"
    )  # fmt: skip
    lines = [
        f"power check before training (d^2; n = {list(cfg.ns)}, {cfg.replicates} replicates;"
        f" prospective, from {whose}):"
    ]
    for r in rows:
        tp, ap = r.theorem_power, r.attainment_power
        if r.pilot_cv is None:  # an entry that takes its power from its own pilot, with none
            lines.append(f"  {r.truth} {r.estimator}: e = {r.predicted:.3f}, band log^"
                         f"{r.band_log_power:.2f} n; {NO_PILOT} ({PILOT_REMEDY})"
                         + ("" if tp.separable else f"; {NO_MARGIN}"))  # fmt: skip
            continue
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
        if is_control(r.estimator):
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
        # the legends sit below the axes, outside the data (panels.outside_legend)
        fig, axes = plt.subplots(
            1, len(rows) + extra, figsize=(4.6 * (len(rows) + extra), 6.2), squeeze=False
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
            fig.savefig(tmp, dpi=110, format="png", bbox_inches="tight")
        plt.close(fig)
        paths.append(path)
    return paths
