"""Writing outputs: every figure as PNG and PDF, every table as text, CSV and LaTeX."""

from __future__ import annotations

import csv
import io
import os

import matplotlib.pyplot as plt

from theory.plumbing.paths import atomic_path, write_atomic

__all__ = ["ONE_CONFIG_HINT", "save_figure", "tex_escape", "write_table"]

# what figures says of a records file that mixes configurations (it has no --fingerprint)
ONE_CONFIG_HINT = (
    "figures reads files of one configuration: pick one with python -m verify.rates"
    " --records FILE --fingerprint PREFIX, or split the file by fingerprint"
)

# LaTeX's special characters in running text and their escapes (backslash first, so the
# escapes' own backslashes are not escaped again)
_TEX_SPECIALS = (
    ("\\", r"\textbackslash{}"),
    ("&", r"\&"),
    ("%", r"\%"),
    ("$", r"\$"),
    ("#", r"\#"),
    ("_", r"\_"),
    ("{", r"\{"),
    ("}", r"\}"),
    ("~", r"\textasciitilde{}"),
    ("^", r"\textasciicircum{}"),
)


def tex_escape(text) -> str:
    """``text`` (any value, through ``str``) safe inside a LaTeX table cell: every special
    character escaped (``lambda_s=1e-6`` -> ``lambda\\_s=1e-6``).  Every table writes its
    names (datasets, methods, variants) through it; the numbers need none."""
    out = []
    for ch in str(text):
        out.append(next((esc for c, esc in _TEX_SPECIALS if c == ch), ch))
    return "".join(out)


def save_figure(fig, out_dir: str, stem: str) -> list[str]:
    """Save ``fig`` as ``stem.png`` and ``stem.pdf`` in ``out_dir`` (each whole or not at
    all), close it, return paths."""

    paths = []
    for ext in ("png", "pdf"):
        paths.append(os.path.join(out_dir, f"{stem}.{ext}"))
        with atomic_path(paths[-1]) as tmp:
            fig.savefig(tmp, dpi=110, format=ext)
    plt.close(fig)
    return paths


def write_table(out_dir: str, stem: str, text: str, rows: list[dict], tex: list[str]) -> None:
    """``stem.txt`` (the printed table), ``stem.csv`` (one row per dict), ``stem.tex``; each
    written whole or not at all."""
    write_atomic(os.path.join(out_dir, f"{stem}.txt"), text + "\n")
    fields = list(dict.fromkeys(k for r in rows for k in r))
    buf = io.StringIO(newline="")
    wr = csv.DictWriter(buf, fieldnames=fields)
    wr.writeheader()
    wr.writerows(rows)
    write_atomic(os.path.join(out_dir, f"{stem}.csv"), buf.getvalue())
    write_atomic(os.path.join(out_dir, f"{stem}.tex"), "\n".join(tex) + "\n")
