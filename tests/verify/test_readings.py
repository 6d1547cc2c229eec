"""The theorem test's three readings (``verify.stats.readings``): the sharp reading the verdict is,
delta_flip / delta_pass, the proved bound read over the constants the theorem leaves open;
where the proved bound is not available; and confirm-v4's alpha = 0.5 re-read against an
independent recomputation of its records."""

from __future__ import annotations

import os

import pytest

from tests.factories import fake_records, tight_protocol
from theory import (
    log_factor_power,
    proved_slopes,
    teacher_log_power,
    teacher_vacuity_n,
)
from verify import protocol as protocols
from verify.reading.analysis import analyse
from verify.reading.controls import read_with_control
from verify.report.findings import readings_lines
from verify.stats.readings import proved_verdict
from verify.stats.slopes import loglog_slope
from verify.stats.verdict import Verdict

NS = (250, 1000, 4000, 16000)
NORM = 16.7  # about the shipped alpha = 0.5 truths' Hoelder norm
REF = os.path.join(os.path.dirname(__file__), "..", "..", "figures", "reference")


def _with_norm(recs, norm=NORM):
    for r in recs:
        r["truth"] = {**r["truth"], "function": {"holder_norm": norm}}
    return recs


def _d2(results, estimator="asvi"):
    return next(r for r in results if r.metric == "d2" and r.estimator == estimator)


def test_exploratory_v3_is_the_default_and_every_protocol_decides_on_the_sharp_reading():
    assert protocols.DEFAULT == protocols.load().name == "exploratory-v3"
    for name in protocols.names():
        if name.startswith(("confirm-", "exploratory-")) and not name.endswith("decided"):
            assert protocols.load(name).band_log_power["holder"] == "2*delta"
    good = dict(protocols.BAND_RULES)
    assert protocols.check_band("x", good) == good
    for bad in ({**good, "holder": "proved"}, {**good, "teacher": "2*delta"}, {"holder": "x"}):
        with pytest.raises(ValueError, match="band_log_power must be"):
            protocols.check_band("x", bad)


def test_the_proved_verdict_holds_for_every_constant_or_is_not_given():
    """FAIL: slower than the bound's largest slope over the constant grid; PASS: below its
    least; UNDECIDABLE where for some constants the bound does not fall (no constraint) or it
    is not available; INCONCLUSIVE where the constants decide."""
    assert proved_verdict(-0.2, -0.1, -0.6, -0.3) == Verdict.FAIL
    assert proved_verdict(-0.9, -0.7, -0.6, -0.3) == Verdict.PASS
    assert proved_verdict(-0.5, -0.4, -0.6, -0.3) == Verdict.INCONCLUSIVE
    assert proved_verdict(-0.9, -0.7, -0.6, +0.1) == Verdict.UNDECIDABLE  # a rising bound
    assert proved_verdict(+0.2, +0.3, -0.6, +0.1) == Verdict.FAIL  # rising faster than it
    assert proved_verdict(-0.9, -0.7, None, None) == Verdict.UNDECIDABLE


def test_a_slope_between_the_sharp_band_and_the_proved_bound_reads_both_ways():
    """alpha = 0.5 over 250..16,000: a slope of -0.15 FAILs the sharp reading (top about
    -0.24).  The proved bound's slope over this design ranges over the constants the theorem
    leaves open, rising for some: it constrains nothing here (UNDECIDABLE), whatever its log
    power at unit constants.  delta_flip / delta_pass are c_flip / c_pass over 2."""
    recs = _with_norm(fake_records(-0.15, -0.5, R=8))
    r = _d2(analyse(recs, protocol=tight_protocol()))
    g = r.theorem.readings
    assert r.theorem.band_log_power == g.sharp_log_power == 2.0
    assert r.theorem.verdict == g.sharp_verdict == Verdict.FAIL
    ps = proved_slopes(list(NS), 0.5, 1, NORM)
    ell = loglog_slope(NS)
    assert g.proved_log_power == pytest.approx((ps.unit + 0.5) / ell)
    assert g.proved_range == pytest.approx(((ps.low + 0.5) / ell, (ps.high + 0.5) / ell))
    assert g.proved_slope == pytest.approx(ps.unit)
    assert ps.high > 0 and g.proved_verdict == Verdict.UNDECIDABLE
    assert g.delta_flip == pytest.approx(r.theorem.c_flip / 2)
    assert g.delta_pass == pytest.approx(r.theorem.c_pass / 2)
    assert 1 < g.delta_flip < g.delta_pass  # a FAIL at delta = 1
    assert g.claim.startswith("Corollary 6.1") and "some delta > 1" in g.claim
    assert g.vacuity_n > 1e17
    assert "(the sharp reading, delta -> 1) over" in r.finding
    words = readings_lines(r)[0]
    assert "no constraint here" in words and "over the constants the theorem leaves open" in words


def test_the_metric_d_reads_delta_and_the_bound_at_its_own_scale():
    recs = _with_norm(fake_records(-0.15, -0.5, R=8))
    res = analyse(recs, protocol=tight_protocol())
    d, d2 = (next(r for r in res if r.metric == m) for m in ("d", "d2"))
    g, g2 = d.theorem.readings, d2.theorem.readings
    assert g.sharp_log_power == log_factor_power("d", 1) == 1.0
    assert g.delta_flip == pytest.approx(d.theorem.c_flip)  # log^delta n for d
    assert g.proved_slope == pytest.approx(g2.proved_slope / 2)  # d is the square root
    assert g.proved_log_power == pytest.approx(g2.proved_log_power / 2)


def test_the_teacher_is_held_to_its_corollary_and_its_delta_is_its_own():
    """The teacher: Corollary 6.4's expression is the verdict's band and its proved bound
    ("any delta > 1"; its constant only scales it); delta_flip solves c(delta) = c_flip
    with c(delta) = c_0 + 2 delta."""
    recs = fake_records(-0.9, 0, R=8, teacher_p=20)
    t = _d2(analyse(recs, protocol=tight_protocol()))
    g = t.theorem.readings
    assert g.claim.startswith("Corollary 6.4") and "any delta > 1" in g.claim
    assert g.proved_log_power == g.sharp_log_power == pytest.approx(t.theorem.band_log_power)
    assert g.proved_range == (g.proved_log_power, g.proved_log_power)
    assert g.sharp_verdict == t.theorem.verdict == Verdict.PASS == g.proved_verdict
    c2 = teacher_log_power(list(NS), 165, 20, delta=2)
    c1 = teacher_log_power(list(NS), 165, 20, delta=1)
    assert c2 - c1 == pytest.approx(2.0)  # linear in delta, slope 2
    assert c1 + 2 * (g.delta_flip - 1) == pytest.approx(t.theorem.c_flip)
    # Corollary 6.4's expression at unit constant falls below 1 from about n = 5.6e5
    assert g.vacuity_n == teacher_vacuity_n(165, 20) and 5e5 < g.vacuity_n < 6e5


def test_without_hoelder_norms_or_at_small_n_the_proved_bound_is_not_available_and_says_so():
    """Records carrying no truth norm, or a design where the bound is undefined at some n at
    unit constants (n = 50: Lemma 6.1's s exceeds n L, eps_n's radicand is negative): the
    proved reading is not available -- said, never made up, never deciding."""
    for recs in (
        fake_records(-0.15, -0.5, R=8),
        _with_norm(fake_records(-0.15, -0.5, R=8, ns=(50, 250, 1000, 4000))),
    ):
        r = _d2(analyse(recs, protocol=tight_protocol()))
        g = r.theorem.readings
        assert g.proved_log_power is None and g.proved_range is None and g.vacuity_n is None
        assert g.proved_verdict == Verdict.UNDECIDABLE
        assert r.theorem.band_log_power == 2.0 and r.theorem.verdict == g.sharp_verdict
        assert (
            "proved bound (Theorem 4.1 at Lemma 6.1's L, N, s): not available"
            in (readings_lines(r)[0])
        )
    assert proved_slopes([50, 250, 1000, 4000], 0.5, 1, NORM).unit is None


def test_confirm_v4_alpha_half_reread_matches_an_independent_recomputation():
    """confirm-v4's alpha = 0.5 records re-read (exploratory; its own verdict, the sharp
    reading's FAIL, unchanged): an audit written apart from ``verify`` measured delta_flip
    1.11, delta_pass 1.19, the proved bound's log power at unit constants 3.77, its vacuity
    n 5.49e17 and Lemma 4.2's ratio 85.5, and the constant grid's slope range reaching above
    0 (about -0.41 .. +0.35); tolerances: the audit's rounding (0.01) and 1% on n."""
    recs, ctrl = read_with_control(
        os.path.join(REF, "records-confirm4-holder-a05.jsonl.gz"), "shipped records"
    )
    r = _d2(analyse(recs, control=ctrl))
    assert r.decision.protocol.startswith("confirm-v4@")
    assert r.theorem.verdict == Verdict.FAIL and r.theorem.band_log_power == 2.0
    g = r.theorem.readings
    assert g.sharp_verdict == Verdict.FAIL and g.proved_verdict == Verdict.UNDECIDABLE
    assert round(g.delta_flip, 2) == 1.11 and round(g.delta_pass, 2) == 1.19
    assert round(g.proved_log_power, 2) == 3.77
    assert g.vacuity_n == pytest.approx(5.49e17, rel=0.01)
    ell = loglog_slope(r.curve.ns)
    lo, hi = (-0.5 + c * ell for c in g.proved_range)
    assert round(lo, 2) == -0.41 and round(hi, 2) == 0.35
    assert "Lemma 4.2's L s log(pN) / n = 85.5" in g.premises
    lp = r.log_or_power
    assert lp.verdict == "power" and lp.fail and lp.change_ci[0] > 0
    e_ell = loglog_slope(lp.upper_ns) - loglog_slope(lp.lower_ns)
    assert lp.allowed[0] == pytest.approx(g.proved_range[1] * e_ell)  # c_max: the grid's largest
