"""Settings said once: each field of a sweep's configuration (``simulate.sweep.setup.config``)
is declared with :func:`setting` -- its default, its bounds, its help text, its command-line
flag and how records and fingerprints treat it -- and everything that used to repeat a
setting reads that one declaration:

* the checks (:func:`constraints_of`: the bounds, checked as the configuration is made);
* the fingerprint (``simulate.sweep.store.fingerprint``: a setting declared ``fingerprint="later"``
  is left out at its default, one rule for all of them, so records written before it
  existed keep their fingerprints; ``silences``: the settings it leaves unused at its
  default, left out with it; ``fingerprint="bookkeeping"``: which cells, never what they
  hold);
* the records (``record``: "always" or "unless-default": written into each cell's
  ``config`` as given; None: the cell writes its own derived value, or none);
* the command lines (:func:`add_flags`, :func:`overrides_from_args`: the flag, its type and
  its help generated from the declaration; both sweep command lines, ``python -m
  simulate.sweep`` and ``python -m verify.rates``, take theirs from here);
* the recipes (``recipe=True``: a setting a training recipe may change,
  ``simulate.sweep.setup.recipes``).

A setting is added, renamed or documented by editing its declaration; the tests hold that
every declared flag is one a command line parses, that every bound is checked, and that the
shipped records' fingerprints are recomputed from their own fields.
"""

from __future__ import annotations

import argparse
from dataclasses import MISSING, dataclass, field, fields

__all__ = [
    "Flag",
    "Setting",
    "add_flags",
    "constraints_of",
    "declared",
    "defaults_of",
    "flag_fields",
    "overrides_from_args",
    "part_of",
    "setting",
]

FINGERPRINT = ("always", "later", "bookkeeping")
RECORD = (None, "always", "unless-default")


@dataclass(frozen=True)
class Flag:
    """A setting's command-line flag: ``--NAME`` (the field's name with dashes unless
    ``name`` is given), parsed by ``type`` (``nargs`` values, one of ``choices``), or, with
    ``boolean``, a ``--NAME`` / ``--no-NAME`` pair; unset, it sets nothing."""

    type: type | None = None
    nargs: str | None = None
    choices: tuple | None = None
    boolean: bool = False
    name: str | None = None
    metavar: str | None = None

    def option(self, field_name: str) -> str:
        return self.name or "--" + field_name.replace("_", "-")

    def dest(self, field_name: str) -> str:
        return self.option(field_name).lstrip("-").replace("-", "_")


@dataclass(frozen=True)
class Setting:
    """One field's declaration (module docstring): what it is (``help``), what it may be
    (``bounds``: ``simulate.core.constraints``; empty: checked where it is used, by the
    class it is handed to), its flag, and how fingerprints, records and recipes treat it."""

    help: str
    bounds: tuple = ()
    flag: Flag | None = None
    fingerprint: str = "always"
    silences: tuple = ()
    record: str | None = None
    recipe: bool = False

    def __post_init__(self):
        if self.fingerprint not in FINGERPRINT:
            raise ValueError(f"fingerprint must be one of {FINGERPRINT}, got {self.fingerprint!r}")
        if self.record not in RECORD:
            raise ValueError(f"record must be one of {RECORD}, got {self.record!r}")
        if self.silences and self.fingerprint != "later":
            raise ValueError("only a setting left out at its default silences others")
        if not self.help:
            raise ValueError("a setting says what it is: give its help")


def setting(default=MISSING, *bounds, help: str, flag: Flag | None = None,
            fingerprint: str = "always", silences: tuple = (), record: str | None = None,
            recipe: bool = False):  # fmt: skip
    """A dataclass field declared once (module docstring): ``default`` (none: the field
    must be given), ``bounds`` (constraints any one of which accepts a value), and the
    rest as :class:`Setting`'s."""
    meta = Setting(help, tuple(bounds), flag, fingerprint, tuple(silences), record, recipe)
    return field(default=default, metadata={"setting": meta})


def declared(cls) -> dict[str, tuple[object, Setting]]:
    """``{name: (default, Setting)}`` of every declared field of ``cls`` (or an instance),
    in the class's order; a field without a default has ``dataclasses.MISSING``."""
    return {
        f.name: (f.default, f.metadata["setting"]) for f in fields(cls) if "setting" in f.metadata
    }


def defaults_of(cls) -> dict:
    """``{name: default}`` of every declared field of ``cls`` that has one."""
    return {k: d for k, (d, _) in declared(cls).items() if d is not MISSING}


def constraints_of(cls) -> dict[str, list]:
    """The bounds table of ``cls``'s declared fields (``simulate.core.constraints``'s
    ``validate_params`` shape), the fields with bounds only."""
    return {k: list(s.bounds) for k, (_, s) in declared(cls).items() if s.bounds}


def flag_fields(cls) -> dict[str, str]:
    """``{argparse destination: field}`` of every declared flag of ``cls``."""
    return {s.flag.dest(k): k for k, (_, s) in declared(cls).items() if s.flag is not None}


def add_flags(group, cls, names, notes: dict | None = None) -> None:
    """Add the flags of ``cls``'s settings ``names`` to ``group`` (an argparse parser or
    argument group), each with its declared type and help (``notes``: per setting, text a
    command line adds, e.g. what its default is there); unset, a flag is None."""
    table = declared(cls)
    notes = notes or {}
    for name in names:
        if name not in table or table[name][1].flag is None:
            raise ValueError(f"{cls.__name__}.{name} declares no flag")
        default, s = table[name]
        flag = s.flag
        text = s.help + (f"; {notes[name]}" if name in notes else "")
        kw = {"help": text, "dest": flag.dest(name)}
        if flag.boolean:
            kw.update(action=argparse.BooleanOptionalAction, default=None)
        else:
            kw.update(type=flag.type, default=None)
            for k in ("nargs", "choices", "metavar"):
                if getattr(flag, k) is not None:
                    kw[k] = getattr(flag, k)
        group.add_argument(flag.option(name), **kw)


def overrides_from_args(args, cls) -> dict:
    """The ``cls`` fields the parsed flags ``args`` set (:func:`flag_fields`; a flag left
    unset, or one the parser does not define, sets nothing)."""
    return {
        name: getattr(args, dest)
        for dest, name in flag_fields(cls).items()
        if getattr(args, dest, None) is not None
    }


def part_of(obj, part):
    """The ``part`` (a dataclass whose fields ``obj`` has, such as one of a sweep's parts)
    of ``obj``, as a value of its own."""
    return part(**{f.name: getattr(obj, f.name) for f in fields(part)})
