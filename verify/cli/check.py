"""The main job from Python, for notebooks: ``verify.check_rate(estimator, truths=...,
ns=..., replicates=..., protocol=...)``.

It is ``python -m verify.rates --estimator MODULE:CLASS`` (or a tier's own estimator) by
another door, not a second harness: the arguments become the run's spec
(``verify.cli.runspec.RunSpec``, built directly: no command line, nothing redirected), checked
by the same code as the command's (``verify.cli.rates_args.command_of``,
``verify.rates.checked_plan``: the same refusals, one line each, raised as
``ValueError``), trained by the same sweeps
into the same records file (``results/records-TIER-CLASS.jsonl`` unless ``out``: a second
call with the same arguments resumes it, a call with other settings is refused as the
command refuses it), and decided by the same analysis.  What comes back is a
:class:`RateCheck`: the typed results the command prints (``results``, each a
``verify.results.MetricResult``), its exit status, a readable ``repr``, a one-screen
:meth:`RateCheck.summary`, the command's tables (:meth:`RateCheck.tables`), its figures
(:meth:`RateCheck.plot`: the rate against the band and the reference, per truth) and
its JSON (:meth:`RateCheck.to_json`).

A run with a named estimator is exploratory, as the command's is (a confirmatory protocol
refuses it); nothing of the truth reaches the estimator (it is fitted on the cell's
``(X, y)`` alone, ``simulate.sweep.train.foreign``).
"""

from __future__ import annotations

import importlib
import numbers
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from simulate.sweep.cli import parse_truths
from simulate.sweep.setup.truth_spec import TruthSpec
from verify.cli.rates_args import command_of
from verify.cli.runspec import RunSpec, param_text
from verify.protocol import CONFIRM_TIERS
from verify.rates import EXIT_WORDS, capped_notes, checked_plan, execute
from verify.reading.analysis import analyse
from verify.report.findings import equivalence_words
from verify.report.render import format_results, plot_results
from verify.report.status import exit_status
from verify.report.tidy import COLUMNS, tidy_rows
from verify.results import results_document

__all__ = ["RateCheck", "RunOptions", "check_rate", "estimator_spec", "run_spec"]


@dataclass(frozen=True)
class RateCheck:
    """What :func:`check_rate` found: the results (``verify.results.MetricResult``, one per
    truth, estimator and metric, as ``verify.rates --json`` writes them), the exit status
    the command would return (0 every d^2 test PASSES, 1 some FAILS family-wise, 3 some is
    INCONCLUSIVE or UNDECIDABLE), the protocol's tag, the records file and the run's
    spec (``verify.cli.runspec.RunSpec``)."""

    results: tuple
    status: int
    protocol: str
    records: str
    spec: RunSpec
    rows: tuple = ()  # the tidy table's rows (verify.report.tidy): one per cell and estimator

    def __repr__(self) -> str:
        ests = sorted({r.estimator for r in self.results})
        truths = list(dict.fromkeys(r.truth for r in self.results))
        return (
            f"RateCheck({', '.join(ests)} on {len(truths)} truth(s) {truths}; protocol"
            f" {self.protocol}; status {self.status}: {_words(self.status)}; records"
            f" {self.records})"
        )

    def summary(self) -> str:
        """One screen: per truth and estimator the d^2 slope with its interval against the
        predicted exponent and the reference's, each test's verdict (and a control's known
        answer), then the exit status in words."""
        lines = [f"verify.check_rate: protocol {self.protocol}; records {self.records}"]
        for r in self.results:
            if r.metric != "d2" or not r.primary:
                continue
            t = r.theorem
            line = (
                f"  {r.truth} {r.estimator}: slope {t.slope:+.3f} [{t.ci_low:+.3f},"
                f" {t.ci_high:+.3f}] against {t.predicted:+.3f}"
                f" (band log^{t.band_log_power:.2f} n): theorem {t.verdict}"
            )
            if t.equivalence is not None:
                line += f"; {equivalence_words(t.equivalence)}"
            if r.attainment is not None:
                a = r.attainment
                line += f"; reference {a.reference.slope:+.3f}, attainment {a.verdict}"
            if r.decision.expected_attainment is not None:
                line += f" (known: {r.decision.expected_attainment})"
            if r.class_theorem is not None:
                line += f"; class band {r.class_theorem.verdict}"
                if r.decision.expected_theorem is not None:
                    line += f" (known: {r.decision.expected_theorem})"
            lines.append(line)
        lines.append(f"status {self.status}: {_words(self.status)}")
        return "\n".join(lines)

    def to_rows(self) -> list[dict]:
        """The tidy table (``verify.report.tidy``): one dict per cell and estimator, every
        metric, the selected width, seeds, timings and the protocols."""
        return [dict(r) for r in self.rows]

    def to_frame(self):
        """:meth:`to_rows` as a pandas DataFrame, its columns in ``verify.report.tidy.COLUMNS``'
        order (pandas: ``pip install 'asvi-rates[frame]'``)."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError(
                "RateCheck.to_frame needs pandas: pip install 'asvi-rates[frame]' (or use"
                " to_rows(), a list of dicts)"
            ) from None
        return pd.DataFrame(self.to_rows(), columns=list(COLUMNS))

    def tables(self, explain: bool = True) -> str:
        """The command's tables, per truth and estimator
        (``verify.report.render.format_results``), with the key to their columns unless
        ``explain`` is False."""
        return format_results(list(self.results), explain=explain)

    def plot(self, folder: str | None = None) -> list[str]:
        """The command's figure per truth (the rate against the band and the reference, one
        panel per metric), written under ``folder`` (default: beside the records,
        ``RECORDS-figures``); returns the files' paths."""
        folder = folder or f"{os.path.splitext(self.records)[0]}-figures"
        return plot_results(list(self.results), folder)

    def to_json(self) -> dict:
        """What ``verify.rates --json`` writes for these results."""
        return results_document(list(self.results))


def _words(status: int) -> str:
    return EXIT_WORDS.get(status, "no verdict")


def estimator_spec(estimator) -> tuple[str, dict[str, str]]:
    """``(MODULE:CLASS, {NAME: VALUE})`` of what :func:`check_rate` is given: a
    ``"MODULE:CLASS"`` string (no parameters), a class (``MODULE:QUALNAME``, by the
    shortest module path that exports it; a class defined in a script or a notebook is
    ``__main__:CLASS``), or an instance (its class, and every parameter its
    ``get_params()`` sets away from the class's default: the Python literal the records
    carry, or an object -- a kernel -- as ``verify.cli.runspec.param_text`` holds it)."""
    if isinstance(estimator, str):
        if estimator.count(":") != 1:
            raise ValueError(f"estimator {estimator!r}: give MODULE:CLASS, a class or an instance")
        return estimator, {}
    cls = estimator if isinstance(estimator, type) else type(estimator)
    if "<locals>" in cls.__qualname__:
        raise ValueError(
            f"estimator {cls.__qualname__}: a class defined inside a function cannot be named"
            " by its records; define it at the top level of a module, script or notebook"
        )
    spec = _public_spec(cls)
    if estimator is cls:
        return spec, {}
    given, defaults = estimator.get_params(deep=False), cls().get_params(deep=False)
    params = {}
    for name, value in given.items():
        if defaults.get(name) is value or _equal(defaults.get(name), value):
            continue
        params[name] = param_text(name, value)
    return spec, params


def _equal(a, b) -> bool:
    """``a == b`` as one bool (False where the comparison fails or is not one: arrays)."""
    try:
        return bool(a == b)
    except Exception:
        return False


def _public_spec(cls) -> str:
    """``MODULE:CLASS`` of a class by the shortest module path that exports it
    (``sklearn.neighbors``, not its private ``sklearn.neighbors._regression``)."""
    parts = cls.__module__.split(".")
    for i in range(1, len(parts) + 1):
        name = ".".join(parts[:i])
        try:
            if getattr(importlib.import_module(name), cls.__qualname__, None) is cls:
                return f"{name}:{cls.__qualname__}"
        except ImportError:  # pragma: no cover - a parent that does not import alone
            continue
    return f"{cls.__module__}:{cls.__qualname__}"


def _truths(truths: Sequence[TruthSpec | str]) -> tuple[TruthSpec, ...]:
    """``truths`` as TruthSpecs: each given, or a kind's name with ``--truth``'s defaults
    (``simulate.sweep.cli.parse_truths``)."""
    if isinstance(truths, (str, bytes)) or not isinstance(truths, Sequence):
        raise ValueError(f"truths must be a list of TruthSpecs or kinds' names, got {truths!r}")
    out = []
    for t in truths:
        if isinstance(t, str):
            if not t.isidentifier():
                raise ValueError(f"truths: {t!r} is not a truth's kind (e.g. 'holder')")
            out += parse_truths(["--truth", t])[0]
            continue
        if not isinstance(t, TruthSpec):
            raise TypeError(f"a truth is a TruthSpec or a kind's name, got {t!r}")
        out.append(t)
    return tuple(out)


@dataclass(frozen=True)
class RunOptions:
    """How :func:`check_rate` runs, beside the estimator and what is given of the design:
    the ``tier`` whose design and settings supply the rest (the command's ``--tier``,
    default quick), the records file (``out``, default the command's), the local workers
    (default the tier's; 0: in this process), ``quiet`` (the command's printed lines --
    power check, timings -- withheld; the progress bar, on stderr, stays) and a named
    regressor's own ``pilot``, whose spread its power is computed from
    (``verify.reading.pilot``): an integer K (K replicates trained first on data seeds of
    their own, ``--pilot-replicates``) or a records file's path (``--pilot``); None: its power
    is unknown."""

    tier: str = "quick"
    out: str | None = None
    workers: int | None = None
    quiet: bool = False
    pilot: int | str | os.PathLike | None = None


def run_spec(estimator, design: Mapping, run: RunOptions = RunOptions()) -> RunSpec:
    """The :class:`~verify.cli.runspec.RunSpec` :func:`check_rate` runs (module docstring):
    ``design`` holds its keyword arguments (``truths``, ``ns``, ``replicates``,
    ``protocol``, ``params``, ``rate``, ``pilot``; None: the tier's or the command's default); each
    value checked for its type here, the rest as the command checks it
    (``verify.cli.rates_args.command_of``)."""
    fields: dict = {"tier": run.tier, "out": run.out, "workers": run.workers}
    params = design.get("params")
    if estimator is not None:
        spec, own = estimator_spec(estimator)
        if params is not None and not isinstance(params, Mapping):
            raise ValueError(f"params must map names to values, got {params!r}"[:200])
        given = {**own, **{k: param_text(k, v) for k, v in (params or {}).items()}}
        fields.update(estimator=spec, estimator_params=given or None)
    elif params:
        raise ValueError("params are the named estimator's: give the estimator")
    if design.get("truths"):
        fields["truths"] = _truths(design["truths"])
    if design.get("ns") is not None:
        fields["n"] = tuple(_integers("ns", design["ns"]))
    for name, value in (("replicates", design.get("replicates")), ("workers", run.workers)):
        if value is not None:
            _integers(name, [value])
    fields["replicates"] = design.get("replicates")
    for name in ("protocol", "rate"):
        value = design.get(name)
        if value is not None and not isinstance(value, str):
            raise ValueError(f"{name} must be a string, got {value!r}"[:200])
        fields[name] = value
    pilot = design.get("pilot")
    if isinstance(pilot, numbers.Integral) and not isinstance(pilot, bool):
        fields["pilot_replicates"] = int(pilot)
    elif isinstance(pilot, (str, os.PathLike)):
        fields["pilot"] = os.fspath(pilot)
    elif pilot is not None:
        raise ValueError(f"pilot must be a replicate count or a records file, got {pilot!r}"[:200])
    if run.out is not None and not isinstance(run.out, (str, os.PathLike)):
        raise ValueError(f"out must be a path, got {run.out!r}"[:200])
    fields["out"] = None if run.out is None else os.fspath(run.out)
    return RunSpec(**fields)


def _integers(name: str, values) -> list[int]:
    """``values`` as ints where each is an integer (not a bool, a string or a float);
    ValueError naming the first that is not (``ns=[250, "--json=/x"]`` would otherwise be
    read by the command line as an option)."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise ValueError(f"{name} must be a list of integers, got {values!r}"[:200])
    for v in values:
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise ValueError(f"{name}: {v!r} is not an integer"[:200])
    return [int(v) for v in values]


def check_rate(estimator=None, *, truths=None, ns=None, replicates=None, protocol=None,
               params: Mapping | None = None, rate: str | None = None,
               run: RunOptions = RunOptions()) -> RateCheck:  # fmt: skip
    """Train ``estimator`` on every cell of a tier's design (``run.tier``: its truths, n
    and replicates unless given) and decide its rate as ``python -m verify.rates`` does (module
    docstring).  ``estimator``: ``"MODULE:CLASS"``, a class or an instance of a
    scikit-learn-style regressor (:func:`estimator_spec`; any class with ``fit``,
    ``predict`` and ``get_params``, one defined in the calling script or notebook
    included), or None for the tier's own estimator; ``params``: its parameters, ``NAME ->
    value`` (a number, a string, an object such as a kernel) or ``NAME -> "EXPR"`` in n, p
    and alpha (``--estimator-param``); ``truths``: ``TruthSpec`` s; ``protocol``: a
    protocol's name (default the toolkit's); ``rate``: a stated rate (``--rate``, a sympy
    expression in n, p and alpha); ``run``: :class:`RunOptions` (its ``pilot``: the named
    regressor's own pilot).
    Raises ``ValueError`` (one line) where the command refuses."""
    design = dict(truths=truths, ns=ns, replicates=replicates, protocol=protocol,
                  params=params, rate=rate, pilot=run.pilot)  # fmt: skip
    spec = run_spec(estimator, design, run)
    cmd = command_of(spec)
    plan = checked_plan(cmd)
    say = (lambda line: None) if run.quiet else print
    for note in plan.notes:
        say(note)
    records, controls, pilots, power = execute(spec, plan, cmd.proto, cmd.workers, [],
                                               plan.source, say)  # fmt: skip
    notes = capped_notes(records, controls, bool(controls), cmd.spec.tier in CONFIRM_TIERS)
    for text in [*power, *notes]:  # the power check in full and the step cap's notes, at the end
        say(text)
    results = analyse(records, cmd.truths or None, controls, cmd.proto, pilots)
    rows = tuple(tidy_rows(records, controls, cmd.proto.tag))
    return RateCheck(tuple(results), exit_status(results), cmd.proto.tag, plan.source, spec, rows)
