"""Any scikit-learn-style regressor through the sweep (``estimator="regressor"``;
``python -m verify.rates --estimator MODULE:CLASS [--estimator-param NAME=VALUE ...]``).

The regressor trains on every cell of the sweep's design -- the same truths, nested data
(``simulate.sweep.cells.job_data``: all n points of the cell, none held out), test points,
class-matched reference and seeds as ASVI's and the Gaussian-process control's -- and its
metrics are recorded under ``per_estimator`` by its class's name (``CLASS`` of
``MODULE:CLASS``), as the control's are.

**Reading runs no code**: a configuration that names a regressor is checked as data when
it is made (:func:`check_regressor_data`: ``MODULE:CLASS`` of identifiers, every parameter
parsed and evaluated at every cell), which is all a records reader (``verify.rates
--records``, ``figures``, ``verify.sizing``, ``verify.starts``, a sweep's resume) needs;
the class is imported only by a run that trains it (:func:`check_regressor`, called by
``simulate.sweep.runner.check_regressor_class`` before anything is written, and by the
fingerprint's :func:`identity`), from the user's own command.

**The class** (:func:`resolve`): ``MODULE:CLASS`` is imported (``importlib``); it must make an
object with its defaults that has ``fit``, ``predict`` and ``get_params`` (scikit-learn's
estimator interface).  Refused in one line otherwise: a module or class that does not import,
a class without ``fit``/``predict``, a parameter ``get_params()`` does not name, a value the
class's own parameter check refuses at some cell (scikit-learn's ``_validate_params``, run
on the unfitted estimator at every truth and n before anything trains, where the class has
one).  A fit or prediction that fails while the sweep runs (a value valid only for some
data, e.g. more neighbours than points; a ``SystemExit`` raised by the user's code too, or a
prediction that is not one number per test point) is :class:`RegressorFailed`, one line
naming the cell; the cells done before it stay recorded.  A prediction that is a number per
test point but not finite, or whose error overflows a float (``DummyRegressor`` at
``constant=1e160``), is a *failed cell*: recorded with ``failed: true``, its non-finite
metrics as NaN and its ``failure`` saying why, read back as failed (never as damaged), and
the sweep goes on.

**The harness's data stay the harness's**: the regressor is given copies of the cell's X and
y and of the test points, so a class that writes into its inputs (standardising in place, a
``predict`` that overwrites X) changes neither the reference fitted on the same data nor the
truth's values the metrics compare with.

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

**Seeds**: a regressor with a ``random_state`` parameter the user does not set gets the
cell's own, ``stable_seed(seed, truth, n, replicate, "regressor") mod 2^32``, so a resumed
sweep writes the same records.

**Metrics** (:func:`point_metrics`): a point estimator's posterior is the point mass at its
prediction ``f_hat``, so the project's ``d2`` (the mean over posterior draws of the
test-point average of the squared Hellinger distance between the Gaussian regression models
of f and f0, ``theory.hellinger_sq_pointwise``) becomes the test-point average of
``h^2(f_hat(x) - f0(x))`` -- every draw is ``f_hat`` -- and ``d`` (the mean over draws of
its square root) that average's square root; ``l2sq`` the prediction's squared L2 error on
the test points, as for the others.

**Identity** (:func:`identity`): the class's qualified name (``__module__.__qualname__``) and
the installed version of the distribution that holds the module's top-level package
(``importlib.metadata``; ``"unknown"`` where none does), part of the sweep's fingerprint.
"""

from __future__ import annotations

import ast
import importlib
import math
import numbers
import re
import time
from importlib import metadata

import numpy as np

from simulate.sweep.cells import cell_inputs, point_record_head, reference
from simulate.sweep.records import code_digest, versions
from simulate.sweep.truth_spec import stable_seed
from theory import hellinger_sq_pointwise

__all__ = [
    "MAX_LENGTH",
    "RegressorFailed",
    "check_regressor",
    "identity",
    "integer_names",
    "parse_param",
    "point_metrics",
    "regressor_name",
    "resolve",
    "run_regressor_job",
    "values_at",
]

MAX_LENGTH = 200
# the largest integer an expression may reach while it is evaluated: a parameter is a count
# or a size, and 2^63 leaves every one room; an integer power past it is refused before it
# is computed (Python's exact integers would otherwise take minutes, or memory, to make it)
INT_LIMIT = 2**63
_SPEC = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")
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
_FLAG = "--estimator-param"


class RegressorFailed(ValueError):
    """A named regressor's fit or prediction failed on a cell's data (one line)."""


def _import(spec: str):
    """The class ``MODULE:CLASS`` names (ValueError, one line, where it does not import)."""
    if not isinstance(spec, str) or spec.count(":") != 1 or not all(spec.split(":")):
        raise ValueError(
            f"--estimator {spec!r}: give MODULE:CLASS, e.g. sklearn.neighbors:KNeighborsRegressor"
        )
    mod, name = spec.split(":")
    try:
        module = importlib.import_module(mod)
    except Exception as exc:  # any import failure of the user's module is bad input
        raise ValueError(
            f"--estimator {spec}: module {mod!r} does not import"
            f" ({type(exc).__name__}: {exc})".splitlines()[0]
        ) from None
    cls = getattr(module, name, None)
    if not isinstance(cls, type):
        raise ValueError(f"--estimator {spec}: module {mod!r} has no class {name!r}")
    return cls


def resolve(spec: str):
    """``(class, its defaults' get_params())`` of ``MODULE:CLASS``; ValueError (one line)
    for a class that does not import, cannot be made with its defaults, or lacks
    ``fit``, ``predict`` or ``get_params``."""
    cls = _import(spec)
    missing = [m for m in ("fit", "predict", "get_params") if not callable(getattr(cls, m, None))]
    if missing:
        raise ValueError(
            f"--estimator {spec}: {cls.__name__} has no {'/'.join(missing)}; give"
            " a regressor with fit and predict (scikit-learn's interface)"
        )
    try:
        defaults = dict(cls().get_params())
    except Exception as exc:
        raise ValueError(
            f"--estimator {spec}: {cls.__name__}() cannot be made with its"
            f" defaults ({type(exc).__name__})"
        ) from None
    return cls, defaults


def regressor_name(spec: str) -> str:
    """The estimator's name in records and reports: ``CLASS`` of ``MODULE:CLASS``."""
    return spec.split(":")[-1]


def identity(spec: str) -> dict:
    """The class's qualified name and its distribution's version (module docstring)."""
    cls = _import(spec)
    top = cls.__module__.split(".")[0]
    dists = metadata.packages_distributions().get(top) or []
    version = "unknown"
    for d in sorted(dists):
        try:
            version = f"{d} {metadata.version(d)}"
            break
        except metadata.PackageNotFoundError:  # pragma: no cover - a stale mapping
            continue
    return {"qualname": f"{cls.__module__}.{cls.__qualname__}", "version": version}


def _refuse(name: str, text: str, why: str) -> ValueError:
    return ValueError(f"{_FLAG} {name}={text}: {why}")


def _check_node(node, name: str, text: str) -> None:
    """Every node of an expression on the whitelist (module docstring)."""
    if isinstance(node, ast.Expression):
        return _check_node(node.body, name, text)
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise _refuse(name, text, f"constant {node.value!r} is not a number")
    elif isinstance(node, ast.Name):
        if node.id not in _NAMES:
            raise _refuse(
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
            raise _refuse(name, text, f"unknown function {node.func.id!r}; use {', '.join(_FUNCS)}")
        for a in node.args:
            _check_node(a, name, text)
    else:
        raise _refuse(
            name,
            text,
            f"{type(node).__name__} is not allowed; use numbers, n, p,"
            " alpha, + - * / // **, parentheses and " + ", ".join(_FUNCS),
        )


def parse_param(name: str, text: str):
    """``("literal", value)`` or ``("expr", tree)`` of one ``NAME=VALUE`` (module
    docstring); ValueError (one line) for a bad expression."""
    if not isinstance(text, str) or not text.strip():
        raise _refuse(name, text, "empty; give a Python literal or an expression in n, p, alpha")
    if len(text) > MAX_LENGTH:
        raise _refuse(name, text[:40] + "...", f"longer than {MAX_LENGTH} characters")
    try:
        return "literal", ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        raise _refuse(name, text, "neither a Python literal nor an expression") from None
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
    (:func:`integer_names`) rounded by the module docstring's rule; ValueError (one line)
    where an expression fails or is not finite."""
    env = {"n": float(n), "p": float(p), "alpha": None if alpha is None else float(alpha)}
    out = {}
    for name, text in params.items():
        kind, v = parse_param(name, text)
        if kind == "expr":
            if alpha is None and _uses_alpha(v):
                raise _refuse(name, text, f"uses alpha, but a truth of p = {p} has none")
            try:
                v = _eval(v, env)
            except (ArithmeticError, ValueError, TypeError, RecursionError, MemoryError) as exc:
                raise _refuse(
                    name, text, f"fails at n = {n}, p = {p}, alpha = {alpha} ({type(exc).__name__})"
                ) from None
            if isinstance(v, complex) or not math.isfinite(v):
                raise _refuse(name, text, f"is {v} at n = {n}, p = {p}, alpha = {alpha}")
            if name in rounded:
                v = math.floor(v + 0.5)
        out[name] = v
    return out


def check_regressor_data(spec, params: dict | None, truths, ns) -> None:
    """A configuration's regressor checked as data, importing nothing (ValueError, one
    line): ``spec`` is ``MODULE:CLASS`` of identifiers, ``params`` maps names to their text,
    and every value parses and, for each truth and n, evaluates within bounds
    (:func:`values_at`, unrounded: the rounding rule reads the class).  What
    ``SweepConfig`` checks as it is made, so that a records file is read without running
    any of the code it names (module docstring)."""
    if not isinstance(spec, str) or len(spec) > MAX_LENGTH or not _SPEC.fullmatch(spec):
        shown = spec[:60] if isinstance(spec, str) else spec
        raise ValueError(
            f"--estimator {shown!r}: give MODULE:CLASS, e.g. sklearn.neighbors:KNeighborsRegressor"
        )
    params = {} if params is None else params
    if not isinstance(params, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in params.items()
    ):
        raise ValueError(f"regressor_params must map names to their text, got {params!r}"[:300])
    for t in truths:
        for n in ns:
            values_at(params, frozenset(), int(n), t.p, t.alpha)


def check_regressor(spec: str, params: dict | None, truths, ns) -> None:
    """A sweep's regressor, checked before anything runs (ValueError, one line): as data
    (:func:`check_regressor_data`), then the class (:func:`resolve`, an import: a run's
    check, never a reader's), every parameter name against ``get_params()`` and the
    class's own check of every value at each truth and n (:func:`values_at`)."""
    check_regressor_data(spec, params, truths, ns)
    cls, defaults = resolve(spec)
    params = params or {}
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise ValueError(
            f"{_FLAG} {unknown[0]}: {regressor_name(spec)} has no parameter"
            f" {unknown[0]!r}; its parameters: {', '.join(sorted(defaults))}"
        )
    rounded = integer_names(cls, defaults)
    for t in truths:
        for n in ns:
            _own_check(cls, spec, values_at(params, rounded, int(n), t.p, t.alpha), t, n)


def _own_check(cls, spec: str, values: dict, truth, n) -> None:
    """The class's own check of its parameters' values at one cell, where it has one
    (scikit-learn >= 1.2: ``_validate_params`` on the unfitted estimator, no data);
    ValueError (one line) naming the cell where it refuses them."""
    try:
        est = cls(**values)
        check = getattr(est, "_validate_params", None)
        if callable(check):
            check()
    except Exception as exc:  # the class's own words, whatever its exception
        given = ", ".join(f"{k}={v!r}" for k, v in values.items())
        raise ValueError(
            f"{_FLAG}: {regressor_name(spec)}({given}) at {truth.key}, n = {n}:"
            f" {type(exc).__name__}: {_first_line(exc)}"
        ) from None


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0]


def point_metrics(pred, f0t, sigma: float) -> dict:
    """``d2``, ``d`` and ``l2sq`` of a point prediction (module docstring); an error that
    overflows a float gives an infinite ``l2sq`` (a failed cell), without a warning."""
    with np.errstate(over="ignore", invalid="ignore"):
        err = np.asarray(pred, dtype=float) - np.asarray(f0t, dtype=float)
        finite = bool(np.all(np.isfinite(err)))  # else d2 is undefined: a failed cell
        d2 = float(np.mean(np.asarray(hellinger_sq_pointwise(err, sigma)))) if finite else math.nan
        l2sq = float(np.mean(err**2))
    return {"d2": d2, "d": math.sqrt(d2) if d2 >= 0 else float("nan"), "l2sq": l2sq}


def _prediction(model, Xt, n_test: int) -> np.ndarray:
    """The model's prediction at the test points (given a copy of them) as one float per
    point; :class:`TypeError` or :class:`ValueError` naming what it is otherwise (two
    columns, another length, strings)."""
    raw = np.asarray(model.predict(np.array(Xt, copy=True)))
    if raw.ndim == 2 and raw.shape[1] == 1:
        raw = raw[:, 0]
    if raw.shape != (n_test,):
        raise ValueError(
            f"predict returned an array of shape {raw.shape} for {n_test} test points;"
            f" give one number per point, shape ({n_test},)"
        )
    if not (np.issubdtype(raw.dtype, np.number) or raw.dtype == bool) or np.iscomplexobj(raw):
        raise TypeError(f"predict returned {raw.dtype} values; give real numbers")
    return raw.astype(float)


def _failure(m: dict, pred: np.ndarray) -> str | None:
    """Why a cell whose metrics are not all finite failed, or None (module docstring)."""
    if all(math.isfinite(v) for v in m.values()):
        return None
    bad = int(np.sum(~np.isfinite(pred)))
    if bad:
        return f"the prediction is not finite at {bad} of {pred.size} test points"
    return "the prediction's error overflows a float (its squared L2 error is not finite)"


def run_regressor_job(job) -> list[dict]:
    """One sweep job's cells for a named regressor (the runner's estimator
    ``"regressor"``): per replicate, the regressor fitted on the cell's data with its
    parameters at this n and the same reference as ASVI's cells; its metrics under
    ``per_estimator`` (module docstring)."""
    cfg = job.config
    cls, defaults = resolve(cfg.regressor)
    name, params = regressor_name(cfg.regressor), dict(cfg.regressor_params or {})
    t0 = time.perf_counter()
    f0s, X_all, y_all, data_seeds, test_seed, Xt = cell_inputs(job)
    values = values_at(params, integer_names(cls, defaults), job.n, job.truth.p, job.truth.alpha)
    records = []
    for i, r in enumerate(job.replicates):
        f0t = f0s[i](Xt)
        kw = dict(values)
        if "random_state" in defaults and "random_state" not in params:
            kw["random_state"] = stable_seed(cfg.seed, job.truth.key, job.n, r, "regressor") % 2**32
        t1 = time.perf_counter()
        try:  # copies: the harness's data stay the harness's (module docstring)
            X, y = np.array(X_all[i], copy=True), np.array(y_all[i], copy=True)
            model = cls(**kw).fit(X, y)
            t2 = time.perf_counter()
            pred = _prediction(model, Xt, len(f0t))
        except (Exception, SystemExit) as exc:  # the user's class on this cell: one line
            raise RegressorFailed(
                f"--estimator {cfg.regressor} failed at {job.truth.key}, n = {job.n},"
                f" replicate {r} ({type(exc).__name__}: {_first_line(exc)}); the cells"
                " done before it stay recorded"
            ) from None
        m = point_metrics(pred, f0t, cfg.sigma)
        failure = _failure(m, pred)
        if failure is not None:  # a failed cell: its undefined metrics NaN, read as failed
            m = {k: v if math.isfinite(v) else float("nan") for k, v in m.items()}
        ref = reference(X_all[i], y_all[i], Xt, f0t, cfg, job)
        records.append(
            {
                **point_record_head(job, r, f0s[i], cfg, (data_seeds[i], test_seed), [m]),
                "metrics": m,
                "per_estimator": {name: m},
                **({} if failure is None else {"failure": failure}),
                "regressor_values": _jsonable(values),
                "reference": ref,
                "timing": {
                    "job_train_s": t2 - t1,
                    "job_eval_s": time.perf_counter() - t2,
                    "job_s": time.perf_counter() - t0,
                },
                "versions": versions(),
                "code": code_digest(),
            }
        )
    return records


def _jsonable(values: dict) -> dict:
    """Each cell's values as JSON holds them (a tuple as a list, anything else by repr)."""
    out = {}
    for k, v in values.items():
        if isinstance(v, (bool, int, float, str)) or v is None:
            out[k] = v
        elif isinstance(v, (list, tuple)) and all(isinstance(x, (int, float, str)) for x in v):
            out[k] = list(v)
        else:
            out[k] = repr(v)
    return out
