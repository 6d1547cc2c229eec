"""One run of the main job as a value (:class:`RunSpec`): what every entry point of
``verify.rates`` builds -- the command line by parsing its flags into one
(:meth:`RunSpec.from_namespace`), ``verify.check_rate`` directly from its arguments, no
command line in between -- and what the checks, the plan and the run read
(``verify.cli.rates_args.command_of``, ``verify.cli.plan.planned_sweep``, ``verify.rates.execute``).

Its fields are the command's options, under the names ``python -m verify.rates --help``
gives them (``--control-every-n`` is ``control_every_n``; ``--n`` is ``n``), each with the
command's default, so a rule written once about an option (``verify.cli.flag_rules``: "an
option the run would not use is refused") reads a spec whichever door it came through;
``tests/verify/test_runspec.py`` holds the two lists and the two sets of defaults equal.
Two are typed beyond the command line: ``truths`` (``TruthSpec`` s; the command's
``--truth`` groups) and ``estimator_params`` (``NAME -> VALUE``: the text
``--estimator-param NAME=VALUE`` gives -- a literal, a bare word, an expression in n, p
and alpha -- or, from Python, an object, ``simulate.sweep.setup.param_values.ObjectParam``).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Mapping

from simulate.sweep.setup.param_values import ObjectParam
from simulate.sweep.setup.truth_spec import TruthSpec

__all__ = ["RunSpec", "param_text", "spec_defaults"]


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """A run of the main job (module docstring); frozen, checked by
    ``verify.cli.rates_args.command_of`` before anything is read or trained."""

    # what to run
    tier: str = "quick"
    truths: tuple[TruthSpec, ...] = ()
    protocol: str | None = None
    dry_run: bool = False
    records: str | None = None
    fingerprint: str | None = None
    partial: bool = False
    # the estimator trained in ASVI's place (exploratory): MODULE:CLASS and its parameters
    estimator: str | None = None
    estimator_params: Mapping[str, str] | None = None
    # its own pilot, whose spread its power is computed from (verify.reading.pilot): a block of
    # replicates trained first, or a records file given
    pilot_replicates: int | None = None
    pilot: str | None = None
    # the records files and the budget-doubling control
    out: str | None = None
    control_records: str | None = None
    no_control: bool = False
    control_every_n: bool = False
    control_from_start: bool = False
    new_file: bool = False
    accept_code_change: bool = False
    # the tier's settings overridden (None: the tier's)
    recipe: str | None = None
    n: tuple[int, ...] | None = None
    replicates: int | None = None
    depth: int | None = None
    l3: float | None = None
    start: str | None = None
    lambda_s_a: float | None = None
    lam: float | None = None
    # how the step runs (float rounding only)
    compile: bool | None = None
    mlp: str | None = None
    # the verdicts' numbers overridden (exploratory)
    delta: float | None = None
    log_power: float | None = None
    rate: str | None = None
    equivalence_margin: float | None = None
    # the outputs
    json: str | None = None
    markdown: str | None = None
    csv: str | None = None
    figures: str | None = None
    quiet: bool = False
    explain: bool = False
    # where the sweeps run
    scheduler: str | None = None
    scheduler_timeout: float | None = None
    worker_timeout: float | None = None
    workers: int | None = None

    @classmethod
    def from_namespace(cls, ns: argparse.Namespace, truths=()) -> RunSpec:
        """The spec of a parsed ``verify.rates`` command line (its ``--truth`` groups
        ``truths``): each option under its own name; ``--estimator-param NAME=VALUE``
        (repeatable) as ``estimator_params``; ValueError (one line) for a ``NAME=VALUE``
        without its ``=`` or a name given twice."""
        given = {k: v for k, v in vars(ns).items() if k != "estimator_param"}
        given["n"] = None if ns.n is None else tuple(ns.n)
        return cls(truths=tuple(truths), estimator_params=_param_items(ns.estimator_param),
                   **given)  # fmt: skip


def _param_items(items) -> dict[str, str] | None:
    """``--estimator-param``'s ``NAME=VALUE`` items as ``{NAME: VALUE}`` (None: none)."""
    if not items:
        return None
    out: dict[str, str] = {}
    for item in items:
        name, eq, text = item.partition("=")
        name = name.strip()
        if not eq or not name.isidentifier():
            raise ValueError(f"--estimator-param {item!r}: give NAME=VALUE")
        if name in out:
            raise ValueError(f"--estimator-param {name} is given twice")
        out[name] = text.strip()
    return out


def param_text(name, value) -> str:
    """A parameter's value as a spec holds it: text as given (a literal, a bare word, an
    expression in n, p and alpha), a number, bool, None or tuple of them as its literal,
    anything else (a kernel object, a user's class's instance) as an
    :class:`~simulate.sweep.setup.param_values.ObjectParam`; ValueError for a name that is not
    an identifier."""
    if not (isinstance(name, str) and name.isidentifier()):
        raise ValueError(f"params: {name!r} is not a parameter's name")
    if isinstance(value, str):
        return value
    if _is_literal(value):
        return repr(value)
    return ObjectParam(value)


def _is_literal(value) -> bool:
    """A value whose ``repr`` is a Python literal that reads back equal (numbers, bools,
    None, and tuples/lists of them)."""
    if value is None or isinstance(value, (bool, int)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)  # repr(inf) is not a literal: an object
    if isinstance(value, (tuple, list)):
        return all(_is_literal(v) for v in value)
    return False


def spec_defaults() -> dict:
    """``{field: default}`` of :class:`RunSpec` (an option whose value differs was given:
    ``verify.cli.flag_rules.refuse_ignored``)."""
    return {f.name: f.default for f in dataclasses.fields(RunSpec)}
