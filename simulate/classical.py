"""A classical reference estimator with oracle tuning: piecewise polynomials on equal bins.

On ``[-1, 1]^p`` cut into ``k^p`` equal cubes, least squares fits a polynomial of total
degree ``D`` in each cube.  For an alpha-Hoelder truth with ``D >= ceil(alpha) - 1`` the
squared bias is ``O(k^(-2 alpha))`` and the variance ``O(k^p / n)``; balancing them,
``k ~ n^(1/(2 alpha + p))`` gives the minimax rate ``n^(-2 alpha/(2 alpha + p))`` of the
squared L2 error, with no log factor (Stone 1982; Gyorfi et al. 2002, Thm 11.3).  The bin
count here is chosen by the *true* error on the test points (an oracle: it uses f0), so the
curve is the best this estimator attains on this truth at these n -- the achievable slope
that calibrates pre-asymptotic effects the theorem's exponent cannot.

Choices: ``D = ceil(alpha) - 1`` (degree 0 for alpha <= 1, 1 for 1 < alpha <= 2); the
candidate k form a geometric grid from 1 to the largest k with at least ``2 (D + 1)^p``
points per cube on average; a cube whose points cannot determine its polynomial (fewer
points than coefficients, or a singular design) gets the lower degree fit down to its
mean, and an empty cube the mean of all data.  Metrics of the fitted function ``fhat``
are those of a posterior that puts all its mass on ``fhat``: squared Hellinger ``d2``
(``theory.hellinger_sq_pointwise`` averaged over the test points), ``d = sqrt(d2)`` and
``l2sq``.  Each metric's oracle picks its own k.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from theory import hellinger_sq_pointwise

__all__ = ["degree_for", "bin_grid", "fit_piecewise", "oracle_piecewise"]


def degree_for(alpha: float) -> int:
    """Polynomial degree that attains the rate for smoothness alpha: ``ceil(alpha) - 1``."""
    if not (math.isfinite(alpha) and alpha > 0):
        raise ValueError(f"alpha must be a finite number > 0, got {alpha!r}")
    return max(0, math.ceil(alpha) - 1)


def _exponents(p: int, degree: int) -> list[tuple]:
    return [e for e in itertools.product(range(degree + 1), repeat=p) if sum(e) <= degree]


def _cells(X: np.ndarray, k: int) -> np.ndarray:
    """Flat cube index of each row of X in the k^p grid of [-1, 1]^p."""
    idx = np.clip(np.floor((X + 1) / 2 * k).astype(np.int64), 0, k - 1)
    return np.ravel_multi_index(idx.T, (k,) * X.shape[1])


def _local(X: np.ndarray, k: int) -> np.ndarray:
    """Coordinates of X inside their cube, scaled to [-1, 1] (conditioning)."""
    u = (X + 1) / 2 * k
    return 2 * (u - np.clip(np.floor(u), 0, k - 1)) - 1


def fit_piecewise(X, y, k: int, degree: int):
    """Least-squares piecewise polynomial of total degree ``degree`` on ``k^p`` equal
    cubes; returns ``predict(Xnew) -> array``."""
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    n, p = X.shape
    ncell = k**p
    cell = _cells(X, k)
    counts = np.bincount(cell, minlength=ncell)
    global_mean = float(y.mean())
    # degree 0 for every cube first (means); higher degrees overwrite where determined
    sums = np.bincount(cell, weights=y, minlength=ncell)
    coef_by_deg = {}
    means = np.where(counts > 0, sums / np.maximum(counts, 1), global_mean)
    best_deg = np.zeros(ncell, dtype=np.int64)
    for D in range(1, degree + 1):
        ex = _exponents(p, D)
        B = _basis(_local(X, k), ex)  # [n, c]
        c = B.shape[1]
        G = np.zeros((ncell, c, c))
        np.add.at(G, cell, B[:, :, None] * B[:, None, :])
        r = np.zeros((ncell, c))
        np.add.at(r, cell, B * y[:, None])
        ok = counts >= c
        coef = np.zeros((ncell, c))
        if ok.any():
            Gs = G[ok]
            # reject near-singular designs (points on a lower-dimensional set)
            cond = np.linalg.cond(Gs)
            good = np.isfinite(cond) & (cond < 1e10)
            sol = np.zeros((Gs.shape[0], c))
            if good.any():
                sol[good] = np.linalg.solve(Gs[good], r[ok][good][..., None])[..., 0]
            coef[ok] = sol
            fine = np.zeros(ncell, dtype=bool)
            fine[np.flatnonzero(ok)[good]] = True
            best_deg = np.where(fine, D, best_deg)
        coef_by_deg[D] = (ex, coef)

    def predict(Xn):
        Xn = np.asarray(Xn, dtype=float)
        cn = _cells(Xn, k)
        out = means[cn].copy()
        loc = _local(Xn, k)
        for D, (ex, coef) in coef_by_deg.items():
            sel = best_deg[cn] == D
            if sel.any():
                out[sel] = (_basis(loc[sel], ex) * coef[cn[sel]]).sum(1)
        return out

    return predict


def _basis(U: np.ndarray, ex: list[tuple]) -> np.ndarray:
    return np.stack([np.prod(U ** np.array(e), axis=1) for e in ex], axis=1)


def bin_grid(n: int, p: int, degree: int, count: int = 40) -> list[int]:
    """Candidate bin counts per axis: a geometric grid from 1 to the largest k with at least
    ``2 (degree + 1)^p`` points per cube on average."""
    k_max = max(1, int((n / (2 * (degree + 1) ** p)) ** (1 / p)))
    return sorted({int(round(x)) for x in np.geomspace(1, k_max, count)})


def oracle_piecewise(X, y, Xt, f0t, sigma: float, alpha: float) -> dict:
    """The oracle-tuned reference on one dataset: for each metric (``d2``, ``d``, ``l2sq``)
    the smallest value over the bin grid and the bin count that attains it."""
    X = np.asarray(X, dtype=float)
    deg = degree_for(alpha)
    best = {m: (math.inf, None) for m in ("d2", "d", "l2sq")}
    f0t = np.asarray(f0t, dtype=float)
    for k in bin_grid(X.shape[0], X.shape[1], deg):
        diff = fit_piecewise(X, y, k, deg)(Xt) - f0t
        d2 = float(np.mean(hellinger_sq_pointwise(diff, sigma)))
        vals = {"d2": d2, "d": math.sqrt(d2), "l2sq": float(np.mean(diff**2))}
        for m, v in vals.items():
            if v < best[m][0]:
                best[m] = (v, k)
    return {
        "method": "piecewise-polynomial, oracle bins",
        "degree": deg,
        **{m: v for m, (v, _) in best.items()},
        "bins": {m: k for m, (_, k) in best.items()},
    }
