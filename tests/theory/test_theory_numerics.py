"""Precision of the priors at extreme rates, and numpy arrays through every formula.

References are 50-digit mpmath evaluations of the defining expressions.  Tolerance: a
formula's float64 (numpy) and default-precision mpmath paths must agree with them to 1e-12
times the largest term of the sum (``N log lam``, ``log N!``, ``lam``, or 1): each term
carries ~1e-16 relative rounding, so that is the most a sum of them can promise, and it is
what "stable" means here -- no overflow, no underflow to 0 inside a log, no inf.  (Where the
terms cancel, e.g. ``log pi(1) ~ -lam/2`` for tiny lam, the relative error of the small
result is not bounded, and nothing downstream needs it: the prior enters a sum of ELBOs.)
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import theory as T

RTOL = 1e-12
LAMS = [1e-300, 1e-100, 1e-17, 1e-8, 0.5, 10.0, 700.0, 1e5]
NS = [1, 4, 1000, 10**6]


def _ref_log_prior_N(N, lam):
    with mpmath.workdps(50):
        lam = mpmath.mpf(lam)  # the float's exact value
        v = N * mpmath.log(lam) - mpmath.log(mpmath.expm1(lam)) - mpmath.loggamma(N + 1)
        return float(v)


def _scale_N(N, lam):
    return max(1.0, abs(N * np.log(lam)), float(mpmath.loggamma(N + 1)), lam)


def _ref_log_prior_s(s, lam_s, H=None):
    with mpmath.workdps(50):
        lam_s = mpmath.mpf(lam_s)
        v = mpmath.log(-mpmath.expm1(-lam_s)) - lam_s * s
        if H is not None:
            v -= mpmath.log(-mpmath.expm1(-lam_s * (H + 1)))
        return float(v)


@pytest.mark.parametrize("lam", LAMS)
@pytest.mark.parametrize("N", NS)
def test_log_prior_N_matches_50_digits(N, lam):
    ref = _ref_log_prior_N(N, lam)
    assert np.isfinite(ref)
    got_mp = float(T.log_prior_N(N, lam))
    got_np = float(T.log_prior_N(np.array([N]), np.array([lam]))[0])
    tol = RTOL * _scale_N(N, lam)
    assert abs(got_mp - ref) <= tol and abs(got_np - ref) <= tol, (got_mp, got_np, ref)


def test_log_prior_N_case_of_the_report():
    """log pi(4) at lam = 1e-17 is about -120.6 (it was +inf: 1 - e^-lam rounded to 0)."""
    assert float(T.log_prior_N(4, 1e-17)) == pytest.approx(-120.6099, abs=1e-4)


@pytest.mark.parametrize("lam_s", LAMS)
@pytest.mark.parametrize("H", [None, 1, 10**6])
def test_log_prior_s_matches_50_digits(lam_s, H):
    s = 0 if H is None else H // 2
    ref = _ref_log_prior_s(s, lam_s, H)
    got_mp = float(T.log_prior_s(s, lam_s, H))
    got_np = float(T.log_prior_s(np.array([s]), np.array([lam_s]), H)[0])
    tol = RTOL * max(1.0, abs(lam_s * s), abs(np.log(lam_s)))
    assert abs(got_mp - ref) <= tol and abs(got_np - ref) <= tol, (got_mp, got_np, ref)


@settings(max_examples=60, deadline=None)
@given(
    N=st.integers(1, 10**6),
    log10_lam=st.floats(-300, 5, allow_nan=False),
)
def test_log_prior_N_finite_and_accurate_everywhere(N, log10_lam):
    lam = 10.0**log10_lam
    got = float(T.log_prior_N(N, lam))
    assert np.isfinite(got)
    assert abs(got - _ref_log_prior_N(N, lam)) <= RTOL * _scale_N(N, lam)


def test_q_star_rejects_s_above_H_like_r_n():
    H = int(T.num_edges(2, T.lemma_width(1, 1), 1))
    T.q_star_log10(1000, 2, 1, H, 1)  # s = H is allowed
    for f in (T.q_star_log10, T.q_star, T.r_n):
        with pytest.raises(ValueError, match="number of edges"):
            f(1000, 2, 1, H + 1, 1)


# (function, arguments with the first array of two values): each must equal the two
# scalar calls element-wise
_A = np.array
ELEMENTWISE = {
    "r_n": (_A([1000.0, 5000.0]), 2, 1, 10, 1),
    "eps_n": (_A([1000.0, 5000.0]), 2, 1, 10, 1),
    "eps_star_n": (_A([1000.0, 5000.0]), 2, 1, 10),
    "xi_bound": (_A([1000.0, 5000.0]), 2, 1, 0.5, 1),
    "lemma_6_1_sparsity": (_A([1, 2]), 3, 1, 0.5),
    "log_prior_N": (_A([1, 4]), _A([1e-17, 3.0])),
    "log_prior_s": (_A([0, 4]), 2.0),
    "lambda_s_rule": (_A([1000.0, 5000.0]), 3),
    "q_star_log10": (_A([1000.0, 5000.0]), 2, 1, 10, 1),
    "q_star": (_A([1000.0, 5000.0]), 2, 1, 10, 1),
    "num_edges": (_A([2, 3]), 4, 1),
    "lemma_width": (_A([2, 3]), 4),
    "corollary_6_1_rate": (_A([1000.0, 5000.0]), 0.5, 1),
    "corollary_6_2_rate": (_A([1000.0, 5000.0]), 0.5, 1),
    "corollary_6_3_rate": (_A([1000.0, 5000.0]), 2, 4, 10, 1),
    "corollary_6_4_rate": (_A([1000.0, 5000.0]), 2, 10, 1, 4),
    "predicted_exponent": (_A([0.5, 1.5]), 1),
    "hellinger_sq_pointwise": (_A([0.1, 0.5]), 1.0),
    "hellinger_sq_sup_bound": (_A([0.1, 0.5]), 1.0),
    "theorem_4_1_bound": (_A([1000.0, 5000.0]), 2, 1, 10, 1, 0.01),
    "theorem_5_1_bound": (_A([1000.0, 5000.0]), 2, 1, 10, 1, 0.01),
    "lemma_6_1": (_A([1000.0, 5000.0]), 1, 0.5),
}


def _as_dict(x):
    if hasattr(x, "as_dict"):
        return x.as_dict()
    return x if isinstance(x, dict) else {"value": x}


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_arrays_are_elementwise(name):
    f, args = getattr(T, name), ELEMENTWISE[name]
    out = _as_dict(f(*args))
    for i in range(2):
        one = _as_dict(f(*[a[i] if isinstance(a, np.ndarray) else a for a in args]))
        assert set(one) == set(out)
        for k, v in one.items():
            arr = np.broadcast_to(np.asarray(out[k], dtype=float), (2,))
            assert arr[i] == pytest.approx(float(v), rel=1e-12), (name, k, i)


@pytest.mark.parametrize(
    "call",
    [
        lambda: T.optimal_structure(_A([1000.0, 5000.0]), 1, 0.5),
        lambda: T.condition_5_2(_A([1000.0, 5000.0]), 2, 1, 10, 1, 0.01),
        lambda: T.condition_5_3(_A([2, 3]), 1, 10, 1),
        lambda: T.condition_5_1([(_A([1000.0, 2000.0]), 2, 1, 10), (4000, 2, 1, 10)], 1),
    ],
)
def test_functions_that_are_not_elementwise_reject_arrays_clearly(call):
    with pytest.raises(ValueError, match="one number per argument"):
        call()
