"""The classical references (``simulate.references.classical``): the piecewise polynomials
exact on their own class, the oracle attaining the minimax rate (with a negative control),
the degree and bin choices."""

import numpy as np
import pytest

from simulate.references.classical import bin_grid, degree_for, fit_piecewise, oracle_piecewise
from simulate.sweep.setup.truth_spec import TruthSpec
from verify.stats.slopes import fit_slope


@pytest.mark.parametrize("degree", [0, 1, 2])
def test_piecewise_polynomial_is_exact_on_its_own_class(degree):
    """A polynomial of the fitted degree on each cube is recovered to rounding (p = 1, 2)."""
    rng = np.random.default_rng(1)
    for p in (1, 2):
        if degree == 2 and p == 2:
            continue
        X = rng.uniform(-1, 1, size=(4000, p))
        f = (
            (lambda Z: 0.5 + Z[:, 0] ** degree - 0.3 * Z[:, -1])
            if degree
            else (lambda Z: np.full(len(Z), 0.7))
        )
        Xt = rng.uniform(-1, 1, size=(500, p))
        got = fit_piecewise(X, f(X), 3, max(degree, 1))(Xt)
        np.testing.assert_allclose(got, f(Xt), atol=1e-8)


@pytest.mark.parametrize("alpha", [0.5, 1.5])
def test_classical_reference_recovers_its_rate(alpha):
    """Oracle-binned piecewise polynomials on the project's exact-Hoelder truth attain the
    minimax slope -2 alpha / (2 alpha + 1) of the squared L2 error.  Declared tolerance
    0.12: integer bin counts and n <= 4000 leave a pre-asymptotic bias, measured at
    0.05-0.06 here (4 replicates; the slope's SE is about 0.03)."""
    ns = [250, 1000, 4000]
    f0 = TruthSpec("holder", p=1, alpha=alpha).build()
    Xt = np.random.default_rng(9).uniform(-1, 1, size=(5000, 1))
    f0t = f0(Xt)
    V = []
    for r in range(4):
        rng = np.random.default_rng(r)
        X = rng.uniform(-1, 1, size=(max(ns), 1))
        y = f0(X) + rng.standard_normal(max(ns))
        V.append([oracle_piecewise(X[:n], y[:n], Xt, f0t, 1.0, alpha)["l2sq"] for n in ns])
    slope = fit_slope(ns, np.array(V)).slope
    assert abs(slope + 2 * alpha / (2 * alpha + 1)) < 0.12
    # negative control: the same estimator with one bin only does not converge at all
    one = [np.mean((fit_piecewise(X[:n], y[:n], 1, 0)(Xt) - f0t) ** 2) for n in ns]
    assert fit_slope(ns, np.array([one])).slope > -0.1


def test_reference_choices():
    assert [degree_for(a) for a in (0.3, 1.0, 1.5, 2.0, 2.5)] == [0, 0, 1, 1, 2]
    assert bin_grid(1000, 1, 0)[0] == 1 and bin_grid(1000, 1, 0)[-1] == 500
    assert bin_grid(1000, 2, 1)[-1] == int((1000 / 8) ** 0.5)


def test_the_cross_validated_spline_takes_each_folds_rows_of_one_design_bit_for_bit():
    """``cv_linear_spline`` builds one design per mesh and takes each fold's rows of it; a
    point's row depends on the point alone, so the choice, its CV error and the refitted
    predictions are those of fitting every fold on its own design (the loop below, the
    plain reading of the method) bit for bit, in one and two dimensions."""
    import math

    from simulate.references.classical import cv_linear_spline, fit_linear_spline, spline_grid

    for p, n in [(1, 400), (2, 300)]:
        rng = np.random.default_rng(p)
        X = rng.uniform(-1, 1, (n, p))
        y = np.sin(3 * X.sum(1)) + 0.3 * rng.standard_normal(n)
        fold = np.random.default_rng(5).permutation(n) % 5
        best = (math.inf, None)
        for k in spline_grid(n, p):
            sse = 0.0
            for f in range(5):
                tr, va = fold != f, fold == f
                sse += float(np.sum((fit_linear_spline(X[tr], y[tr], k)(X[va]) - y[va]) ** 2))
            best = min(best, (sse / n, k), key=lambda b: b[0])
        got = cv_linear_spline(X, y, seed=5)
        assert (got["cv_mse"], got["k"]) == best
        Xt = rng.uniform(-1, 1, (50, p))
        assert np.array_equal(got["predict"](Xt), fit_linear_spline(X, y, best[1])(Xt))
