"""The network family F(L, p, s) of Section 2 and its edge count H.

Depth convention (a choice: the paper is inconsistent).  Section 2 calls the model an
"(L-1)-hidden-layer" network, while Lemma 6.1 (after Schmidt-Hieber, Theorem 3) writes the
widths as ``(12pN, ..., 12pN) in R^L`` and the experiments call a 20-h-h-1 student "depth 2"
(Table 1's Dense-BNN edge counts, 51 at width 2 and 861 at width 20 for p = 20, are exactly
those of two hidden layers).  Here **L is the number of hidden layers**, all of the same
width W; the network has L + 1 weight matrices and H edges counting weights and biases:

    H(L, W, p) = (p + 1) W + (L - 1) (W + 1) W + (W + 1).
"""

from __future__ import annotations

from theory import _validate as check
from theory._backend import ops_for

__all__ = ["num_edges", "lemma_width"]


def num_edges(L, width, p):
    """H: number of weights and biases of an L-hidden-layer ReLU net of equal ``width``.

    ``H = (p+1) W + (L-1)(W+1) W + (W+1)`` (see the module docstring for the depth
    convention).  ``num_edges(2, 2, 20) == 51`` and ``num_edges(2, 20, 20) == 861``, the
    Dense-BNN edge counts of the paper's Table 1.
    """
    check.positive_int("L", L)
    check.positive_int("width", width)
    check.positive_int("p", p)
    ops = ops_for(L, width, p)
    L, W, p = ops.args(L, width, p)
    return (p + 1) * W + (L - 1) * (W + 1) * W + (W + 1)


def lemma_width(N, p):
    """Hidden-layer width ``12 p N`` prescribed by Lemma 6.1 (and used throughout Sec. 4-5)."""
    check.positive_int("N", N)
    check.positive_int("p", p)
    ops = ops_for(N, p)
    N, p = ops.args(N, p)
    return 12 * p * N
