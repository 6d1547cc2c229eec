"""The Hoelder truths have the smoothness they claim."""

import numpy as np
import pytest

from simulate.truths.functions import HolderFunction, finite_difference_exponent


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
