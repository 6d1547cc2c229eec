"""``simulate.sweep.train.foreign``: a named regressor's point metrics (the GP's d2 at a point
mass), its parameters' rounding rule, and its fingerprint."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.kernel_ridge import KernelRidge
from sklearn.neighbors import KNeighborsRegressor

from simulate.sweep.setup.config import SweepConfig
from simulate.sweep.setup.truth_spec import TruthSpec
from simulate.sweep.store.fingerprint import fingerprint_fields
from simulate.sweep.train.foreign import identity, integer_names, point_metrics, values_at
from simulate.sweep.train.gp import gp_metrics

KNN = "sklearn.neighbors:KNeighborsRegressor"


def _cfg(**params):
    return SweepConfig(truths=[TruthSpec("holder", p=1, alpha=0.5)], ns=[100, 200, 400],
                       replicates=2, estimator="regressor", regressor=KNN,
                       regressor_params=params or None)  # fmt: skip


def test_point_metrics_are_the_gp_metrics_of_a_point_mass():
    """d2, d and l2sq of a prediction equal the GP control's metrics of a posterior with
    that mean and no spread (every draw the prediction)."""
    rng = np.random.default_rng(3)
    f0t, pred = rng.normal(size=500), rng.normal(size=500)
    want = gp_metrics(pred, np.zeros((500, 500)), f0t, 0.7, draws=4, seed=1)
    got = point_metrics(pred, f0t, 0.7)
    assert got == pytest.approx(want, rel=1e-9)


def test_values_are_rounded_where_the_default_is_an_int():
    """n_neighbors (default 5, an int): n/3 at n = 100 is 33.3 -> 33, at 200 66.7 -> 67
    (halves up: 2.5 -> 3); a literal and a string as given."""
    cls = KNeighborsRegressor
    rounded = integer_names(cls, cls().get_params())
    at = lambda n, **p: values_at(p, rounded, n, 1, 0.5)  # noqa: E731
    assert at(100, n_neighbors="n/3") == {"n_neighbors": 33}
    assert at(200, n_neighbors="n/3") == {"n_neighbors": 67}
    assert at(5, n_neighbors="n/2") == {"n_neighbors": 3}
    assert at(400, weights="'distance'") == {"weights": "distance"}


def test_an_int_default_the_class_declares_real_is_not_rounded():
    """Variant: KernelRidge's ridge penalty ``alpha`` defaults to the int 1 but is declared
    a real >= 0 (``_parameter_constraints``): ``1/n`` stays 1/400 (rounded, it would be 0,
    no ridge at all); a class declaring nothing is rounded by its default alone."""
    cls = KernelRidge
    assert cls().get_params()["alpha"] == 1 and isinstance(cls().get_params()["alpha"], int)
    rounded = integer_names(cls, cls().get_params())
    assert "alpha" not in rounded
    assert values_at({"alpha": "1/n"}, rounded, 400, 1, 0.5) == {"alpha": 1 / 400}

    class Plain:
        def __init__(self, k=3, scale=1.0, flag=True):
            self.k, self.scale, self.flag = k, scale, flag

    assert integer_names(Plain, {"k": 3, "scale": 1.0, "flag": True}) == {"k"}


def test_the_fingerprint_changes_with_a_parameter_not_with_nothing():
    """Another value of a parameter, or an expression in its place, is another
    fingerprint; the same parameters give the same one."""
    a, b, c = (fingerprint_fields(_cfg(n_neighbors=k)) for k in ("5", "7", "ceil(sqrt(n))"))
    assert a != b and a != c and b != c
    assert fingerprint_fields(_cfg(n_neighbors="5")) == a
    assert fingerprint_fields(_cfg()) != a


def test_a_regressor_is_named_with_its_estimator_alone():
    with pytest.raises(ValueError, match="estimator = 'regressor' alone"):
        SweepConfig(truths=[TruthSpec("holder", p=1, alpha=0.5)], ns=[100, 200, 400],
                    regressor=KNN)  # fmt: skip


def test_a_class_of_no_installed_distribution_is_version_unknown(tmp_path, monkeypatch):
    """Variant: a regressor in a module of the user's own (no distribution holds it) is
    identified by its qualified name with version ``"unknown"``; scikit-learn's by its own."""
    (tmp_path / "my_local_regressors.py").write_text(
        "class Mean:\n"
        "    def __init__(self, shift=0.0):\n"
        "        self.shift = shift\n"
        "    def get_params(self, deep=True):\n"
        "        return {'shift': self.shift}\n"
        "    def fit(self, X, y):\n"
        "        self.m = float(sum(y)) / len(y)\n"
        "        return self\n"
        "    def predict(self, X):\n"
        "        return [self.m + self.shift] * len(X)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    got = identity("my_local_regressors:Mean")
    assert got == {"qualname": "my_local_regressors.Mean", "version": "unknown"}
    assert identity(KNN)["version"].startswith("scikit-learn ")
