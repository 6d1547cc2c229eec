"""Real data: the UCI table and the MNIST-1D figure, drawn from the records of
``simulate.experiments.uci`` and ``simulate.experiments.mnist`` (the protocols, the UCI one of
Hernandez-Lobato and Adams 2015 and the MNIST-1D run, are described there).
"""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

from figures._io import save_figure, tex_escape, write_table
from figures.paper_values import (
    UCI_PUBLISHED,
    UCI_PUBLISHED_SOURCES,
    UCI_SPREAD_AS_PRINTED,
    UCI_UNVERIFIED,
)
from simulate.experiments.uci import DATASETS, UCI_CRITERIA, UCI_METHODS, uci_stem

__all__ = [
    "uci_table", "mnist_figure", "mnist_rows", "mnist_table", "mnist_control_rows",
    "mnist_controls_table", "mnist_controls_figure",
]  # fmt: skip


def _tabular(colspec: str, header: str, body: list[str]) -> list[str]:
    """A booktabs LaTeX tabular: ``header`` and each ``body`` row end with a line break."""
    return [
        rf"\begin{{tabular}}{{{colspec}}}", r"\toprule", header + r" \\", r"\midrule",
        *(row + r" \\" for row in body), r"\bottomrule", r"\end{tabular}",
    ]  # fmt: skip


def _tables(
    out_dir: str,
    stem: str,
    lines: list[str],
    rows: list[dict],
    tex: list[str],
    csv_rows: list[dict] | None = None,
) -> dict:
    """Write the table ``stem`` (``figures._io.write_table``: ``lines`` printed, ``csv_rows``
    -- by default ``rows`` -- as CSV, ``tex``) and return ``{"rows": rows, "text": text}``."""
    text = "\n".join(lines)
    write_table(out_dir, stem, text, rows if csv_rows is None else csv_rows, tex)
    return {"rows": rows, "text": text}


def _se(a) -> float:
    return float(a.std(ddof=1) / np.sqrt(len(a))) if len(a) > 1 else float("nan")


def _published_mark(row, tex: bool = False) -> str:
    """`` (published)`` for a published row, `` (published, unverified)`` for one typed
    from a paper not checked here (``figures.paper_values.UCI_UNVERIFIED``), `` (published,
    +- as printed)`` for one whose +- is not a standard error
    (``figures.paper_values.UCI_SPREAD_AS_PRINTED``), else ''; ``tex``: the LaTeX table's
    marks instead, ``$^*$``, ``$^{*\\dagger}$`` and ``$^{*\\ddagger}$``."""
    if row["source"] != "published":
        return ""
    if not row.get("verified", True):
        return "$^{*\\dagger}$" if tex else " (published, unverified)"
    if row.get("spread") == "as printed":
        return "$^{*\\ddagger}$" if tex else " (published, +- as printed)"
    return "$^*$" if tex else " (published)"


def _own_row(name: str, method: str, crit: str, rs: list) -> dict:
    """One row of this run's UCI table: ``method`` under criterion ``crit`` on dataset
    ``name``, its records ``rs`` (one per split) summarised."""
    rm = np.array([r["rmse"] for r in rs])
    ll = np.array([r["ll"] for r in rs])
    ep = np.array([r["epochs"] for r in rs])
    return {
        "dataset": name,
        "method": method,
        "criterion": crit,
        "splits": len(rs),
        "rmse": rm.mean(),
        "rmse_se": _se(rm),
        "ll": ll.mean(),
        "ll_se": _se(ll),
        "picp90": float(np.mean([r["picp90"] for r in rs])),
        "width90": float(np.mean([r["width90"] for r in rs])),
        "epochs_median": float(np.median(ep)),
        "sigma_median": float(np.median([r["sigma"] for r in rs])),
        "wall_s": rs[0]["wall_s_method"],
        "source": "this run",
    }


def _published_rows(name: str) -> list[dict]:
    """The published rows of dataset ``name`` (``UCI_PUBLISHED``) in the table's shape."""
    rows = []
    for method, ((rm, rm_se), (ll, ll_se)) in UCI_PUBLISHED[name].items():
        rows.append(
            {
                "dataset": name, "method": method, "criterion": "-", "splits": 20,
                "rmse": rm, "rmse_se": rm_se, "ll": ll, "ll_se": ll_se,
                "picp90": float("nan"), "width90": float("nan"),
                "epochs_median": float("nan"), "sigma_median": float("nan"),
                "wall_s": float("nan"),
                "source": "published",
                "verified": method not in UCI_UNVERIFIED,
                "spread": "as printed" if method in UCI_SPREAD_AS_PRINTED else "se",
            }
        )  # fmt: skip
    return rows


def uci_table(recs, out_dir: str, tier: str, splits: str = "random") -> dict:
    """``uci-TIER``: per dataset, our methods under each selection criterion (test RMSE and
    log-likelihood, mean +- SE over splits, the median epochs and sigma chosen, the wall
    time) and below them the published results of other methods under the same protocol
    (``figures.paper_values.UCI_PUBLISHED``, cited in the caption), marked
    ``(published)``, or ``(published, unverified)`` where their values could not be checked
    against their source here, or ``(published, +- as printed)`` where their +- is not a
    standard error.  Our rows also give the 90% predictive interval's coverage of the test
    targets (PICP) and its mean width (original units), mean over splits; the published
    papers report neither.  ``splits``: the records' split kind (``random`` or
    ``standard``), which names the outputs (``uci-TIER``, ``uci-standard-TIER``)."""

    stem = uci_stem(splits)

    rows = []
    for name in DATASETS:
        for method in UCI_METHODS:
            for crit in UCI_CRITERIA:
                rs = [
                    r
                    for r in recs
                    if r["dataset"] == name and r["method"] == method and r["criterion"] == crit
                ]
                if rs:
                    rows.append(_own_row(name, method, crit, rs))
        if any(r["dataset"] == name for r in rows):
            rows += _published_rows(name)
    lines = [
        f"UCI protocol, tier {tier}, {splits} splits: test RMSE (original units) and test "
        "log-likelihood, mean +- SE over splits; PICP: the fraction of test targets inside "
        "the central 90% predictive interval, width: its mean width (original units), means "
        "over splits; 'chosen by': the validation criterion of the grid search "
        "(rmse: the paper's best prediction accuracy; ll: log-likelihood); sigma: median "
        "chosen noise sd (standardised units); wall: grid search and refits of both "
        "criteria; (published): " + UCI_PUBLISHED_SOURCES,
        f"{'dataset':>9s} {'method':>40s} {'chosen by':>9s} {'splits':>6s} {'RMSE':>16s} "
        f"{'log-lik':>16s} {'PICP90':>6s} {'width':>7s} {'epochs':>6s} {'sigma':>5s} "
        f"{'wall s':>7s}",
    ]
    dash = lambda v, fmt: "-" if np.isnan(v) else format(v, fmt)  # noqa: E731
    for r in rows:
        label = r["method"] + _published_mark(r)
        lines.append(
            f"{r['dataset']:>9s} {label:>40s} {r['criterion']:>9s} {r['splits']:6d} "
            f"{r['rmse']:8.3f}+-{r['rmse_se']:6.3f} {r['ll']:8.3f}+-{r['ll_se']:6.3f} "
            f"{dash(r['picp90'], '.3f'):>6s} {dash(r['width90'], '.2f'):>7s} "
            f"{dash(r['epochs_median'], '.0f'):>6s} {dash(r['sigma_median'], '.2f'):>5s} "
            f"{dash(r['wall_s'], '.0f'):>7s}"
        )
    tex = ["% published rows: " + UCI_PUBLISHED_SOURCES] + _tabular(
        "lllcccc",
        r"Dataset & Method & Chosen by & RMSE & Test LL & PICP$_{90}$ & Width$_{90}$",
        [
            f"{tex_escape(r['dataset'])} & {tex_escape(r['method'])}"
            f"{_published_mark(r, tex=True)} & "
            f"{tex_escape(r['criterion'])} & {r['rmse']:.3f} $\\pm$ {r['rmse_se']:.3f} & "
            f"{r['ll']:.3f} $\\pm$ {r['ll_se']:.3f} & {dash(r['picp90'], '.3f')} & "
            f"{dash(r['width90'], '.2f')}"
            for r in rows
        ],
    )
    return _tables(out_dir, f"{stem}-{tier}", lines, rows, tex)


def mnist_rows(recs) -> list[dict]:
    """One summary row per training-set size n: the selected width, its kept-edge fraction,
    ASVI's final and best test accuracy, and Dense-BNN's at the selected width and at its
    own best width (final epoch)."""
    rows = []
    for rec in sorted(recs, key=lambda r: r["n"]):
        k = rec["widths"].index(rec["selected_width"])
        sv, de = rec["curves"]["spike_slab"], rec["curves"]["dense"]
        asvi = [a[k] for a in sv["accuracy"]]
        best = int(np.argmax(asvi))
        dense_final = de["accuracy"][-1]
        j = int(np.argmax(dense_final))
        rows.append(
            {
                "n": rec["n"],
                "lambda_s": rec["lambda_s"],
                "lam": rec["lam"],
                "selected_width": rec["selected_width"],
                "kept_fraction": rec["kept_fraction"][k],
                "asvi_final": asvi[-1],
                "asvi_best": asvi[best],
                "asvi_best_epoch": sv["epochs"][best],
                "dense_at_selected_final": dense_final[k],
                "dense_best_width": rec["widths"][j],
                "dense_best_final": dense_final[j],
                "epochs": rec["epochs"],
                "wall_s": rec["wall_s"],
            }
        )
    return rows


def mnist_table(recs, out_dir: str, tier: str) -> dict:
    """``mnist1d-TIER``: the summary per n (:func:`mnist_rows`) and, per n, the test
    accuracy at every evaluated epoch for ASVI (the selected width), SVI at every width and
    Dense-BNN at every width, with the kept-edge fraction of the selected width (the CSV
    holds the curves, one row per (n, epoch))."""
    rows = mnist_rows(recs)
    lines = [
        f"MNIST-1D, tier {tier}: two hidden layers, posterior-mean test accuracy (10 draws)",
        f"{'n':>6s} {'lambda_s':>8s} {'selected':>8s} {'kept %':>7s} {'ASVI final':>10s} "
        f"{'ASVI best (ep)':>15s} {'Dense@sel':>9s} {'Dense best (w)':>15s} {'wall s':>7s}",
    ]
    for r in rows:
        lines.append(
            f"{r['n']:6d} {r['lambda_s']:8.1f} {r['selected_width']:8d} "
            f"{100 * r['kept_fraction']:7.2f} {r['asvi_final']:10.3f} "
            f"{r['asvi_best']:8.3f} ({r['asvi_best_epoch']:3d}) "
            f"{r['dense_at_selected_final']:9.3f} "
            f"{r['dense_best_final']:8.3f} ({r['dense_best_width']:3d}) {r['wall_s']:7.0f}"
        )
    curve_rows = []
    for rec in sorted(recs, key=lambda r: r["n"]):
        k = rec["widths"].index(rec["selected_width"])
        sv, de = rec["curves"]["spike_slab"], rec["curves"]["dense"]
        ws = rec["widths"]
        lines += [
            "",
            f"n = {rec['n']}: selected width {rec['selected_width']}; accuracy by epoch",
            f"{'epoch':>5s} {'ASVI':>6s} {'kept %':>6s} "
            + " ".join(f"{'SVI ' + str(w):>8s}" for w in ws)
            + " "
            + " ".join(f"{'Dense ' + str(w):>9s}" for w in ws),
        ]
        for i, ep in enumerate(sv["epochs"]):
            kept = sv["kept"][i][k] if "kept" in sv else float("nan")
            lines.append(
                f"{ep:5d} {sv['accuracy'][i][k]:6.3f} {100 * kept:6.2f} "
                + " ".join(f"{a:8.3f}" for a in sv["accuracy"][i])
                + " "
                + " ".join(f"{a:9.3f}" for a in de["accuracy"][i])
            )
            row = {"n": rec["n"], "epoch": ep, "selected_width": rec["selected_width"]}
            row["asvi"] = sv["accuracy"][i][k]
            row["asvi_kept_fraction"] = kept
            row.update({f"svi_{w}": a for w, a in zip(ws, sv["accuracy"][i], strict=True)})
            row.update({f"dense_{w}": a for w, a in zip(ws, de["accuracy"][i], strict=True)})
            curve_rows.append(row)
    tex = _tabular(
        "rrrrrr",
        r"$n$ & selected width & edges kept (\%) & ASVI & Dense-BNN (selected) & "
        r"Dense-BNN (best)",
        [
            f"{r['n']} & {r['selected_width']} & {100 * r['kept_fraction']:.2f} & "
            f"{r['asvi_final']:.3f} & {r['dense_at_selected_final']:.3f} & "
            f"{r['dense_best_final']:.3f}"
            for r in rows
        ],
    )
    return _tables(out_dir, f"mnist1d-{tier}", lines, rows, tex, csv_rows=curve_rows)


def mnist_figure(recs, out_dir: str, tier: str) -> dict:
    """One panel per training-set size n (test accuracy against epoch: ASVI = SVI at the
    selected width, the other SVI widths faint, Dense-BNN at the selected width) and, with
    more than one n, a last panel of final accuracy and kept-edge fraction against n."""

    matplotlib.use("Agg")

    recs = sorted(recs, key=lambda r: r["n"])
    panels = len(recs) + (1 if len(recs) > 1 else 0)
    fig, axes = plt.subplots(1, panels, figsize=(4.2 * panels, 3.6), squeeze=False)
    for ax, rec in zip(axes[0], recs, strict=False):
        k = rec["widths"].index(rec["selected_width"])
        sv, de = rec["curves"]["spike_slab"], rec["curves"]["dense"]
        for j in range(len(rec["widths"])):
            if j != k:
                ax.plot(
                    sv["epochs"], [a[j] for a in sv["accuracy"]], color="C0", alpha=0.3,
                    lw=1, label="SVI, other widths" if j == (1 if k == 0 else 0) else None,
                )  # fmt: skip
        ax.plot(
            sv["epochs"], [a[k] for a in sv["accuracy"]], "C0-", lw=2,
            label=f"ASVI (SVI at selected width {rec['selected_width']})",
        )  # fmt: skip
        ax.plot(
            de["epochs"], [a[k] for a in de["accuracy"]], "C1--", lw=2,
            label=f"Dense-BNN width {rec['selected_width']}",
        )  # fmt: skip
        ax.set_xlabel("epoch")
        ax.set_ylabel("test accuracy")
        kept = 100 * rec["kept_fraction"][k]
        ax.set_title(f"n = {rec['n']}: {kept:.1f}% of edges kept", fontsize=9)
        ax.legend(fontsize=6)
    if len(recs) > 1:
        rows = mnist_rows(recs)
        ax = axes[0][-1]
        ns = [r["n"] for r in rows]
        ax.plot(ns, [r["asvi_final"] for r in rows], "C0o-", label="ASVI final accuracy")
        ax.plot(ns, [r["dense_best_final"] for r in rows], "C1s--", label="Dense-BNN (best width)")
        ax.set_xscale("log")
        ax.set_xlabel("training-set size n")
        ax.set_ylabel("test accuracy")
        ax2 = ax.twinx()
        ax2.plot(ns, [100 * r["kept_fraction"] for r in rows], "C2^:", label="ASVI edges kept")
        ax2.set_ylabel("edges kept (%)")
        h1, l1 = ax.get_legend_handles_labels()
        h2, l2 = ax2.get_legend_handles_labels()
        ax.legend(h1 + h2, l1 + l2, fontsize=6)
        ax.set_title("against n", fontsize=9)
    fig.suptitle(f"MNIST-1D, tier {tier}", fontsize=10)
    fig.tight_layout()
    paths = save_figure(fig, out_dir, f"mnist1d-{tier}")
    return {"paths": paths, "panels": panels}


def mnist_control_rows(recs) -> list[dict]:
    """One row per (n, variant) of the collapse controls: final and best test accuracy and
    the final kept-edge fraction (means over the seeds), the kept edges against the budget
    ``n log(10) / lambda_s`` (the most edges whose sparsity price lambda_s the whole data
    set's likelihood, at most n log 10 nats for 10 classes, can pay), and the negative
    ELBO's parts at the last epoch (nats, whole training set)."""
    rows = []
    for rec in recs:
        c = rec["curves"]
        acc = np.asarray(c["accuracy"]).mean(1)
        best = int(np.argmax(acc))
        kept = float(np.mean(c["kept"][-1]))
        H = float(np.mean(rec["H"]))
        rows.append(
            {
                "n": rec["n"],
                "variant": rec["variant"],
                "family": rec["family"],
                "lambda_s": rec["lambda_s"],
                "optimizer": rec["optimizer"],
                "lr": rec["lr"],
                "init_sigma": rec["init_sigma"],
                "acc_final": float(acc[-1]),
                "acc_best": float(acc[best]),
                "acc_best_epoch": c["epochs"][best],
                "kept_fraction": kept,
                "kept_edges": kept * H,
                "edge_budget": rec["n"] * np.log(10) / rec["lambda_s"],
                "L1": float(np.mean(c["L1"][-1])),
                "L2": float(np.mean(c["L2"][-1])),
                "L3": float(np.mean(c["L3"][-1])),
                "wall_s": rec["wall_s"],
            }
        )
    return rows


def mnist_controls_table(recs, out_dir: str, tier: str) -> dict:
    """``mnist1d-controls-TIER``: :func:`mnist_control_rows` as text, CSV and LaTeX."""
    rows = mnist_control_rows(recs)
    width = recs[0]["width"] if recs else "-"
    lines = [
        f"MNIST-1D collapse controls, tier {tier}: SVI at width {width} (Dense-BNN for "
        "'dense'), one setting of the tier's run changed per row, means over "
        f"{len(recs[0]['seeds']) if recs else 0} seeds; budget = n log(10) / lambda_s "
        "edges; L1, L2, L3: negative ELBO's parts at the last epoch (nats)",
        f"{'n':>6s} {'variant':>16s} {'lambda_s':>8s} {'final':>6s} {'best (ep)':>11s} "
        f"{'kept %':>7s} {'kept':>7s} {'budget':>8s} {'L1':>8s} {'L2':>8s} {'L3':>9s} "
        f"{'wall s':>6s}",
    ]
    for r in rows:
        lines.append(
            f"{r['n']:6d} {r['variant']:>16s} {r['lambda_s']:8.2g} {r['acc_final']:6.3f} "
            f"{r['acc_best']:6.3f} ({r['acc_best_epoch']:3d}) {100 * r['kept_fraction']:7.2f} "
            f"{r['kept_edges']:7.0f} {r['edge_budget']:8.3g} {r['L1']:8.0f} {r['L2']:8.0f} "
            f"{r['L3']:9.0f} {r['wall_s']:6.0f}"
        )
    tex = _tabular(
        "rlrrrrr",
        r"$n$ & variant & $\lambda_s$ & accuracy (final) & accuracy (best) & "
        r"edges kept (\%) & budget",
        [
            f"{r['n']} & {tex_escape(r['variant'])} & {r['lambda_s']:.3g} & {r['acc_final']:.3f} & "
            f"{r['acc_best']:.3f} & {100 * r['kept_fraction']:.2f} & {r['edge_budget']:.3g}"
            for r in rows
        ],
    )
    return _tables(out_dir, f"mnist1d-controls-{tier}", lines, rows, tex)


def mnist_controls_figure(recs, out_dir: str, tier: str) -> dict:
    """A column per n: test accuracy (top) and kept-edge fraction (bottom, log scale)
    against epoch, one line per variant (mean over seeds)."""

    matplotlib.use("Agg")

    ns = sorted({r["n"] for r in recs})
    fig, axes = plt.subplots(2, len(ns), figsize=(4.4 * len(ns), 6.4), squeeze=False)
    variants = list(dict.fromkeys(r["variant"] for r in recs))
    for j, n in enumerate(ns):
        for rec in (r for r in recs if r["n"] == n):
            c = rec["curves"]
            i = variants.index(rec["variant"])
            style = {"color": f"C{i}", "ls": "--" if rec["family"] != "spike_slab" else "-"}
            label = f"{rec['variant']} (lambda_s {rec['lambda_s']:.2g})"
            axes[0][j].plot(c["epochs"], np.mean(c["accuracy"], 1), label=label, **style)
            if rec["family"] == "spike_slab":
                axes[1][j].plot(c["epochs"], 100 * np.mean(c["kept"], 1), **style)
        axes[0][j].set_title(f"n = {n}", fontsize=9)
        axes[0][j].set_ylabel("test accuracy")
        axes[1][j].set_ylabel("edges kept (%)")
        axes[1][j].set_yscale("log")
        axes[1][j].set_xlabel("epoch")
        axes[0][j].legend(fontsize=6)
    fig.suptitle(f"MNIST-1D collapse controls, tier {tier}", fontsize=10)
    fig.tight_layout()
    paths = save_figure(fig, out_dir, f"mnist1d-controls-{tier}")
    return {"paths": paths, "panels": 2 * len(ns)}
