"""The theorem test's prospective power: whether the design separates the band from the
too-slow control's (:func:`power_check`, the earlier rule) and the probability of a
PASS at the exponent (:func:`confirm_power`, the confirming rule; both rules:
``verify.stats.theorem``).

**Power is a property of the design**, computed before the data from a pilot coefficient of
variation (:func:`verify.stats.slopes.expected_slope_se`, the protocol's ``pilot_cv``): it says
what a *non-rejection* means (UNDECIDABLE: the design could not have decided; INCONCLUSIVE:
it could, this run did not); it never withholds a rejection the interval already makes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from verify.stats.slopes import _half_width, _t_quantile, loglog_slope

__all__ = [
    "SEARCH",
    "Power",
    "SearchLimits",
    "power_check",
    "pass_probability",
    "confirm_power",
]


@dataclass(frozen=True)
class Power:
    """:func:`power_check`: whether the design separates the band from the too-slow
    control's (``separable``: the ``gap`` between them exceeds two expected interval
    half-widths, ``half_width``), what would make it separable (``replicates_needed``,
    ``n_needed``; None: nothing within the limits), the prospective ``slope_se`` it
    assumed and the pilot cv that gave it (``pilot_cv``, None when not from a pilot)."""

    separable: bool
    gap: float
    half_width: float
    replicates_needed: int | None
    n_needed: float | None
    slope_se: float
    pilot_cv: float | None = None
    # the confirming rule's power (confirm_power): the probability of a PASS at slope e,
    # and the floor it is held to (None under the earlier rule, whose power is separation)
    probability: float | None = None
    floor: float | None = None


@dataclass(frozen=True)
class SearchLimits:
    """How far :func:`power_check` and :func:`confirm_power` search for what would power a
    design: replicate counts up to ``r_limit`` at its n, and the largest n of its grid up to
    ``n_limit``."""

    n_limit: float = 1e12
    r_limit: int = 10_000


# the limits every caller searches within
SEARCH = SearchLimits()


def power_check(
    ns, predicted: float, log_power: float, slope_se: float, replicates: int,
    level: float = 0.95, limits: SearchLimits = SEARCH,
) -> Power:  # fmt: skip
    """Can a slope interval of this design tell the predicted band ``[e, e + c ell]`` from
    the too-slow control's ``[e/2, e/2 + c ell]``?  Separable when the gap between them,
    ``|e|/2 - c ell``, exceeds two interval half-widths (``t_{R-1} * slope_se`` each): then
    no interval meets both.  Also what would make it separable: the replicates at these
    n (the SE shrinking like ``1/sqrt(R)``; None if no R up to ``r_limit`` does: the gap
    is not positive) and the largest n of a geometric grid of the same length from
    ``ns[0]`` (the SE shrinking with the spread of log n; None if none up to ``n_limit``;
    both limits: ``limits``)."""
    n_limit, r_limit = limits.n_limit, limits.r_limit
    ns = np.asarray(ns, dtype=float)
    e = float(predicted)
    gap = abs(e) / 2 - log_power * loglog_slope(ns)
    h = _half_width(slope_se, replicates, level) if math.isfinite(slope_se) else math.inf
    separable = bool(gap > 2 * h)
    r_needed = None
    if gap > 0 and math.isfinite(slope_se) and replicates > 1:
        for R in range(2, r_limit + 1):
            if gap > 2 * _half_width(slope_se * math.sqrt(replicates / R), R, level):
                r_needed = R
                break
    n_needed = None
    sd0 = float(np.log(ns).std())
    for top in np.geomspace(ns[-1], n_limit, 200):
        grid = np.geomspace(ns[0], top, ns.size)
        g = abs(e) / 2 - log_power * loglog_slope(grid)
        se = slope_se * sd0 / float(np.log(grid).std()) if math.isfinite(slope_se) else 0.0
        if g > 2 * _half_width(se, replicates, level):
            n_needed = float(top)
            break
    return Power(separable, gap, h, r_needed, n_needed, float(slope_se))


def pass_probability(margin: float, slope_se: float, replicates: int, level: float = 0.95) -> float:
    """The probability that a ``level`` interval's upper end ``slope + t_{R-1} SE`` lies
    below a bound ``margin`` above the true slope, the slope estimate normal about it with
    standard error ``slope_se``: ``Phi(margin / SE - t_{R-1})`` (the SE taken as known: a
    prospective figure, like every power here).  0 without an interval (one replicate)."""
    if replicates < 2 or not (math.isfinite(slope_se) and slope_se > 0):
        return 0.0
    return float(stats.norm.cdf(margin / slope_se - _t_quantile(level, replicates - 1)))


def confirm_power(
    ns, predicted: float, log_power: float, slope_se: float, replicates: int,
    level: float = 0.95, floor: float = 0.9, limits: SearchLimits = SEARCH,
) -> Power:  # fmt: skip
    """The confirming theorem test's prospective power (the confirming rule,
    ``verify.stats.theorem``): the probability of a PASS -- the interval's upper end below the
    band's top ``e + c ell`` -- when the slope is e (:func:`pass_probability` with the
    margin ``gap = c ell``); powered when it is at least ``floor``.  Also what would make it
    so: the replicates at these n (the SE shrinking like ``1/sqrt(R)``; None if none up to
    ``r_limit``) and the largest n of a geometric grid of the same length from ``ns[0]``
    (the SE shrinking with the spread of log n, the band's top moving with ell; None if none
    up to ``n_limit``).  A band with no log factor (c = 0) has no margin: an estimator
    exactly at e passes with probability ``1 - level`` / 2 at most, and no design reaches
    the floor.  The two limits: ``limits``."""
    n_limit, r_limit = limits.n_limit, limits.r_limit
    ns = np.asarray(ns, dtype=float)
    gap = float(log_power) * loglog_slope(ns)
    h = _half_width(slope_se, replicates, level) if math.isfinite(slope_se) else math.inf
    prob = pass_probability(gap, slope_se, replicates, level)
    r_needed = None
    if gap > 0 and math.isfinite(slope_se) and replicates > 1:
        for R in range(2, r_limit + 1):
            if pass_probability(gap, slope_se * math.sqrt(replicates / R), R, level) >= floor:
                r_needed = R
                break
    n_needed = None
    if gap > 0 and math.isfinite(slope_se):
        sd0 = float(np.log(ns).std())
        for top in np.geomspace(ns[-1], n_limit, 200):
            grid = np.geomspace(ns[0], top, ns.size)
            se = slope_se * sd0 / float(np.log(grid).std())
            g = float(log_power) * loglog_slope(grid)
            if pass_probability(g, se, replicates, level) >= floor:
                n_needed = float(top)
                break
    return Power(
        separable=bool(prob >= floor), gap=gap, half_width=h, replicates_needed=r_needed,
        n_needed=n_needed, slope_se=float(slope_se), probability=prob, floor=float(floor),
    )  # fmt: skip
