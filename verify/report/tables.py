"""The plain-text report's tables per truth (``verify.report.render.format_results``): the
truth's header, the cell table per n, the slope and attainment tables, the budget
control's cells, the constructive-start comparison and the input-dimension
comparisons; they read :class:`verify.results.MetricResult`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulate.sweep.setup.kinds import is_asvi
from theory.exponents import METRICS
from verify.report.findings import replication_text, verdict_text
from verify.starts import ARM_HEADER, arm_row

if TYPE_CHECKING:  # the results module imports nothing from here; typing only
    from verify.results import MetricResult


def _f(x, fmt="7.3f") -> str:
    return f"{'n/a':>{fmt.split('.')[0]}s}" if x is None else format(x, fmt)


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
    if not is_asvi(r0.estimator):
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
            f"{_yes(t.power):>5s}"
            f" {verdict_text(t.verdict, t.replication):>12s}   "
            f"{c.top_half_slope:8.3f} {_ci(*c.top_half_ci)} "
            f"{('yes' if c.bending else 'no'):>4s}  {replication_text(t.replication)}"
        )
    return lines


def _attain_table_lines(rows: list[MetricResult]) -> list[str]:
    """Per metric: the reference, the attainment test with its allowance and c_hat, its
    negative control, the budget control's slope shift and the oracle-width columns (the
    difference's column ``ASVI-ref`` for ASVI, ``est-ref`` for another estimator)."""
    diff = "ASVI-ref" if rows and is_asvi(rows[0].estimator) else "est-ref"
    lines = [
        f"{'metric':>6s} {'ref':>7s} {diff:>8s} {'95% CI':>17s} {'allow':>6s}"
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
    """A power column: yes / no, ``?`` where it is unknown (an entry with no pilot of its
    own, ``verify.reading.pilot``), n/a where the test is not made."""
    if power is None:
        return "n/a"
    cv = power.pilot_cv if hasattr(power, "pilot_cv") else power.pilot_cv_diff
    return "?" if cv is None else ("yes" if power.separable else "no")


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
