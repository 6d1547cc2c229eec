"""Error terms and bounds of Sections 4-6: r_n, eps_n, xi_n, Lemma 6.1, Theorems 4.1 and 5.1.

Natural logarithms throughout (the paper writes ``log`` for them).  Every function accepts
sympy symbols (returns an expression), numpy arrays (vectorised float64) or numbers
(an mpmath value at the working precision ``mpmath.mp.dps``); see ``theory._backend``.
The depth convention (L = number of hidden layers of width 12pN) is in ``theory.network``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any

import mpmath
import numpy as np

from theory import _validate as check
from theory._backend import is_symbolic, ops_for
from theory.network import lemma_width, num_edges

__all__ = [
    "r_n",
    "eps_n",
    "eps_star_n",
    "xi_bound",
    "lemma_6_1",
    "lemma_6_1_sparsity",
    "Lemma61",
    "BoundConstants",
    "theorem_4_1_bound",
    "theorem_5_1_bound",
    "optimal_structure",
]


def check_structure(n, L, N, s, p):
    check.real("n", n, gt=1, allowed="> 1")
    check.positive_int("L", L)
    check.positive_int("N", N)
    check.positive_int("p", p)
    check.positive_int("s", s)
    check.check_le("s", s, num_edges(L, lemma_width(N, p), p), "the number of edges H(L, 12pN, p)")


def r_n(n, L, N, s, p, B=2):
    r"""Variational error of Lemma 4.1:

    .. math:: r_n(L, N, s) = \frac{L s}{n}\log(12 B p N) + \frac{s}{n}\log\frac{n L}{s}.

    ``B = B_0`` (slab half-width) under the uniform slab, ``B >= 2`` under the Gaussian slab;
    the default B = 2 is the smallest value Lemma 4.1 allows for the Gaussian slab.
    ``s`` must lie in 1..H with H the edge count of the width-12pN network.
    """
    check_structure(n, L, N, s, p)
    check.real("B", B, gt=0)
    ops = ops_for(n, L, N, s, p, B)
    n, L, N, s, p, B = ops.args(n, L, N, s, p, B)
    return (L * s / n) * ops.log(12 * B * p * N) + (s / n) * ops.log(n * L / s)


def _log_power(ops, n, delta):
    return ops.log(n) ** delta


def eps_n(n, L, N, s, p, M=1, delta=1):
    r"""Estimation error of Lemma 4.2:

    .. math:: \varepsilon_n = M \sqrt{\frac{s\log(nL/s) + L s \log(pN)}{n}}\,\log^\delta(n),

    for any delta >= 1 and "some large constant M" (default 1: the lemma fixes no value).
    Raises ``ValueError`` when the radicand is negative (s far above n L).
    """
    check_structure(n, L, N, s, p)
    check.real("M", M, gt=0)
    check.real("delta", delta, ge=1, allowed=">= 1 (Lemma 4.2)")
    ops = ops_for(n, L, N, s, p, M, delta)
    n, L, N, s, p, M, delta = ops.args(n, L, N, s, p, M, delta)
    rad = (s * ops.log(n * L / s) + L * s * ops.log(p * N)) / n
    if ops.name != "sympy" and np.any(np.asarray(rad, dtype=float) < 0):
        raise ValueError("eps_n: s log(nL/s) + L s log(pN) < 0; s is too large for this n and L")
    return M * ops.sqrt(rad) * _log_power(ops, n, delta)


def eps_star_n(n, L, N, s, M=1, delta=1):
    r"""The adaptive estimation error of Section 5, as printed:

    .. math:: \varepsilon_n^* = M'\sqrt{\frac{L s^*\log N^* + s^*\log(Ln/s^*)}{n}}\log^\delta n .

    Note the printed ``log N*`` where Lemma 4.2 has ``log(p N)``; kept as printed (for p = 1
    they agree).  No edge-count check: Section 5 takes (N*, s*) from the adaptive prior's
    support.
    """
    check.real("n", n, gt=1, allowed="> 1")
    check.positive_int("L", L)
    check.positive_int("N", N)
    check.positive_int("s", s)
    check.real("M", M, gt=0)
    check.real("delta", delta, ge=1, allowed=">= 1")
    ops = ops_for(n, L, N, s, M, delta)
    n, L, N, s, M, delta = ops.args(n, L, N, s, M, delta)
    rad = (L * s * ops.log(N) + s * ops.log(L * n / s)) / n
    if ops.name != "sympy" and np.any(np.asarray(rad, dtype=float) < 0):
        raise ValueError("eps_star_n: L s log N + s log(Ln/s) < 0; s is too large for this n and L")
    return M * ops.sqrt(rad) * _log_power(ops, n, delta)


def xi_bound(n, N, p, alpha, holder_norm):
    r"""Lemma 6.1's bound on the approximation error ``xi_n = inf ||f_theta - f_0||_inf^2``:

    .. math:: \xi_n \le \Bigl[(2\|f_0\|_{\mathcal H}+1)\,3^{p+1}\frac{N}{n}
              + \|f_0\|_{\mathcal H}\,2^\alpha N^{-\alpha/p}\Bigr]^2,

    the square of eq. (eqsch1), valid when L and s follow Lemma 6.1's choices.
    """
    check.real("n", n, gt=1, allowed="> 1")
    check.positive_int("N", N)
    check.positive_int("p", p)
    check.real("alpha", alpha, gt=0)
    check.real("holder_norm", holder_norm, ge=0)
    ops = ops_for(n, N, p, alpha, holder_norm)
    n, N, p, alpha, norm = ops.args(n, N, p, alpha, holder_norm)  # H is the edge count
    return ((2 * norm + 1) * 3 ** (p + 1) * N / n + norm * 2**alpha * N ** (-alpha / p)) ** 2


def lemma_6_1_sparsity(N, L, p, alpha):
    """The sparsity bound of Lemma 6.1: ``94 p^2 (alpha+1)^(2p) N (L + ceil(log2 p))``."""
    check.positive_int("N", N)
    check.positive_int("L", L)
    check.positive_int("p", p)
    check.real("alpha", alpha, gt=0)
    ops = ops_for(N, L, p, alpha)
    clog2p = ops.ceil_log2(p)  # on the raw p: exact for any integer size
    N, L, p, alpha = ops.args(N, L, p, alpha)
    return 94 * p**2 * (alpha + 1) ** (2 * p) * N * (L + clog2p)


@dataclass(frozen=True)
class Lemma61:
    """The network Lemma 6.1 prescribes (fields also readable as ``result["L"]``).

    ``N_raw`` is the printed ``C_N floor(n^(p/(2a+p))/log n)`` before clamping, ``s_bound``
    the printed sparsity bound, ``H`` the edge count of the width-``12pN`` network.
    """

    L: Any
    N: Any
    s: Any
    width: Any
    s_bound: Any
    H: Any
    N_raw: Any
    N_clamped: bool
    s_clamped: bool

    def __getitem__(self, key):
        return getattr(self, key)

    def as_dict(self) -> dict:
        return asdict(self)


def lemma_6_1(n, p, alpha, C_N=1):
    r"""The network choices of Lemma 6.1, eq. (choices):

    .. math::
        L = 8 + (\lfloor\log_2 n\rfloor + 5)(1 + \lceil\log_2 p\rceil),\quad
        N = C_N\lfloor n^{p/(2\alpha+p)}/\log n\rfloor,\quad
        s \le 94 p^2 (\alpha+1)^{2p} N (L + \lceil\log_2 p\rceil),

    hidden width ``12 p N`` and L hidden layers (``theory.network``).

    Choices where the lemma is silent:

    * ``N = max(1, floor(C_N * floor(n^(p/(2 alpha+p)) / log n)))``: the floor makes N an
      integer for non-integer C_N, and N is clamped to 1 (``N_clamped``) when the printed
      value is 0 (small n or large alpha), since widths are positive.
    * ``s = min(floor(s_bound), H)``: the lemma gives an upper bound on s; we take it (its
      floor, for non-integer alpha), capped at the number of edges H (``s_clamped``), which
      the bound exceeds for every practical n.

    Numbers give exact integers at any n mpmath holds (``n = 10**300``, ``mpf("1e400")``):
    L from ``floor(log2 n)`` of the raw argument, and N, the width, H and s evaluated at a
    precision that holds the largest of them, H, exactly: where H has more bits than the
    working precision ``mpmath.mp.prec`` (53 by default: H >= 2^53, the working precision
    would round it), the lemma is evaluated again at H's bits plus :data:`GUARD_BITS`;
    below, at the working precision, as it always was (the same values).  Only a printed
    value within the guard's ~2^-40 of an integer could floor differently.
    """
    check.real("n", n, gt=1, allowed="> 1")
    check.positive_int("p", p)
    check.real("alpha", alpha, gt=0)
    check.real("C_N", C_N, gt=0)
    ops = ops_for(n, p, alpha, C_N)
    net = _lemma_6_1(ops, n, p, alpha, C_N)
    if ops.name == "mpmath" and net.H.bit_length() > mpmath.mp.prec:
        with mpmath.workprec(net.H.bit_length() + GUARD_BITS):
            net = _lemma_6_1(ops, n, p, alpha, C_N)
    return net


# the bits a precision holds beyond Lemma 6.1's largest integer H (lemma_6_1)
GUARD_BITS = 40


def _lemma_6_1(ops, n, p, alpha, C_N) -> Lemma61:
    """:func:`lemma_6_1` in the backend ``ops``, at the current precision."""
    flog2n, clog2p = ops.floor_log2(n), ops.ceil_log2(p)  # on the raw arguments: exact
    n_, p_, a_, C_ = ops.args(n, p, alpha, C_N)
    L = 8 + (flog2n + 5) * (1 + clog2p)
    N_raw = ops.floor(C_ * ops.floor(n_ ** (p_ / (2 * a_ + p_)) / ops.log(n_)))
    N = ops.maximum(1, N_raw)
    width = 12 * p_ * N
    s_bound = 94 * p_**2 * (a_ + 1) ** (2 * p_) * N * (L + clog2p)
    H = num_edges(L, width, p_)
    s = ops.minimum(ops.floor(s_bound), H)
    if ops.name == "sympy":
        return Lemma61(L, N, s, width, s_bound, H, N_raw, False, False)
    # numbers give Python ints and bools; arrays give arrays of the broadcast shape,
    # element-wise (float for the sizes, bool for the flags)
    if ops.name == "mpmath":
        to_int, flag = int, bool
    else:
        shape = np.broadcast(*(np.asarray(x) for x in (n, p, alpha, C_N))).shape
        to_int = lambda x: np.broadcast_to(np.asarray(x, dtype=float), shape).copy()  # noqa: E731
        flag = lambda x: np.broadcast_to(np.asarray(x, dtype=bool), shape).copy()  # noqa: E731
    return Lemma61(
        L=to_int(L),
        N=to_int(N),
        s=to_int(s),
        width=to_int(width),
        s_bound=s_bound,
        H=to_int(H),
        N_raw=to_int(N_raw),
        N_clamped=flag(N_raw < 1),
        s_clamped=flag(s_bound > H),
    )


@dataclass(frozen=True)
class BoundConstants:
    """The constants Theorems 4.1 and 5.1 take beyond the network and the approximation error.

    ``B``: the slab's parameter bound of Lemma 4.1 (:func:`r_n`'s ``B``, default 2, the smallest
    the Gaussian slab allows); ``M`` and ``delta``: Lemma 4.2's constant and log power
    (:func:`eps_n`'s, defaults 1); ``C`` and ``C_prime``: Theorem 4.1's C and C' (defaults 1:
    the theorem asserts only their existence).  Theorem 5.1 reads ``B``, ``M``, ``delta`` and
    ``C`` (its one constant C''), never ``C_prime``.  Each value is checked where the theorem
    uses it, by the same rule and message as when passed by name; a field accepts what the
    theorems accept (a number, a numpy array or a sympy symbol).
    """

    B: Any = 2
    M: Any = 1
    delta: Any = 1
    C: Any = 1
    C_prime: Any = 1


def _constants(func: str, constants, by_name: dict, names: tuple) -> BoundConstants:
    """``constants`` (default :class:`BoundConstants`) with the fields given ``by_name``
    replaced: the theorems' keywords ``B=``, ``M=``, ... as before the constants were grouped.
    A name outside ``names`` is a ``TypeError`` as an unknown keyword argument is, and so is
    a ``constants`` that is not a :class:`BoundConstants` (a 7th positional argument)."""
    if constants is None:
        constants = BoundConstants()
    elif not isinstance(constants, BoundConstants):
        raise TypeError(
            f"{func}() takes its constants by name ({'=, '.join(names)}=) or as a"
            f" BoundConstants, got {constants!r} as its 7th argument"
        )
    for name in by_name:
        if name not in names:
            raise TypeError(f"{func}() got an unexpected keyword argument {name!r}")
    return replace(constants, **by_name) if by_name else constants


def theorem_4_1_bound(n, L, N, s, p, xi, constants: BoundConstants | None = None, **by_name):
    r"""Right-hand side of Theorem 4.1, eq. (d2bound), split into its three terms:

    .. math:: C\varepsilon_n^2 + 3C' r_n + 3C'\xi_n
              \quad(\text{estimation} + \text{variational} + \text{approximation}).

    The theorem asserts only the existence of C, C' (and M of Lemma 4.2); the defaults 1
    give the bound's shape, not its level.  ``xi`` is the approximation error, e.g. from
    :func:`xi_bound`.  The constants (:class:`BoundConstants`: ``B``, ``M``, ``delta``,
    ``C``, ``C_prime``) come as ``constants`` or by name, ``theorem_4_1_bound(n, L, N, s,
    p, xi, B=2, M=1, delta=1, C=1, C_prime=1)``, a name replacing that field of
    ``constants``.  Returns a dict with keys ``estimation``, ``variational``,
    ``approximation`` and ``total``.
    """
    k = _constants("theorem_4_1_bound", constants, by_name, ("B", "M", "delta", "C", "C_prime"))
    check.real("xi", xi, ge=0)
    check.real("C", k.C, gt=0)
    check.real("C_prime", k.C_prime, gt=0)
    est = eps_n(n, L, N, s, p, M=k.M, delta=k.delta) ** 2
    var = r_n(n, L, N, s, p, B=k.B)
    ops = ops_for(est, var, xi, k.C, k.C_prime)
    est, var, xi, C, Cp = ops.args(est, var, xi, k.C, k.C_prime)
    terms = {"estimation": C * est, "variational": 3 * Cp * var, "approximation": 3 * Cp * xi}
    terms["total"] = terms["estimation"] + terms["variational"] + terms["approximation"]
    return terms


def theorem_5_1_bound(
    n, L, N_star, s_star, p, xi_star, constants: BoundConstants | None = None, **by_name
):
    r"""Right-hand side of Theorem 5.1, eq. (d2bound+): ``C''[eps*_n^2 + r*_n + xi*_n]``.

    ``eps*_n`` as printed in Section 5 (:func:`eps_star_n`), ``r*_n = r_n(L, N*, s*)``.
    The constants come as ``constants`` (:class:`BoundConstants`; its ``C`` is C'', its
    ``C_prime`` unused) or by name, ``theorem_5_1_bound(n, L, N*, s*, p, xi*, B=2, M=1,
    delta=1, C=1)``.  Returns a dict with the three terms and ``total``; C'' defaults to 1
    (existence only).
    """
    k = _constants("theorem_5_1_bound", constants, by_name, ("B", "M", "delta", "C"))
    check.real("xi_star", xi_star, ge=0)
    check.real("C", k.C, gt=0)
    est = eps_star_n(n, L, N_star, s_star, M=k.M, delta=k.delta) ** 2
    var = r_n(n, L, N_star, s_star, p, B=k.B)
    ops = ops_for(est, var, xi_star, k.C)
    est, var, xi, C = ops.args(est, var, xi_star, k.C)
    terms = {"estimation": C * est, "variational": C * var, "approximation": C * xi}
    terms["total"] = terms["estimation"] + terms["variational"] + terms["approximation"]
    return terms


def optimal_structure(n, p, alpha, holder_norm=1, L=None, B=2, N_max=None):
    r"""(N*, s*) = integer argmin of ``r_n + xi_n`` (Section 5), with xi_n replaced by its
    Lemma 6.1 bound :func:`xi_bound`.

    That bound holds once s reaches Lemma 6.1's sparsity for the given N, and r_n increases
    in s, so for each N the minimising admissible s is ``s(N) = min(floor(lemma_6_1_sparsity),
    H)`` (the floor as in :func:`lemma_6_1`); the search is then over N = 1..N_max (default
    ``min(floor(n), 10**6)``), vectorised in float64 and re-evaluated in mpmath at the
    minimiser.  L defaults to Lemma 6.1's depth.
    Returns a dict: ``N``, ``s``, ``L``, ``width``, ``r_n``, ``xi``, ``objective``,
    ``N_max`` (the search's last N).
    At large n the minimiser is the search's last N (``N == N_max``): r_n, about s/n, no
    longer weighs against xi's N^(-2 alpha/p) below N_max; the minimiser lies beyond.
    The search's doubles hold any n (:func:`_search_objective`).
    """
    for arg in (n, p, alpha, holder_norm, L, B, N_max):
        if is_symbolic(arg):
            raise ValueError("optimal_structure is a numeric search: pass numbers, not symbols")
    check.scalars_only(
        "optimal_structure", n=n, p=p, alpha=alpha, holder_norm=holder_norm, L=L, B=B, N_max=N_max
    )
    check.real("n", n, gt=1, allowed="> 1")
    check.positive_int("p", p)
    check.real("alpha", alpha, gt=0)
    if L is None:
        L = lemma_6_1(n, p, alpha).L
    check.positive_int("L", L)
    if N_max is None:
        N_max = int(min(mpmath.floor(n), 10**6))
    check.positive_int("N_max", N_max)
    Ns = np.arange(1, int(N_max) + 1, dtype=float)
    # floor, as lemma_6_1 does: the bound 94 p^2 (alpha+1)^(2p) N (L + ceil(log2 p)) is not an
    # integer for every N (alpha = 0.5, p = 1: 211.5 N L, a half-integer for odd N L)
    bound = np.floor(lemma_6_1_sparsity(Ns, L, p, alpha))
    s_N = np.minimum(bound, num_edges(L, lemma_width(Ns, p), p))
    k = int(np.argmin(_search_objective(n, L, Ns, s_N, p, alpha, holder_norm, B)))
    N_star, s_star = int(Ns[k]), int(s_N[k])
    r = r_n(n, L, N_star, s_star, p, B)
    xi = xi_bound(n, N_star, p, alpha, holder_norm)
    return {
        "N": N_star,
        "s": s_star,
        "L": int(L),
        "width": 12 * int(p) * N_star,
        "r_n": r,
        "xi": xi,
        "objective": r + xi,
        "N_max": int(N_max),
    }


def _search_objective(n, L, Ns, s_N, p, alpha, holder_norm, B):
    """``r_n + xi_bound`` over the candidates ``Ns`` in doubles, for the search of
    :func:`optimal_structure`: with ``float(n)``, as the formulas write it, where nothing
    overflows (every n below ~1e300: the same doubles as ever); else -- ``n L / s`` past
    1.8e308, or n itself beyond doubles -- the same objective written with ``1/n`` and
    ``log n``, which doubles hold at any n (terms below 1e-308 are then 0, the search's
    resolution)."""
    try:
        nf = float(n)
    except OverflowError:  # an int beyond doubles
        nf = math.inf
    if math.isfinite(nf):
        with np.errstate(over="raise"):
            try:
                return r_n(nf, L, Ns, s_N, p, B) + xi_bound(nf, Ns, p, alpha, holder_norm)
            except FloatingPointError:
                pass
    inv_n, log_n = float(1 / mpmath.mpf(n)), float(mpmath.log(n))
    p_, a_, norm = np.float64(p), np.float64(alpha), np.float64(holder_norm)
    with np.errstate(over="ignore"):  # as the float path: an overflow is an inf
        r = (L * s_N * inv_n) * np.log(12 * B * p_ * Ns) + (s_N * inv_n) * (log_n + np.log(L / s_N))
        approx = (2 * norm + 1) * 3.0 ** (p_ + 1) * Ns * inv_n + norm * 2.0**a_ * Ns ** (-a_ / p_)
        return r + approx**2
