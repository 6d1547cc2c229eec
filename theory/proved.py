"""What the theorems prove for a Hoelder truth at a feasible n (issue 75): the proved bound
of Theorem 4.1 at Lemma 6.1's network, and of Theorem 5.1 at the optimal structure, as
numbers -- their band log power over a design, the n below which they say nothing, and the
premises of Lemmas 4.2 and 6.1 at a given n.

Corollary 6.1, eq. (postcon), states the rate ``[n^(-a/(2a+p)) log^delta n]^2`` "for some
delta > 1"; the protocols' sharp reading takes delta = 1, a log power ``2 delta = 2``.  The
bound the proof actually gives is Theorem 4.1's right-hand side, eq. (d2bound), at the
network of Lemma 6.1, eq. (choices): L ~ log n, N ~ n^(p/(2a+p)) / log n, s ~ N L, which adds
log factors of its own (:func:`proved_log_power` measures them over a design).

Every constant the theorems and lemmas only assert to exist -- C and C' of Theorem 4.1, C''
of Theorem 5.1, M of Lemma 4.2, M' of Section 5, C_N of Lemma 6.1 -- is 1 here
(:class:`theory.bounds.BoundConstants`' defaults; B = 2, the least the Gaussian slab allows):
the bounds below are the theorems' *shape* at unit constants, not a level the paper asserts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import mpmath

from theory import _validate as check
from theory.bounds import (
    BoundConstants,
    lemma_6_1,
    optimal_structure,
    theorem_4_1_bound,
    theorem_5_1_bound,
    xi_bound,
)
from theory.exponents import (
    corollary_6_4_rate,
    design_log_power,
    log_log_slope,
    predicted_exponent,
)

__all__ = [
    "WHICH",
    "DEFAULT_DESIGN",
    "proved_bound",
    "proved_log_power",
    "decreases_over",
    "Decrease",
    "vacuity_n",
    "teacher_vacuity_n",
    "premises",
    "Premises",
    "CONSTANT_GRID",
    "ProvedSlopes",
    "proved_slopes",
]

# the two proved bounds: Theorem 4.1 at Lemma 6.1's (L, N, s); Theorem 5.1 at (N*, s*)
WHICH = ("theorem-4.1", "theorem-5.1")
# the confirm tiers' design, 500 * 4^k up to 512,000
DEFAULT_DESIGN = (500, 2000, 8000, 32000, 128000, 512000)


def _which(which: str) -> str:
    if which not in WHICH:
        raise ValueError(f"which must be one of {WHICH}, got {which!r}")
    return which


def proved_bound(
    n, alpha, p, holder_norm=1, delta=None, which="theorem-4.1", constants=None, C_N=1
) -> dict:
    r"""The proved bound on the VB posterior mean of d^2 for an alpha-Hoelder truth.

    ``which="theorem-4.1"``: Theorem 4.1, eq. (d2bound), ``C eps_n^2 + 3C' r_n + 3C' xi_n``
    at the network of Lemma 6.1, eq. (choices) (:func:`theory.bounds.lemma_6_1`), with
    ``xi_n`` replaced by Lemma 6.1's bound, eq. (eqsch1) (:func:`theory.bounds.xi_bound`):
    the bound behind Corollary 6.1.  ``which="theorem-5.1"``: Theorem 5.1, eq. (d2bound+),
    ``C''[eps*_n^2 + r*_n + xi*_n]`` at (N*, s*) = :func:`theory.bounds.optimal_structure`
    (xi* again Lemma 6.1's bound) with L Lemma 6.1's depth, as Corollary 6.2 chooses it.

    Constants: ``constants`` (:class:`theory.bounds.BoundConstants`, default all 1 and B = 2:
    the theorems assert only that such constants exist) with ``delta`` replacing its field
    where given (None: the field's, default 1, the sharp reading of Corollary 6.1's "some
    delta > 1"); ``C_N`` Lemma 6.1's constant (1).  Theorem 5.1's (N*, s*) search is capped
    at ``N <= min(n, 10^6)`` (optimal_structure's default): where the cap binds (n beyond
    ~1e20 at alpha = 0.5, p = 1) the value is the theorem's expression at the best structure
    below the cap, an upper bound of r*_n + xi*_n -- returned with ``N_capped`` True.

    Numbers only (mpmath at ``mpmath.mp.dps``; ints of any size exact).  Returns a dict: the
    terms ``estimation``, ``variational``, ``approximation``, ``total``, and the structure
    ``L``, ``N``, ``s``, ``N_capped`` (always False for Theorem 4.1).  Raises ``ValueError``
    where the bound is undefined: eps's radicand negative (s above n L; Theorem 5.1 at p = 2,
    alpha = 1.25, n = 500, where N* = 1 makes eps*'s ``log N*`` zero).
    """
    check.scalars_only("proved_bound", n=n, alpha=alpha, p=p, holder_norm=holder_norm)
    _which(which)
    check.real("holder_norm", holder_norm, ge=0)
    k = constants if constants is not None else BoundConstants()
    if not isinstance(k, BoundConstants):
        raise TypeError(f"constants must be a BoundConstants, got {constants!r}")
    if delta is not None:
        k = replace(k, delta=delta)
    net = lemma_6_1(n, p, alpha, C_N)
    if which == "theorem-4.1":
        xi = xi_bound(n, net.N, p, alpha, holder_norm)
        terms = theorem_4_1_bound(n, net.L, net.N, net.s, p, xi, k)
        return {**terms, "L": net.L, "N": net.N, "s": net.s, "N_capped": False}
    opt = optimal_structure(n, p, alpha, holder_norm, L=net.L, B=k.B)
    terms = theorem_5_1_bound(n, net.L, opt["N"], opt["s"], p, opt["xi"], k)
    capped = opt["N"] == opt["N_max"]
    return {**terms, "L": net.L, "N": opt["N"], "s": opt["s"], "N_capped": capped}


def _totals(ns, alpha, p, holder_norm, delta, which) -> list:
    """The proved bound's total at each n of the design, exactly as given (ints stay ints);
    a ``ValueError`` names the n where the bound is undefined."""
    out = []
    for n in ns:
        try:
            out.append(proved_bound(n, alpha, p, holder_norm, delta, which)["total"])
        except ValueError as exc:
            raise ValueError(f"{which} at n = {n}: {exc}") from None
    return out


def proved_log_power(ns, alpha, p, holder_norm=1, delta=1, which="theorem-4.1", metric="d2"):
    """The band log power c of the proved bound (:func:`proved_bound`, unit constants) over
    the design ``ns``, by the teacher's band's rule (:func:`theory.exponents.design_log_power`,
    as :func:`theory.exponents.teacher_log_power`): the least-squares slope of ``log bound``
    on ``log n`` is read as ``e + c ell`` with e = :func:`theory.exponents.predicted_exponent`
    (alpha, p, "d2") = ``-2a/(2a+p)`` and ``ell = slope(log log n ~ log n)``.  Half for d.

    At unit constants the bound carries about 3.8 at alpha = 0.5, p = 1 over n =
    500..512,000 (against the sharp reading's 2), but that number is the unit constants':
    over the constants the theorem leaves open it ranges widely (:func:`proved_slopes`).  A
    c computed from a rising bound is a number, not a rate: :func:`decreases_over` says
    whether the bound falls at all.
    """
    values = _totals(ns, alpha, p, holder_norm, delta, which)
    return design_log_power(ns, values, float(predicted_exponent(alpha, p, "d2")), metric)


# the constants Theorem 4.1 and Lemma 6.1 assert only to exist, over which the proved bound's
# shape is read (proved_slopes): C'/C (the variational and approximation terms against the
# estimation term; Lemma 4.2's M enters as sqrt(C)) and Lemma 6.1's C_N
CONSTANT_GRID = {
    "C_prime_over_C": (1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, 1e3),
    "C_N": (0.5, 1.0, 2.0, 4.0, 8.0),
}


@dataclass(frozen=True)
class ProvedSlopes:
    """:func:`proved_slopes`: the least-squares log-log slope of the proved bound over a
    design at unit constants (``unit``), its least and largest over the constant grid
    (``low``, ``high``), how many constant choices were read (``read``) and how many were
    left out because the bound is undefined at some n of the design (``undefined``); the
    slopes None where no choice (for ``unit``: the unit one) is defined at every n."""

    unit: float | None
    low: float | None
    high: float | None
    read: int
    undefined: int  # left out of low and high: the readings say how many


def proved_slopes(ns, alpha, p, holder_norm=1, delta=1, grid=None) -> ProvedSlopes:
    """The proved bound's log-log slope over the design ``ns`` (Theorem 4.1 at Lemma 6.1,
    :func:`proved_bound`), at unit constants and over a grid of the constants the theorem
    only asserts to exist (:data:`CONSTANT_GRID`: C'/C from 1e-3 to 1e3, Lemma 6.1's C_N from
    1/2 to 8).  The bound is a sum of terms with different powers of n, so its slope over a
    finite design -- and the band log power read from it -- depends on those constants: at
    alpha = 0.5, p = 1 over n = 500..512,000 from about -0.39 to above 0.  A choice under
    which the bound is undefined at some n of the design (eps_n's radicand negative: Lemma
    4.2's premise fails) is left out and counted; the slope is over the whole design, never
    a part of it, so it compares with a data slope over the same n."""
    grid = CONSTANT_GRID if grid is None else grid
    ns = list(ns)

    def slope(ratio, c_n):
        k = BoundConstants(C_prime=ratio)
        try:
            vals = [proved_bound(n, alpha, p, holder_norm, delta, constants=k, C_N=c_n)["total"]
                    for n in ns]  # fmt: skip
        except ValueError:
            return None
        return log_log_slope(ns, vals)

    unit = slope(1.0, 1)
    got = [slope(r, c) for r in grid["C_prime_over_C"] for c in grid["C_N"]]
    ok = [s for s in got if s is not None]
    return ProvedSlopes(
        unit=unit,
        low=min(ok) if ok else None,
        high=max(ok) if ok else None,
        read=len(ok),
        undefined=len(got) - len(ok),
    )


@dataclass(frozen=True)
class Decrease:
    """Whether a proved bound falls over a design: its least-squares log-log ``slope`` over
    the design's n and ``decreases`` = ``slope < 0``."""

    slope: float
    decreases: bool


def decreases_over(ns, alpha, p, holder_norm=1, delta=1, which="theorem-4.1") -> Decrease:
    """Whether the proved bound (:func:`proved_bound`, unit constants) decreases over the
    design ``ns`` at all: its least-squares slope of ``log bound`` on ``log n``
    (:func:`theory.exponents.log_log_slope`) below 0.  The slope over the design is the
    reading; a bound may rise between two n and still fall over the design (Lemma 6.1's
    floors: L steps up at every power of 2)."""
    slope = log_log_slope(ns, _totals(ns, alpha, p, holder_norm, delta, which))
    return Decrease(slope=slope, decreases=slope < 0)


def _says_something(n, alpha, p, holder_norm, delta, which) -> bool:
    """The proved bound below the trivial d^2 <= 1 at n; False where it is undefined."""
    try:
        return proved_bound(n, alpha, p, holder_norm, delta, which)["total"] < 1
    except ValueError:  # eps's radicand negative: no bound at this n, so nothing said
        return False


def vacuity_n(alpha, p, holder_norm=1, delta=1, which="theorem-4.1", n_max=10**40, per_decade=4):
    """The least integer n from which the proved bound (:func:`proved_bound`, unit
    constants) stays below the trivial bound ``d^2 <= 1`` (the squared Hellinger distance
    is at most 1, Section 4): below it the theorem says nothing a probability does not.

    The bound is not monotone in n (Lemma 6.1's floors: L steps up at each power of 2, s
    with N's floor), so "the least n" is read as follows (the paper is silent; this is the
    choice): the bound is evaluated on a scan of ``per_decade`` log-spaced n per factor of
    10 from n = 2 to ``n_max``; the last scanned n where it is not below 1 (or undefined:
    counted as saying nothing) and the next are bisected on the integers (by mpmath, exact
    at any size) down to neighbours ``v - 1`` (bound >= 1) and ``v`` (bound < 1); ``v`` is
    returned.  So the bound is >= 1 at ``v - 1``, below 1 at ``v`` and at every scanned n
    beyond; a dip and rise between two scanned n is not seen.  Returns 2 where the bound is
    below 1 at every scanned n, and None where it is not below 1 at ``n_max``.
    ``n_max`` 1e40 holds both theorems' crossings at every truth of the protocols (Theorem
    4.1: ~5.5e17 at alpha = 0.5, p = 1); Theorem 5.1 costs ~0.15 s a scanned n (its (N*, s*)
    search) against Theorem 4.1's ~1 ms.
    """
    check.scalars_only("vacuity_n", alpha=alpha, p=p, holder_norm=holder_norm, n_max=n_max)
    _which(which)
    check.real("alpha", alpha, gt=0)  # checked here: the scan reads a ValueError as "no bound"
    check.positive_int("p", p)
    check.real("holder_norm", holder_norm, ge=0)
    check.real("delta", delta, ge=1, allowed=">= 1 (Lemma 4.2)")
    check.positive_int("per_decade", per_decade)
    check.real("n_max", n_max, gt=2, allowed="> 2")
    return _least_n_below(
        lambda n: _says_something(n, alpha, p, holder_norm, delta, which), n_max, per_decade
    )


def teacher_vacuity_n(s0, p, L0=2, max_width0=10, delta=1, n_max=10**40, per_decade=4):
    """:func:`vacuity_n` for the teacher: the least n from which Corollary 6.4's expression,
    eq. (postcon3), at unit constant (``theory.corollary_6_4_rate``) stays below the trivial
    bound d^2 <= 1, by the same scan and bisection; ``s0``, ``L0``, ``max_width0``: the
    teacher's non-zero weights and biases, hidden layers and widest layer."""
    check.real("delta", delta, ge=1, allowed=">= 1 (Corollary 6.4: any delta > 1)")
    check.positive_int("per_decade", per_decade)
    check.real("n_max", n_max, gt=2, allowed="> 2")
    corollary_6_4_rate(10, L0, s0, p, max_width0, delta)  # its own checks, before the scan

    def below(n) -> bool:
        try:
            return corollary_6_4_rate(n, L0, s0, p, max_width0, delta) < 1
        except ValueError:  # log(n L0 / s0) < 0 ... : no bound at this n
            return False

    return _least_n_below(below, n_max, per_decade)


def _least_n_below(below, n_max, per_decade):
    """The scan and bisection of :func:`vacuity_n` for any predicate ``below(n)`` (the
    bound is below 1 at the integer n)."""
    top = mpmath.log10(n_max)
    grid = [
        int(mpmath.ceil(mpmath.power(10, k / mpmath.mpf(per_decade))))
        for k in range(int(math.log10(2) * per_decade) + 1, int(top * per_decade) + 1)
    ]
    grid = sorted({2, *grid, int(n_max)})
    says = [below(n) for n in grid]
    if not says[-1]:
        return None
    if all(says):
        return 2
    i = max(j for j, b in enumerate(says) if not b)
    lo, hi = grid[i], grid[i + 1]  # bound >= 1 (or undefined) at lo, < 1 at hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if below(mid):
            hi = mid
        else:
            lo = mid
    return hi


@dataclass(frozen=True)
class Premises:
    """The premises of Corollary 6.1 at one n (:func:`premises`)."""

    n: object
    L: int  # Lemma 6.1's depth (hidden layers)
    width: int  # Lemma 6.1's width 12pN (C_N = 1)
    s: int  # Lemma 6.1's sparsity (its bound, floored, at most the edge count)
    depth: int | None  # the candidate network's hidden layers (None: not given)
    widths: tuple | None  # the candidate's hidden widths
    depth_matches: bool | None  # depth == L
    equal_width: bool | None  # all widths equal (Theorem 4.1's equal-width family)
    implied_C_N: float | None  # width / (12p floor(n^(p/(2a+p)) / log n))
    complexity: float  # max{s log(nL/s), L s log(pN)} at Lemma 6.1's choices
    ratio: float  # complexity / n: Lemma 4.2 asks it to be o(1)


def premises(n, alpha, p, depth=None, widths=None) -> Premises:
    """The premises of Corollary 6.1 at n: a candidate network (``depth`` hidden layers of
    ``widths``) against Lemma 6.1's choices, eq. (choices), and Lemma 4.2's condition
    ``max{s log(nL/s), L s log(pN)} = o(n)`` at those choices, read at one n as the ratio
    ``max{...} / n`` (``ratio``; ~85 at n = 512,000, alpha = 0.5, p = 1: the condition
    "o(n)" is far from met there -- the complexity is 85 n, not a vanishing fraction of it).

    Readings where the paper is silent: L has no free constant in eq. (choices), so the depth
    must equal it (``depth_matches``); N carries "some positive constant C_N", so at one n any
    width is Lemma 6.1's for some C_N -- ``implied_C_N`` is that constant (the narrowest
    width over 12p floor(n^(p/(2a+p)) / log n); None where the floor is 0); Theorem 4.1 asks
    equal widths (``equal_width``).  The ratio is at C_N = 1.
    """
    check.scalars_only("premises", n=n, alpha=alpha, p=p, depth=depth)
    net = lemma_6_1(n, p, alpha)
    n_, L, N, s, p_ = (mpmath.mpf(x) for x in (n, net.L, net.N, net.s, p))
    complexity = max(s * mpmath.log(n_ * L / s), L * s * mpmath.log(p_ * N))
    matches = equal = c_n = None
    if depth is not None:
        check.positive_int("depth", depth)
        matches = int(depth) == net.L
    if widths is not None:
        widths = tuple(int(w) for w in widths)
        for w in widths:
            check.positive_int("widths", w)
        equal = len(set(widths)) == 1
        base = mpmath.floor(n_ ** (p_ / (2 * mpmath.mpf(alpha) + p_)) / mpmath.log(n_))
        c_n = float(min(widths) / (12 * p_ * base)) if base > 0 else None
    return Premises(
        n=n, L=net.L, width=net.width, s=net.s, depth=depth, widths=widths,
        depth_matches=matches, equal_width=equal, implied_C_N=c_n,
        complexity=float(complexity), ratio=float(complexity / n_),
    )  # fmt: skip
