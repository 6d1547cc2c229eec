"""The theorem test's three readings (``verify.readings``): the proved bound's, the sharp
reading's, delta_flip / delta_pass; which one decides under which protocol; where the proved
bound is not available; and confirm-v4's alpha = 0.5 re-read against an independent
recomputation of its records."""

from __future__ import annotations

import dataclasses
import os

import pytest

from tests.factories import fake_records, tight_protocol
from theory import log_factor_power, proved_log_power, teacher_log_power, teacher_vacuity_n
from verify import protocol as protocols
from verify.analysis import analyse
from verify.controls import read_with_control
from verify.findings import readings_lines
from verify.slopes import loglog_slope
from verify.verdict import Verdict

NS = (250, 1000, 4000, 16000)
NORM = 16.7  # about the shipped alpha = 0.5 truths' Hoelder norm
REF = os.path.join(os.path.dirname(__file__), "..", "..", "figures", "reference")


def _with_norm(recs, norm=NORM):
    for r in recs:
        r["truth"] = {**r["truth"], "function": {"holder_norm": norm}}
    return recs


def _d2(results, estimator="asvi"):
    return next(r for r in results if r.metric == "d2" and r.estimator == estimator)


def _sharp(proto):
    return dataclasses.replace(proto, band_log_power={**proto.band_log_power, "holder": "2*delta"})


def test_exploratory_v3_is_the_default_and_holds_hoelder_truths_to_the_proved_bound():
    v3, v2 = protocols.load(), protocols.load("exploratory-v2")
    assert protocols.DEFAULT == v3.name == "exploratory-v3"
    assert v3.band_log_power == {"holder": "proved", "teacher": "corollary-6.4", "gp": "0"}
    assert v2.band_log_power["holder"] == "2*delta"
    for name in ("confirm-v1", "confirm-v2", "confirm-v3", "confirm-v4", "exploratory-v1"):
        assert protocols.load(name).band_log_power["holder"] == "2*delta"  # as registered


def test_a_slope_between_the_sharp_band_and_the_proved_one_reads_both_ways():
    """alpha = 0.5 over 250..16,000: the sharp band's top is e + 2 ell (about -0.24), the
    proved bound's e + c ell with c about 4.4 (about +0.07).  A slope of -0.15 FAILs the
    sharp reading and PASSes the proved bound; which is the verdict is the protocol's, the
    other is reported beside it, and delta_flip / delta_pass are the same either way."""
    recs = _with_norm(fake_records(-0.15, -0.5, R=8))
    proved = _d2(analyse(recs, protocol=tight_protocol()))
    sharp = _d2(analyse(recs, protocol=_sharp(tight_protocol())))
    c = proved_log_power(list(NS), 0.5, 1, NORM)
    assert 3.5 < c < 5.5
    assert proved.theorem.band_log_power == pytest.approx(c)
    assert sharp.theorem.band_log_power == 2.0
    assert proved.theorem.verdict == Verdict.PASS and sharp.theorem.verdict == Verdict.FAIL
    for r, deciding, registered in ((proved, "proved", True), (sharp, "sharp", False)):
        g = r.theorem.readings
        assert (g.deciding, g.registered) == (deciding, registered)
        assert g.proved_verdict == Verdict.PASS and g.sharp_verdict == Verdict.FAIL
        assert g.proved_log_power == pytest.approx(c) and g.sharp_log_power == 2.0
        # delta_flip: the corollary's log^(2 delta) n below which the data FAIL
        assert g.delta_flip == pytest.approx(r.theorem.c_flip / 2)
        assert g.delta_pass == pytest.approx(r.theorem.c_pass / 2)
        assert 1 < g.delta_flip < g.delta_pass < c / 2  # FAIL at delta = 1, PASS below c/2
        assert g.claim.startswith("Corollary 6.1") and "some delta > 1" in g.claim
        assert g.vacuity_n > 1e17  # the proved bound says nothing at these n
        # its slope over the design is e + c ell (c: its log power; at these n it rises)
        assert g.proved_slope == pytest.approx(-0.5 + c * loglog_slope(NS))
    assert "(the proved bound) over" in proved.finding
    assert "(the sharp reading, delta -> 1) over" in sharp.finding
    words = readings_lines(sharp)[0]
    assert "an exploratory re-reading" in words and "places no constraint" in words
    assert "an exploratory re-reading" not in readings_lines(proved)[0]


def test_the_metric_d_reads_delta_at_its_own_scale():
    recs = _with_norm(fake_records(-0.15, -0.5, R=8))
    d = next(r for r in analyse(recs, protocol=tight_protocol()) if r.metric == "d")
    g = d.theorem.readings
    assert g.sharp_log_power == log_factor_power("d", 1) == 1.0
    assert g.delta_flip == pytest.approx(d.theorem.c_flip)  # log^delta n for d


def test_the_teacher_is_held_to_its_corollary_and_its_delta_is_its_own():
    """The teacher: Corollary 6.4's expression is both readings ("any delta > 1"); delta_flip
    solves c(delta) = c_flip with c(delta) = c_0 + 2 delta (the expression's log^(2 delta)
    n times a factor free of delta)."""
    recs = fake_records(-0.9, 0, R=8, teacher_p=20)
    t = _d2(analyse(recs, protocol=tight_protocol()))
    g = t.theorem.readings
    assert g.deciding == "proved" and g.registered
    assert g.claim.startswith("Corollary 6.4") and "any delta > 1" in g.claim
    assert g.proved_log_power == g.sharp_log_power == pytest.approx(t.theorem.band_log_power)
    assert g.proved_verdict == g.sharp_verdict == t.theorem.verdict
    c2 = teacher_log_power(list(NS), 165, 20, delta=2)
    c1 = teacher_log_power(list(NS), 165, 20, delta=1)
    assert c2 - c1 == pytest.approx(2.0)  # linear in delta, slope 2
    assert c1 + 2 * (g.delta_flip - 1) == pytest.approx(t.theorem.c_flip)
    # Corollary 6.4's expression at unit constant falls below 1 from about n = 5.6e5
    assert g.vacuity_n == teacher_vacuity_n(165, 20) and 5e5 < g.vacuity_n < 6e5
    assert f"places no constraint) at n < {g.vacuity_n:.3g}" in readings_lines(t)[0]


def test_without_hoelder_norms_the_proved_reading_is_not_available_and_says_so():
    """Records carrying no truth norm (written by hand, or before norms were recorded): the
    proved bound cannot be evaluated, so the sharp reading decides under every protocol,
    said in the reading and the words; nothing is made up."""
    recs = fake_records(-0.15, -0.5, R=8)
    r = _d2(analyse(recs, protocol=tight_protocol()))
    g = r.theorem.readings
    assert g.deciding == "sharp" and g.proved_log_power is None
    assert g.proved_verdict == Verdict.UNDECIDABLE and g.vacuity_n is None
    assert r.theorem.band_log_power == 2.0 and r.theorem.verdict == Verdict.FAIL
    assert "undefined over this design; the sharp reading decides" in readings_lines(r)[0]


def test_at_small_n_the_proved_bound_is_undefined_and_the_fit_uses_the_n_where_it_is():
    """At n = 50 Lemma 6.1's s exceeds n L (N = 1): eps_n's radicand is negative, the bound
    undefined; the proved log power is taken over the n where it is defined."""
    from simulate.sweep.truth_spec import TruthSpec
    from verify.readings import defined_ns, proved_band

    spec = TruthSpec(kind="holder", p=1, alpha=0.5, seed=0)
    ns = [50, 250, 1000, 4000]
    assert defined_ns(spec, ns, [NORM]) == [250, 1000, 4000]
    assert proved_band(spec, ns, "d2", [NORM]) == pytest.approx(
        proved_log_power([250, 1000, 4000], 0.5, 1, NORM)
    )
    assert proved_band(spec, [50, 60], "d2", [NORM]) != proved_band(spec, [50, 60], "d2", [NORM])


def test_a_known_answer_control_is_held_to_the_sharp_class_band():
    """A known-answer control held to the class band keeps the sharp reading under every
    protocol: its known answers come from exponents, and the proved bound's wide band would
    take away the known FAIL that shows the test can fail."""
    from simulate.sweep.truth_spec import TruthSpec
    from verify.design import TruthDesign, prospective

    spec = TruthSpec(kind="holder", p=1, alpha=0.5, seed=0)
    design = TruthDesign(spec, spec.key, NS, [], 8, [NORM])
    proto = protocols.load()
    asvi = prospective(design, "asvi", "d2", proto)
    held = prospective(design, "asvi", "d2", proto, cv_kind="gp")
    assert held.band_log_power == 2.0 < asvi.band_log_power


def test_a_protocol_naming_another_hoelder_band_is_refused():
    good = {"holder": "proved", "teacher": "corollary-6.4", "gp": "0"}
    assert protocols.check_band("x", good) == good
    assert protocols.check_band("x", {**good, "holder": "2*delta"})["holder"] == "2*delta"
    for bad in ({**good, "holder": "3*delta"}, {**good, "teacher": "proved"}, {"holder": "proved"}):
        with pytest.raises(ValueError, match="holder one of"):
            protocols.check_band("x", bad)


def test_confirm_v4_alpha_half_reread_matches_an_independent_recomputation():
    """confirm-v4's alpha = 0.5 records re-read (exploratory; confirm-v4's own verdict, the
    sharp reading's FAIL, unchanged): an audit written apart from ``verify`` measured delta_flip
    1.11, delta_pass 1.19, the proved bound's log power 3.77 and its vacuity n about 5.5e17,
    and the last halves' flattening; tolerances: the audit's rounding (0.01) and 1% on n."""
    recs, ctrl = read_with_control(
        os.path.join(REF, "records-confirm4-holder-a05.jsonl.gz"), "shipped records"
    )
    r = _d2(analyse(recs, control=ctrl))
    assert r.decision.protocol.startswith("confirm-v4@")
    assert r.theorem.verdict == Verdict.FAIL and r.theorem.band_log_power == 2.0
    g = r.theorem.readings
    assert (g.deciding, g.registered) == ("sharp", False)
    assert g.sharp_verdict == Verdict.FAIL and g.proved_verdict == Verdict.PASS
    assert round(g.delta_flip, 2) == 1.11 and round(g.delta_pass, 2) == 1.19
    assert round(g.proved_log_power, 2) == 3.77
    assert g.vacuity_n == pytest.approx(5.5e17, rel=0.01)
    assert "Lemma 4.2's L s log(pN) / n = 85.5" in g.premises
    lp = r.log_or_power
    assert lp.verdict == "power" and lp.fail and lp.change_ci[0] > 0
    ell = loglog_slope(lp.upper_ns) - loglog_slope(lp.lower_ns)
    assert lp.allowed[0] == pytest.approx(g.proved_log_power * ell)
