"""Designs sized from realised spreads: the cvs a run's records realised, and the replicates
each test needs at a design's n for a stated power.

A design's power is computed before its data from a coefficient of variation
(``verify.stats.slopes.expected_slope_se``: a slope's SE is ``cv / sqrt(R Sxx)``).  A pilot's cv
is an estimate from few replicates; the cv a large run *realises* is read back here from its
results, ``cv = SE sqrt(R Sxx)`` (the SE its interval was built on, over the n it fitted):

* the theorem test's, of a cell's d^2 (:attr:`Realised.cv`, the protocol's ``[pilot_cv]``);
* the attainment test's, of the paired slope difference with the reference
  (``cv_diff``, ``[pilot_cv_diff]``);
* the budget control's, of the slope's change under twice the budget over the control's
  own n and replicates (``cv_control``).

:func:`size` turns them into replicates for a power (0.9 by default) at a design's n:

* **theorem** (the confirming rule): the probability of a PASS when the slope is e
  (``verify.stats.power.confirm_power``) at least the power;
* **attainment**: the probability of a PASS when ASVI attains the reference's rate (a
  paired difference of 0, the interval's upper end at most the allowance:
  ``verify.stats.power.pass_probability``) at least the power, *and* the gap to half the
  reference's rate at least two expected half-widths (the test's own power rule,
  ``verify.stats.attainment.attainment_power``); where the allowance eats that gap no replicate
  count
  will do (None: the test is UNDECIDABLE by design);
* **budget control**: the probability that the slope change's interval lies inside the
  margin when the change is 0 (``2 Phi(m / SE - t) - 1``, an equivalence test that can say
  "converged") at least the power, at the control's n (the design's smallest and largest
  unless it runs at every n).

``python -m verify.sizing RECORDS... [--n N...]`` prints both for the records' truths.
Every number is prospective: a realised cv carries its own sampling error (about
``cv / sqrt(2 (R - 1))``), so a design sized at it is powered at that cv, not beyond it.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass

import numpy as np
from scipy import stats

from theory.plumbing.cli import Parser, print_error
from theory.plumbing.paths import path_arg
from verify import protocol as protocols
from verify.reading.analysis import analyse
from verify.reading.controls import read_with_control
from verify.reading.design import PRIMARY_METRIC
from verify.reading.pilot import realised_cv
from verify.results import MetricResult
from verify.stats.attainment import attainment_power
from verify.stats.power import pass_probability
from verify.stats.slopes import _t_quantile, expected_slope_se, log_allowance, loglog_slope

__all__ = ["Cvs", "Realised", "Sizing", "Target", "control_probability", "realised", "size"]

R_LIMIT = 10_000


@dataclass(frozen=True)
class Realised:
    """One ASVI entry's realised cvs (module docstring): of a cell's d^2, of the paired
    difference with the reference (None without one) and of the budget control's slope
    change (None without a control), with the n and replicates they were read at."""

    truth: str
    ns: tuple[int, ...]
    replicates: int
    cv: float
    cv_diff: float | None
    cv_control: float | None
    control_ns: tuple[int, ...] | None
    control_replicates: int | None


def realised(r: MetricResult) -> Realised:
    """The realised cvs of one result (module docstring)."""
    R, ns = len(r.replicates.used), r.curve.ns
    t = r.theorem
    se = (t.ci_high - t.ci_low) / (2 * _t_quantile(t.level, R - 1))
    cv_diff = None if r.attainment is None else realised_cv(r.attainment.diff.se, ns, R)
    cv_c = c_ns = c_R = None
    if r.control is not None and r.control.shift is not None:
        sh = r.control.shift
        c_ns, c_R = tuple(int(n) for n in sh.ns), len(sh.replicates)
        cv_c = realised_cv(sh.diff.se, c_ns, c_R)
    return Realised(r.truth, tuple(ns), R, realised_cv(se, ns, R), cv_diff, cv_c, c_ns, c_R)


@dataclass(frozen=True)
class Sizing:
    """Replicates for ``power`` at ``ns`` (None: no count up to the limit reaches it),
    per test (module docstring), with the probabilities at ``at`` replicates."""

    ns: tuple[float, ...]
    power: float
    theorem: int | None
    attainment: int | None
    control: int | None
    at: int
    theorem_p: float
    attainment_p: float | None
    control_p: float | None


def control_probability(margin: float, se: float, replicates: int, level: float = 0.95) -> float:
    """The probability that an interval ``shift +- t_{R-1} SE`` about a change of 0 lies
    inside ``[-margin, margin]``: ``2 Phi(margin / SE - t) - 1`` (0 where negative)."""
    if replicates < 2 or not (math.isfinite(se) and se > 0):
        return 0.0
    return max(0.0, float(2 * stats.norm.cdf(margin / se - _t_quantile(level, replicates - 1)) - 1))


def _first(ok) -> int | None:
    return next((R for R in range(2, R_LIMIT + 1) if ok(R)), None)


@dataclass(frozen=True)
class Target:
    """What :func:`size` sizes the tests for: the theorem test's exponent ``predicted`` and
    band log power (its margin is ``c ell``: the sizes depend on the band), and the class's
    exponent the attainment test's half rate is of (``reference_exponent``; None: no
    attainment test)."""

    predicted: float
    band_log_power: float
    reference_exponent: float | None = None


@dataclass(frozen=True)
class Cvs:
    """The cvs :func:`size` sizes at (module docstring): of a cell's d^2 (``cv``), of the
    paired difference with the reference (``cv_diff``) and of the budget control's slope
    change (``cv_control``); None: that test is not sized."""

    cv: float
    cv_diff: float | None = None
    cv_control: float | None = None


def size(
    ns, target: Target, cvs: Cvs, proto: protocols.Protocol, control_ns=None,
    power: float = 0.9, at: int = 0,
) -> Sizing:  # fmt: skip
    """The replicates each test needs for ``power`` at ``ns`` (module docstring) for the
    ``target`` at the ``cvs``; ``control_ns``: the budget control's n (default the ends of
    ``ns``), its replicates as many as the design's; ``at``: the replicates the
    probabilities are reported at (default: the theorem test's need)."""
    band_log_power, reference_exponent = target.band_log_power, target.reference_exponent
    cv, cv_diff, cv_control = cvs.cv, cvs.cv_diff, cvs.cv_control
    ns = tuple(float(n) for n in ns)
    level = proto.level

    def th(R):  # confirm_power's probability, without its own searches for R and n
        return pass_probability(band_log_power * loglog_slope(ns),
                                expected_slope_se(ns, R, cv), R, level)  # fmt: skip

    allowance = log_allowance(ns, proto.attainment_log_power)

    def att(R):
        if cv_diff is None or reference_exponent is None:
            return None
        se = expected_slope_se(ns, R, cv_diff)
        if not attainment_power(ns, reference_exponent, allowance, se, R, level).separable:
            return 0.0
        return pass_probability(allowance, se, R, level)

    c_ns = tuple(control_ns) if control_ns is not None else (ns[0], ns[-1])

    def ctl(R):
        if cv_control is None:
            return None
        se = expected_slope_se(c_ns, R, cv_control)
        return control_probability(proto.budget_margin, se, R, level)

    need_t = _first(lambda R: th(R) >= power)
    need_a = None if att(2) is None else _first(lambda R: att(R) >= power)
    need_c = None if ctl(2) is None else _first(lambda R: ctl(R) >= power)
    at = at or need_t or 2
    return Sizing(ns, power, need_t, need_a, need_c, at, th(at), att(at), ctl(at))


def _grid(ns, top: float) -> tuple[float, ...]:
    """A geometric grid of ``len(ns)`` from ``ns[0]`` to ``top``."""
    return tuple(float(round(x)) for x in np.geomspace(ns[0], top, len(ns)))


def main(argv=None) -> int:
    ap = Parser(
        prog="python -m verify.sizing",
        description="Realised cvs of recorded runs and the replicates each test needs for a"
        " power (default 0.9) at their n and at larger n",
    )
    ap.add_argument(
        "records", nargs="+", type=path_arg, help="records files (each with its -double control)"
    )
    ap.add_argument("--protocol", choices=protocols.names(), default=protocols.DEFAULT)
    ap.add_argument("--power", type=float, default=0.9)
    ap.add_argument(
        "--top",
        type=float,
        nargs="+",
        default=[32_000, 128_000, 512_000],
        help="largest n of the geometric grids to size (same length as the records')",
    )
    args = ap.parse_args(argv)
    if not 0.5 <= args.power < 1:
        print("error: --power must be in [0.5, 1)", file=sys.stderr)
        return 2
    proto = protocols.load(args.protocol)
    for path in args.records:
        if not os.path.isfile(path):
            print_error(f"no records file {path}")
            return 2
        recs, ctrl = read_with_control(path, "give a records file of one configuration")
        for r in analyse(recs, control=ctrl, protocol=proto):
            if r.metric != PRIMARY_METRIC or r.role == "arm":  # any estimator's entry
                continue
            q = realised(r)
            print(
                f"{q.truth} {r.estimator} ({os.path.basename(path)}): R = {q.replicates},"
                f" n = {list(q.ns)};"
                f" realised cv {q.cv:.2f}"
                + (f", of the difference {q.cv_diff:.2f}" if q.cv_diff is not None else "")
                + (f", of the control's change {q.cv_control:.2f} (R = {q.control_replicates},"
                   f" n = {list(q.control_ns)})" if q.cv_control is not None else "")
            )  # fmt: skip
            ref = r.theorem.predicted if r.attainment is not None else None
            for top in args.top:
                g = _grid(q.ns, top)
                ell = loglog_slope(g)
                c = r.theorem.band_log_power  # the teacher's varies slowly with n: kept
                s = size(g, Target(r.theorem.predicted, c, ref),
                         Cvs(q.cv, q.cv_diff, q.cv_control), proto, power=args.power)  # fmt: skip
                what = lambda k: "none (the allowance eats the gap)" if k is None else str(k)  # noqa: E731
                print(
                    f"  n = {int(g[0])}..{int(g[-1])} (ell {ell:.3f}): replicates for power"
                    f" {args.power:g}: theorem {what(s.theorem)}"
                    + (f", attainment {what(s.attainment)}" if ref is not None else "")
                    + (f", budget control {what(s.control)}" if q.cv_control is not None else "")
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
