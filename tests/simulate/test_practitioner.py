"""The regressors as a practitioner meets them (``simulate.estimators``, module docstring):
the noise learned, the targets standardised, training to the stopping rule, the paper's
lambda_s rule, calibrated predictive intervals.

Tolerances: 90% interval coverage on 4,000 fresh test targets has a binomial standard error
of sqrt(0.9 * 0.1 / 4000) = 0.0047, so the band [0.85, 0.95] the estimators promise is about
10 SE either side of nominal: a miss is miscalibration, not chance.  A learned noise sd
from n points has a sampling SE of about sd / sqrt(2 n) (1.6% at n = 2,000, 1% at 5,000), so
10% is 6-10 SE.  All fits are seeded.
"""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from simulate.estimators import NOISE_START, ASVIRegressor, SVIRegressor
from simulate.estimators.policy import _progress
from simulate.progress import Progress
from theory import lambda_s_rule

Z90 = 1.6448536269514722  # the standard normal's 95% quantile


def _data(n: int, seed: int, noise: float, scale: float = 1.0):
    """``f(x) = sin(3 x_1) + x_2^2 / 2`` on U([-1, 1]^2), targets ``scale (f + noise N(0, 1))``."""
    r = np.random.default_rng(seed)
    X = r.uniform(-1, 1, (n, 2))
    f = np.sin(3 * X[:, 0]) + 0.5 * X[:, 1] ** 2
    return X, f, scale * (f + noise * r.normal(size=n))


def _check(m, noise, scale=1.0):
    """Coverage of the 90% interval (mixture and Gaussian forms) on fresh targets, the
    learned sd against the truth, and the RMSE to f, all in f's units."""
    Xt, ft, yt = _data(4000, 1, noise, scale)
    mu, sd = m.predict(Xt, return_std=True)
    lo, hi = m.predict_interval(Xt)
    return {
        "coverage": float(np.mean((yt >= lo) & (yt <= hi))),
        "coverage_gauss": float(np.mean(np.abs(yt - mu) <= Z90 * sd)),
        "sigma": m.sigma_ / scale,
        "rmse_f": float(np.sqrt(np.mean((mu / scale - ft) ** 2))),
    }


EASY = dict(width=8, batch_size=500, lr=1e-2, random_state=0)  # converges in ~15,000 steps


@pytest.fixture(scope="module")
def easy_fit():
    X, _, y = _data(2000, 0, 0.3)
    return SVIRegressor(**EASY).fit(X, y)


def test_intervals_are_calibrated_and_the_noise_is_learned(easy_fit):
    """Defaults (sigma="auto", standardised targets, the stopping rule): the 90% interval
    covers 85-95% of fresh targets, the learned sd is within 10% of the truth (0.3), and the
    stopping rule, not the cap, ended training."""
    got = _check(easy_fit, 0.3)
    assert 0.85 <= got["coverage"] <= 0.95, got
    assert 0.85 <= got["coverage_gauss"] <= 0.95, got
    assert abs(got["sigma"] - 0.3) < 0.03, got
    assert easy_fit.converged_.all() and easy_fit.n_iter_[0] < 7000 * 4  # the cap: 28,000
    # negative control: the paper's known sigma = 1 on the same data over-covers badly
    X, _, y = _data(2000, 0, 0.3)
    known = SVIRegressor(**EASY, sigma=1.0, epochs=60).fit(X, y)
    assert _check(known, 0.3)["coverage"] > 0.99


def test_fits_do_not_depend_on_the_scale_of_y():
    """Targets times 0.01, 1 and 100 (four orders of magnitude): the same fit in y's units.
    The standardised targets agree to float64 rounding, so predictions / scale, sigma_ /
    scale and coverage agree to float32 training's rounding (declared: 1e-4 relative)."""
    X, _, y = _data(600, 0, 0.3)
    fits = {
        s: SVIRegressor(width=4, epochs=15, random_state=0).fit(X, s * y)
        for s in (0.01, 1.0, 100.0)
    }
    Xt, _, _ = _data(500, 1, 0.3)
    ref = fits[1.0].predict(Xt, return_std=True)
    for s, m in fits.items():
        mu, sd = m.predict(Xt, return_std=True)
        np.testing.assert_allclose(mu / s, ref[0], rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(sd / s, ref[1], rtol=1e-4)
        assert m.sigma_ / s == pytest.approx(fits[1.0].sigma_, rel=1e-4)
    # negative control: the paper's unstandardised model is not scale-free
    raw = [
        SVIRegressor(width=4, epochs=15, random_state=0, standardize_y=False)
        .fit(X, s * y)
        .predict(Xt)
        / s
        for s in (0.01, 1.0)
    ]
    assert np.max(np.abs(raw[0] - raw[1])) > 0.05


def test_standardisation_round_trip():
    """Predictions in y's units equal a manual standardise - fit - unstandardise."""
    X, _, y = _data(500, 0, 0.3)
    y = 40.0 + 7.0 * y
    auto = SVIRegressor(width=4, epochs=10, random_state=2).fit(X, y)
    mu, sd = y.mean(), y.std()
    manual = SVIRegressor(width=4, epochs=10, random_state=2, standardize_y=False).fit(
        X, (y - mu) / sd
    )
    Xt, _, _ = _data(200, 1, 0.3)
    a_mean, a_sd = auto.predict(Xt, return_std=True)
    m_mean, m_sd = manual.predict(Xt, return_std=True)
    np.testing.assert_allclose(a_mean, m_mean * sd + mu, rtol=1e-6)
    np.testing.assert_allclose(a_sd, m_sd * sd, rtol=1e-6)
    assert (auto.y_mean_, auto.y_scale_) == pytest.approx((mu, sd))
    assert auto.sigma_ == pytest.approx(manual.sigma_ * sd, rel=1e-6)
    lo, hi = auto.predict_interval(Xt, 0.5)
    assert np.all(lo < a_mean + 1e-9) and np.all(a_mean < hi + 1e-9)


def test_known_sigma_is_in_y_units_and_kept():
    X, _, y = _data(300, 0, 0.3)
    m = SVIRegressor(width=2, epochs=2, random_state=0, sigma=3.0).fit(X, 10 * y)
    assert m.sigma_ == pytest.approx(3.0) and np.allclose(m.sigma_all_, 3.0)
    assert m.posterior_.noise_sd is None  # the known-noise model: nothing learned
    assert m.posterior_.hyper.sigma == pytest.approx(3.0 / m.y_scale_)
    lo, hi = m.predict_interval(X[:20])  # at least the noise's own 90% width, 2 z sigma
    assert np.all(hi - lo >= 2 * Z90 * 3.0 * (1 - 1e-6))


def test_lambda_s_auto_is_the_paper_s_rule():
    X, _, y = _data(300, 0, 0.3)
    m = ASVIRegressor(widths=(2, 4), epochs=2, random_state=0).fit(X, y)
    assert m.posterior_.hyper.lambda_s == pytest.approx(float(lambda_s_rule(300, 2, 0.1)))
    assert (
        ASVIRegressor(widths=(2,), epochs=2, lambda_s=3.0).fit(X, y).posterior_.hyper.lambda_s == 3
    )
    with pytest.raises(ValueError, match="lambda_s must be a number or 'auto'"):
        ASVIRegressor(widths=(2,), epochs=2, lambda_s="paper").fit(X, y)


def test_the_cap_binding_is_reported():
    X, _, y = _data(300, 0, 0.3)
    with pytest.warns(ConvergenceWarning, match="max_epochs=2 stopped widths \\[2\\]"):
        m = SVIRegressor(width=2, max_epochs=2, batch_size=100, random_state=0).fit(X, y)
    assert not m.converged_.any() and m.n_iter_.tolist() == [6] and m.n_steps_ == 6
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a fixed budget is what was asked for: no warning
        fixed = SVIRegressor(width=2, epochs=2, batch_size=100, random_state=0).fit(X, y)
    assert fixed.n_iter_.tolist() == [6] and not fixed.converged_.any()


def test_validation_fraction_holds_points_out_for_the_stopping_rule():
    X, _, y = _data(400, 0, 0.3)
    m = SVIRegressor(
        width=2, max_epochs=40, batch_size=100, random_state=0, validation_fraction=0.25
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m.fit(X, y)
    assert m.posterior_.hyper.lambda_s == pytest.approx(float(lambda_s_rule(300, 2, 0.1)))
    for bad in (0.0, 1.0, "x"):
        with pytest.raises(ValueError, match="validation_fraction"):
            SVIRegressor(width=2, validation_fraction=bad).fit(X, y)
    with pytest.raises(ValueError, match="set epochs=None"):
        SVIRegressor(width=2, epochs=3, validation_fraction=0.2).fit(X, y)


def test_bad_noise_settings_are_refused():
    X, _, y = _data(100, 0, 0.3)
    for bad in ("learned", True, -1.0, 0.0):
        with pytest.raises(ValueError, match="sigma"):
            SVIRegressor(width=2, epochs=1, sigma=bad).fit(X, y)
    with pytest.raises(ValueError, match="standardize_y"):
        SVIRegressor(width=2, epochs=1, standardize_y="yes").fit(X, y)
    with pytest.raises(ValueError, match="progress"):
        SVIRegressor(width=2, epochs=1, progress="sometimes").fit(X, y)


class _Stream(io.StringIO):
    def __init__(self, tty: bool):
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_progress_auto_draws_only_in_a_terminal_after_its_delay(monkeypatch):
    """The estimators' ``progress``: off, on, or "auto" -- a bar only on a terminal, after
    3 s (the bar itself: tests/simulate/test_progress.py)."""
    assert _progress(False, "x") is None and isinstance(_progress(True, "x"), Progress)
    monkeypatch.setattr("sys.stderr", _Stream(tty=False))
    assert _progress("auto", "x") is None  # not a terminal: no bar
    monkeypatch.setattr("sys.stderr", _Stream(tty=True))
    auto = _progress("auto", "x")
    assert isinstance(auto, Progress) and auto.delay == 3.0


@pytest.mark.slow
@pytest.mark.parametrize("noise", [0.1, 1.0])
@pytest.mark.parametrize("scale", [0.05, 20.0])
def test_calibration_across_noise_and_scale(noise, scale):
    """The coverage band at a third and at three times the default test's noise, on y
    scaled by 0.05 and 20 (a 400-fold range); and what the learned sd estimates: the
    residual sd of the fit, the noise and the fit's own error together (``sigma^2 =
    E_q[RSS] / n``), so sigma_^2 is within 10% of noise^2 + RMSE(f)^2 (at noise 0.1 the
    network's error, 0.06, is 17% of sigma_ and the noise alone would be missed by 17%)."""
    X, _, y = _data(2000, 0, noise, scale)
    got = _check(SVIRegressor(**EASY).fit(X, y), noise, scale)
    assert 0.85 <= got["coverage"] <= 0.95, got
    assert got["sigma"] ** 2 == pytest.approx(noise**2 + got["rmse_f"] ** 2, rel=0.1), got
    assert got["sigma"] >= noise * 0.97, got  # the noise is never explained away


@pytest.mark.slow
def test_sigma_recovers_a_known_noise_at_n_5000():
    X, _, y = _data(5000, 3, 0.5)
    m = SVIRegressor(width=8, batch_size=1000, lr=1e-2, random_state=0).fit(X, y)
    assert abs(m.sigma_ - 0.5) < 0.05 and m.converged_.all()


@pytest.mark.slow
def test_a_small_noise_start_avoids_the_constant_fit():
    """``NOISE_START`` and the warm-up (``simulate.core.training.fit_trainer``): from a tenth of y's
    sd a width-2 network fits y = x_1 + noise and the EM then finds the noise (0.1); from
    y's own sd (the constant fit's) its posterior collapses to the constant, which is why
    the start is small."""
    import simulate.estimators.base as est

    r = np.random.default_rng(0)
    X = r.uniform(-1, 1, (300, 3))
    y = X[:, 0] + 0.1 * r.normal(size=300)
    kw = dict(width=2, batch_size=100, random_state=0)  # the default lr: ~17,000 steps
    assert NOISE_START == 0.1
    m = SVIRegressor(**kw).fit(X, y)
    assert m.score(X, y) > 0.9 and abs(m.sigma_ - 0.1) < 0.02
    try:
        est.NOISE_START = 1.0
        assert SVIRegressor(**kw).fit(X, y).score(X, y) < 0.1
    finally:
        est.NOISE_START = 0.1


def test_the_default_fit_report_runs_and_records_the_cap(tmp_path):
    """``simulate.experiments.default_fit`` (the README's cost of the default fit), at a
    small n and a cap that binds: the report holds every field and the cap's warning."""
    from simulate.experiments.default_fit import main, run

    r = run(n=300, n_test=200, widths=(2, 4), max_epochs=1)
    assert r["widths"] == [2, 4] and len(r["n_iter"]) == 2 and not any(r["converged"])
    assert 0 <= r["picp90"] <= 1 and r["test_rmse"] > 0 and r["sigma"] > 0
    assert any("max_epochs=1" in w for w in r["warnings"])
    assert main(["--n", "5"]) == 2
