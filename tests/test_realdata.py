"""Real-data loaders, the UCI protocol's standardisation, and tiny-tier smoke runs."""

import numpy as np

from figures.realdata import mnist_figure, run_mnist1d, run_uci, uci_table
from simulate.data import boston, concrete, mnist1d, standardize, uci_splits


def test_loaders_shapes_and_no_missing_values():
    X, y = concrete()
    assert X.shape == (1030, 8) and y.shape == (1030,) and np.isfinite(X).all()
    X, y = boston()
    assert X.shape == (506, 13) and np.isfinite(y).all()
    X, y, Xt, yt = mnist1d()
    assert X.shape == (4000, 40) and Xt.shape == (1000, 40)
    assert set(np.unique(y)) == set(range(10))
    X2, *_ = mnist1d()
    np.testing.assert_array_equal(X, X2)  # generated deterministically, nothing downloaded


def test_splits_are_deterministic_and_disjoint():
    a, b = uci_splits(506, seed=0), uci_splits(506, seed=0)
    assert len(a) == 20
    for (tr, te), (tr2, te2) in zip(a, b, strict=True):
        np.testing.assert_array_equal(te, te2)
        np.testing.assert_array_equal(tr, tr2)
        assert len(te) == 51 and not set(tr) & set(te) and len(tr) + len(te) == 506
    assert not np.array_equal(a[0][1], a[1][1])


def test_standardization_uses_training_data_only():
    rng = np.random.default_rng(0)
    train, test = rng.normal(5, 2, (100, 3)), rng.normal(50, 20, (10, 3))
    mu, sd, tr, te = standardize(train, test)
    np.testing.assert_allclose(mu, train.mean(0))
    np.testing.assert_allclose(tr.mean(0), 0, atol=1e-12)
    np.testing.assert_allclose(tr.std(0), 1)
    np.testing.assert_allclose(te, (test - train.mean(0)) / train.std(0))  # test not used
    _, sd2, _, _ = standardize(np.ones((5, 1)), np.ones((2, 1)))
    assert sd2[0] == 1.0  # a constant column is left unscaled


def test_uci_and_mnist_tiny_runs(tmp_path):
    recs = run_uci("tiny", str(tmp_path), log=lambda *_: None)
    assert {(r["dataset"], r["method"]) for r in recs} == {
        (d, m) for d in ("concrete", "boston") for m in ("SVI", "Dense-BNN", "HS-BNN")
    }
    assert all(np.isfinite(r["rmse"]) and np.isfinite(r["ll"]) for r in recs)
    res = uci_table(recs, str(tmp_path), "tiny")
    assert len(res["rows"]) == 6 and (tmp_path / "uci-tiny.tex").stat().st_size > 0
    rec = run_mnist1d("tiny", str(tmp_path), log=lambda *_: None)
    assert rec["selected_width"] in rec["widths"]
    assert len(rec["curves"]["dense"]["accuracy"]) == 2
    out = mnist_figure(rec, str(tmp_path), "tiny")
    assert out["panels"] == 1 and all((tmp_path / p.split("/")[-1]).exists() for p in out["paths"])
