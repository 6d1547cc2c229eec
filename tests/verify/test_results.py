"""The typed result (``verify.results``): what ``analyse`` returns, its JSON form against its
JSON Schema, and the schema checker's negative controls."""

import dataclasses
import json
import math

import pytest

from tests.factories import fake_records
from verify.analysis import START_KEYS, analyse
from verify.results import MetricResult, check_against_schema, json_schema
from verify.slopes import Verdict


@pytest.fixture(scope="module")
def results():
    return analyse(fake_records(-0.5, -0.5) + fake_records(-0.5, 0, teacher_p=20, seed=1))


def test_analyse_returns_typed_results_whose_json_fits_the_schema(results):
    assert results and all(isinstance(r, MetricResult) for r in results)
    assert all(isinstance(r.verdict, Verdict) for r in results)
    items = json.loads(json.dumps([r.to_json() for r in results]))  # as written to disk
    check_against_schema(items)
    names = [f.name for f in dataclasses.fields(MetricResult)]
    assert json_schema()["items"]["required"] == sorted(names)
    teacher = next(i for i in items if i["kind"] == "teacher")
    assert teacher["reference_slope"] is None and teacher["attainment_verdict"] is None
    assert set(START_KEYS) < set(names) and "starts" not in START_KEYS


def test_schema_check_refuses_a_missing_key_a_wrong_type_and_an_unknown_key(results):
    good = results[0].to_json()
    check_against_schema([good])
    missing = {k: v for k, v in good.items() if k != "slope"}
    with pytest.raises(ValueError, match="slope"):
        check_against_schema([missing])
    with pytest.raises(ValueError, match="slope"):
        check_against_schema([{**good, "slope": "fast"}])
    with pytest.raises(ValueError, match="verdict"):
        check_against_schema([{**good, "verdict": "MAYBE"}])  # not one of the enum
    with pytest.raises(ValueError, match="extra"):
        check_against_schema([{**good, "extra": 1}])
    with pytest.raises(ValueError, match="primary"):
        check_against_schema([{**good, "primary": 1}])  # an integer is not a boolean


def test_json_form_has_no_nan_and_update_refuses_unknown_fields():
    r = MetricResult(slope=math.nan, mean=[1.0, math.inf], verdict=Verdict.PASS)
    j = r.to_json()
    assert j["slope"] is None and j["mean"] == [1.0, None] and j["verdict"] == "PASS"
    json.dumps(j, allow_nan=False)  # strict JSON
    with pytest.raises(AttributeError, match="no field 'slop'"):
        r.update({"slop": 1.0})
