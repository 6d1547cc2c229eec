"""A stated rate: an expression of the rate of d^2 in n, p and alpha (``verify.rates --rate
EXPR``), parsed from a whitelist, checked over a design's n, and reduced to a band's exponent
and log power the way the teacher's band is (:func:`theory.exponents.teacher_log_power`).

**Parsing** (:func:`parse_rate`): the text is split into Python tokens first, and only these
are accepted -- the names ``n``, ``p``, ``alpha``, ``log``, ``exp``, ``sqrt`` and ``Rational``,
decimal numbers (``2``, ``0.5``, ``1e-3``; no complex, hexadecimal or ``_`` literals), the
operators ``+ - * / **``, parentheses and the comma of ``Rational(a, b)``; anything else is
refused with one line naming the token.  ``Rational`` takes exactly two plain decimal
integers, each with optional minus signs (``Rational(1, 2)``, ``Rational(-3, 4)``), anything
else refused: sympy calls it while it parses, before any bound below is checked, on whatever
it is given (``Rational(0.1)`` is 3602879701896397/2^55, ``Rational(1e-9999)`` a fraction of
10,000 digits).  Only then is the text handed to sympy's ``parse_expr``, with those names
alone in its namespace (no builtins), so nothing but sympy numbers, the three symbols and the
four functions can be built.  Each number sympy or mpmath will compute is bounded before it
is computed -- sympy computes exactly, mpmath ``exp(x)`` with ``log2 |x|`` more bits, so
``((10**4)**(10**4))**(10**4)`` or ``exp(exp(n**3))`` would never end -- and refused in one
line naming the part:

* the text: at most :data:`MAX_LENGTH` characters, and no number written with an exponent
  beyond :data:`MAX_DIGITS` (sympy builds ``1e-999999999`` digit by digit);
* every part made of numbers alone (no n, p or alpha) of the text as parsed unevaluated, and
  again with each truth's p and alpha before sympy puts them in (``2**2**2**p`` at p = 20):
  its value is computed bottom up in mpmath at 53 bits (whose exponents have no bound, so
  nothing large is built), a power's and an exponential's magnitude from their parts' before
  they are computed, so that the check itself is always fast; refused where it is beyond
  ``10^``:data:`MAX_DIGITS` in magnitude, where the exact number sympy may make of it may
  have more than :data:`MAX_DIGITS` digits (``((10**399 + 1)/10**399)**10000`` is about 1,
  its fraction has 8 million digits; ``exp(c*log(x))`` becomes ``x**c``), or where it is a
  power of a number to an exponent beyond :data:`MAX_NUMBER_POWER` (``10**10**10``); a part
  without a value (``1/0``, ``log(0)``) is passed over, and refused by the band's checks;
* at each n of the band (below), every part of the rate by the same rule: none beyond
  ``10^``:data:`MAX_DIGITS` in magnitude, no power to an exponent beyond
  :data:`MAX_EXPONENT` (``n**-(n**n)``; mpmath raises to an integer k bit by bit); and no
  integer of more digits than Python prints (4300, ``10**9999``), which lambdify must.

**The band** (:func:`stated_band`), for one truth's ``(p, alpha)`` over a design's
``n_1 < ... < n_k``, of ``f(n) = EXPR`` at that ``(p, alpha)`` (alpha taken as the decimal
it is written as, ``0.5 -> 1/2``):

* *positive and decreasing*: ``f`` is real, finite and > 0 and strictly decreasing along
  the design's n and :data:`GRID` log-spaced points between its ends (else refused, naming
  the first n where it is not);
* *exponent* ``e = lim_{n -> oo} log f(n) / log n`` (sympy), the rule by which
  ``theory.exponents`` derives the paper's and the teacher's exponents (log factors are of
  power 0); it must be finite and < 0 (a rate slower than every power of n gives the
  power-law slopes nothing to test);
* *log power* ``c`` from the least-squares log-log slope over the design's n, the teacher's
  band's rule::

      slope_ns(log f ~ log n) = e + c * ell,   ell = slope_ns(log log n ~ log n),

  so ``c = (slope - e) / ell = slope_ns(log f - e log n ~ log n) / ell``: exactly ``k`` for
  ``f = C n^e log^k n`` (then ``log f - e log n = log C + k log log n``, the difference taken
  symbolically), and for any other ``f`` the log power its slope over this design amounts
  to.  Computed at :data:`DIGITS` significant digits (mpmath; the design's n are exact), so
  the float it returns carries only its own rounding.

EXPR states the rate of d^2 and of the squared L2 error (Theorem 7.1 bounds both at one
rate); the Hellinger distance d, its square root, has half of both (:meth:`StatedBand.of`).
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass
from functools import lru_cache

import mpmath as mp
import sympy as sp
from sympy.parsing.sympy_parser import auto_number, parse_expr

from theory.rate_sizes import MAX_DIGITS, MAX_EXPONENT, MAX_NUMBER_POWER, check_sizes

__all__ = [
    "ALLOWED",
    "MAX_DIGITS",
    "MAX_EXPONENT",
    "MAX_LENGTH",
    "MAX_NUMBER_POWER",
    "StatedBand",
    "parse_rate",
    "stated_band",
]

_n = sp.Symbol("n", positive=True)
_p = sp.Symbol("p", positive=True, integer=True)
_alpha = sp.Symbol("alpha", positive=True)

# the names an expression may use, and what each is
ALLOWED = {
    "n": _n, "p": _p, "alpha": _alpha,
    "log": sp.log, "exp": sp.exp, "sqrt": sp.sqrt, "Rational": sp.Rational,
}  # fmt: skip
_OPS = {"+", "-", "*", "/", "**", "(", ")", ","}
_NUMBER = re.compile(r"(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
MAX_LENGTH = 400
# the log-spaced points between the design's ends at which f must decrease too
GRID = 64
# mpmath's working precision of the band's evaluation
DIGITS = 30


def _refuse(text: str, why: str) -> ValueError:
    return ValueError(f"--rate {text!r}: {why}")


def _check_tokens(text: str) -> None:
    """Every token of ``text`` on the whitelist (module docstring), else ValueError naming
    the first that is not."""
    if len(text) > MAX_LENGTH:
        raise _refuse(text[:40] + "...", f"longer than {MAX_LENGTH} characters")
    if not text.strip():
        raise _refuse(text, "empty; give an expression in n, p and alpha")
    bad = next((ch for ch in text if not (ch.isascii() and ch.isprintable())), None)
    if bad is not None:
        raise _refuse(text, f"character {bad!r} is not allowed")
    names = ", ".join(ALLOWED)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except tokenize.TokenError:
        raise _refuse(text, "unbalanced parentheses") from None
    for t in tokens:
        kind, s = t.type, t.string
        if kind in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER) or not s.strip():
            continue
        if kind == tokenize.NAME and s not in ALLOWED:
            raise _refuse(text, f"unknown name {s!r}; an expression may use {names}")
        number = _NUMBER.fullmatch(s) if kind == tokenize.NUMBER else None
        if kind == tokenize.NUMBER and not number:
            raise _refuse(text, f"number {s!r} is not a plain decimal (2, 0.5, 1e-3)")
        if number and number[2] and abs(int(number[2][1:])) > MAX_DIGITS:
            raise _refuse(text, f"number {s!r} has an exponent beyond {MAX_DIGITS}")
        if kind == tokenize.OP and s not in _OPS:
            hint = " (powers are **)" if s == "^" else ""
            raise _refuse(text, f"operator {s!r} is not allowed{hint}; use + - * / ** ( ) ,")
        if kind not in (tokenize.NAME, tokenize.NUMBER, tokenize.OP):
            raise _refuse(text, f"token {s!r} is not allowed; an expression may use {names}")
    _check_rationals(text, [t.string for t in tokens if t.string.strip()])


_INTEGER = re.compile(r"\d+")


def _check_rationals(text: str, tokens: list[str]) -> None:
    """Every ``Rational`` of the text given two plain integers, each with optional minus signs
    (module docstring): sympy calls it while it parses, before any bound is checked."""
    for i in (i for i, s in enumerate(tokens) if s == "Rational"):
        rest, ok = iter(tokens[i + 1 :]), True
        for expected in ("(", "INT", ",", "INT", ")"):
            s = next(rest, None)
            while expected == "INT" and s == "-":
                s = next(rest, None)
            ok = ok and (bool(_INTEGER.fullmatch(s or "")) if expected == "INT" else s == expected)
        if not ok:
            raise _refuse(text, "Rational takes two plain integers, as in Rational(-3, 4)")


# what sympy's own transformations call (numbers; Add, Mul, Pow unevaluated): no name of the
# text can reach them, the whitelist having refused every other name
_GLOBALS = {"__builtins__": {}, "Integer": sp.Integer, "Float": sp.Float, "Add": sp.Add,
            "Mul": sp.Mul, "Pow": sp.Pow}  # fmt: skip


def _parse(text: str, evaluate: bool):
    return parse_expr(text, local_dict=dict(ALLOWED), global_dict=dict(_GLOBALS),
                      transformations=(auto_number,), evaluate=evaluate)  # fmt: skip


@lru_cache(maxsize=64)
def _unevaluated(text: str):
    """``text`` parsed unevaluated, as sympy wrote it (after :func:`parse_rate` accepted it)."""
    return _parse(text, False)


@lru_cache(maxsize=64)
def parse_rate(text: str) -> sp.Expr:
    """``text`` as a sympy expression in the symbols n, p and alpha (module docstring);
    ValueError, one line naming the token or the reason, otherwise."""
    _check_tokens(text)
    try:  # any failure to parse the user's text is bad input, whatever sympy raises
        check_sizes(text, _unevaluated(text), {}, "")
        expr = _parse(text, True)
    except ValueError as exc:
        if str(exc).startswith("--rate "):
            raise
        raise _refuse(text, f"not an expression ({type(exc).__name__})") from None
    except Exception as exc:
        raise _refuse(text, f"not an expression ({type(exc).__name__})") from None
    if not isinstance(expr, sp.Expr) or isinstance(expr, sp.Tuple):
        raise _refuse(text, "not an expression in n, p and alpha")
    return expr


@dataclass(frozen=True)
class StatedBand:
    """A stated rate's band for d^2 over one design: its exponent ``e`` and log power ``c``
    (module docstring), with the least-squares ``slope`` and ``ell`` they come from."""

    exponent: float
    log_power: float
    slope: float
    ell: float

    def of(self, metric: str) -> tuple[float, float]:
        """``(exponent, log power)`` in ``metric``'s scale: d^2's and squared L2's as
        stated, half of both for the Hellinger distance d (its square root)."""
        half = 0.5 if metric == "d" else 1.0
        return half * self.exponent, half * self.log_power


def _truth_words(p: int, alpha) -> str:
    return f"p = {p}" + ("" if alpha is None else f", alpha = {float(alpha):g}")


def _at(text: str, p: int, alpha) -> sp.Expr:
    """EXPR at one truth's ``(p, alpha)``: an expression in n alone (ValueError where it
    uses alpha and the truth has none, or keeps another symbol)."""
    expr = parse_rate(text)
    if alpha is None and _alpha in expr.free_symbols:
        raise _refuse(text, f"uses alpha, but a truth with {_truth_words(p, alpha)} has none")
    subs = {_p: sp.Integer(int(p))}
    if alpha is not None:
        subs[_alpha] = sp.Rational(repr(float(alpha)))
    # sympy computes exactly what p and alpha make of numbers alone (2**2**2**p): bounded first
    check_sizes(text, _unevaluated(text), subs, _truth_words(p, alpha))
    return expr.subs(subs)


def _exponent(text: str, f: sp.Expr, where: str) -> sp.Expr:
    """``lim log f / log n`` (module docstring): finite and < 0, else ValueError."""
    try:
        e = sp.limit(sp.expand_log(sp.log(f), force=True) / sp.log(_n), _n, sp.oo)
    except Exception:  # sympy raises several types where it cannot find a limit
        e = None
    if e is None or not (e.is_number and e.is_extended_real and e.is_finite):
        raise _refuse(text, f"its power of n, lim log f / log n, is not a finite number ({where})")
    if not e < 0:
        raise _refuse(text, f"its power of n is {e} ({where}): a rate must fall like n^e, e < 0")
    return e


def _mpmath_function(text: str, f: sp.Expr):
    """``f`` as a function of n in mpmath; ValueError where it holds an integer longer than
    Python prints (``sys.get_int_max_str_digits()``, 4300 digits), as lambdify must."""
    try:
        return sp.lambdify(_n, f, "mpmath")
    except ValueError:
        raise _refuse(text, "holds a number of more digits than Python prints (4300)") from None


def _values(text: str, f: sp.Expr, ns: tuple[int, ...], where: str) -> list:
    """``f`` at the design's n and the grid between its ends (mpmath), checked positive and
    strictly decreasing; ValueError naming the first n where it is not."""
    fn = _mpmath_function(text, f)
    lo, hi = mp.log(ns[0]), mp.log(ns[-1])
    grid = [mp.exp(lo + (hi - lo) * i / (GRID + 1)) for i in range(1, GRID + 1)]
    # a grid point that is a design n but for rounding is that n
    grid = [x for x in grid if all(abs(x - k) > 1e-9 * k for k in ns)]
    at_design = {mp.mpf(k): None for k in ns}
    prev = None
    for x in sorted([*at_design, *grid]):
        check_sizes(text, f, {_n: x}, f"at n = {mp.nstr(x, 6)}, {where}")
        try:
            v = fn(x)
            v = mp.mpf(v) if isinstance(v, int | float) else v
        except (ZeroDivisionError, ValueError, TypeError, OverflowError):
            v = None
        if not (isinstance(v, mp.mpf) and mp.isfinite(v) and v > 0):
            raise _refuse(text, f"not a positive real number at n = {mp.nstr(x, 6)} ({where})")
        if prev is not None and not v < prev[1]:
            raise _refuse(
                text,
                f"not decreasing in n ({where}): {mp.nstr(prev[1], 4)} at n ="
                f" {mp.nstr(prev[0], 6)}, {mp.nstr(v, 4)} at n = {mp.nstr(x, 6)}",
            )
        prev = (x, v)
        if x in at_design:
            at_design[x] = v
    return list(at_design.values())


def _ls_slope(x: list, y: list):
    mx, my = mp.fsum(x) / len(x), mp.fsum(y) / len(y)
    return mp.fsum((a - mx) * (b - my) for a, b in zip(x, y, strict=True)) / mp.fsum(
        (a - mx) ** 2 for a in x
    )


@lru_cache(maxsize=256)
def _band(text: str, ns: tuple[int, ...], p: int, alpha: float | None) -> StatedBand:
    """:func:`stated_band` on a sorted design of distinct integers (cached)."""
    where = f"{_truth_words(p, alpha)}, n = {ns[0]}..{ns[-1]}"
    with mp.workdps(DIGITS):
        f = _at(text, p, alpha)
        if f.free_symbols - {_n}:
            raise _refuse(text, f"keeps symbols {sorted(map(str, f.free_symbols - {_n}))}")
        if f.has(sp.zoo, sp.nan, sp.oo):  # 1/0, or 1/(p - 1) at p = 1
            raise _refuse(text, f"undefined: a division by zero or an infinity ({where})")
        ys = [mp.log(v) for v in _values(text, f, ns, where)]
        e = _exponent(text, f, where)
        x = [mp.log(k) for k in ns]
        ell = _ls_slope(x, [mp.log(v) for v in x])
        # slope(log f) - e = slope(log f - e log n): the difference taken symbolically, so
        # that a pure power leaves exactly 0 and C n^e log^k n exactly k log log n + log C
        rest = _mpmath_function(text, sp.expand_log(sp.log(f) - e * sp.log(_n), force=True))
        c = _ls_slope(x, [mp.mpf(rest(mp.mpf(k))) for k in ns]) / ell
        slope = _ls_slope(x, ys)
        return StatedBand(float(e), float(c), float(slope), float(ell))


def stated_band(text: str, ns, p: int, alpha: float | None = None) -> StatedBand:
    """The band of the stated rate ``text`` (EXPR in n, p, alpha) for a truth of dimension
    ``p`` and smoothness ``alpha`` (None: a teacher truth, which has none) over the design
    ``ns`` (at least two distinct integers > 1): its exponent ``e`` and log power ``c`` for
    d^2 (module docstring: ``slope_ns(log f ~ log n) = e + c ell``).  ValueError, one line
    naming what is wrong, where EXPR does not parse, uses a name off the whitelist, is not
    positive or not decreasing over the design, or has no finite negative power of n."""
    design = tuple(sorted({int(k) for k in ns}))
    if len(design) < 2 or design[0] <= 1:
        raise ValueError(f"a stated rate's band needs at least two sample sizes > 1, got {ns}")
    return _band(text, design, int(p), None if alpha is None else float(alpha))
