"""``theory.proved`` (issue 75): the proved bound of Theorem 4.1 at Lemma 6.1's network and
of Theorem 5.1 at (N*, s*), against direct mpmath evaluations of the printed formulas; the
band log power's shared rule (exact on n^e log^c n, the teacher's values unchanged); the
vacuity n; Lemma 4.2's ratio; the report's section."""

from __future__ import annotations

import json

import mpmath
import pytest

import theory as T
from tests.factories import run_main
from theory.proved import DEFAULT_DESIGN

NS = list(DEFAULT_DESIGN)
# the records' Hoelder norm at alpha = 0.5, p = 1 (HolderFunction(0.5, 1, n_max=512000))
RECORDS_NORM = 16.706


def _log(x):
    return mpmath.log(mpmath.mpf(x))


def test_theorem_4_1_at_lemma_6_1_is_the_printed_formula_at_512000():
    """n = 512,000, alpha = 0.5, p = 1, norm 1: L = 8 + (floor(log2 n) + 5) = 8 + 23 = 31,
    N = floor(sqrt(n) / log n) = floor(715.5 / 13.15) = 54, s = floor(94 * 1.5^2 * 54 * 31)
    = 354,051 (below the edge count); the bound C eps^2 + 3C' r + 3C' xi, eqs. (d2bound),
    (eqsch1), with every constant 1 and B = 2, evaluated here from the printed formulas."""
    n, L, N, s = 512000, 31, 54, 354051
    got = T.proved_bound(n, 0.5, 1)
    assert (got["L"], got["N"], got["s"], got["N_capped"]) == (L, N, s, False)
    eps2 = (s * _log(n * L / s) + L * s * _log(N)) / n * _log(n) ** 2
    r = (mpmath.mpf(L) * s / n) * _log(12 * 2 * N) + mpmath.mpf(s) / n * _log(n * L / s)
    xi = (3 * 3**2 * mpmath.mpf(N) / n + mpmath.sqrt(2) * mpmath.mpf(N) ** -0.5) ** 2
    want = eps2 + 3 * r + 3 * xi
    assert float(got["total"]) == pytest.approx(float(want), rel=1e-12)
    assert float(got["estimation"]) == pytest.approx(float(eps2), rel=1e-12)


def test_theorem_5_1_at_the_optimal_structure_is_the_printed_formula_at_512000():
    """Same truth: (N*, s*) = (1, 4717), s* the edge count of 31 hidden layers of width 12
    (24 + 30 * 156 + 13); eps*^2 has log N* = 0 as printed; C'' = M' = 1."""
    n, L, s = 512000, 31, 4717
    got = T.proved_bound(n, 0.5, 1, which="theorem-5.1")
    assert (got["L"], got["N"], got["s"]) == (L, 1, s)
    eps2 = s * _log(mpmath.mpf(L) * n / s) / n * _log(n) ** 2
    r = (mpmath.mpf(L) * s / n) * _log(24) + mpmath.mpf(s) / n * _log(mpmath.mpf(n) * L / s)
    xi = (27 / mpmath.mpf(n) + mpmath.sqrt(2)) ** 2
    assert float(got["total"]) == pytest.approx(float(eps2 + r + xi), rel=1e-12)


def test_proved_bound_constants_and_delta():
    """``delta`` replaces the constants' field where given; None keeps the field's; the
    constants are BoundConstants or a TypeError; ``which`` one of two."""
    k = T.BoundConstants(delta=2, C=3)
    a = T.proved_bound(8000, 0.5, 1, constants=k)
    b = T.proved_bound(8000, 0.5, 1, delta=2, constants=T.BoundConstants(C=3))
    assert a["total"] == b["total"]
    c = T.proved_bound(8000, 0.5, 1, delta=1, constants=k)
    assert c["estimation"] == pytest.approx(a["estimation"] / _log(8000) ** 2, rel=1e-12)
    with pytest.raises(TypeError, match="BoundConstants"):
        T.proved_bound(8000, 0.5, 1, constants={"C": 1})
    with pytest.raises(ValueError, match="which must be one of"):
        T.proved_bound(8000, 0.5, 1, which="corollary-6.1")


def test_theorem_5_1_says_where_its_search_cap_binds():
    """Beyond ~1e20 at alpha = 0.5, p = 1 the (N*, s*) search's cap N <= 10^6 binds:
    ``N_capped`` says so (the value is then an upper bound of r* + xi*)."""
    assert not T.proved_bound(10**6, 0.5, 1, which="theorem-5.1")["N_capped"]
    far = T.proved_bound(10**25, 0.5, 1, which="theorem-5.1")
    assert far["N_capped"] and far["N"] == 10**6


@pytest.mark.parametrize(("e", "c"), [(-0.5, 2.0), (-0.5, 3.7), (-2 / 3, 0.0), (-1.0, -1.25)])
def test_band_log_power_recovers_n_to_the_e_log_to_the_c(e, c):
    """The shared rule gives back c of ``7 n^e log^c n`` to 1e-9, from mpmath values and
    from doubles; half for d."""
    exact = [7 * mpmath.mpf(n) ** e * _log(n) ** c for n in NS]
    assert abs(T.design_log_power(NS, exact, e) - c) < 1e-9
    assert abs(T.design_log_power(NS, [float(v) for v in exact], e) - c) < 1e-9
    assert abs(T.design_log_power(NS, exact, e, "d") - c / 2) < 1e-9
    assert abs(T.log_log_slope(NS, [mpmath.mpf(n) ** e for n in NS]) - e) < 1e-12
    with pytest.raises(ValueError, match="metric"):
        T.design_log_power(NS, exact, e, "d3")
    with pytest.raises(ValueError, match="one finite positive value"):
        T.design_log_power(NS, exact[:-1], e)


def test_teacher_log_power_unchanged():
    """The values teacher_log_power gave before its least squares were shared (computed by
    the code before the change, printed with repr)."""
    assert T.teacher_log_power(NS, 165, 20) == 2.5960732070898334
    d = T.teacher_log_power([250, 630, 1600, 4000], 300, 200, delta=1.5, metric="d")
    assert d == 1.6998891092330288


def test_proved_log_power_over_the_confirm_design():
    """alpha = 0.5, p = 1: Theorem 4.1's bound carries c ~ 3.79 (norm 1) and ~ 3.77 (the
    records' norm), not the sharp reading's 2; Theorem 5.1's rises at the records' norm
    (slope ~ +0.149); the value is design_log_power's on proved_bound's totals."""
    c1 = T.proved_log_power(NS, 0.5, 1)
    assert 3.75 < c1 < 3.85
    assert 3.72 < T.proved_log_power(NS, 0.5, 1, RECORDS_NORM) < 3.82
    totals = [T.proved_bound(n, 0.5, 1)["total"] for n in NS]
    assert c1 == T.design_log_power(NS, totals, float(T.predicted_exponent(0.5, 1)))
    assert T.proved_log_power(NS, 0.5, 1, metric="d") == pytest.approx(c1 / 2, rel=1e-15)
    rise = T.decreases_over(NS, 0.5, 1, RECORDS_NORM, which="theorem-5.1")
    assert not rise.decreases and 0.14 < rise.slope < 0.16


def test_decreases_over_reports_the_slope():
    """Theorem 4.1 falls over the design at alpha = 0.5, p = 1 (slope ~ -0.094) and rises at
    alpha = 1.25, p = 2 (slope ~ +0.177)."""
    down = T.decreases_over(NS, 0.5, 1)
    assert down.decreases and -0.1 < down.slope < -0.09
    up = T.decreases_over(NS, 1.25, 2)
    assert not up.decreases and 0.17 < up.slope < 0.18


def test_an_undefined_bound_names_its_n():
    """Theorem 5.1 at alpha = 1.25, p = 2, n = 500: N* = 1 makes eps*'s log N* zero and
    s* > L n, a negative radicand; the log power says at which n."""
    with pytest.raises(ValueError, match="theorem-5.1 at n = 500: eps_star_n"):
        T.proved_log_power(NS, 1.25, 2, which="theorem-5.1")


def _total(n, alpha, p, which="theorem-4.1"):
    return T.proved_bound(n, alpha, p, which=which)["total"]


@pytest.mark.parametrize(("alpha", "p", "lo", "hi"), [(0.5, 1, 1e17, 1e18), (1.5, 1, 1e10, 1e11)])
def test_vacuity_n_is_where_the_bound_falls_below_1(alpha, p, lo, hi):
    """The bound is below 1 at v and at or above 1 at v - 1 and at v / 1.01; v an int."""
    v = T.vacuity_n(alpha, p)
    assert isinstance(v, int) and lo < v < hi
    assert _total(v, alpha, p) < 1 <= _total(v - 1, alpha, p)
    assert _total(v // 101 * 100, alpha, p) >= 1


def test_vacuity_n_theorem_5_1_and_the_scans_ends():
    """Theorem 5.1 at alpha = 1.5, p = 1 (a short scan); None where the scan ends before
    the crossing; bad inputs refused before the scan (which reads a ValueError as no
    bound)."""
    v = T.vacuity_n(1.5, 1, which="theorem-5.1", n_max=10**12, per_decade=1)
    assert 1e10 < v < 1e11
    assert _total(v, 1.5, 1, "theorem-5.1") < 1 <= _total(v - 1, 1.5, 1, "theorem-5.1")
    assert T.vacuity_n(0.5, 1, n_max=10**10) is None
    for bad in (
        {"alpha": -1, "p": 1},
        {"alpha": 0.5, "p": 0},
        {"alpha": 0.5, "p": 1, "delta": 0.5},
    ):
        with pytest.raises(ValueError):
            T.vacuity_n(**bad)


def test_premises_at_512000():
    """Lemma 4.2's max{s log(nL/s), L s log(pN)} / n at Lemma 6.1's (31, 54, 354051): the
    second term, 31 * 354051 * log 54 / 512000 ~ 85.5; a candidate's depth against L = 31,
    its width's implied C_N against 12 * 54."""
    pr = T.premises(512000, 0.5, 1, depth=31, widths=[648, 648])
    want = 31 * 354051 * _log(54) / 512000
    assert pr.ratio == pytest.approx(float(want), rel=1e-12) and 80 < pr.ratio < 90
    assert (pr.L, pr.width, pr.s) == (31, 648, 354051)
    assert pr.depth_matches and pr.equal_width and pr.implied_C_N == 1.0
    other = T.premises(512000, 0.5, 1, depth=4, widths=[64, 32])
    assert not other.depth_matches and not other.equal_width
    assert other.implied_C_N == pytest.approx(32 / 648)
    with pytest.raises(AttributeError):
        pr.ratio = 0  # frozen


def test_the_report_prints_the_vacuity_line(tmp_path):
    """``python -m theory --alpha 0.5 --p 1``: the vacuity line and the log power; the JSON
    keeps its sections and adds ``proved``."""
    out = tmp_path / "r.json"
    done = run_main("theory", "--alpha", "0.5", "--p", "1", "--json", out)
    assert done.returncode == 0, done.stderr
    assert (
        "the proved bound (Theorem 4.1 at Lemma 6.1, unit constants) is above 1 -- says"
        " nothing -- for n < 5.49e+17"
    ) in done.stdout
    assert "Theorem 4.1 at Lemma 6.1: band log power c = 3.79" in done.stdout
    r = json.loads(out.read_text())
    assert {"lemma_6_1", "theorem_4_1", "optimal", "predicted_exponent"} <= r.keys()
    assert r["proved"]["vacuity_n"] == T.vacuity_n(0.5, 1)
    assert r["proved"]["theorem_4_1"]["log_power"] == T.proved_log_power(NS, 0.5, 1)


def test_teacher_vacuity_n_is_where_corollary_6_4s_expression_crosses_one():
    """The teacher's vacuity n: Corollary 6.4's expression at unit constant (s0 = 165, the
    paper's 20-10-10-1 teacher, p = 20) is >= 1 at v - 1 and below 1 at v; refused inputs
    are refused before the scan."""
    from theory import corollary_6_4_rate, teacher_vacuity_n

    v = teacher_vacuity_n(165, 20)
    assert (
        corollary_6_4_rate(v, 2, 165, 20, 10, 1) < 1 <= corollary_6_4_rate(v - 1, 2, 165, 20, 10, 1)
    )
    assert teacher_vacuity_n(165, 20, delta=2) > v  # a larger log power says nothing longer
    with pytest.raises(ValueError):
        teacher_vacuity_n(165, 20, delta=0.5)


def test_proved_slopes_span_the_constants_the_theorem_leaves_open():
    """The proved bound is a sum of terms weighted by C, C' (and Lemma 6.1's C_N), which the
    theorem only asserts to exist: its slope over a finite design moves with them.  At unit
    constants it is decreases_over's; over the grid it spans a range that, at alpha = 0.5,
    p = 1 over n = 500..512,000, reaches above 0 (an independent audit: -0.41 .. +0.35);
    choices undefined at some n of the design are left out and counted."""
    from theory import decreases_over, proved_slopes
    from theory.proved import CONSTANT_GRID, DEFAULT_DESIGN

    ps = proved_slopes(DEFAULT_DESIGN, 0.5, 1, 16.71)
    assert ps.unit == pytest.approx(decreases_over(DEFAULT_DESIGN, 0.5, 1, 16.71).slope)
    assert ps.low <= ps.unit <= ps.high
    assert round(ps.low, 2) == -0.41 and round(ps.high, 2) == 0.35
    assert ps.read == len(CONSTANT_GRID["C_prime_over_C"]) * len(CONSTANT_GRID["C_N"])
    small = proved_slopes([50, 100, 200], 0.5, 1, 16.7)
    assert small.unit is None and small.undefined > 0 and small.read + small.undefined == ps.read
    one = proved_slopes(DEFAULT_DESIGN, 0.5, 1, 16.71, grid={"C_prime_over_C": (1.0,), "C_N": (1,)})
    assert one.low == one.high == one.unit
