"""The typed result (``verify.results``): what ``analyse`` returns, its JSON form checked by
an independent validator (``jsonschema``, draft 2020-12) against the schema generated from
the types, the reader's refusal of another schema version, and the round trip."""

import dataclasses
import json
import math
import types
from pathlib import Path

import numpy as np
import pytest

from simulate.sweep.store.schema import read_records
from tests.factories import fake_records, run_main
from verify.reading.analysis import analyse
from verify.results import (
    SCHEMA_ID,
    MetricResult,
    json_schema,
    load_results,
    read_results,
    results_document,
)
from verify.results import main as results_main
from verify.stats.verdict import Verdict

jsonschema = pytest.importorskip("jsonschema")

REFERENCE = str(Path(__file__).resolve().parents[2] / "figures" / "reference")


def validate(doc) -> None:
    """The independent oracle: a published validator, not this package's reader."""
    jsonschema.Draft202012Validator.check_schema(json_schema())
    jsonschema.Draft202012Validator(json_schema()).validate(doc)


@pytest.fixture(scope="module")
def results():
    return analyse(fake_records(-0.5, -0.5) + fake_records(-0.5, 0, teacher_p=20, seed=1))


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory):
    """``verify.rates --json`` on the shipped quick records (with their budget control)."""
    tmp = tmp_path_factory.mktemp("quick")
    out = tmp / "quick.json"
    r = run_main("verify.rates", "--records", f"{REFERENCE}/records-quick.jsonl.gz", "--json", out,
                 "--figures", tmp / "f")  # fmt: skip
    assert r.returncode in (0, 1, 3), r.stderr
    return out


def test_the_written_report_fits_the_schema_by_an_independent_validator(quick_report):
    """``verify.rates --json``'s file, as written, validates against the generated schema
    under ``jsonschema``; it names its schema; the reader gives typed results back."""
    doc = json.loads(quick_report.read_text())
    validate(doc)
    assert doc["schema"] == SCHEMA_ID == "asvi-rates/metric-result/7"
    back = read_results(str(quick_report))
    assert len(back) == len(doc["results"]) == 6
    assert all(isinstance(r.theorem.verdict, Verdict) for r in back)
    d2 = [r for r in back if r.metric == "d2"]
    assert all(r.control is not None and r.control.state is not None for r in d2)


@pytest.mark.parametrize("name", ["constructive", "gp"])
def test_every_record_group_fits_the_schema(name):
    """The constructive-start comparison (arms, ``starts``) and the known-answer control
    (no ASVI summaries, a known answer) validate too."""
    res = analyse(read_records(f"{REFERENCE}/records-{name}.jsonl.gz"))
    doc = json.loads(json.dumps(results_document(res)))
    validate(doc)
    if name == "constructive":
        assert any(e["starts"] is not None for e in doc["results"])
    else:
        assert all(e["asvi"] is None for e in doc["results"])


def test_groups_that_do_not_apply_are_null_and_the_schema_says_so(results):
    doc = json.loads(json.dumps(results_document(results)))
    validate(doc)
    teacher = next(e for e in doc["results"] if e["kind"] == "teacher")
    assert teacher["attainment"] is None and teacher["starts"] is None


def test_the_validator_and_the_reader_refuse_what_does_not_fit(results):
    """Negative controls: a missing key, a wrong type, a verdict not in the enum, an
    unknown key, an integer for a boolean, each refused by ``jsonschema`` and by the
    reader (naming the path)."""
    good = json.loads(json.dumps(results_document(results)))
    e = good["results"][0]
    th, dec = e["theorem"], e["decision"]
    bad = [  # (what the reader's message names, the entry)
        ("slope", {**e, "theorem": {k: v for k, v in th.items() if k != "slope"}}),
        ("slope", {**e, "theorem": {**th, "slope": "fast"}}),
        ("verdict", {**e, "theorem": {**th, "verdict": "MAYBE"}}),
        ("extra", {**e, "extra": 1}),
        ("primary", {**e, "primary": 1}),
        ("fail_p_holm", {**e, "decision": {**dec, "fail_p_holm": [0.1]}}),
    ]
    for name, entry in bad:
        doc = {**good, "results": [entry]}
        with pytest.raises(jsonschema.ValidationError):
            validate(doc)
        with pytest.raises(ValueError, match=name):
            load_results(doc)


def test_a_report_of_another_schema_is_refused_naming_both_versions(results, tmp_path):
    """Version 3 and earlier were a bare array of flat objects; a document naming another
    version is refused too; each with one line naming the version found and expected."""
    flat = [{"estimator": "asvi", "verdict": "PASS"}]
    old = tmp_path / "v3.json"
    old.write_text(json.dumps(flat))
    with pytest.raises(ValueError) as got:
        read_results(str(old))
    msg = str(got.value)
    assert "asvi-rates/metric-result/3" in msg and SCHEMA_ID in msg and "\n" not in msg
    other = {"schema": "asvi-rates/metric-result/5", "results": []}
    with pytest.raises(ValueError, match="metric-result/5.*metric-result/7"):
        load_results(other)


def test_the_json_form_round_trips_and_has_no_nan(results):
    """Results read back from their JSON give the same JSON; a non-finite number is null
    in the file (strict JSON) and NaN again when read."""
    doc = json.loads(json.dumps(results_document(results), allow_nan=False))
    back = load_results(doc)
    assert [r.to_json() for r in back] == doc["results"]
    r = dataclasses.replace(
        results[0], theorem=dataclasses.replace(results[0].theorem, slope=math.nan)
    )
    j = r.to_json()
    assert j["theorem"]["slope"] is None and j["theorem"]["verdict"] == str(r.theorem.verdict)
    json.dumps(j, allow_nan=False)
    assert math.isnan(MetricResult.from_json(j).theorem.slope)


def _mutable_parts(x, path: str = "r"):
    """Every place inside a result that could be changed in place: a record that is not a
    frozen dataclass, a mapping that is not read-only, a list, dict, set or array."""
    if dataclasses.is_dataclass(x):
        if not type(x).__dataclass_params__.frozen:
            yield f"{path} ({type(x).__name__} not frozen)"
        for f in dataclasses.fields(x):
            yield from _mutable_parts(getattr(x, f.name), f"{path}.{f.name}")
    elif isinstance(x, types.MappingProxyType):
        for k, v in x.items():
            yield from _mutable_parts(v, f"{path}[{k!r}]")
    elif isinstance(x, (dict, list, set, np.ndarray)):
        yield f"{path} ({type(x).__name__})"
    elif isinstance(x, tuple):
        for i, v in enumerate(x):
            yield from _mutable_parts(v, f"{path}[{i}]")


@pytest.fixture(scope="module")
def constructive():
    """Results with every record group, the constructive-start comparison included."""
    return analyse(read_records(f"{REFERENCE}/records-constructive.jsonl.gz"))


def test_results_are_immutable(results, constructive):
    """No record, nested record or mapping of a result can be changed in place, as built
    and as read back from its JSON form; negative controls: each kind of mutation raises,
    and the walk finds a mutable mapping put back in."""
    r = next(r for r in constructive if r.starts is not None)
    doc = json.loads(json.dumps(results_document(constructive + results)))
    for res in (constructive + results, load_results(doc)):
        assert [p for x in res for p in _mutable_parts(x)] == []
    with pytest.raises(dataclasses.FrozenInstanceError):
        results[0].theorem = None
    with pytest.raises(dataclasses.FrozenInstanceError):
        results[0].theorem.verdict = Verdict.FAIL
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.starts.answer = ""
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.starts.arms["R"].d2 = ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.replicates.used = ()
    with pytest.raises(TypeError):
        r.starts.arms["R"] = None
    with pytest.raises(TypeError):
        del r.starts.arms["R"]
    back = next(x for x in load_results(doc) if x.starts is not None)
    with pytest.raises(TypeError):
        back.starts.arms["R"] = None
    loose = dataclasses.replace(r, starts=dataclasses.replace(r.starts, arms=dict(r.starts.arms)))
    assert list(_mutable_parts(loose)) == ["r.starts.arms (dict)"]


def test_the_schema_command_line(capsys):
    """``python -m verify.results`` with no argument prints the schema; ``--help`` prints
    the help and exits 0 (it printed the schema: ``main`` ignored its arguments); any
    other argument is one line on stderr and exit 2."""
    assert results_main([]) == 0
    assert json.loads(capsys.readouterr().out) == json_schema()
    with pytest.raises(SystemExit) as done:
        results_main(["--help"])
    out = capsys.readouterr().out
    assert done.value.code == 0
    assert out.startswith("usage: python -m verify.results") and SCHEMA_ID in out
    assert "$defs" not in out
    with pytest.raises(SystemExit) as done:
        results_main(["schema.json"])
    err = capsys.readouterr().err
    assert done.value.code == 2 and err.count("\n") == 1 and "schema.json" in err
    r = run_main("verify.results", "--help")
    assert r.returncode == 0 and r.stdout.startswith("usage:") and "$defs" not in r.stdout
