"""The typed result of one (estimator, truth, metric): :class:`MetricResult`, and its JSON
schema (:func:`json_schema`, written by ``python -m verify.rates --json`` beside the
results as ``SCHEMA_ID``).

Every field is documented by its group (``GROUPS``); a field that does not apply to an
estimator is None (the classical reference's ASVI summaries, an attainment test without
a reference, the budget control where none ran, the constructive-start keys on every
entry but the random start's).  Verdicts are :class:`verify.slopes.Verdict` members, the
strings (``"PASS"``, ``"FAIL"``, ``"INCONCLUSIVE"``, ``"UNDECIDABLE"``) in JSON.
"""

from __future__ import annotations

import math
import types
import typing
from dataclasses import dataclass, field, fields

import numpy as np

from verify.slopes import Verdict

__all__ = ["GROUPS", "SCHEMA_ID", "MetricResult", "check_against_schema", "json_schema"]

SCHEMA_ID = "asvi-rates/metric-result/3"  # 3: partial_read


def _g(group: str, default=None):
    return field(default=default, metadata={"group": group})


GROUPS = {
    "id": "which estimator, truth (its key, kind, smoothness alpha, input dimension p) and "
    "metric; ``primary``: the metric that decides the exit status (d^2); ``arm``/``role``: "
    "for the constructive-start arms, the arm's letter and whether it decides",
    "theorem": "the slope of log metric against log n (replicate bootstrap; ``level`` its "
    "confidence), the predicted slope, the slope corrected for the theorem's log factor, "
    "the one-sided theorem test's ``verdict`` and ``direction``, its band (``band_log_power``: "
    "the log power c of the result that covers the truth) and the slow negative control, "
    "the prospective power check, and ``c_flip``: the band log power below which the "
    "verdict is a FAIL",
    "curve": "the fitted curve: per n the mean and standard error of the metric, local "
    "slopes, the top half's slope and the bend between halves",
    "replicates": "the replicates used, those dropped (incomplete) and those excluded (a "
    "failed cell), with the failed cells (n, replicate)",
    "asvi": "ASVI's own summaries (None for other estimators): the oracle-width curve and "
    "ASVI's ratio to it, the fixed-width curve, the selected and candidate widths, the "
    "largest steps per n, lambda_s and the fraction of candidates converged",
    "attainment": "the attainment test against the class-matched reference (None without "
    "one): the reference's curve and slope, the paired slope difference and its interval "
    "over the whole design, the verdict, its negative control, the log allowance and the "
    "fitted log power, the top half's difference (reported, not deciding), the "
    "prospective power against half the reference's rate, the allowance's log powers at "
    "which the verdict flips, and a refusal (alpha beyond the reference's saturation)",
    "control": "the budget-doubling control (None where none ran): its summary, the slope "
    "shift it causes with its interval and n, and its state as an equivalence test "
    "against ``budget_margin`` (converged: the verdicts stand; undetermined: they stand, "
    "labelled; limited: they become INCONCLUSIVE; ``optimisation_limited``: limited)",
    "finding": "the sentence the report prints, and the input dimension of the truth",
    "decision": "how the entry enters the exit status: the protocol it was decided under "
    "(``NAME@DIGEST``) and the records' own protocol, ``partial_read`` (set when the "
    "records were read while another run still wrote them: ``verify.rates --partial``), "
    "a refusal (a truth the verdicts do not apply to), the one-sided FAIL p-values of its "
    "tests, their Holm-adjusted values over the run's family and whether its FAIL survives "
    "the family-wise level",
    "starts": "the constructive-start comparison, on the random start's entry only: the "
    "paired ELBO gaps per n, the constructive and random slopes and attainment verdicts, the "
    "best arm's, the objective's evidence and the answer (``verify.starts``)",
}


@dataclass
class MetricResult:
    """One (estimator, truth, metric)'s fits, tests and controls; fields by group
    (``GROUPS``)."""

    estimator: str = _g("id")
    truth: str = _g("id")
    kind: str = _g("id")
    alpha: float | None = _g("id")
    p: int = _g("id")
    metric: str = _g("id")
    primary: bool = _g("id")
    arm: str | None = _g("id")
    role: str | None = _g("id")
    predicted: float = _g("theorem")
    slope: float = _g("theorem")
    ci_low: float = _g("theorem")
    ci_high: float = _g("theorem")
    corrected_slope: float = _g("theorem")
    verdict: Verdict = _g("theorem")
    direction: str | None = _g("theorem")
    control_slow_rejected: bool = _g("theorem")
    control_exponents: list = _g("theorem")
    band: list = _g("theorem")
    power_separable: bool = _g("theorem")
    power: dict = _g("theorem")
    level: float = _g("theorem")
    band_log_power: float = _g("theorem")
    c_flip: float | None = _g("theorem")
    ns: list = _g("curve")
    mean: list = _g("curve")
    se: list = _g("curve")
    local_slopes: list = _g("curve")
    top_half_slope: float = _g("curve")
    top_half_ci: list = _g("curve")
    top_half_ns: list = _g("curve")
    bend: float = _g("curve")
    bend_ci: list = _g("curve")
    bending: bool = _g("curve")
    replicates: list = _g("replicates")
    dropped_replicates: list = _g("replicates")
    failed_cells: list = _g("replicates")
    excluded_replicates: list = _g("replicates")
    expected_attainment: Verdict | None = _g("attainment")
    oracle_mean: list | None = _g("asvi")
    oracle_slope: float | None = _g("asvi")
    oracle_ratio: list | None = _g("asvi")
    oracle_ratio_slope: float | None = _g("asvi")
    oracle_ratio_ci: list | None = _g("asvi")
    fixed_width: int | None = _g("asvi")
    fixed_mean: list | None = _g("asvi")
    fixed_slope: float | None = _g("asvi")
    selected_widths: list | None = _g("asvi")
    selected_at_top: list | None = _g("asvi")
    candidate_widths: list | None = _g("asvi")
    steps_max: list | None = _g("asvi")
    lambda_s: list | None = _g("asvi")
    converged_fraction: float | None = _g("asvi")
    reference_slope: float | None = _g("attainment")
    reference_mean: list | None = _g("attainment")
    reference_top_half_slope: float | None = _g("attainment")
    reference_k: list | None = _g("attainment")
    reference_oracle_mean: list | None = _g("attainment")
    reference_oracle_slope: float | None = _g("attainment")
    attainment_diff: float | None = _g("attainment")
    attainment_ci_low: float | None = _g("attainment")
    attainment_ci_high: float | None = _g("attainment")
    attainment_verdict: Verdict | None = _g("attainment")
    attainment_control: dict | None = _g("attainment")
    attainment_log_power: float | None = _g("attainment")
    attainment_log_power_ci: list | None = _g("attainment")
    log_allowance: float | None = _g("attainment")
    log_power_allowed: float | None = _g("attainment")
    attainment_top_half: dict | None = _g("attainment")
    attainment_power: dict | None = _g("attainment")
    attainment_c_flip: dict | None = _g("attainment")
    attainment_refused: str | None = _g("attainment")
    budget_control: list | None = _g("control")
    control_slope_shift: float | None = _g("control")
    control_slope_shift_ci: list | None = _g("control")
    control_ns: list | None = _g("control")
    optimisation_limited: bool | None = _g("control")
    budget_state: str | None = _g("control")
    budget_margin: float | None = _g("control")
    finding: str = _g("finding", "")
    input_dimension: list | None = _g("finding")
    protocol: str | None = _g("decision")
    records_protocol: str | None = _g("decision")
    partial_read: str | None = _g("decision")
    refused: str | None = _g("decision")
    fail_p: dict | None = _g("decision")
    fail_p_holm: dict | None = _g("decision")
    fail_familywise: bool | None = _g("decision")
    starts: dict | None = _g("starts")
    elbo_gap: list | None = _g("starts")
    elbo_gap_ci: list | None = _g("starts")
    slope_constructive: float | None = _g("starts")
    slope_random: float | None = _g("starts")
    attainment_verdict_constructive: Verdict | None = _g("starts")
    attainment_verdict_random: Verdict | None = _g("starts")
    constructive_arm: str | None = _g("starts")
    elbo_gap_best: list | None = _g("starts")
    elbo_gap_best_ci: list | None = _g("starts")
    slope_best: float | None = _g("starts")
    attainment_verdict_best: Verdict | None = _g("starts")
    objective_evidence: list | None = _g("starts")
    answer: str | None = _g("starts")

    def update(self, values: dict) -> None:
        """Set fields from ``values`` (unknown names are refused)."""
        for k, v in values.items():
            if k not in _FIELD_NAMES:
                raise AttributeError(f"MetricResult has no field {k!r}")
            setattr(self, k, v)

    def to_json(self) -> dict:
        """Every field, JSON-ready: verdicts as their strings, numpy scalars and arrays as
        numbers and lists, non-finite numbers as None (JSON has no NaN)."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}


_FIELD_NAMES = frozenset(f.name for f in fields(MetricResult))


def _plain(x):
    if isinstance(x, Verdict):
        return str(x)
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, np.ndarray)):
        return [_plain(v) for v in x]
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return float(x) if math.isfinite(x) else None
    return x


_JSON_TYPES = {str: "string", float: "number", int: "integer", bool: "boolean",
               list: "array", dict: "object", Verdict: "string", type(None): "null"}  # fmt: skip


def _members(t) -> tuple:
    """The types a field's annotation allows (``X | None`` -> ``(X, NoneType)``)."""
    return typing.get_args(t) if isinstance(t, types.UnionType) else (t,)


def json_schema() -> dict:
    """The JSON Schema (draft 2020-12) of ``python -m verify.rates --json``: an array of
    :class:`MetricResult` objects; each property carries its group's description.  A
    float field may also be null (a non-finite number)."""
    props = {}
    hints = typing.get_type_hints(MetricResult)
    for f in fields(MetricResult):
        allowed = _members(hints[f.name])
        kinds = [_JSON_TYPES[m] for m in allowed]
        if "number" in kinds and "null" not in kinds:
            kinds.append("null")
        prop: dict = {"type": kinds[0] if len(kinds) == 1 else kinds}
        if Verdict in allowed:
            none = [None] if type(None) in allowed else []
            prop["enum"] = [str(v) for v in Verdict] + none
        prop["description"] = f"[{f.metadata['group']}] {GROUPS[f.metadata['group']]}"
        props[f.name] = prop
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "verify.rates results",
        "type": "array",
        "items": {
            "type": "object",
            "properties": props,
            "required": sorted(props),
            "additionalProperties": False,
        },
    }


def check_against_schema(items: list, schema: dict | None = None) -> None:
    """Raise ValueError unless ``items`` (parsed JSON) fits :func:`json_schema`: every
    property present, no other, each of a declared type (a small checker: the schema uses
    only ``type``, ``enum``, ``required`` and ``additionalProperties``)."""
    schema = schema or json_schema()
    item = schema["items"]
    py = {"string": str, "number": (int, float), "integer": int, "boolean": bool,
          "array": list, "object": dict, "null": type(None)}  # fmt: skip
    for i, obj in enumerate(items):
        if set(obj) != set(item["required"]):
            diff = sorted(set(obj) ^ set(item["required"]))
            raise ValueError(f"item {i}: keys differ from the schema's: {diff}")
        for k, v in obj.items():
            spec = item["properties"][k]
            kinds = spec["type"] if isinstance(spec["type"], list) else [spec["type"]]
            ok = any(
                isinstance(v, py[t]) and not (t in ("integer", "number") and isinstance(v, bool))
                for t in kinds
            )
            if not ok or ("enum" in spec and v not in spec["enum"]):
                raise ValueError(f"item {i}: {k} = {v!r} is not {kinds}")


def main(argv=None) -> int:
    """``python -m verify.results``: print the JSON Schema of ``verify.rates --json``."""
    import json

    print(json.dumps(json_schema(), indent=2))
    return 0


if __name__ == "__main__":
    from theory.cli import run_main

    raise SystemExit(run_main(main))
