import math

import numpy as np
import pytest
import sympy as sp
from hypothesis import given
from hypothesis import strategies as st
from scipy import integrate, stats

import theory as T

rationals = st.fractions(min_value="1/10", max_value=6, max_denominator=12)


def test_derived_exponent_is_the_closed_form_symbolically():
    a, p = sp.symbols("alpha p", positive=True)
    d = T.derive_exponent()
    assert sp.simplify(d["d2"].subs({d["alpha"]: a, d["p"]: p}) + 2 * a / (2 * a + p)) == 0
    assert sp.simplify(d["theta"].subs({d["alpha"]: a, d["p"]: p}) - p / (2 * a + p)) == 0


@given(alpha=rationals, p=st.integers(1, 20))
def test_derived_exponent_at_random_rationals(alpha, p):
    a = sp.Rational(alpha.numerator, alpha.denominator)
    d = T.derive_exponent()
    derived = d["d2"].subs({d["alpha"]: a, d["p"]: p})
    assert derived == -2 * a / (2 * a + p)  # exact rational equality
    assert float(T.predicted_exponent(a, p, "d2")) == pytest.approx(float(-2 * a / (2 * a + p)))
    assert float(T.predicted_exponent(a, p, "l2sq")) == pytest.approx(float(derived))
    assert float(T.predicted_exponent(a, p, "d")) == pytest.approx(float(-a / (2 * a + p)))


def test_predicted_exponent_symbolic_and_metric_check():
    a = sp.Symbol("a", positive=True)
    assert sp.simplify(T.predicted_exponent(a, 1, "d") + a / (2 * a + 1)) == 0
    with pytest.raises(ValueError, match="metric"):
        T.predicted_exponent(1, 1, "rmse")
    assert T.log_factor_power("d2", 1.5) == 3 and T.log_factor_power("d", 1.5) == 1.5


@given(delta=st.floats(-5, 5), sigma=st.floats(0.1, 5))
def test_pointwise_hellinger_is_one_minus_bhattacharyya(delta, sigma):
    def root_product(y):
        return math.sqrt(stats.norm.pdf(y, 0, sigma) * stats.norm.pdf(y, delta, sigma))

    bc, _ = integrate.quad(root_product, -np.inf, np.inf, epsabs=1e-13)
    assert float(T.hellinger_sq_pointwise(delta, sigma)) == pytest.approx(1 - bc, abs=1e-8)


def test_regression_hellinger_integral_and_sup_bound():
    sigma = 0.7

    def f(x):
        return 2 * x**2

    def f0(x):
        return math.sin(3 * x)

    want, _ = integrate.quad(lambda x: 1 - math.exp(-((f(x) - f0(x)) ** 2) / (8 * sigma**2)), -1, 1)
    got = T.hellinger_sq(f, f0, 1, sigma)
    assert float(got) == pytest.approx(want / 2, rel=1e-10)
    xs = np.linspace(-1, 1, 20001)
    sup = np.max(np.abs(2 * xs**2 - np.sin(3 * xs)))
    assert got <= T.hellinger_sq_sup_bound(sup, sigma)
    # Monte Carlo form agrees with the integral within 5 standard errors
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(200_000, 1))
    vals = 1 - np.exp(-((2 * X[:, 0] ** 2 - np.sin(3 * X[:, 0])) ** 2) / (8 * sigma**2))
    mc = T.hellinger_sq(
        lambda Z: 2 * Z[:, 0] ** 2, lambda Z: np.sin(3 * Z[:, 0]), 1, sigma, sample=X
    )
    assert mc == pytest.approx(float(got), abs=5 * vals.std() / math.sqrt(len(X)))


@given(coef=st.lists(st.floats(-3, 3), min_size=3, max_size=3), sigma=st.floats(0.2, 3))
def test_hellinger_respects_sup_bound_2d(coef, sigma):
    a, b, c = coef
    X = np.random.default_rng(1).uniform(-1, 1, size=(2000, 2))

    def f(Z):
        return a * Z[:, 0] + b * Z[:, 1] ** 2 + c

    d2 = T.hellinger_sq(f, lambda Z: np.zeros(len(Z)), 2, sigma, sample=X)
    sup = abs(a) + abs(b) + abs(c)  # |a x + b y^2 + c| <= |a| + |b| + |c| on the cube
    assert 0 <= d2 <= float(T.hellinger_sq_sup_bound(sup, sigma)) + 1e-15
