"""The command-line flags of a sweep's settings, generated from their declarations
(``simulate.sweep.setup.parts``; ``simulate.sweep.setup.settings``): both sweep command lines
(``python -m simulate.sweep``, ``python -m verify.rates``) add theirs with
:func:`add_sweep_flags` and read them back with :func:`overrides_from_args`, so a flag
means one field, with one type and one help text, everywhere."""

from __future__ import annotations

from simulate.sweep.setup import settings
from simulate.sweep.setup.config import SweepConfig

__all__ = ["FLAG_FIELDS", "add_sweep_flags", "overrides_from_args"]

# argparse destination -> SweepConfig field, for every declared flag
FLAG_FIELDS = settings.flag_fields(SweepConfig)


def add_sweep_flags(group, names, notes: dict | None = None) -> None:
    """Add the flags of the SweepConfig settings ``names`` to ``group``, each with its
    declared type and help (``notes``: text this command line adds to a setting's help)."""
    settings.add_flags(group, SweepConfig, names, notes)


def overrides_from_args(args) -> dict:
    """The SweepConfig fields the parsed flags ``args`` set (:data:`FLAG_FIELDS`; a flag
    left unset, or one the parser does not define, sets nothing)."""
    return settings.overrides_from_args(args, SweepConfig)
