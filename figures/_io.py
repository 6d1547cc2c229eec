"""Writing outputs: every figure as PNG and PDF, every table as text, CSV and LaTeX."""

from __future__ import annotations

import csv
import os

__all__ = ["save_figure", "write_table"]


def save_figure(fig, out_dir: str, stem: str) -> list[str]:
    """Save ``fig`` as ``stem.png`` and ``stem.pdf`` in ``out_dir``, close it, return paths."""
    import matplotlib.pyplot as plt

    paths = []
    for ext in ("png", "pdf"):
        paths.append(os.path.join(out_dir, f"{stem}.{ext}"))
        fig.savefig(paths[-1], dpi=110)
    plt.close(fig)
    return paths


def write_table(out_dir: str, stem: str, text: str, rows: list[dict], tex: list[str]) -> None:
    """``stem.txt`` (the printed table), ``stem.csv`` (one row per dict), ``stem.tex``."""
    with open(os.path.join(out_dir, f"{stem}.txt"), "w") as fh:
        fh.write(text + "\n")
    fields = list(dict.fromkeys(k for r in rows for k in r))
    with open(os.path.join(out_dir, f"{stem}.csv"), "w", newline="") as fh:
        wr = csv.DictWriter(fh, fieldnames=fields)
        wr.writeheader()
        wr.writerows(rows)
    with open(os.path.join(out_dir, f"{stem}.tex"), "w") as fh:
        fh.write("\n".join(tex) + "\n")
