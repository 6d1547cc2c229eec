"""The candidate widths of a cell (powers of two growing with n), their grouping into
padded programs, and the selection among them: ASVI's by the penalised ELBO (eq. (13)),
the plain arm's by validation error."""

from __future__ import annotations

import math

import numpy as np

from simulate.core.posterior import select_width

__all__ = ["candidate_widths", "group_widths", "cell_selection", "plain_selection"]


def candidate_widths(n: int, width_min: int = 2, scale: float = 1.0, width_max: int = 256):
    """Powers of two from ``width_min`` (rounded up to one) to the first power of two
    ``>= scale * sqrt(n)``, at most ``width_max`` and at least two candidates: for n = 250,
    1000, 4000, 16000 and the defaults, tops 16, 32, 64, 128."""
    lo = 1 << max(0, math.ceil(math.log2(width_min)))
    top = 1 << max(0, math.ceil(math.log2(max(1.0, scale * math.sqrt(n)))))
    top = min(max(top, 2 * lo), width_max)
    out = []
    w = lo
    while w <= top:
        out.append(w)
        w *= 2
    return out or [lo]


def group_widths(widths, waste: float = 2.0) -> list[list[int]]:
    """Candidate widths to train in one padded program each: going down from the widest, a
    width joins the current group while the padded work ``count * max_width^2`` stays within
    ``waste`` times the work ``sum width^2`` the group's models need.  Padding everything to
    the widest multiplies the narrow models' work (3.75x for 4..64), one program per width
    multiplies the per-step overhead (the quick tier took 157 s instead of 90 s); for
    4, 8, 16, 32 this gives [[32, 16], [8, 4]]."""
    groups: list[list[int]] = []
    for w in sorted({int(x) for x in widths}, reverse=True):
        g = groups[-1] if groups else None
        if g is not None and (len(g) + 1) * g[0] ** 2 <= waste * (sum(x * x for x in g) + w * w):
            g.append(w)
        else:
            groups.append([w])
    return groups


def cell_selection(per_width: dict, widths, lam: float) -> dict:
    """ASVI's selection in one cell from its per-width ``elbo`` and ``failed`` (eq. (13),
    ``posterior.select_width``): the record's ``failed``, ``selected_width``,
    ``selected_at_top``, ``metrics`` (the selected candidate's) and the per-width
    ``penalized_elbo``.  A cell whose every candidate diverged is *failed*: no width, metrics
    None (its per-width ``failed_step`` and ``failed_term`` say where and what).  One place
    for the sweep and for ``verify.rates``' re-selection under another width prior."""
    try:
        sel = select_width(per_width["elbo"], widths, lam, failed=per_width["failed"])
    except FloatingPointError:  # every candidate diverged: a failed cell, recorded as such
        return _failed_selection(widths)
    k = sel["index"]
    return {
        "failed": False,
        "selected_width": sel["width"],
        "selected_at_top": bool(k == len(widths) - 1 and len(widths) > 1),
        "metrics": {m: float(per_width[m][k]) for m in ("d2", "d", "l2sq")},
        "penalized_elbo": sel["penalized"].tolist(),
    }


def _failed_selection(widths) -> dict:
    """The selection keys of a cell whose every candidate failed: no width, no metrics."""
    return {
        "failed": True,
        "selected_width": None,
        "selected_at_top": False,
        "metrics": {m: None for m in ("d2", "d", "l2sq")},
        "penalized_elbo": [None] * len(widths),
    }


def plain_selection(per_width: dict, widths) -> dict:
    """The plain arm's selection (``simulate.references.plain``): the candidate with the smallest
    validation error (its own objective); the keys of :func:`cell_selection`."""
    v = np.asarray(per_width["val_mse"], dtype=float)
    ok = np.isfinite(v)
    if not ok.any():
        return _failed_selection(widths)
    k = int(np.argmin(np.where(ok, v, np.inf)))
    return {
        "failed": False,
        "selected_width": int(widths[k]),
        "selected_at_top": bool(k == len(widths) - 1 and len(widths) > 1),
        "metrics": {m: float(per_width[m][k]) for m in ("d2", "d", "l2sq")},
        "penalized_elbo": [None] * len(widths),
    }
