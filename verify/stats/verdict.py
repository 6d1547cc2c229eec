"""A test's outcome (:class:`Verdict`) and the family-wise level over the tests that set
the exit status (:func:`holm`).

**Family-wise level** (:func:`holm`): the FAILs that set the exit status are Holm-adjusted
over every test that could set it; a FAIL that does not survive the adjustment is reported
as a FAIL at its own level and counts as INCONCLUSIVE.  The PASS of the whole run needs
every test to pass (an intersection-union test: no adjustment is needed for it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

__all__ = [
    "Verdict",
    "Holm",
    "holm",
]


class Verdict(StrEnum):
    """A test's outcome.  A ``StrEnum``: it equals, prints and serialises as its name, so
    records, JSON reports and comparisons with the plain strings are unchanged."""

    PASS = "PASS"
    FAIL = "FAIL"
    INCONCLUSIVE = "INCONCLUSIVE"  # the design could decide, this run did not
    UNDECIDABLE = "UNDECIDABLE"  # the design cannot decide (no power against e/2)


@dataclass(frozen=True)
class Holm:
    """:func:`holm`: the adjusted p-values and the rejections, in the input's order."""

    adjusted: tuple[float, ...]
    rejected: tuple[bool, ...]


def holm(pvalues, alpha: float) -> Holm:
    """Holm's step-down procedure over ``pvalues`` (NaN: not a test, never rejected) at
    family-wise level ``alpha``: ``adjusted`` p-values (``max_{j <= i} min(1, (m - j + 1)
    p_(j))`` in sorted order) and ``rejected`` (``adjusted <= alpha``), in the input's
    order."""
    p = np.asarray(pvalues, dtype=float)
    ok = np.flatnonzero(np.isfinite(p))
    adj = np.full(p.shape, math.nan)
    m = ok.size
    if m:
        order = ok[np.argsort(p[ok], kind="stable")]
        running = 0.0
        for i, k in enumerate(order):
            running = max(running, min(1.0, (m - i) * p[k]))
            adj[k] = running
    rejected = np.where(np.isfinite(adj), adj <= alpha, False)
    return Holm(tuple(adj.tolist()), tuple(bool(x) for x in rejected))
