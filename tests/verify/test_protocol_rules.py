"""The corrected verdict rules and the protocol that freezes them: each test names the
rule it holds and fails on the code before it (the earlier behaviour in its docstring)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simulate.sweep.setup.config import SweepConfig
from simulate.sweep.setup.truth_spec import TruthSpec
from tests.factories import fake_records, run_main, tight_protocol, verdict_entry
from theory import corollary_6_4_rate, teacher_log_power
from verify import protocol as protocols
from verify.reading.analysis import analyse
from verify.reading.design import band_log_power, design_power
from verify.report.status import entry_outcome, exit_status
from verify.results import read_results
from verify.stats.slopes import loglog_slope
from verify.stats.verdict import holm

FAKE_NS = [250, 1000, 4000, 16000]
TIGHT = tight_protocol()


def _d2(results, truth_prefix="", estimator="asvi"):
    return next(
        r for r in results
        if r.metric == "d2" and r.truth.startswith(truth_prefix) and r.estimator == estimator
    )  # fmt: skip


# ------------------------------------------------------------------ the band per truth
def test_teacher_band_is_corollary_6_4s_own_expression():
    """Defect 1: the teacher was held to the Hoelder truths' log^2 n.  Its band's log power
    is now the one Corollary 6.4's expression carries over the design (its own log-log
    slope, computed independently here), ~2.57 over n = 500..32,000 for s0 = 165, p = 20:
    a teacher slope of -0.70 lies above the log^2 band's top (-1 + 2 ell = -0.74, a FAIL
    on the earlier code) and inside Corollary 6.4's (-0.67): it PASSes (rejects e/2)."""
    ns = np.array([500, 2000, 8000, 32000.0])
    y = np.log([float(corollary_6_4_rate(float(n), 2, 165, 20, 10)) for n in ns])
    slope = np.polyfit(np.log(ns), y, 1)[0]
    c = teacher_log_power(ns, 165, 20)
    assert c == pytest.approx((slope + 1) / loglog_slope(ns), rel=1e-9)
    assert 2.4 < c < 2.7 and teacher_log_power(ns, 165, 20, metric="d") == pytest.approx(c / 2)
    res = analyse(fake_records(-0.70, 0, teacher_p=20, noise=0.01), protocol=TIGHT)
    d2 = _d2(res, "teacher")
    t = d2.theorem
    assert t.band_log_power == pytest.approx(teacher_log_power(FAKE_NS, 165, 20))
    assert t.band[1] == pytest.approx(-1 + t.band_log_power * loglog_slope(FAKE_NS))
    assert t.ci_low > -1 + 2 * loglog_slope(FAKE_NS)  # above the earlier band
    assert t.verdict == "PASS" and "consistent with n^-1.000 log^2." in d2.finding


def test_gp_control_band_carries_no_log_and_holder_two_delta():
    spec = TruthSpec("holder", p=1, alpha=0.5)
    assert band_log_power(spec, FAKE_NS, [], "gp-matern-0.5", "d2", 1.0) == 0.0
    assert band_log_power(spec, FAKE_NS, [], "asvi", "d2", 1.5) == 3.0
    assert band_log_power(spec, FAKE_NS, [], "asvi", "d", 1.0) == 1.0


def test_c_flip_is_the_band_power_where_the_verdict_changes():
    """Every verdict reports c_flip: the theorem test FAILs for band log powers below
    (ci_low - e) / ell and not above; the attainment test FAILs below ci_low / ell and
    PASSes (given power) from ci_high / ell."""
    d2 = _d2(analyse(fake_records(-0.75, -0.75, alpha=1.5), protocol=TIGHT))
    ell = loglog_slope(FAKE_NS)
    t, a = d2.theorem, d2.attainment
    assert t.c_flip == pytest.approx((t.ci_low - t.predicted) / ell)
    assert a.c_flip.fail_below == pytest.approx(a.diff.ci_low / ell)
    assert a.c_flip.pass_from == pytest.approx(a.diff.ci_high / ell)


# ------------------------------------------------------------------ curvature
def test_a_bend_is_stated_and_never_switches_the_deciding_slope():
    """Defect 5: a bending curve's attainment was decided on the top half (a two-point
    slope).  ASVI at the reference's slope but flattening over the top half: the global
    difference (inside the allowance) decides; the top half's is reported beside it."""
    recs = fake_records(-0.75, -0.75, alpha=1.5, noise=0.01)
    for r in recs:
        if r["cell"]["n"] == 16000:  # the top point lifted: the top half flattens
            for m, f in (("d2", 2.2), ("d", math.sqrt(2.2)), ("l2sq", 2.2)):
                r["metrics"][m] *= f
                r["per_width"][m][1] *= f
    d2 = _d2(analyse(recs, protocol=TIGHT))
    assert d2.curve.bending
    a = d2.attainment
    assert a.top_half.ci[0] > a.allowance  # the top half alone would FAIL
    assert a.diff.diff < a.allowance  # the global difference decides
    assert a.verdict != "FAIL"
    assert "stated, not deciding" in d2.finding


# ------------------------------------------------------------------ family-wise level
def test_holm_against_hand_computed_values():
    """Holm (1979): sorted p (0.01, 0.02, 0.03, 0.5) times (4, 3, 2, 1), made monotone."""
    got = holm([0.03, 0.5, 0.01, 0.02, math.nan], 0.05)
    assert got.adjusted[:4] == pytest.approx([0.06, 0.5, 0.04, 0.06])
    assert math.isnan(got.adjusted[4])
    assert got.rejected == (False, False, True, False, False)


def test_a_fail_that_does_not_survive_the_familywise_level_is_not_exit_1():
    """Defect 7: the exit status ORed one-sided tests at 2.5% each.  A FAIL with
    ``fail_familywise`` False counts as INCONCLUSIVE; one that survives stays a FAIL."""
    r = verdict_entry(theorem="FAIL", attainment="PASS", familywise=False)
    assert entry_outcome(r) == "INCONCLUSIVE"
    assert entry_outcome(verdict_entry(theorem="FAIL", familywise=True)) == "FAIL"
    # two truths, one FAILing attainment clearly: Holm over 4 tests keeps it (exit 1)
    recs = fake_records(-0.2, -0.75, alpha=1.5) + [
        {**r, "cell": {**r["cell"], "truth": "holder-a1.5-p1-s1"},
         "truth": {**r["truth"], "seed": 1}}
        for r in fake_records(-0.75, -0.75, alpha=1.5, seed=3)
    ]  # fmt: skip
    res = analyse(recs, protocol=TIGHT)
    bad = _d2(res, "holder-a1.5-p1-s0")
    assert bad.attainment.verdict == "FAIL" and bad.decision.fail_familywise is True
    held = bad.decision.fail_p_holm
    assert held.attainment <= 0.025 and held.theorem is not None
    assert exit_status(res) == 1


def test_wording_never_says_contradicts():
    """Defect 7: a FAIL read "contradicts the theorem's rate"; it now says what it
    measured: slower than n^e log^c n over the design's n."""
    d2 = _d2(analyse(fake_records(-0.2, -0.75, alpha=1.5), protocol=TIGHT))
    assert d2.theorem.verdict == "FAIL"
    assert (
        "slower than n^-0.750 log^2.00 n (the sharp reading, delta -> 1) over n = 250..16000"
        in d2.finding
    )
    assert "contradict" not in d2.finding


# ------------------------------------------------------------------ truths refused
def test_integer_alpha_is_refused_and_alpha_beyond_saturation_skips_attainment(tmp_path):
    """Defect 9: integer alpha's construction is smoother than named; the linear-spline
    reference saturates beyond alpha = 2.  Earlier both were decided as any truth."""
    d2 = _d2(analyse(fake_records(-0.6, -0.6, alpha=1.0), protocol=TIGHT))
    assert d2.theorem.verdict == d2.attainment.verdict == "UNDECIDABLE"
    assert "integer alpha" in d2.decision.refused
    assert d2.finding.startswith("not decided (verdicts set UNDECIDABLE): integer alpha")
    d2 = _d2(analyse(fake_records(-0.8, -0.8, alpha=2.5), protocol=TIGHT))
    assert d2.attainment is None and "saturates" in d2.decision.attainment_refused
    r = run_main("verify.rates", "--truth", "holder", "--alpha", "1", "--p", "1", "--out",
                 tmp_path / "r.jsonl")  # fmt: skip
    assert r.returncode == 2 and "integer alpha" in r.stderr
    assert not (tmp_path / "r.jsonl").exists()


# ------------------------------------------------------------------ the protocol
def test_protocols_load_and_their_digest_is_the_files():
    """Every shipped protocol loads; its digest is its file's SHA-256 (a changed number is
    a new digest); the confirmatory one holds a fresh truth seed no tier uses."""
    import hashlib
    from importlib import resources

    from simulate.sweep.setup import tiers

    assert {"exploratory-v1", "confirm-v1"} <= set(protocols.names())
    for name in protocols.names():
        p = protocols.load(name)
        raw = (resources.files("verify") / "protocols" / f"{name}.toml").read_bytes()
        assert p.digest == hashlib.sha256(raw).hexdigest()[:12] and p.tag == f"{name}@{p.digest}"
    c = protocols.load("confirm-v1")
    assert c.kind == "confirmatory"
    tier = protocols.design_tier(c)
    seeds = {t.seed for s in tier["sweeps"] for t in s["truths"]} | {tier["gp"]["truths"][0].seed}
    used = {t.seed for tr in tiers.RATES.values() for t in tr["truths"]}
    assert seeds == {c.design["truth_seed"]} and not seeds & used and 0 in used
    for s in tier["sweeps"]:
        assert s["sweep"]["protocol"] == c.tag and "stop_risk_tol" not in s["sweep"]
    with pytest.raises(ValueError, match="no protocol"):
        protocols.load("nope")


def test_the_confirm_design_has_the_power_it_was_sized_for():
    """The prospective power of confirm-v1's design (no training): the theorem test
    separates e from e/2 for alpha = 1.5 and the teacher; the GP control's known answers
    are UNDECIDABLE, none (reported only) and FAIL at nu = 0.5, 1.5, 2.5."""
    p = protocols.load("confirm-v1")
    tier = protocols.design_tier(p)
    for s in tier["sweeps"]:
        cfg = SweepConfig(truths=s["truths"], **s["sweep"])
        for row in design_power(cfg, p):
            assert row.theorem_power.separable, row
    g = tier["gp"]
    rows = design_power(SweepConfig(truths=g["truths"], **g["sweep"]), p)
    assert [r.expected_attainment for r in rows] == ["UNDECIDABLE", None, "FAIL"]


def test_records_carry_the_protocol_and_a_report_on_another_says_so(tmp_path):
    """A sweep under a protocol writes ``NAME@DIGEST`` into every record's config (and its
    fingerprint); ``verify.rates --records`` under another protocol says so; the JSON
    entries carry both."""
    from simulate.sweep.run.runner import run_sweep
    from simulate.sweep.setup.tiers import RATES
    from simulate.sweep.store.fingerprint import fingerprint_fields

    tiny = RATES["tiny"]
    cfg = SweepConfig(truths=tiny["truths"], **{**tiny["sweep"], "protocol": "x-v9@abc"})
    assert fingerprint_fields(cfg)["protocol"] == "x-v9@abc"
    path = tmp_path / "r.jsonl"
    recs = run_sweep(cfg, path, progress=False, log=lambda *_: None)
    assert {r["config"]["protocol"] for r in recs} == {"x-v9@abc"}
    rep = tmp_path / "rep.json"
    r = run_main("verify.rates", "--records", path, "--json", rep, "--figures", tmp_path / "f")
    assert r.returncode in (0, 1, 3), r.stderr
    assert "the records were written under x-v9@abc" in r.stdout
    entries = read_results(str(rep))
    tag = protocols.load().tag
    got = {(e.decision.protocol, e.decision.records_protocol) for e in entries}
    assert got == {(tag, "x-v9@abc")}


def test_confirm_tier_dry_run_and_its_refusals():
    """``--tier confirm --dry-run`` prints the protocol, the design and its power and
    trains nothing; overrides of a pre-registered design, and another protocol's numbers,
    are refused (exit 2)."""

    def run(*a):
        return run_main("verify.rates", *a)

    r = run("--tier", "confirm", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert protocols.load("confirm-v1").tag in r.stdout and "confirmatory" in r.stdout
    assert "holder-a1.5-p1-s20261127" in r.stdout and "40 replicates" in r.stdout
    assert "known answer: FAIL" in r.stdout
    for bad in (["--replicates", "8"], ["--log-power", "1"], ["--protocol", "exploratory-v1"]):
        r = run("--tier", "confirm", "--dry-run", *bad)
        assert r.returncode == 2 and r.stderr.startswith("error:"), (bad, r.stderr)


def test_a_protocol_names_its_recipe_and_writes_its_settings():
    """confirm-v2 trains the recipe it names, its settings written out in [design.common]
    (so the digest covers them); a design whose settings disagree with its recipe, or that
    leaves one out, is refused."""
    from simulate.sweep.setup.recipes import DEFAULT_RECIPE, recipe_settings
    from verify.protocol import _recipe_mismatch, design_tier

    p = protocols.load("confirm-v2")
    tier = design_tier(p)
    own = recipe_settings(p.design["recipe"])
    for s in tier["sweeps"]:
        for k, v in own.items():
            if k in s["sweep"]:
                assert s["sweep"][k] == v
        assert s["sweep"]["lr_inclusion"] == own["lr_inclusion"] != None  # noqa: E711
    common = dict(p.design["common"])
    assert _recipe_mismatch({"recipe": p.design["recipe"], "common": common}) is None
    assert "lr_inclusion" in _recipe_mismatch(
        {"recipe": p.design["recipe"], "common": {**common, "lr_inclusion": 0.05}}
    )
    less = {k: v for k, v in common.items() if k != "stop_lr_decays"}
    assert "stop_lr_decays" in _recipe_mismatch({"recipe": p.design["recipe"], "common": less})
    assert _recipe_mismatch({"common": common}) is None  # no recipe named: the settings rule
    # confirm-v3 names the default recipe, its ramp written out; without it, refused
    v3 = protocols.load("confirm-v3")
    assert v3.design["recipe"] == DEFAULT_RECIPE and v3.design["truth_seed"] == 20261129
    c3 = dict(v3.design["common"])
    assert _recipe_mismatch({"recipe": v3.design["recipe"], "common": c3}) is None
    c3.pop("lr_inclusion_ramp")
    assert "lr_inclusion_ramp" in _recipe_mismatch({"recipe": v3.design["recipe"], "common": c3})
    assert all(s["sweep"]["lr_inclusion_ramp"] == 1000 for s in design_tier(v3)["sweeps"])


# ------------------------------------------------------------------ confirm-v4
def _fresh_confirmatory(name: str):
    """A confirmatory protocol under the confirming rule, and its truth seed: the data
    seed too, and used by no tier and no other protocol."""
    from simulate.sweep.setup import tiers

    p = protocols.load(name)
    assert p.kind == "confirmatory" and p.theorem_rule == "confirm" and p.power_floor == 0.9
    seed = p.design["truth_seed"]
    used = {t.seed for tr in tiers.RATES.values() for t in tr["truths"]}
    for other in protocols.names():
        q = protocols.load(other)
        if q.design and other != name:
            used |= {q.design["truth_seed"], q.design["data_seed"]}
    assert seed == p.design["data_seed"] and seed not in used
    return p, seed


def test_confirm_v4_is_powered_where_it_says_and_on_a_fresh_seed():
    """confirm-v4's design, before training: a truth seed no tier and no earlier protocol
    uses; the Hoelder sweeps' own n grid (to 512,000) over the teachers' common one; every
    ASVI theorem test and the Hoelder truths' attainment tests powered (P(PASS) >= the
    floor, the gap to half the reference's rate separable); every budget control able to
    say converged with probability >= 0.9 but the teacher p = 200's, whose protocol says it
    is not sized; the GP control's known answers those its comment derives."""
    from verify.sizing import control_probability
    from verify.stats.slopes import expected_slope_se

    p, seed = _fresh_confirmatory("confirm-v4")
    tier = protocols.design_tier(p)
    powered_controls = set()
    for s in tier["sweeps"]:
        cfg = SweepConfig(truths=s["truths"], **s["sweep"])
        t = cfg.truths[0]
        assert t.seed == seed and cfg.seed == seed and cfg.mlp == "native-step"
        assert max(cfg.ns) == (512_000 if t.kind == "holder" else 32_000)
        (row,) = design_power(cfg, p)
        assert row.theorem_power.probability >= 0.9, s["name"]
        if t.kind == "holder":
            assert row.attainment_power.separable and row.attainment_probability >= 0.9
        cv = p.cv_for(t.key, t.kind, control=True)
        R = s["control_replicates"]
        se = expected_slope_se([cfg.ns[0], cfg.ns[-1]], R, cv)
        if control_probability(p.budget_margin, se, R, p.level) >= 0.9:
            powered_controls.add(s["name"])
    assert powered_controls == {s["name"] for s in tier["sweeps"]} - {"teacher-p200"}
    g = tier["gp"]
    rows = design_power(SweepConfig(truths=g["truths"], **g["sweep"]), p)
    got = {(r.truth.split("-s")[0], r.estimator): (r.expected_attainment, r.expected_theorem)
           for r in rows}  # fmt: skip
    assert got[("holder-a0.5-p1", "gp-matern-0.5")] == ("UNDECIDABLE", "PASS")
    assert got[("holder-a0.5-p1", "gp-matern-1.5")] == (None, None)
    assert got[("holder-a0.5-p1", "gp-matern-2.5")] == ("FAIL", "FAIL")
    assert got[("holder-a1.5-p1", "gp-matern-1.5")] == ("PASS", "PASS")
    assert got[("holder-a1.5-p1", "gp-matern-0.5")] == (None, None)


# ------------------------------------------------------------------ confirm-v5
def test_confirm_v5_is_powered_where_it_says_and_on_a_fresh_seed():
    """confirm-v5's design, before training: a truth seed no tier and no earlier protocol
    uses; both sweeps grow the class at the edge to 512 with the constructive arms in every
    cell; the theorem, attainment and budget-control tests powered at the cvs written; the
    split's three tests powered at the cvs its comment states (|e|/2 said "flattens" with
    probability 0.9); its [split] the rule verify.split reads."""
    from verify.sizing import control_probability
    from verify.split import replicates_for
    from verify.stats.slopes import expected_slope_se

    p, seed = _fresh_confirmatory("confirm-v5")
    assert protocols.CONFIRM_TIERS["confirm5"] == "confirm-v5"
    tier = protocols.design_tier(p)
    split_cv = {"holder-a0.5-p1": 0.43, "holder-a1.5-p1": 0.43 * 0.46 / 0.21}
    for s in tier["sweeps"]:
        cfg = SweepConfig(truths=s["truths"], **s["sweep"])
        t = cfg.truths[0]
        assert (cfg.start, cfg.plain_arm, cfg.width_edge_max) == ("both", False, 512)
        assert cfg.elbo_draws == 30
        assert cfg.ns == [500, 2000, 8000, 32000, 128000, 512000] and t.seed == seed
        (row,) = design_power(cfg, p)
        assert row.theorem_power.probability >= 0.9, s["name"]
        assert row.attainment_power.separable and row.attainment_probability >= 0.9
        cv = p.cv_for(t.key, t.kind, control=True)
        R = s["control_replicates"]
        se = expected_slope_se([cfg.ns[0], cfg.ns[-1]], R, cv)
        assert control_probability(p.budget_margin, se, R, p.level) >= 0.9
        e = abs(t.predicted("d2"))
        need = replicates_for(split_cv[t.key.rsplit("-s", 1)[0]], cfg.ns, e / 2)
        assert need is not None and cfg.replicates >= need, (s["name"], need)
        assert cfg.replicates % cfg.replicate_block == 0
    assert p.split["metric"] == "d2" and p.split["level"] == 0.95
    assert p.split["floor"]["depth"] == 2


def test_a_sweeps_own_settings_and_the_control_pilot_cv():
    """A confirmatory sweep's ``settings`` override ``[design.common]`` (confirm-v4's n
    grid) but may not set its replicates, seeds, protocol, truths or estimator; the budget
    control's pilot cv is None where a protocol has none (confirm-v3), and a non-positive
    one is refused."""
    import dataclasses

    from verify.protocol import _check, _own_settings

    p = protocols.load("confirm-v4")
    assert _own_settings(p, {"name": "x", "settings": {"ns": [1, 2, 3]}}) == {"ns": [1, 2, 3]}
    for bad in ("replicates", "seed", "protocol", "truths", "estimator"):
        with pytest.raises(ValueError, match="may not set"):
            _own_settings(p, {"name": "x", "settings": {bad: 1}})
    assert protocols.load("confirm-v3").cv_for("holder-a1.5-p1-s1", "holder", control=True) is None
    assert p.cv_for("holder-a1.5-p1-s1", "holder", control=True) == 0.73
    assert p.cv_for("teacher-p50-s1", "teacher", control=True) == p.pilot_cv_control["default"]
    with pytest.raises(ValueError, match="pilot_cv_control"):
        _check(dataclasses.replace(p, pilot_cv_control={"default": -1.0}))
    # a sweep's settings are held to the design's recipe as [design.common] is
    sweeps = [dict(p.design["sweeps"][0], settings={"lr_inclusion": 0.05})]
    off = dataclasses.replace(p, design={**p.design, "sweeps": sweeps})
    with pytest.raises(ValueError, match="sweep 'holder-a15'.*lr_inclusion"):
        protocols.design_tier(off)


def test_the_attainment_pass_probability_is_0_without_power():
    """The dry run's P(PASS at the reference's rate) is 0 where the attainment test has no
    power (confirm-v3's alpha = 1.5 at its pilot cv of the difference: not separable), as
    ``verify.sizing.size`` counts it, and the power line does not print it there."""
    from verify.report.render import power_lines

    p = protocols.load("confirm-v3")
    s = protocols.design_tier(p)["sweeps"][0]
    cfg = SweepConfig(truths=s["truths"], **s["sweep"])
    (row,) = design_power(cfg, p)
    assert not row.attainment_power.separable and row.attainment_power.gap > 0
    assert row.attainment_probability == 0.0
    assert "P(PASS at the reference's rate)" not in power_lines([row], cfg)


def test_confirm4_dry_run_prints_every_tests_power_and_the_cost():
    """``--tier confirm4 --dry-run``: the protocol's tag, each sweep's n and replicates,
    the attainment test's P(PASS) and each budget control's P(converged), the known
    answers and the estimated cost; nothing trained (no records written)."""
    import os

    out_file = "/nonexistent-dir/r.jsonl"
    r = run_main("verify.rates", "--tier", "confirm4", "--dry-run", "--out", out_file)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    p = protocols.load("confirm-v4")
    assert p.tag in out
    assert all(f"{s['replicates']} replicates" in out for s in p.design["sweeps"])
    assert out.count("P(converged | no change)") == 6
    assert "P(PASS at the reference's rate)" in out and "known answer: FAIL" in out
    assert "in all:" in out and not os.path.exists("/nonexistent-dir")


def test_every_confirmatory_design_plans_with_its_controls():
    """Each confirmatory tier's plan is made (its sweeps, its budget controls and its
    known-answer control configured and checked, nothing trained): confirm-v5's controls
    re-train the random start alone, with no constructive arm."""
    for tier in protocols.CONFIRM_TIERS:
        res = run_main("verify.rates", "--tier", tier, "--dry-run")
        assert res.returncode == 0, (tier, res.stderr)
    from verify.reading.controls import control_config

    p = protocols.load("confirm-v5")
    for s in protocols.design_tier(p)["sweeps"]:
        ccfg = control_config(SweepConfig(truths=s["truths"], **s["sweep"]), 8)
        assert (ccfg.start, ccfg.plain_arm) == ("random", True)
