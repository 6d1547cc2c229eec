"""One formula, three evaluators: sympy (symbolic), mpmath (exact numbers), numpy (arrays).

Every quantity of the paper is written once, as a function of an :class:`Ops` namespace
(``log``, ``sqrt``, ``floor`` ...).  :func:`ops_for` picks the namespace from the arguments:

* any argument is a sympy expression with free symbols -> sympy, the result is an expression;
* otherwise any argument is a numpy array              -> numpy float64, vectorised;
* otherwise                                              -> mpmath at the working precision
  ``mpmath.mp.dps`` (so values far below float64's range stay representable).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mpmath
import numpy as np
import sympy as sp

__all__ = ["Ops", "ops_for", "is_symbolic"]


def is_symbolic(x: Any) -> bool:
    """True for a sympy expression that still has free symbols."""
    return isinstance(x, sp.Basic) and bool(x.free_symbols)


def _exact_int(x, rounding) -> int:
    if isinstance(x, (int, np.integer)):
        return int(x)  # exact, whatever its size
    if isinstance(x, sp.Basic):
        return int(sp.floor(x) if rounding is mpmath.floor else sp.ceiling(x))
    return int(rounding(x))


def _mp_floor_log2(x) -> int:
    # floor(log2 x) = floor(log2 floor x) for x >= 1, and the latter is exact on integers.
    # Pass the raw argument (not its mpf conversion) to stay exact beyond 2^53.
    return _exact_int(x, mpmath.floor).bit_length() - 1


def _mp_ceil_log2(x) -> int:
    # ceil(log2 x) for real x >= 1 = bit length of ceil(x) - 1 (exact on integers).
    return (_exact_int(x, mpmath.ceil) - 1).bit_length()


def _to_mp(x):
    if isinstance(x, sp.Basic):
        if x.is_Rational:
            return mpmath.mpf(int(x.p)) / int(x.q)
        return mpmath.mpf(str(sp.N(x, mpmath.mp.dps + 5)))
    if isinstance(x, (bool, np.bool_)):
        raise TypeError("booleans are not numbers here")
    if isinstance(x, (int, np.integer)):
        return mpmath.mpf(int(x))
    return mpmath.mpf(x)


@dataclass(frozen=True)
class Ops:
    """The functions a formula may use; ``convert`` maps a raw argument into the backend."""

    name: str
    convert: Callable
    log: Callable
    exp: Callable
    sqrt: Callable
    floor: Callable
    ceil: Callable
    floor_log2: Callable
    ceil_log2: Callable
    log10: Callable
    loggamma: Callable
    log1mexp: Callable  # log(1 - e^-x) for x > 0, accurate for tiny and for huge x
    minimum: Callable
    maximum: Callable
    pi: Any
    e: Any

    def args(self, *xs):
        return tuple(self.convert(x) for x in xs)


SYMPY = Ops(
    name="sympy",
    convert=sp.sympify,
    log=sp.log,
    exp=sp.exp,
    sqrt=sp.sqrt,
    floor=sp.floor,
    ceil=sp.ceiling,
    floor_log2=lambda x: sp.floor(sp.log(x, 2)),
    ceil_log2=lambda x: sp.ceiling(sp.log(x, 2)),
    log10=lambda x: sp.log(x, 10),
    loggamma=sp.loggamma,
    log1mexp=lambda x: sp.log(1 - sp.exp(-x)),
    minimum=sp.Min,
    maximum=sp.Max,
    pi=sp.pi,
    e=sp.E,
)

MPMATH = Ops(
    name="mpmath",
    convert=_to_mp,
    log=mpmath.log,
    exp=mpmath.exp,
    sqrt=mpmath.sqrt,
    floor=mpmath.floor,
    ceil=mpmath.ceil,
    floor_log2=lambda x: mpmath.mpf(_mp_floor_log2(x)),
    ceil_log2=lambda x: mpmath.mpf(_mp_ceil_log2(x)),
    log10=mpmath.log10,
    loggamma=mpmath.loggamma,
    log1mexp=lambda x: mpmath.log(-mpmath.expm1(-x)),
    minimum=min,
    maximum=max,
    pi=mpmath.pi,
    e=mpmath.e,
)

_np_floor_log2 = np.vectorize(lambda x: float(int(math.floor(x)).bit_length() - 1), otypes=[float])
_np_ceil_log2 = np.vectorize(lambda x: float((int(math.ceil(x)) - 1).bit_length()), otypes=[float])

NUMPY = Ops(
    name="numpy",
    convert=lambda x: np.asarray(x, dtype=float),
    log=np.log,
    exp=np.exp,
    sqrt=np.sqrt,
    floor=np.floor,
    ceil=np.ceil,
    floor_log2=_np_floor_log2,
    ceil_log2=_np_ceil_log2,
    log10=np.log10,
    loggamma=lambda x: np.vectorize(math.lgamma, otypes=[float])(x),
    log1mexp=lambda x: np.log(-np.expm1(-x)),
    minimum=np.minimum,
    maximum=np.maximum,
    pi=np.pi,
    e=np.e,
)


def ops_for(*xs) -> Ops:
    """The evaluator for these arguments (see the module docstring for the rule)."""
    if any(is_symbolic(x) for x in xs):
        return SYMPY
    if any(isinstance(x, np.ndarray) and x.ndim > 0 for x in xs):
        return NUMPY
    return MPMATH
