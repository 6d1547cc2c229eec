"""Argument checks shared by every formula: one clear ``ValueError`` naming the argument.

Symbolic arguments (sympy expressions with free symbols) are not checked: their assumptions
are the caller's business.  Numbers and arrays are checked element-wise; NaN and infinities
are always rejected, so a formula never returns a silent nan.
"""

from __future__ import annotations

import numbers

import mpmath
import numpy as np
import sympy as sp

from theory._backend import is_symbolic

__all__ = ["real", "positive_int", "check_le", "scalars_only"]


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


def real(name: str, x, *, gt=None, ge=None, allowed: str | None = None) -> None:
    """Check that ``x`` is finite and real, ``> gt`` and/or ``>= ge``."""
    if is_symbolic(x):
        return
    v = _values(name, x)
    rng = allowed or (f"> {gt}" if gt is not None else (f">= {ge}" if ge is not None else "finite"))
    if v.size == 0:
        raise ValueError(f"{name} is empty; allowed range: {rng}")
    if np.any(v.imag != 0) or not np.all(np.isfinite(v.real)):
        raise ValueError(f"{name} must be a finite real number ({rng}), got {x!r}")
    if gt is not None and not np.all(v.real > gt):
        raise ValueError(f"{name} must be {rng}, got {x!r}")
    if ge is not None and not np.all(v.real >= ge):
        raise ValueError(f"{name} must be {rng}, got {x!r}")


def positive_int(name: str, x, *, ge: int = 1) -> None:
    """Check that ``x`` is an integer (of any numeric type) ``>= ge``."""
    if is_symbolic(x):
        return
    what = "a positive integer" if ge == 1 else f"an integer >= {ge}"
    v = _values(name, x)
    if v.size == 0 or np.any(v.imag != 0) or not np.all(np.isfinite(v.real)):
        raise ValueError(f"{name} must be {what}, got {x!r}")
    if not np.all(v.real == np.round(v.real)) or not np.all(v.real >= ge):
        raise ValueError(f"{name} must be {what}, got {x!r}")


def check_le(name: str, x, bound, bound_desc: str) -> None:
    """Check ``x <= bound`` (numbers only) with a message naming ``bound_desc``."""
    if is_symbolic(x) or is_symbolic(bound):
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
