"""The width trade-off: Theorem 4.1's three terms against width (theory) beside the
measured error against width of fixed-width SVI fits (sweep records, per width)."""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

from figures._io import save_figure
from theory import eps_n, lemma_6_1_sparsity, lemma_width, num_edges, r_n, xi_bound
from verify.reading.records import cells_of

__all__ = ["theory_terms", "tradeoff_figure"]


def theory_terms(n: int, p: int, alpha: float, holder_norm: float, L: int, N_max: int = 2000):
    """The three terms of eq. (d2bound) (constants 1) for N = 1..N_max at depth L, with
    s = min(Lemma 6.1's sparsity, edges): estimation eps_n^2, variational 3 r_n,
    approximation 3 xi (Lemma 6.1's bound).  Returns arrays keyed by name, and widths 12pN."""
    N = np.arange(1, N_max + 1, dtype=float)
    s = np.minimum(np.floor(lemma_6_1_sparsity(N, L, p, alpha)), num_edges(L, lemma_width(N, p), p))
    s = np.minimum(s, np.floor(n * L / np.e))  # keep s log(nL/s) >= 0 (Lemma 4.2's regime)
    return {
        "width": 12 * p * N,
        "estimation": eps_n(float(n), L, N, s, p) ** 2,
        "variational": 3 * r_n(float(n), L, N, s, p),
        "approximation": 3 * xi_bound(float(n), N, p, alpha, holder_norm),
    }


def tradeoff_figure(records, out_dir: str, tag: str) -> dict:
    """Left: theory's terms for the first Hoelder truth of the records at its largest n.
    Right: measured VB-posterior d^2 of each candidate width (mean over replicates), per
    n, over that n's candidates."""

    matplotlib.use("Agg")

    holder = [c for c in cells_of(records) if c.spec.kind == "holder"]
    if not holder:
        raise ValueError("the trade-off figure needs records of a holder truth")
    key = sorted({c.truth for c in holder})[0]
    cells = [c for c in holder if c.truth == key]
    spec = cells[0].spec
    ns = sorted({c.n for c in cells})
    L = cells[0].depth + 1
    # the Hoelder norm of the first replicate's truth (each replicate draws its own)
    norm = cells[0].holder_norm
    terms = theory_terms(ns[-1], int(spec.p), float(spec.alpha), float(norm), L)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9.5, 3.8))
    total = terms["estimation"] + terms["variational"] + terms["approximation"]
    for name in ("estimation", "variational", "approximation"):
        a1.plot(terms["width"], terms[name], label=name)
    a1.plot(terms["width"], total, "k-", lw=2, label="sum (Theorem 4.1)")
    a1.set_xscale("log")
    a1.set_yscale("log")
    a1.set_xlabel("width 12pN")
    a1.set_title(f"theory, n = {ns[-1]}, depth L = {L} (constants 1)", fontsize=9)
    a1.legend(fontsize=7)
    measured, widths = {}, {}
    for n in ns:  # the candidate widths may grow with n
        at_n = [c for c in cells if c.n == n]
        widths[n] = list(at_n[0].widths)
        measured[n] = np.mean([c.per_width["d2"] for c in at_n], axis=0)
        a2.plot(widths[n], measured[n], "o-", label=f"n = {n}")
    a2.set_xscale("log", base=2)
    a2.set_yscale("log")
    a2.set_xlabel("width (fixed-width SVI)")
    a2.set_ylabel("VB posterior mean d^2")
    a2.set_title(f"measured, {key}", fontsize=9)
    a2.legend(fontsize=7)
    fig.tight_layout()
    paths = save_figure(fig, out_dir, f"tradeoff-{tag}")
    argmin = int(np.argmin(total))
    return {
        "paths": paths,
        "panels": 2,
        "theory_argmin_width": float(terms["width"][argmin]),
        "measured": {n: v.tolist() for n, v in measured.items()},
        "widths": widths,
    }
