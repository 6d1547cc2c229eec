"""Each formula of ``theory`` recomputed here from the paper's printed form, independently
of the package's code path (plain ``math`` / hand-written mpmath), plus its properties."""

import math

import mpmath
import numpy as np
import pytest
import sympy as sp
from hypothesis import assume, given
from hypothesis import strategies as st

import theory as T


def edges(L, W, p):
    """Edge count written out layer by layer (L hidden layers of width W)."""
    total = p * W + W  # input layer weights + biases
    for _ in range(L - 1):
        total += W * W + W
    return total + W + 1  # output weights + bias


def floor_log2(n):
    k = 0
    while 2 ** (k + 1) <= n:
        k += 1
    return k


def ceil_log2(p):
    k = 0
    while 2**k < p:
        k += 1
    return k


ns = st.integers(min_value=10, max_value=10**7)
small = st.integers(min_value=1, max_value=6)
ps = st.integers(min_value=1, max_value=5)
alphas = st.floats(min_value=0.1, max_value=4.0)


def test_edge_count_matches_table_1_dense_bnn():
    # Table 1, Dense-BNN column: 20-W-W-1 networks
    printed = {2: 51, 4: 109, 6: 175, 8: 249, 10: 331, 12: 421, 14: 519, 16: 625, 18: 739, 20: 861}
    for W, H in printed.items():
        assert T.num_edges(2, W, 20) == H == edges(2, W, 20)


@given(L=small, W=st.integers(1, 50), p=ps)
def test_edge_count_formula(L, W, p):
    assert T.num_edges(L, W, p) == edges(L, W, p)


@given(n=ns, L=small, N=st.integers(1, 20), p=ps, B=st.floats(1, 5), frac=st.floats(0.001, 1))
def test_r_n_printed_form(n, L, N, p, B, frac):
    s = max(1, int(frac * edges(L, 12 * p * N, p)))
    want = L * s / n * math.log(12 * B * p * N) + s / n * math.log(n * L / s)
    assert float(T.r_n(n, L, N, s, p, B)) == pytest.approx(want, rel=1e-12)


@given(n=ns, L=small, N=st.integers(1, 20), p=ps, delta=st.floats(1, 3), M=st.floats(0.1, 5))
def test_eps_n_printed_form(n, L, N, p, delta, M):
    s = max(1, min(n * L // 3, edges(L, 12 * p * N, p)))
    want = M * math.sqrt((s * math.log(n * L / s) + L * s * math.log(p * N)) / n)
    want *= math.log(n) ** delta
    assert float(T.eps_n(n, L, N, s, p, M, delta)) == pytest.approx(want, rel=1e-12)


@given(n=ns, N=st.integers(1, 10**4), p=ps, alpha=alphas, H=st.floats(0, 10))
def test_xi_bound_printed_form(n, N, p, alpha, H):
    want = ((2 * H + 1) * 3 ** (p + 1) * N / n + H * 2**alpha * N ** (-alpha / p)) ** 2
    assert float(T.xi_bound(n, N, p, alpha, H)) == pytest.approx(want, rel=1e-12)


def test_lemma_6_1_worked_example():
    # n = 10^4, p = 2, alpha = 1: L = 8 + (13+5)(1+1) = 44; N = floor(100/log 10^4) = 10
    net = T.lemma_6_1(10**4, 2, 1)
    assert (net.L, net.N, net.width) == (44, 10, 240)
    assert net["s_bound"] == 94 * 4 * 2**4 * 10 * (44 + 1)
    assert net.s == edges(44, 240, 2) and net.s_clamped


@given(n=st.integers(3, 10**9), p=ps, alpha=alphas)
def test_lemma_6_1_printed_form(n, p, alpha):
    net = T.lemma_6_1(n, p, alpha)
    L = 8 + (floor_log2(n) + 5) * (1 + ceil_log2(p))
    raw = math.floor(n ** (p / (2 * alpha + p)) / math.log(n))
    assume(abs(n ** (p / (2 * alpha + p)) / math.log(n) - round(raw)) > 1e-9)  # no float tie
    N = max(1, raw)
    s_bound = 94 * p**2 * (alpha + 1) ** (2 * p) * N * (L + ceil_log2(p))
    assert (net.L, net.N, net.N_raw, net.width) == (L, N, raw, 12 * p * N)
    assert net.N_clamped == (raw < 1)
    assert net.s == min(math.floor(s_bound), edges(L, 12 * p * N, p))


def test_lemma_6_1_exact_at_powers_of_two():
    for k in range(2, 60):
        assert T.lemma_6_1(2**k, 1, 1).L == 8 + (k + 5)
        assert T.lemma_6_1(2**k - 1, 1, 1).L == 8 + (k - 1 + 5)
        assert T.lemma_6_1(2**k, 2**k + 1, 1).L == 8 + (k + 5) * (1 + k + 1)


def test_lemma_6_1_clamps_N_for_small_n():
    net = T.lemma_6_1(100, 1, 5)  # 100^(1/11) / log 100 < 1
    assert net.N_raw == 0 and net.N == 1 and net.N_clamped


@given(n=ns, L=small, N=st.integers(1, 10), p=ps, frac=st.floats(0.01, 0.5))
def test_r_n_monotone(n, L, N, p, frac):
    H = edges(L, 12 * p * N, p)
    s = max(1, min(int(frac * H), n * L // 10))
    assume(s + 1 <= H and (s + 1) <= n * L / math.e)
    r = T.r_n(n, L, N, s, p)
    assert T.r_n(n, L, N, s + 1, p) > r  # increasing in s (while log(nL/s) > 1)
    assert T.r_n(n, L + 1, N, s, p) > r  # increasing in L
    assert T.r_n(2 * n, L, N, s, p) < r  # decreasing in n (s <= nL)


def test_limits_in_n():
    n = sp.Symbol("n", positive=True)
    assert sp.limit(T.r_n(n, 3, 2, 50, 1), n, sp.oo) == 0
    assert sp.limit(T.eps_n(n, 3, 2, 50, 1), n, sp.oo) == 0
    a, H = sp.Rational(3, 2), 2
    assert sp.limit(T.xi_bound(n, 7, 2, a, H), n, sp.oo) == (H * 2**a * 7 ** (-a / 2)) ** 2
    assert sp.limit(T.corollary_6_1_rate(n, a, 2), n, sp.oo) == 0


@given(n=ns, L=small, N=st.integers(1, 10), p=ps, frac=st.floats(0.001, 1), delta=st.floats(1, 2))
def test_eps_sq_over_r_n_is_a_log_factor(n, L, N, p, frac, delta):
    s = max(1, min(int(frac * edges(L, 12 * p * N, p)), int(n * L / math.e)))
    ratio = float(T.eps_n(n, L, N, s, p, 1, delta) ** 2 / T.r_n(n, L, N, s, p))
    logf = math.log(n) ** (2 * delta)
    assert ratio <= logf * (1 + 1e-12)
    assert ratio >= logf * math.log(p * N) / math.log(24 * p * N) * (1 - 1e-12)


def test_numpy_and_mpmath_agree():
    Ns = np.arange(1, 50)
    s = 100
    arr = T.r_n(1e5, 3, Ns, s, 2)
    for N, v in zip(Ns, arr, strict=True):
        assert float(T.r_n(10**5, 3, int(N), s, 2)) == pytest.approx(v, rel=1e-12)


def q_star_printed(n, L, N, s, p, B, slab):
    """Float64 evaluation of (qstar)/(qstar2) exactly as printed."""
    a, b = 12 * B * p * N, 24 * B * p * N
    if slab == "uniform":
        brace = (p + 1 + 1 / (a - 1)) ** 2 * L**2 / a**2 + 1 / (a**2 - 1) + 2 / (a - 1) ** 2
        return s / (4 * n) * a ** (-2 * L) / brace
    brace = (p + 1 + 1 / (a - 1)) ** 2 + 1 / (b**2 - 1) + 2 / (b - 1) ** 2
    return s / (16 * n) / math.log(36 * p * N) * b ** (-2 * L) / brace


@pytest.mark.parametrize("slab", ["uniform", "gaussian"])
@given(n=ns, L=small, N=st.integers(1, 5), p=ps, B=st.floats(1, 4))
def test_q_star_matches_float64_where_representable(slab, n, L, N, p, B):
    want = q_star_printed(n, L, N, 10, p, B, slab)
    assume(want > 1e-290)
    assert float(T.q_star(n, L, N, 10, p, B, slab)) == pytest.approx(want, rel=1e-10)
    assert float(T.q_star_log10(n, L, N, 10, p, B, slab)) == pytest.approx(math.log10(want))


@pytest.mark.parametrize("slab", ["uniform", "gaussian"])
def test_q_star_log10_finite_where_float64_underflows(slab):
    net = T.lemma_6_1(10**6, 2, 1)
    assert q_star_printed(10**6, net.L, net.N, net.s, 2, 2, slab) == 0.0  # float64 underflow
    v = T.q_star_log10(10**6, net.L, net.N, net.s, 2, 2, slab)
    assert mpmath.isfinite(v) and v < -308
    assert mpmath.log10(T.q_star(10**6, net.L, net.N, net.s, 2, 2, slab)) == pytest.approx(v)


@pytest.mark.parametrize("lam", [0.5, 3, 10, 50, 600])
def test_prior_on_N_sums_to_one(lam):
    # the Poisson(lam) tail beyond 10 lam + 100 is far below 1e-12
    total = mpmath.fsum(mpmath.exp(T.log_prior_N(N, lam)) for N in range(1, int(10 * lam) + 100))
    assert total == pytest.approx(1, abs=1e-12)
    # printed form lambda^N / ((e^lambda - 1) N!) where float64 can hold it
    if lam <= 50:
        for N in (1, 3, 10):
            want = lam**N / (math.expm1(lam) * math.factorial(N))
            assert float(mpmath.exp(T.log_prior_N(N, lam))) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("lam_s", [0.1, 1, 3, 50])
def test_prior_on_s_sums_to_one(lam_s):
    tot = mpmath.nsum(lambda s: mpmath.exp(T.log_prior_s(int(s), lam_s)), [0, mpmath.inf])
    assert tot == pytest.approx(1, abs=1e-12)
    H = 30
    tot_h = sum(mpmath.exp(T.log_prior_s(s, lam_s, H)) for s in range(H + 1))
    assert tot_h == pytest.approx(1, abs=1e-12)


def test_theorem_4_1_terms():
    n, L, N, s, p, xi = 5000, 3, 2, 200, 1, 0.01
    t = T.theorem_4_1_bound(n, L, N, s, p, xi, B=2, M=2, delta=1, C=3, C_prime=0.5)
    eps2 = 4 * (s * math.log(n * L / s) + L * s * math.log(p * N)) / n * math.log(n) ** 2
    r = L * s / n * math.log(24 * p * N) + s / n * math.log(n * L / s)
    assert float(t["estimation"]) == pytest.approx(3 * eps2)
    assert float(t["variational"]) == pytest.approx(1.5 * r)
    assert float(t["approximation"]) == pytest.approx(1.5 * xi)
    assert float(t["total"]) == pytest.approx(3 * eps2 + 1.5 * r + 1.5 * xi)


def test_theorem_5_1_terms_use_printed_eps_star():
    n, L, N, s, p = 5000, 3, 4, 200, 3
    t = T.theorem_5_1_bound(n, L, N, s, p, 0.02)
    eps2 = (L * s * math.log(N) + s * math.log(L * n / s)) / n * math.log(n) ** 2
    assert float(t["estimation"]) == pytest.approx(eps2)
    assert float(t["total"]) == pytest.approx(eps2 + float(T.r_n(n, L, N, s, p)) + 0.02)


def test_theorem_constants_as_one_object_or_by_name():
    """The theorems' constants as a BoundConstants give the values the keywords give, bit for
    bit, for numbers, arrays and symbols; a keyword replaces that field of the object."""
    n, L, N, s, p, xi = 5000, 3, 2, 200, 1, 0.01
    k = T.BoundConstants(B=3, M=2, delta=1.5, C=3, C_prime=0.5)
    by_name = T.theorem_4_1_bound(n, L, N, s, p, xi, B=3, M=2, delta=1.5, C=3, C_prime=0.5)
    assert T.theorem_4_1_bound(n, L, N, s, p, xi, k) == by_name
    assert T.theorem_4_1_bound(n, L, N, s, p, xi, constants=k) == by_name
    assert T.theorem_4_1_bound(n, L, N, s, p, xi) == T.theorem_4_1_bound(
        n, L, N, s, p, xi, T.BoundConstants()
    )
    # a keyword over an object: that field replaced, the others kept
    mixed = T.theorem_4_1_bound(n, L, N, s, p, xi, T.BoundConstants(B=3, M=2, delta=1.5), C=3,
                                C_prime=0.5)  # fmt: skip
    assert mixed == by_name
    five = T.theorem_5_1_bound(n, L, 4, s, 3, 0.02, B=3, M=2, delta=1.5, C=3)
    assert T.theorem_5_1_bound(n, L, 4, s, 3, 0.02, k) == five  # C_prime unused by 5.1
    arr = np.array([1000.0, 5000.0])
    a = T.theorem_4_1_bound(arr, L, N, s, p, xi, T.BoundConstants(M=np.array([1.0, 2.0])))
    b = T.theorem_4_1_bound(arr, L, N, s, p, xi, M=np.array([1.0, 2.0]))
    assert all(np.array_equal(a[key], b[key]) for key in b)
    C = sp.Symbol("C", positive=True)
    sym = T.theorem_5_1_bound(n, L, 4, s, 3, 0.02, T.BoundConstants(C=C))
    assert sym["total"] == T.theorem_5_1_bound(n, L, 4, s, 3, 0.02, C=C)["total"]


def test_theorem_constants_wrong_way_is_a_type_error():
    """A constant by position (the 7th argument not a BoundConstants), an unknown keyword,
    or C_prime to Theorem 5.1 (its one constant is C) are TypeErrors naming the mistake; a
    constant out of its range is the same ValueError by object as by name."""
    with pytest.raises(TypeError, match="BoundConstants, got 2 as its 7th argument"):
        T.theorem_4_1_bound(5000, 3, 2, 200, 1, 0.01, 2)
    with pytest.raises(TypeError, match="unexpected keyword argument 'C_prime'"):
        T.theorem_5_1_bound(5000, 3, 2, 200, 1, 0.01, C_prime=2)
    with pytest.raises(TypeError, match="unexpected keyword argument 'b'"):
        T.theorem_4_1_bound(5000, 3, 2, 200, 1, 0.01, b=2)
    with pytest.raises(ValueError) as by_name:
        T.theorem_4_1_bound(5000, 3, 2, 200, 1, 0.01, C=-1)
    with pytest.raises(ValueError) as by_object:
        T.theorem_4_1_bound(5000, 3, 2, 200, 1, 0.01, T.BoundConstants(C=-1))
    assert str(by_name.value) == str(by_object.value)


def test_report_inputs_as_one_object_or_by_name():
    """``theory.summary.report``'s inputs as a ReportInputs give the report the keywords give;
    an unknown keyword is a TypeError."""
    from theory.summary import ReportInputs, report

    kw = dict(holder_norm=2, B=3, C_N=2, lam=4, delta=1.5, N_max=50)
    assert report(5000, 3, 0.5, ReportInputs(**kw)) == report(5000, 3, 0.5, **kw)
    assert report(5000, 1, 1.0) == report(5000, 1, 1.0, ReportInputs())
    with pytest.raises(TypeError, match="unexpected keyword argument 'C'"):
        report(5000, 1, 1.0, C=2)


def brute_force_structure(n, alpha, Hn, L, N_max):
    """``(objective, N, s)`` minimising r_n + xi over N = 1..N_max for p = 1, written out
    from the formulas (s = min(floor(Lemma 6.1's bound), edges), as lemma_6_1 does)."""
    best = None
    for N in range(1, N_max + 1):
        s = min(math.floor(94 * (alpha + 1) ** 2 * N * L), edges(L, 12 * N, 1))
        obj = (
            L * s / n * math.log(24 * N)
            + s / n * math.log(n * L / s)
            + ((2 * Hn + 1) * 9 * N / n + Hn * 2**alpha * N ** (-alpha)) ** 2
        )
        if best is None or obj < best[0]:
            best = (obj, N, s)
    return best


def test_optimal_structure_brute_force():
    n, p, alpha, Hn, L = 10**7, 1, 2.0, 1.0, 3
    best = brute_force_structure(n, alpha, Hn, L, 399)
    opt = T.optimal_structure(n, p, alpha, Hn, L=L, N_max=399)
    assert (opt["N"], opt["s"]) == best[1:]
    assert float(opt["objective"]) == pytest.approx(best[0])
    assert 1 < opt["N"] < 399  # an interior optimum: the trade-off is real here


def test_optimal_structure_floors_a_fractional_sparsity_bound():
    """alpha = 0.5, p = 1 makes Lemma 6.1's bound 211.5 N L: a half-integer for odd N L.  The
    search floors it as lemma_6_1 does (it once passed half-integer s on, and failed from
    n = 1e17 on, where L is odd), and matches the brute force there."""
    n, p, alpha, Hn, L = 10**17, 1, 0.5, 1.0, 5
    best = brute_force_structure(n, alpha, Hn, L, 199)
    opt = T.optimal_structure(n, p, alpha, Hn, L=L, N_max=199)
    assert (opt["N"], opt["s"]) == best[1:]
    assert isinstance(opt["s"], int)


def test_corollary_rates():
    n = 10**5
    assert float(T.corollary_6_1_rate(n, 1, 2, 1.5)) == pytest.approx(
        (n ** (-1 / 4) * math.log(n) ** 1.5) ** 2
    )
    # Corollary 6.2 (ASVI adapts): the same rate, eps*_n^2 = (n^(-a/(2a+p)) log^delta n)^2
    assert float(T.corollary_6_2_rate(n, 1.5, 1)) == pytest.approx(
        (n ** (-1.5 / 4) * math.log(n)) ** 2
    )
    L, N, s, p = 2, 1, 165, 20
    want = (s * math.log(n * L / s) + L * s * math.log(p * N)) / n * math.log(n) ** 2
    assert float(T.corollary_6_3_rate(n, L, N, s, p)) == pytest.approx(want)
    want4 = (s * math.log(n * L / s) + L * s * math.log(p * 10)) / n * math.log(n) ** 4
    assert float(T.corollary_6_4_rate(n, L, s, p, 10, delta=2)) == pytest.approx(want4)


def test_conditions():
    assert T.condition_5_3(3, 2, 12 * 2 * 2 + 3, 2)
    assert not T.condition_5_3(3, 2, 12 * 2 * 2 + 2, 2)
    r = float(T.r_n(10**4, 3, 2, 100, 1))
    assert T.condition_5_2(10**4, 3, 2, 100, 1, r * 5)
    assert not T.condition_5_2(10**4, 3, 2, 100, 1, r * 50)
    # sub-linear sparse growth satisfies 5.1; linear growth s ~ n does not
    seq = [(n, 3, 2, int(n**0.5)) for n in (10**4, 10**5, 10**6)]
    assert T.condition_5_1(seq, p=1)
    assert not T.condition_5_1([(n, 3, 2, n // 10) for n in (10**4, 10**5, 10**6)], p=1)


def test_lambda_s_rule_takes_hidden_layers_and_gives_the_printed_values():
    """``lambda_s_rule(n, L, a)`` with L hidden layers (theory's convention) reproduces the
    appendix's printed values: the teacher experiment's lambda_s = 3 (two hidden layers,
    n = 10^4, a = 0.1: 2.76) and MNIST's 50 (two hidden layers, n = 6 x 10^4, a = 1.5:
    49.5); tolerance: the printed values are rounded to integers."""
    from theory import lambda_s_rule

    assert float(lambda_s_rule(10**4, 2, 0.1)) == pytest.approx(3, abs=0.5)
    assert float(lambda_s_rule(6 * 10**4, 2, 1.5)) == pytest.approx(50, abs=0.5)
    assert float(lambda_s_rule(10**4, 1, 0.1)) == pytest.approx(0.2 * math.log(10**4))
