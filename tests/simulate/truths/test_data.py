"""Real data (``simulate.truths.data``): the loaders, MNIST-1D's nested splits and cache, the
UCI splits and the protocol's standardisation on the training part only."""

import numpy as np
import pytest

from simulate.truths.data import (
    boston,
    concrete,
    mnist1d,
    mnist1d_pool,
    mnist1d_split,
    standardize,
    uci_splits,
)  # fmt: skip


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
    from mnist1d.data import make_dataset

    d = make_dataset()  # the package's default dataset: the same signals and split
    np.testing.assert_array_equal(X, d["x"])
    np.testing.assert_array_equal(Xt, d["x_test"])
    np.testing.assert_array_equal(yt, d["y_test"])


def test_mnist1d_split_sizes_nesting_no_overlap_and_cache(tmp_path):
    """The requested sizes; training sets of one pool nested, one shared test set, no test
    signal among the training signals; the cache gives back the generated pool; bad sizes
    are refused."""
    small = mnist1d_split(300, 200, 800, cache_dir=str(tmp_path))
    big = mnist1d_split(600, 200, 800, cache_dir=str(tmp_path))
    assert small[0].shape == (300, 40) and small[2].shape == (200, 40)
    assert big[0].shape == (600, 40) and big[1].shape == (600,)
    np.testing.assert_array_equal(big[0][:300], small[0])  # nested
    np.testing.assert_array_equal(big[2], small[2])  # one test set
    train = {row.tobytes() for row in big[0]}
    assert not any(row.tobytes() in train for row in big[2])
    assert (tmp_path / "mnist1d-800-seed42.npz").exists()
    fresh = mnist1d_pool(800)  # generated again, not read from the cache
    cached = mnist1d_pool(800, cache_dir=str(tmp_path))
    np.testing.assert_array_equal(fresh[0], cached[0])
    assert not np.array_equal(mnist1d_pool(800, seed=1)[0], fresh[0])  # the seed matters
    with pytest.raises(ValueError, match="pool"):
        mnist1d_split(700, 200, 800)
    with pytest.raises(ValueError, match="multiple of 10"):
        mnist1d_pool(805)


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
