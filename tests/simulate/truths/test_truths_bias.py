"""The teacher's bias convention: eq. (eqmod2)'s ``sigma_b(y) = relu(y - b)`` in the hidden
layers (``"subtract"``, the default) or ``relu(h W + b)`` (``"add"``); the output adds its
bias either way.  The rate sweeps' teacher truths keep ``"add"``."""

import numpy as np
import pytest
import torch

from simulate.core.layout import Layout
from simulate.truths.functions import TeacherNetwork

X = np.random.default_rng(1).uniform(-1, 1, size=(100_000, 20))


def in_the_core(t: TeacherNetwork, X, sign: float) -> np.ndarray:
    """The teacher's weights run through the core's own batched ReLU network
    (``simulate.core.layout.Layout.forward``, code independent of ``TeacherNetwork``): hidden
    biases ``sign * b`` (``relu(h W + sign b)``), the output bias added."""
    layout = Layout(t.p, len(t.weights) - 1, [max(W.shape[1] for W in t.weights[:-1])])
    theta = torch.zeros(1, layout.P, dtype=torch.float64)
    for l, (W, b) in enumerate(zip(t.weights, t.biases, strict=True)):
        blk = layout.block(theta, l)[0]  # [out, in + 1], a view
        o, i = W.shape[1], W.shape[0]
        blk[:o, :i] = torch.as_tensor(W.T)
        blk[:o, -1] = torch.as_tensor(b if l == len(t.weights) - 1 else sign * b)
    x = torch.as_tensor(X, dtype=torch.float64)[None]
    return layout.forward(theta, x)[0, 0].numpy()


def test_both_conventions_are_what_they_say():
    add, sub = TeacherNetwork(p=20, seed=0, bias="add"), TeacherNetwork(p=20, seed=0)
    assert TeacherNetwork().bias == "subtract"  # eq. (eqmod2), the measured default
    np.testing.assert_allclose(add(X[:1000]), in_the_core(add, X[:1000], +1.0), atol=1e-12)
    np.testing.assert_allclose(sub(X[:1000]), in_the_core(sub, X[:1000], -1.0), atol=1e-12)
    assert all(np.array_equal(a, b) for a, b in zip(add.weights, sub.weights, strict=True))
    assert add.n_edges == sub.n_edges == 167
    assert not np.allclose(add(X[:1000]), sub(X[:1000]))  # a different truth
    for t in (add, sub):  # without biases the two coincide
        t.biases = [np.zeros_like(b) for b in t.biases]
    assert np.array_equal(add(X[:1000]), sub(X[:1000]))


def test_active_fractions_of_the_hidden_units():
    """Seed 0, 100,000 inputs: the fraction of (input, unit) pairs with a positive hidden
    activation.  Tolerance 0.01: each fraction averages 10^6 pairs (SE < 0.001 even with
    the units' correlation)."""
    fa = [
        float((h > 0).mean())
        for h in TeacherNetwork(p=20, seed=0, bias="add").hidden_and_output(X)[0]
    ]
    fs = [float((h > 0).mean()) for h in TeacherNetwork(p=20, seed=0).hidden_and_output(X)[0]]
    assert fa == pytest.approx([0.657, 0.956], abs=0.01)
    assert fs == pytest.approx([0.342, 0.612], abs=0.01)


def test_bad_bias_convention():
    with pytest.raises(ValueError, match="bias"):
        TeacherNetwork(bias="minus")
