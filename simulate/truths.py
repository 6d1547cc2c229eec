"""Ground truths f_0 and data from the regression model (1): ``Y = f_0(X) + N(0, sigma^2)``,
``X ~ U([-1, 1]^p)``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["TeacherNetwork", "make_regression_data"]


@dataclass
class TeacherNetwork:
    """The paper's teacher (Section 8.1, Figure 1(a)): a ReLU network ``p-w-...-w-1``
    (default 20-10-10-1) whose weights and biases are drawn from U(0.5, 1.5) and then set to
    zero independently with probability 1/2 (``drop``).  Biases count as edges: the paper's
    "around 165.5" true edges is half of the 331 weights and biases of 20-10-10-1.
    ``p`` larger than the teacher's ``p_active`` adds irrelevant inputs (zero weights).
    """

    p: int = 20
    widths: tuple = (10, 10)
    seed: int = 0
    low: float = 0.5
    high: float = 1.5
    drop: float = 0.5
    p_active: int | None = None

    def __post_init__(self):
        if self.p < 1 or any(w < 1 for w in self.widths):
            raise ValueError(f"p and widths must be >= 1, got p={self.p}, widths={self.widths}")
        rng = np.random.default_rng(self.seed)
        active = self.p if self.p_active is None else self.p_active
        if not 1 <= active <= self.p:
            raise ValueError(f"p_active must be in [1, p], got {self.p_active}")
        dims = [active, *self.widths, 1]
        self.weights, self.biases = [], []
        for i, o in zip(dims[:-1], dims[1:], strict=True):
            W = rng.uniform(self.low, self.high, size=(i, o)) * (rng.random((i, o)) >= self.drop)
            b = rng.uniform(self.low, self.high, size=o) * (rng.random(o) >= self.drop)
            self.weights.append(W)
            self.biases.append(b)
        self.p_active_ = active

    @property
    def n_edges(self) -> int:
        """Number of non-zero weights and biases."""
        return int(
            sum(
                (W != 0).sum() + (b != 0).sum()
                for W, b in zip(self.weights, self.biases, strict=True)
            )
        )

    def __call__(self, X) -> np.ndarray:
        h = np.asarray(X, dtype=float)[:, : self.p_active_]
        for k, (W, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            h = h @ W + b
            if k < len(self.weights) - 1:
                h = np.maximum(h, 0)
        return h[:, 0]


def make_regression_data(f0, n: int, p: int, sigma: float, seed: int):
    """``(X, y)`` with ``X ~ U([-1,1]^p)`` (n, p) and ``y = f0(X) + N(0, sigma^2)``."""
    if n < 1 or p < 1 or not sigma > 0:
        raise ValueError(f"need n >= 1, p >= 1, sigma > 0; got n={n}, p={p}, sigma={sigma}")
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, p))
    return X, f0(X) + sigma * rng.standard_normal(n)
