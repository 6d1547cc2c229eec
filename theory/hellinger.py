r"""The squared Hellinger distance of the regression model (Section 4) and its sup-norm bound.

For ``Y = f(X) + N(0, sigma^2)`` with ``X ~ U([-1,1]^p)``, the squared Hellinger distance
``d^2 = 1 - int sqrt(p_theta p_0)`` between the joint laws is

.. math:: d^2(P_\theta, P_0) = \mathbb E_X\Bigl[1 - \exp\Bigl\{-\frac{(f_\theta(X)-f_0(X))^2}
          {8\sigma^2}\Bigr\}\Bigr],

and, the integrand being increasing in ``|f_theta - f_0|``, it is bounded by
``1 - exp(-||f_theta - f_0||_inf^2 / (8 sigma^2))`` (proof of Lemma A.2, eq. (testrate)).
"""

from __future__ import annotations

import mpmath
import numpy as np

from theory import _validate as check
from theory._backend import is_symbolic, ops_for

__all__ = ["hellinger_sq_pointwise", "hellinger_sq", "hellinger_sq_sup_bound"]


def hellinger_sq_pointwise(delta, sigma):
    """``1 - exp(-delta^2 / (8 sigma^2))``: d^2 between N(a, sigma^2) and N(a + delta, sigma^2)."""
    check.real("delta", delta)
    check.real("sigma", sigma, gt=0)
    ops = ops_for(delta, sigma)
    delta, sigma = ops.args(delta, sigma)
    return 1 - ops.exp(-(delta**2) / (8 * sigma**2))


def hellinger_sq_sup_bound(sup_diff, sigma):
    """The sup-norm bound ``d^2 <= 1 - exp(-||f_theta - f_0||_inf^2 / (8 sigma^2))``."""
    check.real("sup_diff", sup_diff, ge=0)
    return hellinger_sq_pointwise(sup_diff, sigma)


def hellinger_sq(f, f0, p, sigma, *, sample=None):
    """d^2(P_f, P_f0) of the regression model with X ~ U([-1,1]^p).

    * ``sample=None``: exact integration over the cube with ``mpmath.quad`` (p <= 3), ``f``
      and ``f0`` being callables of p scalar arguments;
    * ``sample`` an (m, p) array of draws of X: the Monte Carlo average, ``f`` and ``f0``
      being vectorised callables of an (m, p) array.
    """
    check.positive_int("p", p)
    check.real("sigma", sigma, gt=0)
    if is_symbolic(sigma):
        raise ValueError("hellinger_sq integrates numerically: sigma must be a number")
    if sample is None:
        if p > 3:
            raise ValueError("exact integration supports p <= 3; pass a Monte Carlo sample")
        s2 = 8 * mpmath.mpf(sigma) ** 2

        def integrand(*x):
            return 1 - mpmath.exp(-((f(*x) - f0(*x)) ** 2) / s2)

        return mpmath.quad(integrand, *([[-1, 1]] * p)) / mpmath.mpf(2) ** p
    X = np.asarray(sample, dtype=float)
    if X.ndim != 2 or X.shape[1] != p or X.shape[0] == 0:
        raise ValueError(f"sample must be a non-empty (m, {p}) array, got shape {X.shape}")
    diff = np.asarray(f(X), dtype=float).ravel() - np.asarray(f0(X), dtype=float).ravel()
    if not np.all(np.isfinite(diff)):
        raise ValueError("f or f0 returned non-finite values on the sample")
    return float(np.mean(hellinger_sq_pointwise(diff, float(sigma))))
