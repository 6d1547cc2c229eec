"""Rate figures from ``verify.rates`` records: log-log posterior d^2 against n."""

from __future__ import annotations

import numpy as np

from verify.rates import analyse, loglog_axes

from ._io import save_figure

__all__ = ["rate_figure"]


def rate_figure(records, out_dir: str, tag: str, metric: str = "d2") -> dict:
    """One panel per truth: mean over replicates with standard-error bars, the fitted line
    with the band of slopes in its 95% interval (pivoting at the design's centre), and the
    predicted slope through the same centre."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res = [r for r in analyse(records) if r["metric"] == metric]
    fig, axes = plt.subplots(1, len(res), figsize=(4.2 * len(res), 3.6), squeeze=False)
    for ax, r in zip(axes[0], res, strict=True):
        ns, mean, se = np.array(r["ns"]), np.array(r["mean"]), np.array(r["se"])
        x0, y0 = np.exp(np.log(ns).mean()), np.exp(np.log(mean).mean())
        grid = np.geomspace(ns[0], ns[-1], 60)

        def line(b, y0=y0, x0=x0, grid=grid):
            return y0 * (grid / x0) ** b

        ax.fill_between(grid, line(r["ci_low"]), line(r["ci_high"]), color="C0", alpha=0.15)
        ax.fill_between(
            grid,
            line(r["ci_high"]),
            line(r["ci_low"]),
            color="C0",
            alpha=0.15,
            label="95% interval of the slope",
        )
        ax.plot(grid, line(r["slope"]), "C0-", label=f"fit {r['slope']:.3f}")
        ax.plot(grid, line(r["predicted"]), "C3--", label=f"predicted {r['predicted']:.3f}")
        ax.errorbar(ns, mean, yerr=se, fmt="o", color="k", capsize=3, label="mean +- SE")
        loglog_axes(ax)
        ax.set_ylabel(f"VB posterior mean {metric}")
        ax.set_title(f"{r['truth']}: {r['verdict']}", fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    paths = save_figure(fig, out_dir, f"rates-{tag}")
    return {"paths": paths, "panels": len(res), "results": res}
