"""A named regressor's parameters as the sweep gives them (``--estimator-param NAME=VALUE``;
``regressor_params`` in a configuration): parsed, checked and evaluated at each cell without
running anything but arithmetic.

**Its parameters** (:func:`parse_param`): ``NAME=VALUE`` is a Python literal
(``ast.literal_eval``: ``5``, ``'distance'``, ``(50, 50)``, ``None``); anything else is an
expression in ``n`` (the cell's sample size), ``p`` (the truth's input dimension) and
``alpha`` (its smoothness; a truth without one refuses an expression using it), of numbers,
``+ - * / // **``, parentheses and the functions ``ceil floor log sqrt exp min max`` --
checked node by node on its syntax tree (nothing else is evaluated), at most
:data:`MAX_LENGTH` characters, evaluated per cell within bounds: a float that overflows, an
integer past :data:`INT_LIMIT` (``floor(1e300)``) or an integer power whose result would pass
it (``ceil(n)**ceil(n)``, refused before it is computed, so no expression can run long) and a
non-finite or complex value are refused in one line (``ValueError``). **Rounding rule**
(:func:`integer_names`): where the parameter's default (in ``get_params()``) is an int (not
a bool), the value is rounded to the nearest int, halves up (``floor(v + 1/2)``) -- unless
the class declares that the parameter takes non-integer reals (scikit-learn's
``_parameter_constraints``: a real interval or type among its constraints; KernelRidge's
``alpha``, default ``1``, keeps ``1/n``); otherwise it is kept as computed (``ceil`` and
``floor`` give ints).  The records keep the expressions as given (the fingerprint,
``config``) and each cell's values (``regressor_values``).

**A bare word is a string** (``kernel=laplacian``, ``weights=distance``): a single name that
is neither ``n``, ``p``, ``alpha`` nor one of the functions is the string itself, as if
quoted (a choice: scikit-learn's options are words, and quoting them on a command line is a
chore; ``"'n'"`` is the string ``n``).

**An object** (:class:`ObjectParam`, given from Python only: ``verify.check_rate`` with a
kernel object, ``GaussianProcessRegressor(kernel=Matern(nu=0.5))``): its text is
``@object `` and its ``repr`` -- what the records carry and the fingerprint hashes (a
character no Python expression starts with, so the text is never evaluated); the object
itself travels with the configuration in memory (pickled with a job to its worker) and
each fit gets a deep copy.  A reader takes the text as a description; a run that trains
from text alone (a records file resumed from the command line) is refused, naming the
parameter (``simulate.sweep.train.foreign.check_regressor``).
"""

from __future__ import annotations

import ast
import math
import numbers
import re

__all__ = [
    "FLAG",
    "INT_LIMIT",
    "MAX_LENGTH",
    "OBJECT_MARK",
    "ObjectParam",
    "integer_names",
    "parse_param",
    "refuse",
    "values_at",
]

MAX_LENGTH = 200
# an object's text: the mark, then its repr, at most OBJECT_MAX_LENGTH characters in all
OBJECT_MARK = "@object "
OBJECT_MAX_LENGTH = 2000
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


class ObjectParam(str):
    """A parameter given as an object (module docstring): the string is its text
    (:data:`OBJECT_MARK` and its ``repr``), ``.value`` the object.  A ``str``, so every
    reader of a configuration's parameters takes it as text, and JSON writes the text."""

    value: object

    def __new__(cls, value):
        text = OBJECT_MARK + " ".join(repr(value).split())
        if _ADDRESS.search(text):  # another run's object prints another address
            raise ValueError(
                f"{type(value).__name__} object: its repr names a memory address ({text[8:80]}),"
                " so the records could not name it again; give it a repr of its parameters"
                " (scikit-learn's BaseEstimator has one)"
            )
        if len(text) > OBJECT_MAX_LENGTH:
            raise ValueError(
                f"{type(value).__name__} object: its repr is longer than"
                f" {OBJECT_MAX_LENGTH} characters, too long for the records to name it"
            )
        self = super().__new__(cls, text)
        self.value = value
        return self

    def __reduce__(self):  # pickled (to a worker) with its object
        return ObjectParam, (self.value,)

    def __deepcopy__(self, memo):  # a configuration's copy (dataclasses.asdict) keeps it
        return self


# the largest integer an expression may reach while it is evaluated: a parameter is a count
# or a size, and 2^63 leaves every one room; an integer power past it is refused before it
# is computed (Python's exact integers would otherwise take minutes, or memory, to make it)
INT_LIMIT = 2**63
_NAMES = ("n", "p", "alpha")
_FUNCS = {
    "ceil": math.ceil,
    "floor": math.floor,
    "log": math.log,
    "sqrt": math.sqrt,
    "exp": math.exp,
    "min": min,
    "max": max,
}


def _power(a, b):
    """``a ** b``, an integer power whose result would pass :data:`INT_LIMIT` refused
    before it is computed (OverflowError)."""
    if isinstance(a, int) and isinstance(b, int) and b > 0 and abs(a) > 1:
        if b * math.log2(abs(a)) > math.log2(INT_LIMIT):
            raise OverflowError("an integer power beyond 2^63")
    return a**b


_BINOPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Pow: _power,
}
FLAG = "--estimator-param"


def refuse(name: str, text: str, why: str) -> ValueError:
    return ValueError(f"{FLAG} {name}={text}: {why}")


def _check_node(node, name: str, text: str) -> None:
    """Every node of an expression on the whitelist (module docstring)."""
    if isinstance(node, ast.Expression):
        return _check_node(node.body, name, text)
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise refuse(name, text, f"constant {node.value!r} is not a number")
    elif isinstance(node, ast.Name):
        if node.id not in _NAMES:
            raise refuse(
                name,
                text,
                f"unknown name {node.id!r}; an expression may use n, p,"
                f" alpha and {', '.join(_FUNCS)} (a string literal is quoted:"
                f" {name}=\"'{node.id}'\")",
            )
    elif isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        _check_node(node.left, name, text)
        _check_node(node.right, name, text)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        _check_node(node.operand, name, text)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        if node.func.id not in _FUNCS:
            raise refuse(name, text, f"unknown function {node.func.id!r}; use {', '.join(_FUNCS)}")
        for a in node.args:
            _check_node(a, name, text)
    else:
        raise refuse(
            name,
            text,
            f"{type(node).__name__} is not allowed; use numbers, n, p,"
            " alpha, + - * / // **, parentheses and " + ", ".join(_FUNCS),
        )


def parse_param(name: str, text: str):
    """``("literal", value)``, ``("expr", tree)`` or ``("object", value)`` of one
    ``NAME=VALUE`` (module docstring: a bare word is the string; an object's text gives its
    object, or None where only the text is known); ValueError (one line) for a bad
    expression."""
    if not isinstance(text, str) or not text.strip():
        raise refuse(name, text, "empty; give a Python literal or an expression in n, p, alpha")
    if text.startswith(OBJECT_MARK):
        if len(text) > OBJECT_MAX_LENGTH:
            raise refuse(name, text[:40] + "...", f"longer than {OBJECT_MAX_LENGTH} characters")
        return "object", getattr(text, "value", None)
    if len(text) > MAX_LENGTH:
        raise refuse(name, text[:40] + "...", f"longer than {MAX_LENGTH} characters")
    try:
        return "literal", ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        raise refuse(name, text, "neither a Python literal nor an expression") from None
    word = tree.body
    if isinstance(word, ast.Name) and word.id not in _NAMES and word.id not in _FUNCS:
        return "literal", word.id  # a bare word is the string (module docstring)
    _check_node(tree, name, text)
    return "expr", tree


def _bounded(v):
    """``v``, or OverflowError for an integer past :data:`INT_LIMIT` (every step of an
    evaluation passes through here, so none starts from a number past it)."""
    if isinstance(v, int) and abs(v) > INT_LIMIT:
        raise OverflowError("an integer beyond 2^63")
    return v


def _eval(node, env: dict):
    if isinstance(node, ast.Expression):
        return _eval(node.body, env)
    if isinstance(node, ast.Constant):
        return float(node.value)  # a 400-digit literal: OverflowError
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, ast.BinOp):
        a, b = _eval(node.left, env), _eval(node.right, env)
        return _bounded(_BINOPS[type(node.op)](a, b))
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, env)
        return -v if isinstance(node.op, ast.USub) else v
    return _bounded(_FUNCS[node.func.id](*(_eval(a, env) for a in node.args)))


def _uses_alpha(tree) -> bool:
    return any(isinstance(x, ast.Name) and x.id == "alpha" for x in ast.walk(tree))


def _takes_reals(constraints) -> bool:
    """Whether a scikit-learn parameter's constraints accept a non-integer real: a type, or
    an ``Interval``'s ``type``, that is a Real and not an Integral."""
    for c in constraints if isinstance(constraints, (list, tuple)) else ():
        t = c if isinstance(c, type) else getattr(c, "type", None)
        if isinstance(t, type) and issubclass(t, numbers.Real):
            if not issubclass(t, numbers.Integral):
                return True
    return False


def integer_names(cls, defaults: dict) -> frozenset:
    """The parameters whose computed values are rounded to an int (module docstring's
    rounding rule): an int (not bool) default, and no declared constraint taking reals."""
    declared = getattr(cls, "_parameter_constraints", None)
    declared = declared if isinstance(declared, dict) else {}
    return frozenset(
        k
        for k, d in defaults.items()
        if isinstance(d, int) and not isinstance(d, bool) and not _takes_reals(declared.get(k))
    )


def values_at(params: dict, rounded, n: int, p: int, alpha) -> dict:
    """Every parameter's value at one cell (sample size ``n``, the truth's ``p`` and
    ``alpha``): literals as given, expressions evaluated, those named in ``rounded``
    (:func:`integer_names`) rounded by the module docstring's rule, an object as itself
    (its text where only the text is known: a description); ValueError (one line) where an
    expression fails or is not finite."""
    env = {"n": float(n), "p": float(p), "alpha": None if alpha is None else float(alpha)}
    out = {}
    for name, text in params.items():
        kind, v = parse_param(name, text)
        if kind == "object":
            v = text if v is None else v
        elif kind == "expr":
            if alpha is None and _uses_alpha(v):
                raise refuse(name, text, f"uses alpha, but a truth of p = {p} has none")
            try:
                v = _eval(v, env)
            except (ArithmeticError, ValueError, TypeError, RecursionError, MemoryError) as exc:
                raise refuse(
                    name, text, f"fails at n = {n}, p = {p}, alpha = {alpha} ({type(exc).__name__})"
                ) from None
            if isinstance(v, complex) or not math.isfinite(v):
                raise refuse(name, text, f"is {v} at n = {n}, p = {p}, alpha = {alpha}")
            if name in rounded:
                v = math.floor(v + 0.5)
        out[name] = v
    return out
