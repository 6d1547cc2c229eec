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
from scipy import sparse
from scipy.sparse.linalg import spsolve

from theory import hellinger_sq_pointwise

__all__ = [
    "degree_for", "bin_grid", "fit_piecewise", "oracle_piecewise", "fit_linear_spline",
    "spline_grid", "cv_linear_spline", "metrics_of", "spline_reference",
]  # fmt: skip


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


# --------------------------------------------------------------------------- linear splines
# The class-matched reference of the rate sweeps.
#
# Why a continuous linear spline: a one-hidden-layer ReLU network ``sum_j c_j relu(x - t_j)``
# plus a linear part *is* a continuous piecewise-linear function with knots t_j, and every
# continuous piecewise-linear function on a grid is such a network (deeper ReLU networks
# contain them too), so the spline is the estimator of the network class's own kind.  For
# alpha <= 2 the best continuous linear spline on a mesh of width h approximates an
# alpha-Hoelder function to O(h^alpha) (de Boor, A Practical Guide to Splines, ch. XII; for
# simplicial elements in p dimensions, Ciarlet's interpolation estimates), and least squares
# on ~h^-p coefficients has variance O(h^-p / n): with h ~ n^(-1/(2 alpha + p)) the squared
# L2 error attains the minimax rate ``n^(-2 alpha/(2 alpha + p))`` with no log factor (Stone
# 1982; Gyorfi et al. 2002, ch. 11 and 15).
#
# Choices: *equally spaced* knots (a ``k^p`` grid of cubes, each cut into p! simplices by
# the Kuhn (Freudenthal) triangulation, so the spline is the continuous piecewise-linear
# interpolant of its ``(k+1)^p`` node values): the sweep's truths have the same smoothness
# everywhere, where free knots gain no rate, and fixed knots keep the fit one linear least-
# squares problem.  The mesh ``k`` is chosen by ``folds``-fold cross-validation on the
# training data itself (noisy, drawn like it; the test points never enter), then the
# spline is refitted on all of it.  A tiny ridge (``1e-8`` of the design's mean diagonal)
# pulls the node values toward the data mean so nodes with no data are determined.


def _kuhn_design(X: np.ndarray, k: int):
    """Sparse design matrix ``[n, (k+1)^p]`` of the continuous piecewise-linear functions
    on the Kuhn triangulation of the ``k^p`` grid of [-1, 1]^p: row i holds the barycentric
    weights of x_i in its simplex (p + 1 non-zeros summing to 1)."""

    n, p = X.shape
    u = (X + 1) / 2 * k
    cell = np.clip(np.floor(u), 0, k - 1).astype(np.int64)
    loc = np.clip(u - cell, 0.0, 1.0)
    order = np.argsort(-loc, axis=1, kind="stable")  # coordinates by decreasing offset
    s = np.take_along_axis(loc, order, axis=1)
    w = np.empty((n, p + 1))
    w[:, 0] = 1 - s[:, 0]
    if p > 1:
        w[:, 1:p] = s[:, :-1] - s[:, 1:]
    w[:, p] = s[:, -1]
    verts = np.empty((n, p + 1, p), dtype=np.int64)
    verts[:, 0] = cell
    rows = np.arange(n)
    for i in range(1, p + 1):
        verts[:, i] = verts[:, i - 1]
        verts[rows, i, order[:, i - 1]] += 1
    cols = np.ravel_multi_index(tuple(verts.reshape(-1, p).T), (k + 1,) * p).reshape(n, p + 1)
    return sparse.csr_matrix(
        (w.ravel(), (np.repeat(rows, p + 1), cols.ravel())), shape=(n, (k + 1) ** p)
    )


def fit_linear_spline(X, y, k: int):
    """Least-squares continuous linear spline on the Kuhn triangulation of the ``k^p``
    grid of [-1, 1]^p (module notes above); returns ``predict(Xnew) -> array``."""

    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    if X.ndim != 2 or y.shape != (X.shape[0],) or k < 1:
        raise ValueError(f"need X [n, p], y [n] and k >= 1; got {X.shape}, {y.shape}, {k}")
    coef = _spline_coef(_kuhn_design(X, k), y)

    def predict(Xn):
        Xn = np.asarray(Xn, dtype=float)
        return _kuhn_design(Xn, k) @ coef

    return predict


def _spline_coef(B, y: np.ndarray) -> np.ndarray:
    """The spline's node values: least squares on the design ``B`` (:func:`_kuhn_design`'s
    rows of the data) with the tiny ridge toward the data mean (module notes above)."""
    ybar = float(y.mean())
    G = (B.T @ B).tocsc()
    ridge = 1e-8 * max(float(G.diagonal().mean()), 1e-300)
    G = G + ridge * sparse.identity(G.shape[0], format="csc")
    return np.atleast_1d(spsolve(G, B.T @ (y - ybar))) + ybar


def spline_grid(n: int, p: int, count: int = 30) -> list[int]:
    """Candidate meshes ``k`` per axis: a geometric grid from 1 to the largest k whose
    ``(k+1)^p`` nodes leave at least 4 points per node on average (a fold of 4/5 of the
    data then still has about 3)."""
    k_max = max(1, int((n / 4) ** (1 / p)) - 1)
    return sorted({int(round(x)) for x in np.geomspace(1, k_max, count)})


def cv_linear_spline(X, y, folds: int = 5, seed: int = 0) -> dict:
    """The mesh ``k`` of :func:`fit_linear_spline` chosen by ``folds``-fold
    cross-validated squared error on (X, y) alone; returns ``{"k", "cv_mse", "predict"}``
    with ``predict`` the spline refitted on all of (X, y) at that k."""
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    n, p = X.shape
    if n < 2 * folds:
        raise ValueError(f"need at least {2 * folds} points for {folds}-fold CV, got {n}")
    fold = np.random.default_rng(seed).permutation(n) % folds
    best = (math.inf, None)
    for k in spline_grid(n, p):
        # one design of all the points per mesh, its rows taken per fold: a point's row
        # depends on the point alone, so each fold's fit and predictions are those of its
        # own designs bit for bit (tested), at a fraction of the cost
        B = _kuhn_design(X, k)
        sse = 0.0
        for f in range(folds):
            tr, va = np.flatnonzero(fold != f), np.flatnonzero(fold == f)
            coef = _spline_coef(B[tr], y[tr])
            sse += float(np.sum((B[va] @ coef - y[va]) ** 2))
        if sse / n < best[0]:
            best = (sse / n, k)
    return {"k": best[1], "cv_mse": best[0], "predict": fit_linear_spline(X, y, best[1])}


def metrics_of(fhat_t: np.ndarray, f0t: np.ndarray, sigma: float) -> dict:
    """``d2``, ``d``, ``l2sq`` of a posterior with all its mass on ``fhat`` (test points)."""
    diff = np.asarray(fhat_t, dtype=float) - np.asarray(f0t, dtype=float)
    d2 = float(np.mean(hellinger_sq_pointwise(diff, sigma)))
    return {"d2": d2, "d": math.sqrt(d2), "l2sq": float(np.mean(diff**2))}


def spline_reference(X, y, Xt, f0t, sigma: float, seed: int = 0) -> dict:
    """The class-matched reference on one dataset (notes above): the cross-validated
    continuous linear spline's metrics at the test points and its mesh."""
    cv = cv_linear_spline(X, y, seed=seed)
    return {
        "method": "linear spline, mesh by 5-fold CV",
        "k": cv["k"],
        **metrics_of(cv["predict"](Xt), f0t, sigma),
    }
