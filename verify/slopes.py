"""Log-log slope fitting with replicate-level uncertainty, and the verdict rule.

Data: ``values[r, j]``, the metric of replicate r at sample size ``ns[j]`` (replicates are
nested across n, so each row is one curve).  The fitted quantity is the least-squares
slope of ``log(mean_r values[:, j])`` against ``log ns[j]``.

Confidence interval (``level``, default 95%): the slope is recomputed on ``n_boot``
bootstrap resamples of whole replicates (rows); their standard deviation, multiplied by
``sqrt(R / (R - 1))`` (the bootstrap's plug-in variance is biased low by (R - 1)/R), is the
standard error, and the interval is ``slope +- t_{R-1} * SE``.  A plain percentile interval
from R = 3..10 replicates undercovers badly (there are only 10 distinct resamples of 3); the
t-interval on the bootstrap SE holds its nominal coverage (tested over many seeds).

Log factor: the theorems bound the rate as ``n^e log^c n`` with ``c = 2 delta`` for d^2 and
squared L2, ``delta`` for d (``theory.log_factor_power``).  The *corrected slope* is the
slope of ``log(mean) - c log log n``.  Over the design, removing the log factor lowers the
slope by the constant ``shift = c * slope(log log n ~ log n)``.

Theorem test (:func:`theorem_test`): if the truth is ``C n^e log^{c'} n`` for some
``0 <= c' <= c`` (the theorem allows any log power up to c), the raw slope lies in the band
``[e, e + shift]``.  The slope's confidence interval *meets* a band when they overlap.
Two negative controls apply the same rule to wrong exponents: *too slow* (``e / 2``) and
*too fast* (``2 e``); a control is *rejected* when the interval misses its band.

* **FAIL** when the interval misses the predicted band (the data contradict the rate);
* **PASS** when it meets the band *and* both controls are rejected (the measurement could
  have told the predicted rate from half and from twice it);
* **INCONCLUSIVE** otherwise (it meets the band but also a wrong exponent's, or no interval
  exists: one replicate).

Attainment test (:func:`attainment_test`): the slope of a method minus the slope of a
reference fitted on the same replicates (:func:`paired_slope_diff`: whole replicates
resampled jointly, so the shared data's noise cancels).  ``ATTAIN_TOL = 0.1``: a slope
flatter by 0.1 costs a factor 1.5 in risk over a 64x range of n, about the size of the
constant-factor differences between good estimators.  **PASS** when the interval's upper
end is at most the tolerance, **FAIL** when its lower end is above it, **INCONCLUSIVE**
otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

__all__ = [
    "SlopeFit",
    "fit_slope",
    "verdict",
    "negative_control_exponent",
    "theorem_test",
    "paired_slope_diff",
    "attainment_test",
    "ATTAIN_TOL",
    "finding",
]

ATTAIN_TOL = 0.1  # slope units: a factor 1.5 in risk over a 64x range of n


@dataclass
class SlopeFit:
    ns: np.ndarray
    mean: np.ndarray
    se: np.ndarray
    local_slopes: np.ndarray
    slope: float
    ci_low: float
    ci_high: float
    se_slope: float
    corrected_slope: float
    shift: float
    replicates: int
    level: float


def _ls_slope(x, Y):
    """Least-squares slopes of each row of Y (..., k) on x (k,)."""
    xc = x - x.mean()
    return (Y - Y.mean(-1, keepdims=True)) @ xc / (xc @ xc)


def fit_slope(
    ns, values, log_power: float = 0.0, level: float = 0.95, n_boot: int = 2000, seed: int = 0
) -> SlopeFit:
    """Fit the log-log slope of the replicate mean (module docstring)."""
    ns = np.asarray(ns, dtype=float)
    V = np.asarray(values, dtype=float)
    if V.ndim != 2 or V.shape[1] != ns.size:
        raise ValueError(f"values must be [replicates, {ns.size}], got {V.shape}")
    if ns.size < 3:
        raise ValueError(f"need at least 3 sample sizes, got {ns.size}")
    if np.any(ns <= 1) or np.any(np.diff(ns) <= 0):
        raise ValueError("sample sizes must be > 1 and increasing")
    if not np.all(np.isfinite(V)) or np.any(V <= 0):
        raise ValueError("values must be finite and positive (log-log fit)")
    R = V.shape[0]
    x = np.log(ns)
    mean = V.mean(0)
    y = np.log(mean)
    slope = float(_ls_slope(x, y))
    shift = float(log_power * _ls_slope(x, np.log(np.log(ns))))
    se = V.std(0, ddof=1) / np.sqrt(R) if R > 1 else np.full(ns.size, np.nan)
    if R > 1:
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, R, size=(n_boot, R))
        boot = _ls_slope(x, np.log(V[idx].mean(1)))
        se_slope = float(boot.std(ddof=1) * np.sqrt(R / (R - 1)))
        q = stats.t.ppf(0.5 + level / 2, R - 1)
        lo, hi = slope - q * se_slope, slope + q * se_slope
    else:
        se_slope, lo, hi = float("nan"), float("nan"), float("nan")
    return SlopeFit(
        ns=ns,
        mean=mean,
        se=se,
        local_slopes=np.diff(y) / np.diff(x),
        slope=slope,
        ci_low=float(lo),
        ci_high=float(hi),
        se_slope=se_slope,
        corrected_slope=slope - shift,
        shift=shift,
        replicates=R,
        level=level,
    )


def _meets(fit: SlopeFit, lo: float, hi: float) -> bool:
    return fit.ci_low <= hi and fit.ci_high >= lo


def verdict(fit: SlopeFit, predicted: float) -> str:
    """Whether the slope's CI meets the band ``[predicted, predicted + shift]``: "PASS"
    when it does, "FAIL" otherwise (one replicate: no interval, "FAIL").  The building block
    of :func:`theorem_test`, which adds the two negative controls."""
    if not (np.isfinite(fit.ci_low) and np.isfinite(fit.ci_high)):
        return "FAIL"
    return "PASS" if _meets(fit, predicted, predicted + fit.shift) else "FAIL"


def negative_control_exponent(predicted: float) -> float:
    """The too-fast wrong exponent: twice the predicted one."""
    return 2.0 * predicted


def theorem_test(fit: SlopeFit, predicted: float) -> dict:
    """The theorem test of the module docstring: verdict, both controls, and which side a
    failure is on (``direction``: "slower" or "faster" than predicted)."""
    slow, fast = 0.5 * predicted, negative_control_exponent(predicted)
    if not (np.isfinite(fit.ci_low) and np.isfinite(fit.ci_high)):
        return {
            "verdict": "INCONCLUSIVE",
            "control_slow_rejected": False,
            "control_fast_rejected": False,
            "direction": None,
            "slow_exponent": slow,
            "fast_exponent": fast,
        }
    meets = _meets(fit, predicted, predicted + fit.shift)
    slow_rej = not _meets(fit, slow, slow + fit.shift)
    fast_rej = not _meets(fit, fast, fast + fit.shift)
    if not meets:
        v = "FAIL"
        direction = "slower" if fit.ci_low > predicted + fit.shift else "faster"
    else:
        v = "PASS" if slow_rej and fast_rej else "INCONCLUSIVE"
        direction = None
    return {
        "verdict": v,
        "control_slow_rejected": slow_rej,
        "control_fast_rejected": fast_rej,
        "direction": direction,
        "slow_exponent": slow,
        "fast_exponent": fast,
    }


def paired_slope_diff(ns, A, B, level: float = 0.95, n_boot: int = 2000, seed: int = 0) -> dict:
    """Slope of A minus slope of B (each the log-log slope of the replicate mean, as in
    :func:`fit_slope`), with rows of A and B the same replicates.  The interval resamples
    whole replicates jointly and is ``diff +- t_{R-1} SE`` with the bootstrap SE inflated by
    ``sqrt(R / (R - 1))`` (as :func:`fit_slope`; coverage tested)."""
    ns = np.asarray(ns, dtype=float)
    A, B = np.asarray(A, dtype=float), np.asarray(B, dtype=float)
    if A.shape != B.shape or A.ndim != 2 or A.shape[1] != ns.size:
        raise ValueError(f"A and B must both be [replicates, {ns.size}], got {A.shape}, {B.shape}")
    for V in (A, B):
        if not np.all(np.isfinite(V)) or np.any(V <= 0):
            raise ValueError("values must be finite and positive (log-log fit)")
    x = np.log(ns)
    diff = float(_ls_slope(x, np.log(A.mean(0))) - _ls_slope(x, np.log(B.mean(0))))
    R = A.shape[0]
    if R < 2:
        return {"diff": diff, "se": math.nan, "ci_low": math.nan, "ci_high": math.nan}
    idx = np.random.default_rng(seed).integers(0, R, size=(n_boot, R))
    boot = _ls_slope(x, np.log(A[idx].mean(1))) - _ls_slope(x, np.log(B[idx].mean(1)))
    se = float(boot.std(ddof=1) * np.sqrt(R / (R - 1)))
    q = stats.t.ppf(0.5 + level / 2, R - 1)
    return {"diff": diff, "se": se, "ci_low": diff - q * se, "ci_high": diff + q * se}


def attainment_test(diff: dict, tol: float = ATTAIN_TOL) -> str:
    """PASS / FAIL / INCONCLUSIVE for a :func:`paired_slope_diff` (module docstring)."""
    lo, hi = diff["ci_low"], diff["ci_high"]
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "INCONCLUSIVE"
    if hi <= tol:
        return "PASS"
    if lo > tol:
        return "FAIL"
    return "INCONCLUSIVE"


def finding(theorem: str, attainment: str | None, direction: str | None = None) -> str:
    """The report's sentence for one (truth, metric)."""
    if theorem == "FAIL":
        return f"contradicts the predicted rate ({direction} than predicted)"
    if theorem == "PASS" and attainment == "PASS":
        return "attains the achievable rate"
    if theorem == "PASS" and attainment == "FAIL":
        return "within the theorem's band but slower than achievable"
    if theorem == "PASS":
        return "within the theorem's band; attainment " + (
            "not tested (no reference)" if attainment is None else "inconclusive"
        )
    if attainment == "FAIL":
        return "inconclusive against the theorem, slower than achievable"
    return "inconclusive"
