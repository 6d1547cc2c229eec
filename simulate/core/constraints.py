"""Declarative parameter constraints, checked in one place.

Beside each configuration class its module keeps a table of its fields' allowed values,
``{field: [allowed, ...]}`` (the shape of scikit-learn's ``_parameter_constraints``:
``HYPER_CONSTRAINTS``, ``_STOP_CONSTRAINTS``, ``STEP_OPTIONS_CONSTRAINTS``,
``SWEEP_CONSTRAINTS``), and the class's ``__post_init__`` calls
:func:`validate_params` with it once, where the values enter, as each is made (``Hyper``,
``StopRule``, ``StepOptions`` and ``SweepConfig``; the estimators check their own
parameters through :func:`check`).  A value is accepted when any of its field's constraints
accepts it; the error names the field, what it must be and what it got, e.g. ``lr must be a
finite number > 0, got -1``.

* :class:`Interval` -- integers or real numbers in a range (booleans are refused: ``True``
  is not a width; real numbers must be finite);
* :class:`Count` -- a whole number in a range, an integral float such as ``100.0`` included
  (counts read from a command line or a JSON file arrive as floats);
* :class:`Options` -- one of a fixed set of values (strings: names of a family, slab, ...);
* :data:`BOOL` -- ``True`` or ``False`` only;
* ``None`` -- the value may be None.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral, Real

__all__ = [
    "BOOL",
    "Count",
    "INT_POSITIVE",
    "POSITIVE",
    "Interval",
    "Options",
    "check",
    "validate_params",
]


@dataclass(frozen=True)
class Interval:
    """Numbers of ``kind`` (``Integral`` or ``Real``) between ``low`` and ``high`` (None:
    unbounded); ``closed`` says which ends belong: "both", "left", "right" or "neither"."""

    kind: type
    low: float | None
    high: float | None
    closed: str = "both"

    def accepts(self, v) -> bool:
        if isinstance(v, bool) or not isinstance(v, self.kind):
            return False
        if self.kind is Real and not math.isfinite(v):
            return False
        left, right = self.closed in ("both", "left"), self.closed in ("both", "right")
        if self.low is not None and (v < self.low or (v == self.low and not left)):
            return False
        return self.high is None or not (v > self.high or (v == self.high and not right))

    def __str__(self) -> str:
        what = "an integer" if self.kind is Integral else "a finite number"
        num = (lambda x: f"{x:d}") if self.kind is Integral else (lambda x: f"{x:g}")
        if self.high is None:
            op = ">=" if self.closed in ("both", "left") else ">"
            return f"{what} {op} {num(self.low)}" if self.low is not None else what
        lo = "[" if self.closed in ("both", "left") else "("
        hi = "]" if self.closed in ("both", "right") else ")"
        return f"{what} in {lo}{num(self.low)}, {num(self.high)}{hi}"


@dataclass(frozen=True)
class Count:
    """A whole number in ``[low, high]`` (``high`` None: unbounded): an integer, or a finite
    float with no fractional part (``100.0``: the count a command line's ``type=float`` or a
    JSON file delivers).  Booleans, non-integral and non-finite numbers are refused.
    :func:`check` returns the value as given; ``int()`` it for the count."""

    low: int
    high: int | None = None

    def accepts(self, v) -> bool:
        if isinstance(v, bool) or not isinstance(v, Real):
            return False
        if not isinstance(v, Integral) and not (math.isfinite(v) and float(v).is_integer()):
            return False
        return v >= self.low and (self.high is None or v <= self.high)

    def __str__(self) -> str:
        if self.high is None:
            return f"a whole number >= {self.low:d}"
        return f"a whole number in [{self.low:d}, {self.high:d}]"


@dataclass(frozen=True)
class Options:
    """One of ``values``."""

    values: tuple

    def accepts(self, v) -> bool:
        return any(type(v) is type(o) and v == o for o in self.values)

    def __str__(self) -> str:
        return f"one of {self.values}"


BOOL = Options((True, False))
POSITIVE = Interval(Real, 0, None, "neither")
INT_POSITIVE = Interval(Integral, 1, None, "left")


def _accepts(c, v) -> bool:
    return v is None if c is None else c.accepts(v)


def check(name: str, value, *allowed):
    """``value`` if one of ``allowed`` accepts it, else ``ValueError`` naming ``name``."""
    if not any(_accepts(c, value) for c in allowed):
        what = " or ".join("None" if c is None else str(c) for c in allowed)
        raise ValueError(f"{name} must be {what}, got {value!r}")
    return value


def validate_params(obj, constraints: dict) -> None:
    """Check every field of ``obj`` named in ``constraints`` (module docstring)."""
    for name, allowed in constraints.items():
        check(name, getattr(obj, name), *allowed)
