"""The figure panels of one result, shared with ``figures``: the rate panel, the
selected-width panel and the constructive-start comparison's ELBO gaps, on
log-log axes (:func:`loglog_axes`); ``verify.report.render.plot_results`` lays them out."""

from __future__ import annotations

from typing import TYPE_CHECKING

import matplotlib
import matplotlib.ticker
import numpy as np

if TYPE_CHECKING:  # the results module imports nothing from here; typing only
    from verify.results import MetricResult

__all__ = [
    "ARM_SHORT", "LEGEND_PT", "draw_elbo_gap_panel", "loglog_axes", "draw_rate_panel",
    "draw_width_panel", "n_label", "outside_legend",
]  # fmt: skip


# the metrics as a panel's title names them
METRIC_WORDS = {"d2": "d^2 (squared Hellinger)", "d": "d (Hellinger)", "l2sq": "squared L2"}

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
    ax.set_title(f"constructive vs random start: {c.answer_key}", fontsize=9)
    ax.tick_params(labelsize=TICK_PT)
    outside_legend(ax)


# the panels' text sizes (points): legible at the size a notebook shows a figure
LEGEND_PT = 8
TICK_PT = 8


def n_label(n: float, _pos=None) -> str:
    """A sample size as a tick label: ``250``, ``4000``, ``32k``, ``512k``, ``1.5M``."""
    n = float(n)
    if n >= 1e6:
        return f"{n / 1e6:g}M"
    return f"{n / 1e3:g}k" if n >= 1e4 else f"{n:g}"


def loglog_axes(ax, ns=None) -> None:
    """Log-log axes against n: the x ticks at the design's sample sizes ``ns`` (labelled
    ``250``, ``32k``; a log axis alone labelled one decade of 250..4000), the y ticks at 1, 2
    and 5 per decade (labelled as numbers), no minor tick labels."""

    ax.set_xscale("log")
    ax.set_yscale("log")
    if ns is not None:
        ax.xaxis.set_major_locator(matplotlib.ticker.FixedLocator([float(n) for n in ns]))
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(n_label))
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    else:
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda y, _: f"{y:g}"))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.tick_params(labelsize=TICK_PT)
    ax.set_xlabel("n")


def outside_legend(ax) -> None:
    """The panel's legend below its axes, outside the data, at :data:`LEGEND_PT`."""
    ax.legend(fontsize=LEGEND_PT, loc="upper center", bbox_to_anchor=(0.5, -0.16),
              frameon=False, borderaxespad=0.0)  # fmt: skip


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
    ax.plot(grid, band[0], "C3--", label=f"predicted e = {t.predicted:.3f}")
    # the too-slow alternative the verdicts are told apart from (e/2 ctl, the power)
    ax.plot(grid, y0 * (grid / x0) ** (t.predicted / 2), "C7:",
            label=f"half the rate, e/2 = {t.predicted / 2:.3f}")  # fmt: skip
    ax.fill_between(
        grid,
        np.minimum(*band),
        np.maximum(*band),
        color="C3",
        alpha=0.12,
        label="theorem band (log factor)",
    )
    loglog_axes(ax, ns)
    att = a.verdict if a else "n/a"
    ax.set_title(f"{METRIC_WORDS.get(r.metric, r.metric)}: theorem {t.verdict},"
                 f" attainment {att}", fontsize=9)  # fmt: skip
    outside_legend(ax)


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
    loglog_axes(ax, ns)
    ax.set_ylabel("width")
    ax.set_title("selected width", fontsize=9)
    outside_legend(ax)
