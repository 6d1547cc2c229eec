"""Frozen records as JSON and back, and their JSON Schema, all driven by the records'
types: :func:`to_json` (a record and everything in it as JSON-ready values),
:func:`from_json` (parsed JSON as a value of an annotated type, ``ValueError`` naming the
path where it is not) and :func:`_schema_of` (an annotation's JSON Schema, each record type
once in ``$defs``).  ``verify.results`` writes and reads its documents through them.

Types: frozen dataclasses (every field present, none other), ``X | None``, ``tuple[X,
...]`` and fixed tuples, mappings of strings, ``verify.stats.verdict.Verdict`` (as its string),
float (a non-finite number as null), int, bool and str.
"""

from __future__ import annotations

import collections.abc
import math
import types
import typing
from dataclasses import fields, is_dataclass

import numpy as np

from verify.stats.verdict import Verdict

__all__ = ["from_json", "to_json"]


# ------------------------------------------------------------------ JSON form
def to_json(x):
    """A record, and everything in it, as JSON-ready values: records as objects of their
    fields, verdicts as their strings, numpy scalars and arrays as numbers and lists,
    non-finite numbers as None (JSON has no NaN)."""
    if is_dataclass(x) and not isinstance(x, type):
        return {f.name: to_json(getattr(x, f.name)) for f in fields(x)}
    if isinstance(x, Verdict):
        return str(x)
    if isinstance(x, collections.abc.Mapping):
        return {str(k): to_json(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, np.ndarray)):
        return [to_json(v) for v in x]
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return float(x) if math.isfinite(x) else None
    return x


def _members(t) -> tuple:
    """The types an annotation allows (``X | None`` -> ``(X, NoneType)``)."""
    if isinstance(t, types.UnionType) or typing.get_origin(t) is typing.Union:
        return typing.get_args(t)
    return (t,)


def _hints(cls) -> dict:
    return typing.get_type_hints(cls)


def _is_mapping(t) -> bool:
    return typing.get_origin(t) in (dict, collections.abc.Mapping)


def from_json(t, v, path: str = "$"):
    """``v`` (parsed JSON) as a value of type ``t`` (``ValueError`` naming the path where
    it is not)."""
    allowed = _members(t)
    if len(allowed) > 1:
        if v is None and type(None) in allowed:
            return None
        rest = [m for m in allowed if m is not type(None)]
        if len(rest) != 1:
            raise TypeError(f"{path}: unsupported annotation {t}")
        return from_json(rest[0], v, path)
    if t is type(None):
        if v is not None:
            raise ValueError(f"{path}: {v!r} is not null")
        return None
    if is_dataclass(t):
        if not isinstance(v, dict):
            raise ValueError(f"{path}: expected an object ({t.__name__}), got {type(v).__name__}")
        names = [f.name for f in fields(t)]
        if set(v) != set(names):
            diff = sorted(set(v) ^ set(names))
            raise ValueError(f"{path}: keys differ from {t.__name__}'s fields: {diff}")
        hints = _hints(t)
        return t(**{k: from_json(hints[k], v[k], f"{path}.{k}") for k in names})
    origin, args = typing.get_origin(t), typing.get_args(t)
    if origin is tuple:
        if not isinstance(v, list):
            raise ValueError(f"{path}: expected an array, got {type(v).__name__}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(from_json(args[0], x, f"{path}[{i}]") for i, x in enumerate(v))
        if len(v) != len(args):
            raise ValueError(f"{path}: expected {len(args)} items, got {len(v)}")
        pairs = enumerate(zip(args, v, strict=True))
        return tuple(from_json(a, x, f"{path}[{i}]") for i, (a, x) in pairs)
    if _is_mapping(t):
        if not isinstance(v, dict):
            raise ValueError(f"{path}: expected an object, got {type(v).__name__}")
        # read-only, as the record that wrote it (a frozen record holds no mutable mapping)
        return types.MappingProxyType(
            {k: from_json(args[1], x, f"{path}.{k}") for k, x in v.items()}
        )
    if t is Verdict:
        if v not in {str(m) for m in Verdict}:
            raise ValueError(f"{path}: {v!r} is not a verdict ({', '.join(Verdict)})")
        return Verdict(v)
    if t is float:
        if v is None:
            return math.nan  # a non-finite number
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError(f"{path}: {v!r} is not a number")
        return float(v)
    if t in (int, bool, str):
        if not isinstance(v, t) or (t is int and isinstance(v, bool)):
            raise ValueError(f"{path}: {v!r} is not {t.__name__}")
        return v
    raise TypeError(f"{path}: unsupported annotation {t}")


# ------------------------------------------------------------------ JSON Schema
def _schema_of(t, defs: dict) -> dict:
    allowed = _members(t)
    if len(allowed) > 1:
        rest = [m for m in allowed if m is not type(None)]
        inner = _schema_of(rest[0], defs)
        if "type" in inner and "$ref" not in inner and "enum" not in inner:
            kinds = inner["type"] if isinstance(inner["type"], list) else [inner["type"]]
            return {**inner, "type": kinds + ([] if "null" in kinds else ["null"])}
        if "enum" in inner:
            return {**inner, "enum": [*inner["enum"], None]}
        return {"anyOf": [inner, {"type": "null"}]}
    if is_dataclass(t):
        name = t.__name__
        if name not in defs:
            defs[name] = None  # being built (no record holds itself)
            hints = _hints(t)
            props = {f.name: _schema_of(hints[f.name], defs) for f in fields(t)}
            doc = " ".join((t.__doc__ or name).split())
            defs[name] = {"type": "object", "description": doc, "properties": props,
                          "required": list(props), "additionalProperties": False}  # fmt: skip
        return {"$ref": f"#/$defs/{name}"}
    origin, args = typing.get_origin(t), typing.get_args(t)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": _schema_of(args[0], defs)}
        return {"type": "array", "prefixItems": [_schema_of(a, defs) for a in args],
                "minItems": len(args), "maxItems": len(args)}  # fmt: skip
    if _is_mapping(t):
        return {"type": "object", "additionalProperties": _schema_of(args[1], defs)}
    if t is Verdict:
        return {"enum": [str(v) for v in Verdict]}
    if t is float:
        return {"type": ["number", "null"]}  # null: a non-finite number
    simple = {int: "integer", bool: "boolean", str: "string", type(None): "null"}
    if t in simple:
        return {"type": simple[t]}
    raise TypeError(f"unsupported annotation {t}")
