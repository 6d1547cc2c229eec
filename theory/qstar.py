"""The q* constants of the proof of Lemma 4.1 (eqs. (qstar) and (qstar2)).

They are the slab half-width ``a_n`` (uniform slab) and variance ``sigma_n^2`` (Gaussian
slab) of the variational distribution q* centred at the best approximating network.  Both
carry the factor ``(12BpN)^(-2L)`` or ``(24BpN)^(-2L)``: with L from Lemma 6.1 they are far
below float64's smallest positive number, so they are offered as mpmath values and in log10
form (finite wherever the arguments are valid).
"""

from __future__ import annotations

from theory import _validate as check
from theory._backend import ops_for
from theory.bounds import check_structure

__all__ = ["q_star_log10", "q_star"]

_SLABS = ("uniform", "gaussian")


def _log_q_star(ops, n, L, N, s, p, B, slab):
    """Natural log of a_n or sigma_n^2, assembled as a sum of logs (never underflows)."""
    a = 12 * B * p * N
    if slab == "uniform":
        # a_n = s/(4n) (12BpN)^(-2L) {(p+1+1/(12BpN-1))^2 L^2/(12BpN)^2 + 1/((12BpN)^2-1)
        #        + 2/(12BpN-1)^2}^(-1)
        brace = (p + 1 + 1 / (a - 1)) ** 2 * L**2 / a**2 + 1 / (a**2 - 1) + 2 / (a - 1) ** 2
        return ops.log(s / (4 * n)) - 2 * L * ops.log(a) - ops.log(brace)
    # sigma_n^2 = s/(16n) log(36pN)^(-1) (24BpN)^(-2L) {(p+1+1/(12BpN-1))^2
    #              + 1/((24BpN)^2-1) + 2/(24BpN-1)^2}^(-1)
    b = 24 * B * p * N
    brace = (p + 1 + 1 / (a - 1)) ** 2 + 1 / (b**2 - 1) + 2 / (b - 1) ** 2
    return (
        ops.log(s / (16 * n)) - ops.log(ops.log(36 * p * N)) - 2 * L * ops.log(b) - ops.log(brace)
    )


def _check(n, L, N, s, p, B, slab):
    check_structure(n, L, N, s, p)  # as r_n: s in 1..H of the width-12pN network
    check.real("B", B, ge=1, allowed=">= 1 (B_0 > 1 for the uniform slab, B >= 2 for the Gaussian)")
    if slab not in _SLABS:
        raise ValueError(f"slab must be one of {_SLABS}, got {slab!r}")


def q_star_log10(n, L, N, s, p, B=2, slab="gaussian"):
    r"""log10 of the q* constant of the proof of Lemma 4.1.

    * ``slab="uniform"``: log10 a_n, eq. (qstar),
      :math:`a_n=\frac{s}{4n}(12BpN)^{-2L}\{(p+1+\frac1{12BpN-1})^2\frac{L^2}{(12BpN)^2}
      +\frac1{(12BpN)^2-1}+\frac2{(12BpN-1)^2}\}^{-1}`.
    * ``slab="gaussian"``: log10 sigma_n^2, eq. (qstar2),
      :math:`\sigma_n^2=\frac{s}{16n}\log(36pN)^{-1}(24BpN)^{-2L}\{(p+1+\frac1{12BpN-1})^2
      +\frac1{(24BpN)^2-1}+\frac2{(24BpN-1)^2}\}^{-1}`.

    Printed-form choices: ``log(36pN)^{-1}`` is read as ``1/log(36pN)``; the first brace term
    of sigma_n^2 keeps the printed ``12BpN - 1`` beside ``24BpN`` elsewhere.
    """
    _check(n, L, N, s, p, B, slab)
    ops = ops_for(n, L, N, s, p, B)
    args = ops.args(n, L, N, s, p, B)
    return _log_q_star(ops, *args, slab) / ops.log(10)


def q_star(n, L, N, s, p, B=2, slab="gaussian"):
    """a_n or sigma_n^2 itself (see :func:`q_star_log10`); an mpmath value for numbers,
    which keeps its exponent however small, or a sympy expression for symbols."""
    _check(n, L, N, s, p, B, slab)
    ops = ops_for(n, L, N, s, p, B)
    args = ops.args(n, L, N, s, p, B)
    return ops.exp(_log_q_star(ops, *args, slab))
