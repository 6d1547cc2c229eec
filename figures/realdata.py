"""Real data: the UCI table and the MNIST-1D figure, drawn from the records of
``simulate.experiments.realdata`` (its drivers are re-exported here; the protocols, the
UCI one of Hernandez-Lobato and Adams 2015 and the MNIST-1D run, are described there).
"""

from __future__ import annotations

import numpy as np

from simulate.experiments.realdata import (  # noqa: F401  (the drivers, re-exported)
    DATASETS,
    MNIST_TIERS,
    UCI_METHODS,
    UCI_TIERS,
    mnist_store,
    run_mnist1d,
    run_uci,
    uci_store,
)

from ._io import save_figure, write_table

__all__ = ["UCI_TIERS", "MNIST_TIERS", "run_uci", "uci_table", "run_mnist1d", "mnist_figure"]


def _se(a) -> float:
    return float(a.std(ddof=1) / np.sqrt(len(a))) if len(a) > 1 else float("nan")


def uci_table(recs, out_dir: str, tier: str) -> dict:
    rows = []
    for name in DATASETS:
        for method in UCI_METHODS:
            rs = [r for r in recs if r["dataset"] == name and r["method"] == method]
            if not rs:
                continue
            rm = np.array([r["rmse"] for r in rs])
            ll = np.array([r["ll"] for r in rs])
            k = len(rs)
            rows.append(
                {
                    "dataset": name,
                    "method": method,
                    "splits": k,
                    "rmse": rm.mean(),
                    "rmse_se": _se(rm),
                    "ll": ll.mean(),
                    "ll_se": _se(ll),
                    "wall_s": rs[0]["wall_s_method"],
                }
            )
    lines = [
        f"UCI protocol, tier {tier}: test RMSE (original units) and test log-likelihood, "
        "mean +- SE over splits",
        f"{'dataset':>9s} {'method':>10s} {'splits':>6s} {'RMSE':>16s} {'log-lik':>16s} "
        f"{'wall s':>7s}",
    ]
    for r in rows:
        lines.append(
            f"{r['dataset']:>9s} {r['method']:>10s} {r['splits']:6d} "
            f"{r['rmse']:8.3f}+-{r['rmse_se']:6.3f} {r['ll']:8.3f}+-{r['ll_se']:6.3f} "
            f"{r['wall_s']:7.0f}"
        )
    text = "\n".join(lines)
    tex = [
        r"\begin{tabular}{llcc}",
        r"\toprule",
        r"Dataset & Method & RMSE & Test LL \\",
        r"\midrule",
    ]
    tex += [
        f"{r['dataset']} & {r['method']} & {r['rmse']:.3f} $\\pm$ {r['rmse_se']:.3f} & "
        f"{r['ll']:.3f} $\\pm$ {r['ll_se']:.3f} \\\\"
        for r in rows
    ]
    tex += [r"\bottomrule", r"\end{tabular}"]
    write_table(out_dir, f"uci-{tier}", text, rows, tex)
    return {"rows": rows, "text": text}


def mnist_figure(rec: dict, out_dir: str, tier: str) -> dict:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    k = rec["widths"].index(rec["selected_width"])
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    sv, de = rec["curves"]["spike_slab"], rec["curves"]["dense"]
    for j, w in enumerate(rec["widths"]):
        if j != k:
            ax.plot(
                sv["epochs"],
                [a[j] for a in sv["accuracy"]],
                color="C0",
                alpha=0.35,
                lw=1,
                label=f"SVI width {w}",
            )
    ax.plot(
        sv["epochs"],
        [a[k] for a in sv["accuracy"]],
        "C0-",
        lw=2,
        label=f"ASVI (= SVI at selected width {rec['selected_width']})",
    )
    ax.plot(
        de["epochs"],
        [a[k] for a in de["accuracy"]],
        "C1--",
        lw=2,
        label=f"Dense-BNN width {rec['selected_width']}",
    )
    ax.set_xlabel("epoch")
    ax.set_ylabel("test accuracy")
    ax.set_title(
        f"MNIST-1D ({tier}); sparsity {100 * rec['sparsity'][k]:.1f}% of edges kept", fontsize=9
    )
    ax.legend(fontsize=7)
    fig.tight_layout()
    paths = save_figure(fig, out_dir, f"mnist1d-{tier}")
    return {"paths": paths, "panels": 1}
