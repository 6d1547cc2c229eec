"""The sizes of a stated rate's numbers, bounded before sympy or mpmath computes them
(:func:`check_sizes`; the rule is :mod:`theory.rate_expression`'s module docstring).

sympy computes numbers exactly and mpmath ``exp(x)`` with ``log2 |x|`` more bits, so a short
text (``((10**4)**(10**4))**(10**4)``, ``exp(exp(n**3))``) could otherwise run for ever.  Each
part of an expression made of numbers alone is valued bottom up in mpmath at 53 bits (whose
exponents have no bound, so nothing large is built), a power's and an exponential's
magnitude from its parts' before it is computed, so the check itself is always fast.
"""

from __future__ import annotations

import math

import mpmath as mp
import sympy as sp

__all__ = ["MAX_DIGITS", "MAX_EXPONENT", "MAX_NUMBER_POWER", "SizeRefused", "check_sizes"]

# the largest power of a number to a number (10**10**10 would be computed exactly)
MAX_NUMBER_POWER = 10_000
# the most digits of any part of a rate, in magnitude or exactly: far beyond any rate's own
# numbers, and sympy and mpmath compute up to it in milliseconds
MAX_DIGITS = 10_000
# the largest exponent of a power at a band's n, a float's: mpmath raises x to an integer k
# in log2 k steps at 4 log2 k bits (k = 10^300 takes 10 ms, 10^4000 six seconds)
MAX_EXPONENT = 1e308

_LN10 = math.log(10)
_CONSTANTS = {sp.pi: lambda: +mp.pi, sp.E: lambda: +mp.e, sp.I: lambda: mp.mpc(0, 1)}


class SizeRefused(ValueError):
    """A part of a stated rate beyond the bounds (one line: ``--rate 'TEXT': why``)."""


def _show(node) -> str:
    """``node`` as one short line (a number beyond Python's 4300 digits by its kind alone)."""
    try:
        s = " ".join(str(node).split())
    except ValueError:
        s = type(node).__name__
    return s if len(s) <= 60 else s[:57] + "..."


def _digits(k: int):
    return mp.log10(abs(k)) if k else mp.mpf(0)


def _power_value(b, e, within):
    """``b ** e`` (53 bits) as sympy's principal branch, its magnitude checked first."""
    if b == 0:  # 0**0 = 1, 0**e = 0 for Re e > 0; 1/0 has none
        return None if mp.re(e) < 0 else mp.mpf(0) if e != 0 else mp.mpf(1)
    t = e * mp.log(b)  # b**e = exp(t), the principal branch as sympy's
    within(mp.re(t) / _LN10)
    if mp.im(b) != 0 or mp.im(e) != 0 or (b < 0 and not mp.isint(e)):
        return mp.exp(t)
    if abs(e) <= MAX_NUMBER_POWER:
        return mp.power(b, e)  # as exact as 53 bits allow: 10**4 is 10000
    size = mp.exp(e * mp.log(abs(b)))  # (-1)**10**9999 at once, not bit by bit
    return -size if b < 0 and int(e) % 2 else size


class _Check:
    """One :func:`check_sizes` pass over an expression (its methods are the pass's steps)."""

    def __init__(self, text: str, at: dict, where: str):
        self.text, self.at = text, at
        self.exact = all(isinstance(v, sp.Basic) for v in at.values())
        self.tail = f" ({where})" if where else ""

    def refuse(self, why: str) -> SizeRefused:
        return SizeRefused(f"--rate {self.text!r}: {why}{self.tail}")

    def within(self, node, log10_size) -> None:  # |node| = 10^log10_size
        if log10_size > MAX_DIGITS:
            raise self.refuse(f"{_show(node)} is beyond 10^{MAX_DIGITS} in magnitude")

    def value(self, node, args):
        """``node``'s value from its parts' values, none where sympy would have none."""
        if node.is_Add:
            return mp.fsum(args)
        if node.is_Mul:
            return mp.fprod(args)
        if node.is_Pow:
            return _power_value(*args, lambda size: self.within(node, size))
        if isinstance(node, sp.exp):
            self.within(node, mp.re(args[0]) / _LN10)
            return mp.exp(args[0])
        if isinstance(node, sp.log):
            return None if args[0] == 0 else mp.log(args[0])
        return None

    def leaf(self, node):
        """``(value, digits, latent)`` of a part without parts (:meth:`visit`)."""
        if node.is_Rational or node.is_Float:  # 9.9e10000 is beyond the bound
            v = mp.mpf(node._mpf_) if node.is_Float else mp.mpf(node.p) / node.q
            if v != 0:
                self.within(node, mp.log10(abs(v)))
            digits = _digits(node.p) + _digits(node.q) if node.is_Rational else mp.mpf(0)
            return v, digits, mp.mpf(0)
        if not node.is_number:  # a symbol is no number
            return None
        v = _CONSTANTS.get(node)  # pi, E, I; zoo and nan have no value
        return (v() if v else None), mp.mpf(0), mp.mpf(0)

    def sizes(self, node, args, digits, latent):
        """``(digits, latent)`` of a part from its parts' (:meth:`visit`); a power's exponent
        bounded first."""
        size = [mp.mpf(1) if a is None else max(mp.mpf(1), abs(a)) for a in args]
        if node.is_Pow:
            e = args[1]
            if self.exact and e is not None and not abs(e) <= MAX_NUMBER_POWER:
                raise self.refuse(
                    f"the power {_show(node)} of a number is beyond {MAX_NUMBER_POWER}"
                )
            if not self.exact and e is not None and not abs(e) <= MAX_EXPONENT:
                raise self.refuse(
                    f"the power {_show(node)} has an exponent beyond {MAX_EXPONENT:g}"
                )
            return digits[0] * size[1], latent[0] * size[1] + latent[1] * size[0]
        if isinstance(node, sp.log):
            return digits[0], digits[0]
        if isinstance(node, sp.exp):
            return digits[0] + latent[0], digits[0] + latent[0]
        # Add, Mul: their parts' digits together; a log's scaled by its factors
        lat = mp.fsum(
            li * mp.fprod(m for j, m in enumerate(size) if j != i) for i, li in enumerate(latent)
        )
        return mp.fsum(digits) + mp.log10(len(args)), lat

    def visit(self, node):
        """``(value, digits, latent)`` of a part made of numbers alone (None of any other):
        ``digits`` bounds those of the exact number sympy may make of it, ``latent`` those of
        the numbers its logarithms may become (``exp(c*log(x)) = x**c``)."""
        if node in self.at:
            v = self.at[node]
            return self.visit(v) if isinstance(v, sp.Basic) else (mp.mpf(v), mp.mpf(0), mp.mpf(0))
        if not node.args:
            return self.leaf(node)
        parts = [self.visit(a) for a in node.args]
        if any(part is None for part in parts):
            return None
        args, digits, latent = (list(x) for x in zip(*parts, strict=True))
        d, lat = self.sizes(node, args, digits, latent)
        v = None
        if all(a is not None for a in args):
            try:
                v = self.value(node, args)
            except SizeRefused:
                raise
            except (ArithmeticError, TypeError, ValueError):
                pass
        if v is not None and not (mp.isfinite(mp.re(v)) and mp.isfinite(mp.im(v))):
            v = None
        if v is not None and v != 0:
            self.within(node, mp.log10(abs(v)))
        if self.exact and d > MAX_DIGITS:
            raise self.refuse(f"{_show(node)} would have more than {MAX_DIGITS} digits")
        return v, d, lat

    def visit_all(self, x) -> None:  # the text may be a tuple (refused as no expression later)
        if isinstance(x, tuple | list):
            for part in x:
                self.visit_all(part)
        elif isinstance(x, sp.Basic):
            self.visit(x)


def check_sizes(text: str, expr, at: dict, where: str) -> None:
    """Every part of ``expr`` made of numbers alone, once the symbols of ``at`` have its
    values, within the bounds of :mod:`theory.rate_expression`'s module docstring, else
    :class:`SizeRefused` (a ValueError) naming it.  ``at``: symbol -> a sympy number (p and
    alpha of a truth, or no symbol: the parts sympy will compute exactly, so also their digits
    and powers are bounded) or an mpmath number (n of the band: the parts mpmath will compute,
    their magnitude).  Each part's value is computed bottom up in mpmath at 53 bits, a power's
    and an exponential's magnitude checked before it is computed, so no check is slow; a part
    without a value (1/0, log(0)) is passed over."""
    with mp.workprec(53):
        _Check(text, at, where).visit_all(expr)
