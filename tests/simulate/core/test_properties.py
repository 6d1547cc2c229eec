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
from simulate.sweep.widths import group_widths
from theory import num_edges
from verify.slopes import fit_slope

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


@given(st.lists(st.integers(1, 512), min_size=1, max_size=12), st.floats(1.0, 4.0))
def test_group_widths_is_a_partition_within_its_waste_bound(widths, waste):
    groups = group_widths(widths, waste)
    flat = [w for g in groups for w in g]
    assert sorted(flat) == sorted(set(widths))  # every distinct width exactly once
    for g in groups:
        assert g == sorted(g, reverse=True)
        assert len(g) == 1 or len(g) * g[0] ** 2 <= waste * sum(w * w for w in g)


@settings(max_examples=25)
@given(st.floats(1e-6, 1e6), st.integers(0, 2**16))
def test_fit_slope_is_invariant_to_scaling_the_values(c, seed):
    rng = np.random.default_rng(seed)
    ns = np.array([250, 1000, 4000, 16000])
    V = 0.3 * ns**-0.5 * np.exp(rng.normal(0, 0.05, (4, ns.size)))
    a, b = fit_slope(ns, V), fit_slope(ns, c * V)
    assert b.slope == pytest.approx(a.slope, abs=1e-9)
    assert (b.ci_low, b.ci_high) == pytest.approx((a.ci_low, a.ci_high), abs=1e-9)


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
