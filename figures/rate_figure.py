"""Rate figures from ``verify.rates`` records: one row per truth, a panel per metric (ASVI,
oracle-width SVI, SVI at the smallest candidate width, the classical reference, the
predicted slope with its log band) and the selected width against n."""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt

from figures._io import save_figure
from theory.exponents import METRICS
from verify.reading.analysis import analyse
from verify.report.panels import draw_rate_panel, draw_width_panel

__all__ = ["rate_figure"]


def rate_figure(records, out_dir: str, tag: str, metrics=METRICS) -> dict:
    """Panels drawn by ``verify.rates`` (one figure for every truth of the records)."""

    matplotlib.use("Agg")

    res = [r for r in analyse(records) if r.metric in metrics]
    truths = list(dict.fromkeys(r.truth for r in res))
    cols = len(metrics) + 1
    fig, axes = plt.subplots(
        len(truths), cols, figsize=(4.6 * cols, 6.2 * len(truths)), squeeze=False
    )
    for row, key in zip(axes, truths, strict=True):
        rs = [r for r in res if r.truth == key]
        for ax, r in zip(row[:-1], rs, strict=True):
            draw_rate_panel(ax, r)
            ax.set_title(f"{key}\n{ax.get_title()}", fontsize=9)
        draw_width_panel(row[-1], rs[0])
    fig.tight_layout()
    paths = save_figure(fig, out_dir, f"rates-{tag}")
    return {"paths": paths, "panels": len(res) + len(truths), "results": res}
