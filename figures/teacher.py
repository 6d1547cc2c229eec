"""The paper's teacher-network experiment: Table 1 and Figure 1(b), drawn from the records
of ``simulate.experiments.table1`` (its driver is re-exported here; the setting is described
there).  The ASVI row selects, per replicate, the SVI width with the largest penalised ELBO
(eq. (13)), so it reuses the SVI fits; Figure 1(b)'s re-selection for other lambda needs no
training: the penalty ``log pi(N)`` is added to the recorded ELBOs.
"""

from __future__ import annotations

import numpy as np

from simulate.experiments.table1 import (  # noqa: F401  (the driver, re-exported)
    METHODS,
    PAPER_WIDTHS,
    SCHEMA,
    TIERS,
    run_teacher,
    teacher_store,
)
from simulate.posterior import select_width

from ._io import save_figure, write_table
from .paper_values import TABLE1_ASVI, TABLE1_EDGES, TABLE1_RMSE

__all__ = ["TIERS", "METHODS", "run_teacher", "table1", "figure_1b"]


def _mean_se(a):
    a = np.asarray(a, dtype=float)
    return a.mean(0), (a.std(0, ddof=1) / np.sqrt(len(a)) if len(a) > 1 else np.nan * a[0])


def asvi_selection(recs, lam: float = 10.0):
    """Per replicate: (selected width, its RMSE, its edges), from the SVI records."""
    out = []
    for r in sorted((x for x in recs if x["method"] == "SVI"), key=lambda x: x["replicate"]):
        sel = select_width(np.array(r["elbo"]), r["widths"], lam, failed=r["failed"])
        k = sel["index"]
        out.append((sel["width"], r["rmse"][k], r["edges"][k]))
    return out


def table1(recs, out_dir: str, tier: str) -> dict:
    """Write Table 1 as text, CSV and LaTeX (ours beside the paper's); return its rows."""
    widths = recs[0]["widths"]
    rows = []
    stats = {}
    for m in METHODS:
        mine = [r for r in recs if r["method"] == m]
        stats[m] = (
            _mean_se([r["rmse"] for r in mine]),
            _mean_se([r["edges"] for r in mine]),
            len(mine),
        )
    for j, w in enumerate(widths):
        row = {"width": w}
        for m in METHODS:
            (rm, rs), (em, es), _ = stats[m]
            row[f"{m} rmse"], row[f"{m} rmse se"] = rm[j], rs[j]
            row[f"{m} edges"], row[f"{m} edges se"] = em[j], es[j]
            pr, pe = TABLE1_RMSE[m].get(w), TABLE1_EDGES[m].get(w)
            row[f"{m} rmse paper"] = pr[0] if pr else None
            row[f"{m} edges paper"] = pe[0] if pe else None
        rows.append(row)
    sel = asvi_selection(recs)
    a_rmse = _mean_se([s[1] for s in sel])
    a_edges = _mean_se([s[2] for s in sel])
    asvi = {"rmse": a_rmse, "edges": a_edges, "widths": [s[0] for s in sel]}
    reps = stats["SVI"][2]
    epochs = recs[0]["epochs"]
    text = _table1_text(rows, a_rmse, a_edges, asvi["widths"], tier, reps, epochs)
    asvi_row = {
        "width": "ASVI",
        "SVI rmse": a_rmse[0],
        "SVI rmse se": a_rmse[1],
        "SVI edges": a_edges[0],
        "SVI edges se": a_edges[1],
        "SVI rmse paper": TABLE1_ASVI["rmse"][0],
        "SVI edges paper": TABLE1_ASVI["edges"][0],
    }
    tex = _table1_tex(rows, a_rmse, a_edges)
    write_table(out_dir, f"table1-{tier}", text, [*rows, asvi_row], tex)
    return {"rows": rows, "asvi": asvi, "text": text, "replicates": reps, "epochs": epochs}


def _table1_text(rows, a_rmse, a_edges, selected, tier, reps, epochs) -> str:
    """Table 1 as plain text: ours +- SE with the paper's value in brackets."""
    head = (
        f"{'width':>5s} "
        + " ".join(f"{m + ' RMSE':>22s}" for m in METHODS)
        + " "
        + " ".join(f"{m + ' edges':>22s}" for m in METHODS)
    )
    lines = [
        f"Table 1 (teacher network), tier {tier}: {reps} replications, {epochs} epochs; "
        "ours +- SE (paper's value in brackets)",
        head,
    ]
    for row in rows:
        cells = [
            f"{row[m + ' rmse']:7.3f}+-{row[m + ' rmse se']:5.3f} ({row[m + ' rmse paper']:.3f})"
            for m in METHODS
        ]
        cells += [
            f"{row[m + ' edges']:7.1f}+-{row[m + ' edges se']:5.1f} ({row[m + ' edges paper']:.1f})"
            for m in METHODS
        ]
        lines.append(f"{row['width']:5d} " + " ".join(f"{c:>22s}" for c in cells))
    lines.append(
        f"ASVI  RMSE {a_rmse[0]:.3f}+-{a_rmse[1]:.3f} (paper {TABLE1_ASVI['rmse'][0]}"
        f"+-{TABLE1_ASVI['rmse'][1]}), edges {a_edges[0]:.1f}+-{a_edges[1]:.1f} "
        f"(paper {TABLE1_ASVI['edges'][0]}+-{TABLE1_ASVI['edges'][1]}); "
        f"selected widths {selected}"
    )
    return "\n".join(lines)


def _table1_tex(rows, a_rmse, a_edges) -> list[str]:
    """Table 1 as a LaTeX tabular (lines)."""
    tex = [
        r"\begin{tabular}{l" + "c" * 6 + "}",
        r"\toprule",
        r"Width & "
        + " & ".join(f"{m} RMSE" for m in METHODS)
        + " & "
        + " & ".join(f"{m} edges" for m in METHODS)
        + r" \\",
        r"\midrule",
    ]
    for row in rows:
        cells = [
            f"{row[m + ' rmse']:.3f} $\\pm$ {row[m + ' rmse se']:.3f} "
            f"({row[m + ' rmse paper']:.3f})"
            for m in METHODS
        ]
        cells += [
            f"{row[m + ' edges']:.1f} $\\pm$ {row[m + ' edges se']:.1f} "
            f"({row[m + ' edges paper']:.1f})"
            for m in METHODS
        ]
        tex.append(f"{row['width']} & " + " & ".join(cells) + r" \\")
    tex += [
        r"\midrule",
        f"Adaptive & {a_rmse[0]:.3f} $\\pm$ {a_rmse[1]:.3f} "
        f"({TABLE1_ASVI['rmse'][0]:.3f}) & & & {a_edges[0]:.1f} $\\pm$ {a_edges[1]:.1f} "
        f"({TABLE1_ASVI['edges'][0]:.1f}) & & \\\\",
        r"\bottomrule",
        r"\end{tabular}",
    ]
    return tex


def figure_1b(recs, out_dir: str, tier: str, lams=(1, 3, 10, 30)) -> dict:
    """Frequency of the selected width over replications, for each lambda of the prior."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    widths = recs[0]["widths"]
    freqs = {}
    fig, axes = plt.subplots(1, len(lams), figsize=(3.2 * len(lams), 3.0), sharey=True)
    for ax, lam in zip(np.atleast_1d(axes), lams, strict=True):
        sel = [s[0] for s in asvi_selection(recs, lam)]
        counts = [sel.count(w) for w in widths]
        freqs[lam] = dict(zip(widths, counts, strict=True))
        ax.bar([str(w) for w in widths], counts, color="C0")
        ax.axvline(widths.index(10) if 10 in widths else 0, color="C3", ls="--", lw=1)
        ax.set_title(f"lambda = {lam}" + (" (paper)" if lam == 10 else ""))
        ax.set_xlabel("selected width")
    np.atleast_1d(axes)[0].set_ylabel(f"count of {len(sel)} replications")
    fig.suptitle("Figure 1(b): ASVI's selected width (true width 10, dashed)")
    fig.tight_layout()
    paths = save_figure(fig, out_dir, f"fig1b-{tier}")
    return {"frequencies": freqs, "paths": paths, "panels": len(lams)}
