"""Conditions 5.1-5.3 of Section 5 as predicates on concrete (n, L, N*, s*) values.

The conditions are asymptotic; a finite-n predicate needs a reading of ``≺``, ``o(.)`` and
``≍``.  The readings chosen here (each documented where it is made):

* 5.1 ``1 ≺ max{L s* log(pN*), s* log(nL/s*)} = o(n^a)`` for some a < 1: over a sequence of
  growing n, the maximum increases and its log-log growth exponent between the two largest
  n is below ``a`` (default: any a < 1, i.e. exponent < 1).
* 5.2 ``r*_n ≍ xi*_n``: the ratio lies in ``[1/ratio, ratio]`` (default ratio = 10).
* 5.3 ``s* >= 12 p N* + L``: exact.
"""

from __future__ import annotations

import mpmath

from theory import _validate as check
from theory.bounds import r_n

__all__ = ["condition_5_1", "condition_5_2", "condition_5_3"]


def _complexity(n, L, N, s, p):
    n, L, N, s, p = (mpmath.mpf(x) for x in (n, L, N, s, p))
    return max(L * s * mpmath.log(p * N), s * mpmath.log(n * L / s))


def condition_5_1(seq, p, a=1):
    """Condition 5.1 on a sequence ``[(n, L, N*, s*), ...]`` of at least two growing n.

    True when ``max{L s log(pN), s log(nL/s)}`` strictly increases along the sequence and
    its growth exponent ``log(c_k/c_{k-1}) / log(n_k/n_{k-1})`` between the last two entries
    is ``< a`` (a <= 1; the condition asks for some a < 1).
    """
    check.scalars_only("condition_5_1", p=p, a=a)
    for entry in seq:
        check.scalars_only("condition_5_1", **dict(zip(("n", "L", "N", "s"), entry, strict=False)))
    check.positive_int("p", p)
    check.real("a", a, gt=0)
    if a > 1:
        raise ValueError(f"a must be in (0, 1], got {a}")
    if len(seq) < 2:
        raise ValueError("condition_5_1 needs at least two (n, L, N, s) entries")
    ns = [mpmath.mpf(x[0]) for x in seq]
    if any(b <= a_ for a_, b in zip(ns, ns[1:], strict=False)):
        raise ValueError("the n of the sequence must strictly increase")
    cs = []
    for n, L, N, s in seq:
        check.real("n", n, gt=1, allowed="> 1")
        check.positive_int("L", L)
        check.positive_int("N", N)
        check.positive_int("s", s)
        cs.append(_complexity(n, L, N, s, p))
    increasing = all(b > a_ for a_, b in zip(cs, cs[1:], strict=False))
    growth = mpmath.log(cs[-1] / cs[-2]) / mpmath.log(ns[-1] / ns[-2])
    return bool(increasing and growth < a)


def condition_5_2(n, L, N, s, p, xi, B=2, ratio=10):
    """Condition 5.2, ``r*_n ≍ xi*_n``, read as ``1/ratio <= r_n / xi <= ratio``."""
    check.scalars_only("condition_5_2", n=n, L=L, N=N, s=s, p=p, xi=xi, B=B, ratio=ratio)
    check.real("xi", xi, gt=0)
    check.real("ratio", ratio, ge=1)
    q = r_n(n, L, N, s, p, B) / mpmath.mpf(xi)
    return bool(1 / mpmath.mpf(ratio) <= q <= ratio)


def condition_5_3(L, N, s, p):
    """Condition 5.3, ``s* >= 12 p N* + L`` (no redundant width)."""
    check.scalars_only("condition_5_3", L=L, N=N, s=s, p=p)
    check.positive_int("L", L)
    check.positive_int("N", N)
    check.positive_int("s", s)
    check.positive_int("p", p)
    return bool(s >= 12 * p * N + L)
