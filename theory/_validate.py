"""Argument checks shared by every formula: one clear ``ValueError`` naming the argument.

Symbolic arguments (sympy expressions with free symbols) are not checked: their assumptions
are the caller's business.  Numbers and arrays are checked element-wise; NaN and infinities
are always rejected, so a formula never returns a silent nan.
"""

from __future__ import annotations

import math
import numbers

import mpmath
import numpy as np
import sympy as sp

from theory._backend import is_symbolic

__all__ = ["real", "positive_int", "check_le", "scalars_only"]


def _exact(name: str, x):
    """A single number as a value Python compares exactly, or None for anything else
    (arrays, lists, sympy expressions other than integers: :func:`_values`' numpy path).

    Integers of any size stay Python ints and mpmath numbers stay mpmath numbers: the
    theory is evaluated in mpmath at any n it can hold (``n = 10**300``, ``mpf("1e400")``),
    and a check through numpy had refused an integer beyond 2^63 (an object array, "must be
    numeric") and would turn an mpmath number beyond 1.8e308 into an infinity."""
    if isinstance(x, (bool, np.bool_)):
        raise ValueError(f"{name} must be a number, got the boolean {x!r}")
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, sp.Integer):
        return int(x)
    if isinstance(x, mpmath.mpf):
        return x
    if isinstance(x, (float, np.floating)):
        return float(x)
    return None


def _values(name: str, x) -> np.ndarray:
    if isinstance(x, (bool, np.bool_)):
        raise ValueError(f"{name} must be a number, got the boolean {x!r}")
    if isinstance(x, sp.Basic):
        if not x.is_number:
            raise ValueError(f"{name} must be a number or a sympy expression, got {x!r}")
        try:
            return np.asarray([complex(x)])
        except TypeError as exc:  # pragma: no cover - sympy oddities
            raise ValueError(f"{name} must be a real number, got {x!r}") from exc
    if isinstance(x, mpmath.mpf):
        return np.asarray([float(x)]) if mpmath.isfinite(x) else np.asarray([np.nan])
    if isinstance(x, (numbers.Real, np.ndarray, list, tuple)):
        arr = np.asarray(x)
        if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number):
            raise ValueError(f"{name} must be numeric, got {x!r}")
        return arr.astype(complex).ravel()
    raise ValueError(f"{name} must be a real number, got {type(x).__name__} {x!r}")


def _finite(v) -> bool:
    return mpmath.isfinite(v) if isinstance(v, mpmath.mpf) else (
        isinstance(v, int) or math.isfinite(v))  # fmt: skip


def real(name: str, x, *, gt=None, ge=None, allowed: str | None = None) -> None:
    """Check that ``x`` is finite and real, ``> gt`` and/or ``>= ge``.  A single number
    (an int of any size, a float, an mpmath number) is compared exactly (:func:`_exact`);
    arrays element-wise in numpy."""
    if is_symbolic(x):
        return
    rng = allowed or (f"> {gt}" if gt is not None else (f">= {ge}" if ge is not None else "finite"))
    e = _exact(name, x)
    if e is not None:
        if not _finite(e):
            raise ValueError(f"{name} must be a finite real number ({rng}), got {x!r}")
        if (gt is not None and not e > gt) or (ge is not None and not e >= ge):
            raise ValueError(f"{name} must be {rng}, got {x!r}")
        return
    v = _values(name, x)
    if v.size == 0:
        raise ValueError(f"{name} is empty; allowed range: {rng}")
    if np.any(v.imag != 0) or not np.all(np.isfinite(v.real)):
        raise ValueError(f"{name} must be a finite real number ({rng}), got {x!r}")
    if gt is not None and not np.all(v.real > gt):
        raise ValueError(f"{name} must be {rng}, got {x!r}")
    if ge is not None and not np.all(v.real >= ge):
        raise ValueError(f"{name} must be {rng}, got {x!r}")


def positive_int(name: str, x, *, ge: int = 1) -> None:
    """Check that ``x`` is an integer (of any numeric type, an int of any size) ``>= ge``."""
    if is_symbolic(x):
        return
    what = "a positive integer" if ge == 1 else f"an integer >= {ge}"
    e = _exact(name, x)
    if e is not None:
        if not _finite(e) or e != int(e) or not e >= ge:
            raise ValueError(f"{name} must be {what}, got {x!r}")
        return
    v = _values(name, x)
    if v.size == 0 or np.any(v.imag != 0) or not np.all(np.isfinite(v.real)):
        raise ValueError(f"{name} must be {what}, got {x!r}")
    if not np.all(v.real == np.round(v.real)) or not np.all(v.real >= ge):
        raise ValueError(f"{name} must be {what}, got {x!r}")


def check_le(name: str, x, bound, bound_desc: str) -> None:
    """Check ``x <= bound`` (numbers only; two single numbers compared exactly) with a
    message naming ``bound_desc``."""
    if is_symbolic(x) or is_symbolic(bound):
        return
    ex, eb = _exact(name, x), _exact("bound", bound)
    if ex is not None and eb is not None:
        if not ex <= eb:
            raise ValueError(f"{name} must be <= {bound_desc} = {bound}, got {x!r}")
        return
    if not np.all(np.asarray(_values(name, x).real) <= np.asarray(_values("bound", bound).real)):
        raise ValueError(f"{name} must be <= {bound_desc} = {bound}, got {x!r}")


def scalars_only(func: str, **args) -> None:
    """Reject numpy arrays (and lists) for functions that are not element-wise (searches and
    predicates): one clear ``ValueError`` naming the argument, not numpy's "truth value of
    an array is ambiguous"."""
    for name, x in args.items():
        if isinstance(x, (list, tuple)) or (isinstance(x, np.ndarray) and x.ndim > 0):
            raise ValueError(
                f"{func} takes one number per argument, not an array ({name} = {x!r});"
                " call it once per value"
            )
