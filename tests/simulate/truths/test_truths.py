"""The Hoelder truths have the smoothness they claim."""

import numpy as np
import pytest

from simulate.truths.functions import (
    HolderFunction,
    TeacherNetwork,
    finite_difference_exponent,
    make_regression_data,
)


def measured_exponent(alpha, p, seed):
    f = HolderFunction(alpha, p, n_max=10**12, seed=seed)  # many levels for the check
    hs = np.geomspace(2.0 ** (-f.K + 5), 2.0**-4, 10)  # away from the truncation scale
    return finite_difference_exponent(
        f, p, alpha, hs, order=int(np.floor(alpha)) + 1, n_points=3000, seed=seed
    )


@pytest.mark.parametrize(
    ("alpha", "p"), [(0.3, 1), (0.5, 1), (0.75, 2), (1.5, 1), (1.25, 2), (0.5, 3)]
)
def test_increments_scale_like_h_to_the_alpha(alpha, p):
    """sup |Delta_h^{r+1} f| ~ h^alpha (r = floor alpha) between the truncation scale and the
    domain.  Tolerance 0.2: the sup over 3000 random points and directions is a noisy
    estimate (seed-to-seed spread about 0.05-0.1, measured)."""
    est = [measured_exponent(alpha, p, s) for s in (1, 2)]
    assert abs(np.mean(est) - alpha) < 0.2


def test_negative_control_smooth_function_is_not_rough():
    hs = np.geomspace(2.0**-12, 2.0**-4, 10)
    est = finite_difference_exponent(lambda X: np.sin(3 * X[:, 0]), 1, 0.5, hs, order=1)
    assert est > 0.95  # Lipschitz and smoother: first differences scale like h
    rough = HolderFunction(0.5, 1, n_max=10**12, seed=1)
    hs = np.geomspace(2.0 ** (-rough.K + 5), 2.0**-4, 10)
    assert finite_difference_exponent(rough, 1, 0.5, hs, order=1) < 0.7


def test_holder_norm_bounds_the_observed_quotients():
    f = HolderFunction(0.5, 1, n_max=10**6, seed=0)
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (20000, 1))
    y = np.clip(x + rng.normal(0, 0.01, x.shape), -1, 1)
    q = np.abs(f(x) - f(y)) / np.abs(x - y)[:, 0] ** 0.5
    sup = np.max(np.abs(f(rng.uniform(-1, 1, (20000, 1)))))
    assert q.max() + sup <= f.holder_norm


def test_truncation_follows_n_max_and_bad_input():
    assert HolderFunction(0.5, 1, n_max=10**4).K < HolderFunction(0.5, 1, n_max=10**8).K
    for bad in ({"alpha": 0}, {"alpha": -1}, {"alpha": 0.5, "p": 0}):
        with pytest.raises(ValueError):
            HolderFunction(**bad)


def test_teacher_network_matches_the_paper():
    t = TeacherNetwork()  # 20-10-10-1, U(0.5, 1.5), half the edges zeroed
    assert [W.shape for W in t.weights] == [(20, 10), (10, 10), (10, 1)]
    nz = np.concatenate([np.r_[W.ravel(), b] for W, b in zip(t.weights, t.biases, strict=True)])
    assert nz.size == 331
    nonzero = nz[nz != 0]
    assert nonzero.min() >= 0.5 and nonzero.max() <= 1.5
    # the zeroed fraction over many teachers is 1/2 (binomial, 5 SE)
    frac = np.mean([TeacherNetwork(seed=s).n_edges / 331 for s in range(40)])
    assert abs(frac - 0.5) < 5 * np.sqrt(0.25 / (331 * 40))
    X, y = make_regression_data(t, 1000, 20, 1.0, seed=0)
    assert X.shape == (1000, 20) and np.all(np.abs(X) <= 1)
    assert np.std(y - t(X)) == pytest.approx(1.0, abs=0.1)
    wide = TeacherNetwork(p=30, p_active=20, seed=0)  # irrelevant inputs do nothing
    X30 = np.random.default_rng(0).uniform(-1, 1, (50, 30))
    X30b = X30.copy()
    X30b[:, 20:] = 0
    np.testing.assert_array_equal(wide(X30), wide(X30b))
