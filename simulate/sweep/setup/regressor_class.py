"""A named regressor's class (``simulate.sweep.train.foreign``), apart from training it: its
``MODULE:CLASS`` checked as data (:func:`check_regressor_data`, all a records reader
needs: nothing imported), and, for a run that trains it, imported and checked
(:func:`resolve`, :func:`check_regressor`) and named in the fingerprint
(:func:`identity`).  Its own module so the estimator kinds (``simulate.sweep.setup.kinds``) hold
the regressor's checks without the training's imports (the sweep's cells and data)."""

from __future__ import annotations

import importlib
import re
from importlib import metadata

from simulate.sweep.setup.param_values import (
    FLAG,
    MAX_LENGTH,
    integer_names,
    parse_param,
    values_at,
)

__all__ = [
    "check_regressor",
    "check_regressor_data",
    "first_line",
    "identity",
    "regressor_name",
    "resolve",
]


_SPEC = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")


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
    for name, text in params.items():
        if parse_param(name, text) == ("object", None):
            raise ValueError(
                f"{FLAG} {name}: an object the records name by its repr ({text[:80]}); only"
                " the run that holds the object trains with it (verify.check_rate with the"
                " object); reading the records needs none"
            )
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise ValueError(
            f"{FLAG} {unknown[0]}: {regressor_name(spec)} has no parameter"
            f" {unknown[0]!r}; its parameters: {', '.join(sorted(defaults))}"
        )
    rounded = integer_names(cls, defaults)
    for t in truths:
        for n in ns:
            _own_check(cls, spec, values_at(params, rounded, int(n), t.p, t.alpha), t, n)


def _own_check(cls, spec: str, values: dict, truth, n) -> None:
    """The class's own check of its parameters' values at one cell, where it declares one
    (scikit-learn >= 1.2: ``_validate_params`` on the unfitted estimator, no data, for a
    class with ``_parameter_constraints``; a ``BaseEstimator`` subclass without them is made
    with the values only); ValueError (one line) naming the cell where it refuses them."""
    try:
        est = cls(**values)
        check = getattr(est, "_validate_params", None)
        if callable(check) and isinstance(getattr(cls, "_parameter_constraints", None), dict):
            check()
    except Exception as exc:  # the class's own words, whatever its exception
        given = ", ".join(f"{k}={v!r}" for k, v in values.items())
        raise ValueError(
            f"{FLAG}: {regressor_name(spec)}({given}) at {truth.key}, n = {n}:"
            f" {type(exc).__name__}: {first_line(exc)}"
        ) from None


def first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0]
