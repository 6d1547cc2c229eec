"""The risk split (``verify.split``) as one stacked figure per truth: the class floor, the
objective's share and the optimiser's share of ASVI's mean d^2 against n (left, shares;
right, the levels floor, optimum and ASVI's own with the class-matched reference, log-log),
and its table as CSV."""

from __future__ import annotations

import csv
import os

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

from figures._io import save_figure
from theory.plumbing.paths import atomic_path
from verify.split import LEVELS, TERMS, Split

__all__ = ["split_figure"]

COLOURS = {"class": "#4c72b0", "objective": "#dd8452", "optimiser": "#c44e52"}


def _levels(sp: Split) -> dict:
    """Per level (and the reference), the mean over replicates at each n."""
    out = {}
    for lv in (*LEVELS, "reference"):
        vals = [[getattr(c, lv) for c in sp.cells if c.n == n] for n in sp.ns]
        if all(v is not None for col in vals for v in col):
            out[lv] = [float(np.mean(col)) for col in vals]
    return out


def split_figure(sp: Split, out_dir: str, tag: str) -> dict:
    """Draw ``sp`` (one truth) into ``out_dir`` as ``split-TAG-TRUTH.png/.pdf`` and write its
    table ``split-TAG-TRUTH.csv`` (per n and term: mean, interval, share); returns the
    paths."""
    matplotlib.use("Agg")
    ns = np.array(sp.ns, dtype=float)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9.5, 3.9))
    bottom = np.zeros(ns.size)
    for t in TERMS:
        share = np.clip(np.array(sp.term_share[t]), 0, None)  # a negative mean share: 0
        a1.bar(range(ns.size), share, bottom=bottom, color=COLOURS[t], label=t, width=0.7)
        bottom += share
    a1.set_xticks(range(ns.size), [f"{int(n):,}" for n in ns], fontsize=8)
    a1.set_xlabel("n")
    a1.set_ylabel(f"share of ASVI's mean {sp.metric}")
    a1.set_title(f"{sp.truth}: the split ({sp.replicates} replicates)", fontsize=9)
    levels = _levels(sp)
    marks = {"floor": "s-", "optimum": "^-", "random": "o-", "reference": "k--"}
    names = {"floor": "class floor F", "optimum": "optimum O", "random": "ASVI (R)",
             "reference": "reference (spline)"}  # fmt: skip
    for lv, v in levels.items():
        if np.all(np.isfinite(v)) and min(v) > 0:
            a2.loglog(ns, v, marks[lv], label=names[lv], ms=4)
    a2.set_xlabel("n")
    a2.set_ylabel(f"mean {sp.metric}")
    a2.set_title("the levels (their differences are the terms)", fontsize=9)
    for ax in (a1, a2):
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
    fig.tight_layout()
    stem = f"split-{tag}-{sp.truth}"
    paths = save_figure(fig, out_dir, stem)
    csv_path = os.path.join(out_dir, stem + ".csv")
    with atomic_path(csv_path) as tmp, open(tmp, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["truth", "n", "term", "mean", "ci_low", "ci_high", "share"])
        for t in TERMS:
            for j, n in enumerate(sp.ns):
                lo, hi = sp.term_ci[t][j]
                w.writerow([sp.truth, n, t, sp.term_mean[t][j], lo, hi, sp.term_share[t][j]])
    return {"figure": paths, "csv": csv_path}
