"""The typed result of one (estimator, truth, metric): :class:`MetricResult`, composed of
frozen records each built by the function that computes it, and its JSON form and JSON
Schema (``python -m verify.results`` prints the schema).

**The records** (each a frozen dataclass; a group that does not apply to an entry is
None):

* the entry's identity (estimator, truth, kind, alpha, p, metric; ``primary``: the metric
  that decides the exit status, d^2; ``arm``/``role``: for the constructive-start arms,
  the arm's letter and whether it decides) -- plain fields of :class:`MetricResult`;
* ``theorem`` (:class:`TheoremTest`, ``verify.reading.entry_records.theorem_result``): the slope,
  its
  interval, the band, the one-sided theorem test and its prospective power;
* ``curve`` (:class:`Curve`): per n the mean, SE and local slopes, the top half's slope
  and the bend;
* ``replicates`` (``verify.reading.records.Replicates``): the replicates used, dropped and
  excluded (a failed cell);
* ``asvi`` (:class:`AsviSummary`; None for other estimators): oracle-width and
  fixed-width curves, selections, steps, lambda_s, convergence;
* ``attainment`` (:class:`Attainment`; None without a reference): the attainment test
  against the class-matched reference with its negative control and power;
* ``control`` (``verify.reading.controls.BudgetShift``; None where no control ran): the budget
  control per n and the slope shift's equivalence test;
* ``decision`` (:class:`Decision`): the protocols, a partial read, the refusals, a
  control's known answer, the Holm-adjusted FAIL p-values and the family-wise outcome;
* ``starts`` (``verify.starts.Starts``; on the random start's entry only): the
  constructive-start comparison;
* ``input_dimension`` (:class:`InputDimension` rows) and ``finding`` (the report's
  sentence).

Nothing is edited after it is built: the family-wise adjustment and the other late
fields make new results with ``dataclasses.replace``.

**The JSON form** (``verify.rates --json``; schema ``SCHEMA_ID``) mirrors the records: an
object ``{"schema": SCHEMA_ID, "results": [...]}``, each result an object of its fields,
each record a nested object of its own (``result["theorem"]["verdict"]``,
``result["attainment"]["diff"]["ci_low"]``); verdicts as their strings; a non-finite
number as null (JSON has no NaN; read back as NaN where the field is a number, as None
where the field may be None).  Properties derived from fields (``BudgetShift.
optimisation_limited``) are not written.  :func:`read_results` reads a file back into
:class:`MetricResult` objects and refuses one of another schema (version 3 and earlier
were a bare array of flat objects) with one line naming both versions.  The schema is
generated from the types (:func:`json_schema`), so it cannot drift from them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from theory.plumbing.cli import Parser, run_main
from verify.reading.controls import BudgetShift
from verify.reading.records import Replicates
from verify.report.typedjson import _schema_of, from_json, to_json
from verify.starts import Starts
from verify.stats.attainment import AttainmentPower, Flip, LogPower
from verify.stats.equivalence import Equivalence
from verify.stats.logfactor import LogOrPower
from verify.stats.power import Power
from verify.stats.readings import Readings
from verify.stats.replication import Replication
from verify.stats.slopes import SlopeDiff
from verify.stats.verdict import Verdict

__all__ = [
    "SCHEMA_ID",
    "AsviSummary",
    "Attainment",
    "AttainmentControl",
    "Curve",
    "Decision",
    "InputDimension",
    "MetricResult",
    "ReferenceCurve",
    "TestPValues",
    "TheoremTest",
    "TopHalfDiff",
    "json_schema",
    "load_results",
    "read_results",
    "results_document",
]

# 4: nested records, the document names its schema; 5: the confirming theorem rule, each
# verdict's replication, a known-answer control's test against the class band; 6: the
# theorem test's readings (verify.stats.readings) and the log-factor-or-power test
# (verify.stats.logfactor); 7: the theorem test's equivalence reading (verify.stats.equivalence)
# and the curve's per-replicate values
SCHEMA_ID = "asvi-rates/metric-result/7"


@dataclass(frozen=True)
class TheoremTest:
    """The slope of log metric against log n (replicate bootstrap; ``level`` its
    confidence) with its interval, the predicted slope, the slope corrected for the
    band's log factor, the band ``[e, e + c ell]`` (``band_log_power``: the log power c of
    the result that covers the truth), the one-sided theorem test's ``verdict`` and
    ``direction``, the too-slow control (``control_exponents``: e/2; rejected or not), the
    one-sided FAIL p-value, ``c_flip`` (the band log power below which the verdict is a
    FAIL) and the prospective power check (``power``)."""

    predicted: float
    slope: float
    ci_low: float
    ci_high: float
    corrected_slope: float
    level: float
    band_log_power: float
    band: tuple[float, float]
    verdict: Verdict
    direction: str | None
    control_slow_rejected: bool
    control_exponents: tuple[float, ...]
    c_flip: float
    fail_p: float
    power: Power
    # the rule it was decided under (verify.stats.theorem.THEOREM_RULES), the band log power
    # from which the confirming rule PASSes, and the verdict's replication
    # (verify.stats.replication; None where it is not resampled)
    rule: str = "reject-e/2"
    c_pass: float = math.nan
    replication: Replication | None = None
    # the sharp reading's, delta_flip / delta_pass and the proved bound's (verify.stats.readings;
    # None for a known-answer control, a refused truth or a stated rate)
    readings: Readings | None = None
    # the equivalence reading (verify.stats.equivalence: TOST within +- m of e), beside the
    # test, never deciding; None where it is not read (a stated rate with a log factor, the
    # paper's band without --equivalence-margin, a known-answer control)
    equivalence: Equivalence | None = None


@dataclass(frozen=True)
class Curve:
    """The fitted curve: per n the mean and standard error of the metric and the local
    slopes; the top half's slope with its interval and n, and the bend between halves
    with its interval (``bending``: the interval excludes 0; stated, never deciding)."""

    ns: tuple[int, ...]
    mean: tuple[float, ...]
    se: tuple[float, ...]
    local_slopes: tuple[float, ...]
    top_half_slope: float
    top_half_ci: tuple[float, float]
    top_half_ns: tuple[float, ...]
    bend: float
    bend_ci: tuple[float, float]
    bending: bool
    # the per-replicate values the fit read, [replicate][n], the replicates in the order of
    # ``MetricResult.replicates.used`` (a statistician's own analysis starts here)
    values: tuple[tuple[float, ...], ...] = ()


@dataclass(frozen=True)
class AsviSummary:
    """ASVI's own summaries: the oracle-width curve and ASVI's ratio to it (per n, and
    its slope with the interval), the fixed-width curve (the smallest common candidate
    width), the selected widths ``[replicate][n]``, the selections at the largest
    candidate per n, the candidate widths per n, the largest steps per n, lambda_s per n
    and the fraction of candidates converged."""

    oracle_mean: tuple[float, ...]
    oracle_slope: float
    oracle_ratio: tuple[float, ...]
    oracle_ratio_slope: float
    oracle_ratio_ci: tuple[float, float]
    fixed_width: int
    fixed_mean: tuple[float, ...]
    fixed_slope: float
    selected_widths: tuple[tuple[int, ...], ...]
    selected_at_top: tuple[int, ...]
    candidate_widths: tuple[tuple[int, ...], ...]
    steps_max: tuple[int, ...]
    lambda_s: tuple[float | None, ...]
    converged_fraction: float


@dataclass(frozen=True)
class ReferenceCurve:
    """The class-matched reference's curve: its slope, mean per n, top half's slope and
    median mesh ``k`` per n; the piecewise-polynomial oracle's mean and slope (None where
    the records hold none)."""

    slope: float
    mean: tuple[float, ...]
    top_half_slope: float
    k: tuple[float, ...]
    oracle_mean: tuple[float, ...] | None
    oracle_slope: float | None


@dataclass(frozen=True)
class AttainmentControl:
    """The attainment test's negative control: SVI at the smallest candidate width
    against the reference (``diff``), its verdict, and whether it is rejected (a FAIL, as
    it must be)."""

    diff: SlopeDiff
    verdict: Verdict
    rejected: bool


@dataclass(frozen=True)
class TopHalfDiff:
    """The paired slope difference over the top half's ``ns`` with its interval and the
    log power it amounts to (reported, not deciding)."""

    ns: tuple[float, ...]
    diff: float
    ci: tuple[float, float]
    log_power: float


@dataclass(frozen=True)
class Attainment:
    """The attainment test against the class-matched reference over the whole design:
    the reference's curve, the paired slope difference with its interval, the verdict,
    its negative control (None for the known-answer control), the log power the
    difference amounts to (``log_power``: c_hat and its interval), the ``allowance`` in
    slope units and its log power (``allowance_log_power``), the top half's difference,
    the prospective power against half the reference's rate, the allowance's log powers
    at which the verdict flips, and the one-sided FAIL p-value."""

    reference: ReferenceCurve
    diff: SlopeDiff
    verdict: Verdict
    control: AttainmentControl | None
    log_power: LogPower
    allowance: float
    allowance_log_power: float
    top_half: TopHalfDiff
    power: AttainmentPower
    c_flip: Flip
    fail_p: float
    replication: Replication | None = None


@dataclass(frozen=True)
class TestPValues:
    """One p-value per test of an entry (None where the test is not in the family)."""

    __test__ = False  # not a pytest test class

    theorem: float | None
    attainment: float | None


@dataclass(frozen=True)
class Decision:
    """How the entry enters the exit status: the protocol it was decided under
    (``NAME@DIGEST``) and the records' own, ``partial_read`` (set when the records were
    read while another run still wrote them: ``verify.rates --partial``), a refusal of its
    verdicts (a truth they do not apply to) or of its attainment test alone, a
    known-answer control's expected attainment verdict, the Holm-adjusted FAIL p-values
    of its tests over the run's family (``fail_p_holm``; None where none is in it) and
    whether its FAIL survives the family-wise level (``fail_familywise``; None where it
    has no FAIL or does not decide)."""

    protocol: str | None = None
    records_protocol: str | None = None
    partial_read: str | None = None
    refused: str | None = None
    attainment_refused: str | None = None
    expected_attainment: Verdict | None = None
    fail_p_holm: TestPValues | None = None
    # a known-answer control's expected verdict of its test against the truth class's
    # band (MetricResult.class_theorem; None: no known answer at this design, or no test)
    expected_theorem: Verdict | None = None
    fail_familywise: bool | None = None


@dataclass(frozen=True)
class InputDimension:
    """Corollary 6.3 for two teacher truths that differ only in p: both slopes and the
    ratio of their means at the largest n both have."""

    metric: str
    p_small: int
    p_large: int
    slope_small: float
    slope_large: float
    n: int
    ratio_large_to_small: float


@dataclass(frozen=True)
class MetricResult:
    """One (estimator, truth, metric)'s fits, tests and controls (module docstring)."""

    estimator: str
    truth: str
    kind: str
    alpha: float | None
    p: int
    metric: str
    primary: bool
    arm: str | None
    role: str | None
    theorem: TheoremTest
    curve: Curve
    replicates: Replicates
    asvi: AsviSummary | None
    attainment: Attainment | None
    control: BudgetShift | None
    decision: Decision
    starts: Starts | None = None
    input_dimension: tuple[InputDimension, ...] = ()
    finding: str = ""
    # a known-answer control held to the truth class's band too (the exponent and log
    # power ASVI is held to; verify.reading.entry_records.class_theorem_result): None for ASVI
    class_theorem: TheoremTest | None = None
    # log factor or power: the change of the local slope between the design's halves
    # against any n^e log^c n with c up to the band's or the proved bound's largest over
    # the constant grid, the larger (verify.stats.logfactor; None
    # with fewer than three n)
    log_or_power: LogOrPower | None = None

    def to_json(self) -> dict:
        """The result as JSON-ready nested objects (module docstring)."""
        return to_json(self)

    @classmethod
    def from_json(cls, obj: dict) -> MetricResult:
        """A result from its JSON form (every field present, none other, each of its
        type; ``ValueError`` naming the path otherwise)."""
        return from_json(cls, obj)


# the document's ``stated_rate`` object, written under ``verify.rates --rate`` only
# (verify.reading.stated_rate.document_entry): the expression, the protocol, per truth its band
_STATED_RATE_SCHEMA = {
    "description": "verify.rates --rate EXPR: the stated rate of d^2 in place of the paper's"
    " band, and per truth the exponent and log power derived over its n (d^2)",
    "type": "object",
    "properties": {
        "expr": {"type": "string"},
        "protocol": {"type": "string"},
        "truths": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "truth": {"type": "string"},
                    "p": {"type": "integer"},
                    "alpha": {"type": ["number", "null"]},
                    "ns": {"type": "array", "items": {"type": "integer"}},
                    "exponent": {"type": "number"},
                    "log_power": {"type": "number"},
                },
                "required": ["truth", "p", "alpha", "ns", "exponent", "log_power"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["expr", "protocol", "truths"],
    "additionalProperties": False,
}


def json_schema() -> dict:
    """The JSON Schema (draft 2020-12) of ``python -m verify.rates --json``, generated
    from the records' types: the document ``{"schema": SCHEMA_ID, "results": [...]}``,
    one ``$defs`` entry per record type, described by its docstring.  A number may also
    be null (a non-finite number)."""
    defs: dict = {}
    item = _schema_of(MetricResult, defs)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "verify.rates results",
        "type": "object",
        "properties": {
            "schema": {"const": SCHEMA_ID},
            "results": {"type": "array", "items": item},
            "stated_rate": _STATED_RATE_SCHEMA,
        },
        "required": ["schema", "results"],
        "additionalProperties": False,
        "$defs": defs,
    }


def results_document(results: list[MetricResult]) -> dict:
    """What ``verify.rates --json`` writes: ``{"schema": SCHEMA_ID, "results": [...]}``."""
    return {"schema": SCHEMA_ID, "results": [r.to_json() for r in results]}


def load_results(doc, source: str = "the results") -> list[MetricResult]:
    """The results of a parsed ``verify.rates --json`` document; ``ValueError`` (one
    line) for a document of another schema, naming the version found and the one
    expected, or for an entry that does not fit its types."""
    found = doc.get("schema") if isinstance(doc, dict) else None
    if found != SCHEMA_ID:
        if isinstance(doc, list):
            found = "asvi-rates/metric-result/3 or earlier (a bare array, no schema field)"
        raise ValueError(
            f"{source}: results of schema {found or 'unknown'}; this version reads"
            f" {SCHEMA_ID} (re-run verify.rates --json to rewrite them)"
        )
    if set(doc) - {"stated_rate"} != {"schema", "results"} or not isinstance(doc["results"], list):
        raise ValueError(
            f"{source}: a results document is {{schema, results: [...]}} (and, under a"
            " stated rate, stated_rate)"
        )
    return [from_json(MetricResult, e, f"results[{i}]") for i, e in enumerate(doc["results"])]


def read_results(path: str) -> list[MetricResult]:
    """:func:`load_results` of the file ``path``."""
    with open(path, encoding="utf-8") as f:
        return load_results(json.load(f), path)


def main(argv=None) -> int:
    """``python -m verify.results``: print the JSON Schema of ``verify.rates --json``
    (``--help``: what it does; any other argument is an error, exit 2)."""
    Parser(
        prog="python -m verify.results",
        description=f"Print the JSON Schema (draft 2020-12) of the document that"
        f" python -m verify.rates --json writes (schema {SCHEMA_ID}).",
    ).parse_args(argv)
    print(json.dumps(json_schema(), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main))
