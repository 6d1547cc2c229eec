"""``verify.rates --rate EXPR``: a stated rate in place of the paper's band
(``verify.reading.stated_rate``)
-- the same tests against the derived band, shown in the report's opening lines and its JSON,
carried in the protocol's name and digest, refused under a confirmatory protocol; without
``--rate`` nothing changes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jsonschema
import pytest

from tests.factories import fake_records, run_main, tight_protocol
from verify import protocol as protocols
from verify.reading import stated_rate
from verify.reading.analysis import analyse
from verify.results import json_schema, load_results

QUICK = str(
    Path(__file__).resolve().parents[2] / "figures" / "reference" / "records-quick.jsonl.gz"
)
PAPER = "n**(-2*alpha/(2*alpha+p))*log(n)**2"  # Corollary 6.1 at delta = 1
PURE = "n**(-2*alpha/(2*alpha+p))"
SHARP = "exploratory-v2"  # the protocol holding Hoelder truths to the sharp reading, c = 2


def _report(tmp_path, *extra):
    """``verify.rates --records QUICK [extra]``: the run and its JSON document."""
    rep = tmp_path / f"r{len(list(tmp_path.iterdir()))}.json"
    r = run_main("verify.rates", "--records", QUICK, "--json", rep, "--figures", tmp_path / "f",
                 *extra)  # fmt: skip
    return r, (json.loads(rep.read_text()) if rep.exists() else None)


def _without_tag(doc):
    doc = json.loads(json.dumps(doc))
    doc.pop("stated_rate", None)
    for e in doc["results"]:
        e["decision"]["protocol"] = None
        # beside the verdicts, not under a stated rate: the theorem's readings, and the
        # log-factor test's allowance (the proved bound's log power; a stated rate's own)
        e["theorem"]["readings"] = e["log_or_power"] = None
        e["finding"] = e["finding"].replace(" (the sharp reading, delta -> 1)", "")
    return doc


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    return _report(tmp_path_factory.mktemp("plain"), "--protocol", SHARP)


def test_the_papers_own_rate_gives_the_same_report_as_no_rate(tmp_path, plain):
    """Corollary 6.1's rate at delta = 1 as EXPR derives the sharp reading's band exactly
    (e = -2a/(2a+p), c = 2; exploratory-v2's Hoelder band) on the quick tier's records: every
    entry, verdict and number of the JSON is the same as without --rate under that protocol
    but the protocol tag, which names the rate, with a digest of its own (and the readings
    reported beside the verdicts, which a stated rate replaces)."""
    r0, doc0 = plain
    r, doc = _report(tmp_path, "--rate", PAPER, "--protocol", SHARP)
    assert r.returncode == r0.returncode == 3, r.stderr
    assert _without_tag(doc) == _without_tag(doc0)
    tag = protocols.load(SHARP).tag
    tags = {e["decision"]["protocol"] for e in doc["results"]}
    (mine,) = tags
    name, _, digest = mine.partition("@")
    assert name == f"{SHARP}+rate={PAPER}" and digest != tag.partition("@")[2]
    assert {e["decision"]["protocol"] for e in doc0["results"]} == {tag}
    assert "stated_rate" not in doc0 and "stated rate" not in r0.stdout
    # shown: the opening lines and the JSON, per truth
    head = r.stdout.split("\n== ")[0]
    assert f"stated rate (--rate): {PAPER} replaces the paper's band" in head
    assert "holder-a0.5-p1-s0 (n = 250..4000): n^-0.5 log^2 n (e = -0.5, c = 2.0)" in head
    assert "holder-a1.5-p1-s0 (n = 250..4000): n^-0.75 log^2 n (e = -0.75, c = 2.0)" in head
    s = doc["stated_rate"]
    assert s["expr"] == PAPER and s["protocol"] == mine
    assert [(t["truth"], t["exponent"], t["log_power"]) for t in s["truths"]] == [
        ("holder-a0.5-p1-s0", -0.5, 2.0), ("holder-a1.5-p1-s0", -0.75, 2.0),
    ]  # fmt: skip
    jsonschema.Draft202012Validator(json_schema()).validate(doc)
    assert len(load_results(doc)) == len(doc["results"])


def test_a_too_fast_stated_rate_fails_and_a_log_free_one_loses_its_margin(tmp_path, plain):
    """Negative control: n^-2 is far faster than the quick tier's slopes (-0.40, -0.66):
    every theorem test FAILs and the run exits 1.  The paper's exponent without its log
    factor (band log power 0) takes the confirming PASS's margin away: no theorem PASS."""
    r, doc = _report(tmp_path, "--rate", "n**(-2)")
    assert r.returncode == 1, r.stderr
    assert {e["theorem"]["verdict"] for e in doc["results"]} == {"FAIL"}
    assert {(e["theorem"]["predicted"], e["theorem"]["band_log_power"]) for e in doc["results"]
            if e["metric"] == "d2"} == {(-2.0, 0.0)}  # fmt: skip
    assert {e["theorem"]["predicted"] for e in doc["results"] if e["metric"] == "d"} == {-1.0}
    r, doc = _report(tmp_path, "--rate", PURE)
    assert r.returncode == 3, r.stderr
    d2 = [e for e in doc["results"] if e["metric"] == "d2"]
    assert [(e["theorem"]["predicted"], e["theorem"]["band_log_power"]) for e in d2] == [
        (-0.5, 0.0), (-0.75, 0.0)]  # fmt: skip
    assert "PASS" not in {e["theorem"]["verdict"] for e in doc["results"]}
    assert "PASS" in {e["theorem"]["verdict"] for e in plain[1]["results"]}
    # the attainment test is the class's, unchanged
    att = [(e["truth"], e["metric"], e["attainment"]["verdict"]) for e in doc["results"]]
    assert att == [(e["truth"], e["metric"], e["attainment"]["verdict"])
                   for e in plain[1]["results"]]  # fmt: skip


@pytest.mark.parametrize(
    ("expr", "args", "says"),
    [
        (PAPER, ["--protocol", "confirm-v4"], "protocol confirm-v4 is confirmatory: its band is"),
        ("beta*n**(-1)", [], "unknown name 'beta'"),
        ("n^(-1)", [], "operator '^' is not allowed (powers are **)"),
        ("n**2", [], "not decreasing in n (p = 1, alpha = 0.5, n = 250..4000)"),
        ("-n**(-1)", [], "not a positive real number at n = 250"),
    ],
)
def test_a_refused_rate_is_one_line_exit_2(tmp_path, expr, args, says):
    """A confirmatory protocol, a name or operator off the whitelist, an increasing or a
    negative rate: exit 2, one line naming why, no report."""
    r, doc = _report(tmp_path, f"--rate={expr}", *args)  # = : an EXPR may start with -
    assert r.returncode == 2 and doc is None
    err = r.stderr.strip()
    assert err.startswith("error:") and says in err and "\n" not in err, err


def test_a_confirmatory_tier_and_a_training_run_refuse_before_anything_runs(tmp_path):
    """--tier confirm4 (its protocol confirmatory) refuses --rate; a training run whose
    truths the rate does not fit is refused before any training, naming the truth."""
    r = run_main("verify.rates", "--tier", "confirm4", "--dry-run", "--rate", PAPER)
    assert r.returncode == 2 and "confirm-v4 is confirmatory" in r.stderr
    out = tmp_path / "r.jsonl"
    r = run_main("verify.rates", "--tier", "tiny", "--out", out, "--rate",
                 "n**(-1)*log(n)**20")  # fmt: skip
    assert r.returncode == 2 and not out.exists()
    assert r.stderr.startswith("error: holder-a0.5-p1-s0: --rate") and "not decreasing" in r.stderr


def test_dry_run_and_the_digest_carry_the_rate():
    """--dry-run's power lines use the stated band; the copy's digest is its text's, which
    is the protocol file's with the rate appended: another rate, another digest; spaces in
    EXPR do not make another protocol."""
    r = run_main("verify.rates", "--dry-run", "--rate", "n**(-2)")
    assert r.returncode == 0, r.stderr
    assert "e = -2.000, band log^0.00 n" in r.stdout
    assert f"{protocols.DEFAULT}+rate=n**(-2)@" in r.stdout
    base = protocols.load()
    a, b = stated_rate.with_rate(base, PAPER), stated_rate.with_rate(base, " n ** (-2) ")
    assert a.text.startswith(base.text.rstrip()) and a.text.endswith(f'expr = "{PAPER}"\n')
    import hashlib

    assert a.digest == hashlib.sha256(a.text.encode()).hexdigest()[:12]
    assert len({base.digest, a.digest, b.digest}) == 3
    assert b.tag == stated_rate.with_rate(base, "n**(-2)").tag
    assert stated_rate.with_rate(base, PAPER).kind == "exploratory"


def test_synthetic_curves_pass_their_own_stated_rate_and_fail_a_faster_one():
    """On records of known slope -0.5 (synthetic, small noise, a design with power): a stated
    n^-0.5 log^2 n PASSes the theorem test, n^-1 FAILs it; a teacher truth's band under a
    stated rate is the rate's, the same on every resample (not its edge counts')."""
    tight = tight_protocol()
    recs = fake_records(-0.5, -0.5)
    ok = analyse(recs, protocol=stated_rate.with_rate(tight, "n**(-1/2)*log(n)**2"))
    bad = analyse(recs, protocol=stated_rate.with_rate(tight, "n**(-1)"))
    d2 = [r for r in ok if r.metric == "d2" and r.estimator == "asvi"]
    assert [r.theorem.verdict for r in d2] == ["PASS"]
    assert [r.theorem.verdict for r in bad if r.metric == "d2"] == ["FAIL"]
    teach = analyse(fake_records(-1.0, -1.0, teacher_p=20, seed=1),
                    protocol=stated_rate.with_rate(tight, "log(n)/n"))  # fmt: skip
    t = next(r.theorem for r in teach if r.metric == "d2")
    assert (t.predicted, round(t.band_log_power, 12)) == (-1.0, 1.0)
    assert t.verdict == "PASS" and t.replication.share == 1.0
    plain = analyse(fake_records(-1.0, -1.0, teacher_p=20, seed=1), protocol=tight)
    assert next(r.theorem for r in plain if r.metric == "d2").band_log_power > 2
    assert dataclasses.replace(tight).stated_rate is None
