"""Predicted contraction exponents, derived symbolically, and the rates of Corollaries 6.1-6.4.

The exponent is *derived* (not typed in) by the balance argument of Sections 5-6: put
``N = n^theta`` with L ~ log n and s proportional to N L (Lemma 6.1).  Then, dropping
logarithms, the variational error r_n (Lemma 4.1) grows like ``n^(e_r(theta))`` and the
approximation bound xi_n (Lemma 6.1) like ``n^(e_xi(theta))``; each exponent is computed by
sympy as ``lim log(term)/log(n)`` of the actual formulas of ``theory.bounds`` (term by term,
with L and log factors held as constants of zero power).  ``e_r`` increases and the
``N^(-2 alpha/p)`` part of ``e_xi`` decreases in theta; the bound's exponent
``max(e_r, e_xi)`` is smallest where they cross, and that crossing is solved for.  The
result, ``-2 alpha/(2 alpha + p)``, is checked against the closed form in the tests.
"""

from __future__ import annotations

from functools import lru_cache

import mpmath
import numpy as np
import sympy as sp

from theory import _validate as check
from theory._backend import ops_for
from theory.bounds import r_n, xi_bound

__all__ = [
    "METRICS",
    "derive_exponent",
    "predicted_exponent",
    "teacher_exponent",
    "log_factor_power",
    "teacher_log_power",
    "design_log_power",
    "log_log_slope",
    "gp_matern_exponent",
    "knn_exponent",
    "corollary_6_1_rate",
    "corollary_6_2_rate",
    "corollary_6_3_rate",
    "corollary_6_4_rate",
]

METRICS = ("d2", "d", "l2sq")

_n = sp.Symbol("n", positive=True)
_theta = sp.Symbol("theta", positive=True)
_alpha = sp.Symbol("alpha", positive=True)
_p = sp.Symbol("p", positive=True, integer=True)


def _power(term) -> sp.Expr:
    """Power of n of one product term: lim_{n->oo} log(term) / log(n)."""
    return sp.simplify(sp.limit(sp.log(term) / sp.log(_n), _n, sp.oo))


@lru_cache(maxsize=1)
def derive_exponent():
    """Derive ``(theta*, exponent of the d^2 bound)`` as sympy expressions in alpha, p.

    Returns a dict with ``theta`` (N* = n^theta up to logs), ``e_r`` and ``e_xi`` (the term
    exponents as functions of theta) and ``d2`` (the balanced exponent).
    """
    L, c, B, H = sp.symbols("L c B H", positive=True)
    N = _n**_theta
    s = c * N * L  # Lemma 6.1: s proportional to N (L + ceil log2 p), L ~ log n
    r = r_n(_n, L, N, s, _p, B)
    e_r = sp.Max(*[_power(t) for t in sp.Add.make_args(sp.expand(r))])
    inner = sp.sqrt(xi_bound(_n, N, _p, _alpha, H))  # xi = (a N/n + b N^(-alpha/p))^2
    inner_terms = sp.Add.make_args(sp.expand(sp.powdenest(inner, force=True)))
    e_inner = [_power(t) for t in inner_terms]
    decreasing = [e for e in e_inner if sp.diff(e, _theta).is_negative]
    if len(decreasing) != 1 or not sp.diff(e_r, _theta).is_positive:
        raise RuntimeError("balance argument failed: unexpected term exponents")
    e_dec = 2 * decreasing[0]
    theta = sp.solve(sp.Eq(e_r, e_dec), _theta)
    if len(theta) != 1:
        raise RuntimeError(f"balance argument failed: solutions {theta}")
    theta = sp.simplify(theta[0])
    d2 = sp.simplify(e_r.subs(_theta, theta))
    # the other part of xi, (N/n)^2, must be of lower order at the balance point
    for e in e_inner:
        if e is not decreasing[0]:
            gap = sp.simplify(2 * e.subs(_theta, theta) - d2)
            if not gap.is_negative:
                raise RuntimeError(f"balance argument failed: term of power {e} dominates")
    e_xi = 2 * sp.Max(*e_inner)
    return {"theta": theta, "e_r": e_r, "e_xi": e_xi, "d2": d2, "alpha": _alpha, "p": _p}


def predicted_exponent(alpha, p, metric="d2"):
    """Predicted exponent of n in the contraction rate of Corollaries 6.1/6.2.

    ``metric``: ``"d2"`` (VB-posterior mean of the squared Hellinger distance, the left side
    of Theorems 4.1 and 5.1), ``"l2sq"`` (squared L2: Theorem 7.1 bounds it at the same rate
    as d^2), ``"d"`` (Hellinger distance: half the d^2 exponent).  The d^2 exponent is
    :func:`derive_exponent`'s, ``-2 alpha/(2 alpha + p)``; logarithmic factors are excluded
    (see :func:`log_factor_power`).
    """
    check.real("alpha", alpha, gt=0)
    check.positive_int("p", p)
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    ops = ops_for(alpha, p)
    if ops.name == "sympy":
        return _exponent_expr(metric).subs({_alpha: alpha, _p: p})
    a, pp = ops.args(alpha, p)
    return _exponent_fn(metric)(a, pp)


def _exponent_expr(metric: str) -> sp.Expr:
    """:func:`derive_exponent`'s d^2 exponent in ``metric``'s scale (half for d)."""
    return derive_exponent()["d2"] * (sp.Rational(1, 2) if metric == "d" else 1)


@lru_cache(maxsize=len(METRICS))
def _exponent_fn(metric: str):
    """:func:`_exponent_expr` made an mpmath function of (alpha, p) once per metric
    (``sympy.lambdify`` compiles a function each call: ~0.15 s, once per entry of an
    analysis before)."""
    return sp.lambdify((_alpha, _p), _exponent_expr(metric), "mpmath")


def log_factor_power(metric="d2", delta=1):
    """Power of log n multiplying n^exponent in Corollary 6.1's rate, eq. (postcon):
    ``[n^(-a/(2a+p)) log^delta n]^2`` gives ``2 delta`` for d^2 and squared L2, ``delta`` for d.
    The corollary says "some delta > 1"; the default 1 is its limiting value."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    check.real("delta", delta, ge=1, allowed=">= 1")
    return delta if metric == "d" else 2 * delta


def corollary_6_1_rate(n, alpha, p, delta=1):
    r"""Corollary 6.1 (known alpha, Lemma 6.1 network), eq. (postcon), without the constant C'':

    .. math:: \bigl[n^{-\alpha/(2\alpha+p)}\log^\delta n\bigr]^2 .
    """
    check.real("n", n, gt=1, allowed="> 1")
    check.real("alpha", alpha, gt=0)
    check.positive_int("p", p)
    check.real("delta", delta, ge=1, allowed=">= 1")
    ops = ops_for(n, alpha, p, delta)
    n, alpha, p, delta = ops.args(n, alpha, p, delta)
    return (n ** (-alpha / (2 * alpha + p)) * ops.log(n) ** delta) ** 2


def corollary_6_2_rate(n, alpha, p, delta=1):
    """Corollary 6.2 (unknown alpha, adaptive N and s): the same rate as Corollary 6.1."""
    return corollary_6_1_rate(n, alpha, p, delta)


def _teacher_rate(n, delta, counts: dict, L, s, p, w):
    """Corollaries 6.3's and 6.4's one rate ``(s log(nL/s) + L s log(p w)) / n log^(2 delta) n``
    (``w``: 6.3's N, 6.4's largest teacher width).  ``n`` is checked > 1, then ``counts``
    (each positive integer under the name the caller's signature gives it, in its order),
    then ``delta`` >= 1."""
    check.real("n", n, gt=1, allowed="> 1")
    for name, value in counts.items():
        check.positive_int(name, value)
    check.real("delta", delta, ge=1, allowed=">= 1")
    ops = ops_for(n, L, s, p, w, delta)
    n, L, s, p, w, delta = ops.args(n, L, s, p, w, delta)
    return (s * ops.log(n * L / s) + L * s * ops.log(p * w)) / n * ops.log(n) ** (2 * delta)


def corollary_6_3_rate(n, L, N, s, p, delta=1):
    r"""Corollary 6.3 (teacher-student, structure known: L = L_0, s >= s_0, 12pN >= widths),
    eq. (postcon2), without C'':

    .. math:: \frac{s\log(nL/s) + L s\log(pN)}{n}\log^{2\delta} n .
    """
    return _teacher_rate(n, delta, {"L": L, "N": N, "s": s, "p": p}, L, s, p, N)


def corollary_6_4_rate(n, L0, s0, p, max_width0, delta=1):
    r"""Corollary 6.4 (teacher-student, adaptive), eq. (postcon3), without C'':

    .. math:: \frac{s_0\log(nL_0/s_0) + L_0 s_0\log(p\max_i p_{0,i})}{n}\log^{2\delta} n .
    """
    counts = {"L0": L0, "s0": s0, "p": p, "max_width0": max_width0}
    return _teacher_rate(n, delta, counts, L0, s0, p, max_width0)


@lru_cache(maxsize=1)
def _teacher_d2_exponent():
    L0, s0, p, w = sp.symbols("L0 s0 p w", positive=True)
    rate = corollary_6_4_rate(_n, L0, s0, p, w, delta=1)
    return sp.Max(*[_power(t) for t in sp.Add.make_args(sp.expand(rate))])


def teacher_exponent(metric="d2"):
    """Predicted exponent of n for a teacher-network truth (Corollaries 6.3/6.4): the power
    of n in eq. (postcon3), derived by sympy (-1 for d^2 and squared L2, the parametric
    rate, -1/2 for d), logarithmic factors ``log^{2 delta} n`` excluded."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    e = _teacher_d2_exponent()
    return e / 2 if metric == "d" else e


def teacher_log_power(ns, s0, p, L0=2, max_width0=10, delta=1, metric="d2") -> float:
    """The log power c that Corollary 6.4's own expression, eq. (postcon3), carries over a
    design ``ns``: its least-squares log-log slope over ``ns`` is ``e + c ell`` with ``e`` =
    :func:`teacher_exponent` and ``ell = slope(log log n ~ log n)``, so the teacher's band
    is ``[e, e + c ell]``.  The expression is ``(s0 log(n L0/s0) + L0 s0 log(p w0)) / n *
    log^(2 delta) n``: besides ``log^(2 delta) n`` the first term grows like log n, so c is
    above ``2 delta`` (about 2.4-2.6 at delta = 1 over n = 500..32,000 for s0 165-300, p 20
    or 200).  ``L0``, ``s0``, ``max_width0``: the teacher's hidden layers, non-zero weights
    and biases, and widest layer (the paper's 20-10-10-1: 2, about 165, 10).  For the
    Hellinger distance d (the square root) c is half."""

    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    x = _log_design(ns)
    values = [float(corollary_6_4_rate(float(n), L0, s0, p, max_width0, delta)) for n in np.exp(x)]
    return design_log_power(ns, values, float(teacher_exponent("d2")), metric)


def _log_design(ns) -> np.ndarray:
    """``log n`` of a design as float64; ``ValueError`` unless two or more n, each > 1."""
    x = np.log(np.asarray(ns, dtype=float))
    if x.size < 2 or np.any(x <= 0):
        raise ValueError(f"need at least two sample sizes > 1, got {ns}")
    return x


def log_log_slope(ns, values) -> float:
    """The least-squares slope of ``log values`` on ``log n`` over the design ``ns`` (float64;
    ``values`` positive numbers of any kind, their logs taken in mpmath so that values
    beyond doubles are held)."""
    x = _log_design(ns)
    if any(isinstance(v, mpmath.mpf) for v in values):
        y = np.array([float(mpmath.log(v)) for v in values])
    else:  # doubles: numpy's log, as teacher_log_power always took it
        y = np.log(np.asarray(values, dtype=float))
    if y.shape != x.shape or not np.all(np.isfinite(y)):
        raise ValueError(f"need one finite positive value per sample size, got {values}")
    xc = x - x.mean()
    return float(xc @ (y - y.mean()) / (xc @ xc))


def design_log_power(ns, values, exponent, metric="d2") -> float:
    """The band log power c that an expression's ``values`` at the design ``ns`` carry
    beyond the exponent ``exponent`` of n (the d^2 exponent): its least-squares log-log slope
    (:func:`log_log_slope`) is read as ``e + c ell`` with ``ell = slope(log log n ~ log n)``
    over the same design, so ``c = (slope - e) / ell``: exactly k for ``n^e log^k n``, and for
    any other expression the log power its slope over this design amounts to.  The rule of
    the teacher's band (:func:`teacher_log_power`) and of the proved bound's
    (``theory.proved.proved_log_power``).  For the Hellinger distance d (``metric="d"``, the
    square root) c is half."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    x = _log_design(ns)
    slope = log_log_slope(ns, values)
    xc = x - x.mean()
    ell = float(xc @ (np.log(x) - np.log(x).mean()) / (xc @ xc))
    c = (slope - float(exponent)) / ell
    return c / 2 if metric == "d" else c


def gp_matern_exponent(alpha, nu, p, metric="d2") -> float:
    """Exponent of n of the posterior contraction rate of Gaussian-process regression with a
    Matern prior of smoothness ``nu`` (fixed length scale and variance, known noise) at a
    truth of smoothness ``alpha`` in p dimensions: ``eps_n = n^(-min(alpha, nu)/(2 nu + p))``
    (van der Vaart and van Zanten 2011, *Information rates of nonparametric Gaussian
    process methods*, JMLR 12, Theorem 5), so ``2 eps_n`` exponent for the squared
    Hellinger distance and the squared L2 error, ``eps_n``'s for the Hellinger distance
    (the regression model's Hellinger distance is equivalent to L2 for bounded functions,
    ``theory.hellinger``).  No log factor.  Not a quantity of the paper: the rate of the
    known-answer control of ``verify.rates --tier gp``, whose matched prior (nu = alpha)
    contracts at ASVI's predicted exponent and whose over-smooth prior does not."""
    check.real("alpha", alpha, gt=0)
    check.real("nu", nu, gt=0)
    check.positive_int("p", p)
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    e = -min(float(alpha), float(nu)) / (2 * float(nu) + int(p))
    return e if metric == "d" else 2 * e


def knn_exponent(alpha, p, gamma, metric="d2") -> float:
    """Exponent of n of the k-nearest-neighbour regression estimate's squared error with
    ``k`` of order ``n^gamma`` (``0 <= gamma < 1``) at an alpha-Hoelder truth with alpha <=
    1 in p dimensions: its risk is of order ``sigma^2 / k + (k / n)^(2 alpha / p)``
    (Gyorfi, Kohler, Krzyzak and Walk 2002, *A Distribution-Free Theory of Nonparametric
    Regression*, Theorem 6.2; ``simulate.sweep.train.knn``), so ``max(-gamma, -(1 - gamma) 2 alpha
    / p)`` for the squared Hellinger distance and the squared L2 error, half of it for the
    Hellinger distance.  ``gamma = 2 alpha / (2 alpha + p)`` (the matched k) gives the
    class's exponent ``-2 alpha / (2 alpha + p)``; ``gamma = 0`` (k fixed) gives 0, the
    variance ``sigma^2 / k`` not shrinking.  Exact for ``gamma <= 2 alpha / (2 alpha + p)``
    (the risk is at least the variance ``sigma^2 / k``, whatever the truth); above it the
    bias term decides and the value is an upper bound of the exponent only (no lower bound
    of the bias is proven here).  No log factor.  Not a quantity of the paper:
    the rate of the known-answer control of ``verify.rates --tier knn``."""
    check.real("alpha", alpha, gt=0)
    check.positive_int("p", p)
    check.real("gamma", gamma, ge=0)
    if float(alpha) > 1:
        raise ValueError(f"the k-NN rate is proven here for alpha <= 1, got alpha = {alpha}")
    if not float(gamma) < 1:
        raise ValueError(f"gamma must be below 1 (k of order n^gamma, k < n), got {gamma}")
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    g, a = float(gamma), float(alpha)
    e = max(-g, -(1 - g) * 2 * a / int(p)) + 0.0  # + 0.0: k fixed is 0, not -0
    return e / 2 if metric == "d" else e
