"""Property tests (hypothesis) of the pieces the rest is built on: the random-number mixer,
the padding of models of different widths, the grouping of candidate widths, and the slope
fit's invariance to the scale of the values."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import simulate.core.rng as rng
from simulate.core import Layout
from theory import num_edges

widths_st = st.lists(st.integers(1, 40), min_size=1, max_size=6)


@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=64))
def test_mix32_on_int32_is_bit_identical(values):
    x = torch.tensor(values, dtype=torch.int64)
    assert torch.equal(rng.mix32_i32(rng._to_i32(x)).to(torch.int64) & 0xFFFFFFFF, rng.mix32(x))


@given(widths_st, st.integers(1, 4), st.integers(1, 30))
def test_layout_edge_counts_match_the_theory_for_any_widths(widths, depth, p):
    lay = Layout(p, depth, widths)
    H = lay.mask(None, torch.float64)[:, : lay.P_net].sum(-1)
    assert H.tolist() == [float(num_edges(depth, w, p)) for w in widths]


@given(st.integers(1, 20), st.integers(1, 20), st.integers(1, 3), st.integers(1, 5))
def test_a_models_counters_do_not_depend_on_padding(w, extra, depth, p):
    """The slots a width-w model uses carry the same counters alone and padded beside a
    wider model: so it draws the same noise either way (simulate.core.rng)."""
    alone = Layout(p, depth, [w])
    padded = Layout(p, depth, [w, w + extra])
    a = alone.counters()[0][alone.mask(None, torch.float64)[0] > 0]
    b = padded.counters()[0][padded.mask(None, torch.float64)[0] > 0]
    assert sorted(a.tolist()) == sorted(b.tolist())


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.floats(-50, 50), min_size=1, max_size=30),
    st.floats(0.01, 20),
    st.floats(0.01, 0.99),
)
def test_mixture_quantile_is_where_the_mixture_cdf_reaches_its_level(draws, s, q):
    """``mixture_quantiles``: the mixture's CDF at the returned point is the level (to 1e-9),
    and the quantiles are ordered in the level."""
    from scipy.special import ndtr

    from simulate.core.posterior import mixture_quantiles

    f = np.array(draws, dtype=float)[:, None]
    (x,) = mixture_quantiles(f, s, (q,))
    assert ndtr((x[0] - f[:, 0]) / s).mean() == pytest.approx(q, abs=1e-9)
    lo, hi = mixture_quantiles(f, s, (min(q, 0.5), max(q, 0.5)))
    assert lo[0] <= hi[0]
