"""The theory at any n mpmath holds (issue 61): ``python -m theory --n 1e300`` and the
functions at n = 10**300, beyond doubles (``mpf("1e400")``, ``10**1000``), refusing only n <= 1
and non-numbers; Lemma 6.1's integers exact there, and below 2^53 the working precision's
values as they always were."""

from __future__ import annotations

import argparse
import json
import math

import mpmath
import pytest

import theory as T
from tests.factories import run_main

HUGE = [10**300, mpmath.mpf("1e400"), 10**1000]
HUGE_IDS = ["1e300", "mpf-1e400", "1e1000"]


def _exact_N(n, p, alpha):
    """Lemma 6.1's N = floor(n^(p/(2 alpha + p)) / log n), at a precision far beyond the
    lemma's own (an independent evaluation: 4,000 digits)."""
    with mpmath.workdps(4000):
        n_, a_ = mpmath.mpf(n), mpmath.mpf(alpha)
        return int(mpmath.floor(n_ ** (p / (2 * a_ + p)) / mpmath.log(n_)))


@pytest.mark.parametrize("n", HUGE, ids=HUGE_IDS)
@pytest.mark.parametrize(("p", "alpha"), [(1, 1.0), (2, 0.5), (1, 0.1)])
def test_lemma_6_1_is_exact_at_any_n(n, p, alpha):
    net = T.lemma_6_1(n, p, alpha)
    flog2 = int(mpmath.floor(mpmath.log(n, 2))) if isinstance(n, mpmath.mpf) else n.bit_length() - 1
    assert net.L == 8 + (flog2 + 5) * (1 + (p - 1).bit_length())
    assert net.N == _exact_N(n, p, alpha)
    W = 12 * p * net.N
    assert net.width == W
    assert net.H == (p + 1) * W + (net.L - 1) * (W + 1) * W + (W + 1)  # exact, hundreds of digits


def test_an_edge_count_beyond_2_53_is_exact_at_an_ordinary_n():
    """n = 1e9, alpha = 0.1: H = 13747693066299841 (main printed ...840, rounded to 53 bits)."""
    net = T.lemma_6_1(10**9, 1, 0.1)
    W = net.width
    assert net.H == 2 * W + (net.L - 1) * (W + 1) * W + (W + 1)


@pytest.mark.parametrize("n", [250, 10_000, 32_000, 10**6, 12_345.5])
def test_below_2_53_the_lemma_runs_at_the_working_precision(n):
    """The precision is raised only where H leaves the working precision's integers: below,
    s_bound (a float of the report) is the working precision's, bit for bit as before."""
    net = T.lemma_6_1(n, 1, 0.5)
    assert net.H < 2**53
    with mpmath.workprec(mpmath.mp.prec):  # the value a 53-bit evaluation gives
        expected = 94 * mpmath.mpf(1.5) ** 2 * net.N * net.L
    assert net.s_bound == expected and net.s_bound._mpf_[1].bit_length() <= mpmath.mp.prec


@pytest.mark.parametrize("n", HUGE, ids=HUGE_IDS)
def test_every_quantity_is_finite_at_any_n(n):
    net = T.lemma_6_1(n, 1, 1.0)
    L, N, s = net.L, net.N, net.s
    values = [
        T.r_n(n, L, N, s, 1),
        T.eps_n(n, L, N, s, 1),
        T.xi_bound(n, N, 1, 1.0, 1.0),
        T.theorem_4_1_bound(n, L, N, s, 1, T.xi_bound(n, N, 1, 1.0, 1.0))["total"],
        T.corollary_6_1_rate(n, 1.0, 1),
        T.corollary_6_3_rate(n, L, N, s, 1),
        T.lambda_s_rule(n, L),
        T.q_star_log10(n, L, N, s, 1),
        T.optimal_structure(n, 1, 1.0)["objective"],
    ]
    for v in values:
        assert isinstance(v, mpmath.mpf) and mpmath.isfinite(v) and v != 0, v
    opt = T.optimal_structure(n, 1, 1.0)
    assert opt["N"] == opt["N_max"] == 10**6  # the search's cap: said, not hidden


def test_the_search_does_not_overflow_near_the_largest_double():
    """Variant: n = 1e308, where the search's n L / s left doubles (inf everywhere and
    N* = 1 with an overflow warning); it takes 1/n and log n instead."""
    with _no_warnings():
        opt = T.optimal_structure(10**308, 1, 1.0)
    assert opt["N"] == 10**6


class _no_warnings:
    def __enter__(self):
        import warnings

        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter("error")

    def __exit__(self, *exc):
        self._w.__exit__(*exc)


@pytest.mark.parametrize("n", [1, 0.5, -3, math.nan, math.inf, mpmath.mpf("-1e400")])
def test_only_n_at_most_1_or_not_a_number_is_refused(n):
    with pytest.raises(ValueError, match=r"^n must be"):
        T.lemma_6_1(n, 1, 1.0)
    with pytest.raises(ValueError, match=r"^n must be"):
        T.r_n(n, 26, 2, 100, 1)


def test_the_report_at_n_1e300(tmp_path):
    out = tmp_path / "r.json"
    done = run_main("theory", "--n", "1e300", "--json", out)
    assert done.returncode == 0, done.stderr
    r = json.loads(out.read_text())
    assert r["inputs"]["n"] == 10**300  # read exactly
    assert r["lemma_6_1"]["N"] == _exact_N(10**300, 1, 1.0)
    assert f"N = {_exact_N(10**300, 1, 1.0)}" in done.stdout
    assert "N* is the search's cap N = 1000000" in done.stdout
    floats = [v for part in r.values() if isinstance(part, dict) for v in part.values()]
    assert all(math.isfinite(v) for v in floats if isinstance(v, float))


def test_help_states_the_domain():
    done = run_main("theory", "--help")
    text = " ".join(done.stdout.split())
    assert "any number > 1 up to 1.8e308" in text and "read exactly" in text


def test_sample_size_reads_n_exactly():
    from theory.summary import sample_size

    assert sample_size("1e300") == 10**300 and isinstance(sample_size("1e300"), int)
    assert sample_size("10000") == sample_size("1e4") == 10000
    assert sample_size("12345.5") == 12345.5
    assert sample_size("1.7976931348623157e308") > 10**308
    for bad in ("2e308", "1e999999999", "abc", "inf", "nan", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            sample_size(bad)
