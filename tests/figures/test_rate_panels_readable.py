"""The rate figures read at a glance (issue 77, item 6): legends of at least 8 pt below the
axes (outside the data), the x ticks at the design's n, the half-rate line e/2 drawn, and
every legend entry named in docs/usage.md."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt

from tests.factories import fake_records
from verify.reading.analysis import analyse
from verify.report.panels import draw_rate_panel, draw_width_panel, n_label

USAGE = Path(__file__).resolve().parents[2] / "docs" / "usage.md"


def _panels():
    matplotlib.use("Agg")  # as the figures' own code does
    r = next(x for x in analyse(fake_records(-0.5, -0.5)) if x.metric == "d2")
    fig, (ax, wx) = plt.subplots(1, 2, figsize=(9, 6))
    draw_rate_panel(ax, r)
    if r.asvi is not None:
        draw_width_panel(wx, r)
    fig.canvas.draw()
    return fig, ax, r


def test_the_legend_is_legible_and_outside_the_data():
    fig, ax, _ = _panels()
    try:
        leg = ax.get_legend()
        assert all(t.get_fontsize() >= 8 for t in leg.get_texts())
        box, axes = leg.get_window_extent(), ax.get_window_extent()
        assert box.y1 <= axes.y0  # wholly below the axes
    finally:
        plt.close(fig)


def test_the_ticks_are_the_designs_n_and_e_half_is_drawn():
    fig, ax, r = _panels()
    try:
        ticks = [float(t) for t in ax.get_xticks()]
        assert ticks == [float(n) for n in r.curve.ns]
        labels = [t.get_text() for t in ax.get_xticklabels()]
        assert labels == [n_label(n) for n in r.curve.ns]
        names = [t.get_text() for t in ax.get_legend().get_texts()]
        assert any(
            s.startswith(f"half the rate, e/2 = {r.theorem.predicted / 2:.3f}") for s in names
        )
    finally:
        plt.close(fig)


def test_n_labels():
    assert [n_label(n) for n in (250, 4000, 32000, 512000, 1_500_000)] == [
        "250", "4000", "32k", "512k", "1.5M"
    ]  # fmt: skip


def test_every_legend_entry_is_named_in_the_usage_guide():
    fig, ax, _ = _panels()
    try:
        names = [t.get_text() for t in ax.get_legend().get_texts()]
    finally:
        plt.close(fig)
    text = " ".join(USAGE.read_text().split())
    for name in names:
        stem = re.split(r" [-+]?\d|, e/2 = | e = ", name)[0]  # the entry without its numbers
        stem = re.sub(r"SVI width \d+", "SVI width W", stem)
        if stem in ("asvi",):
            stem = "ESTIMATOR"
        assert f"**{stem}" in text, (name, stem)
