"""How far a verdict would survive a re-run: its replication probability.

A verdict is computed from R replicates (each its own truth, data and training).  Another
run of the same design draws R others; how often it would give the same verdict is
estimated here by recomputing the **whole decision** -- slope, band, difference, interval
and verdict, by the same code, the prospective power held as designed -- on resamples of
the replicates:

* ``resamples`` bootstrap resamples of whole replicates (rows drawn with replacement, the
  protocol's ``[replication]``; seed fixed), the **share** of each verdict among them;
* each **leave-one-out** set (R sets of R - 1 replicates): how many **flip** the verdict;
* the **margin** of the realised verdict to its threshold, in standard errors: the
  distance of the deciding interval end from the bound it is compared with, over the SE
  (0 at the flip; for a verdict that decides nothing, INCONCLUSIVE or UNDECIDABLE, the
  nearest deciding comparison's, negative).

A decided verdict (PASS or FAIL) whose share is below the protocol's **stability floor**
is **fragile**: it is printed and written as such beside the verdict.  The bootstrap of a
bootstrap: each resample's own interval is the protocol's interval (the t interval on the
bootstrap SE, ``verify.stats.slopes``) with its inner resamples drawn by the same seed, so the
resamples share their inner draws (common random numbers) and differ only in the
replicates.  What is not resampled: the budget-doubling control (other replicates, fewer)
and the family-wise adjustment (across entries); a verdict they override is not
resampled (its replication is None).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from verify.stats.verdict import Verdict

__all__ = ["DECIDED", "Replication", "replicate"]

DECIDED = (Verdict.PASS, Verdict.FAIL)


@dataclass(frozen=True)
class Replication:
    """One verdict's replication (module docstring): the realised ``verdict``; ``share``,
    the fraction of the ``resamples`` bootstrap resamples that give it, and ``shares``,
    each verdict's; ``loo_flips`` of the ``loo_sets`` leave-one-out sets that give another;
    ``margin_se``, its margin to the threshold in SE; the protocol's ``floor`` and whether
    the verdict is ``fragile`` (decided and ``share < floor``)."""

    verdict: Verdict
    share: float
    shares: Mapping[str, float]  # read-only (types.MappingProxyType)
    resamples: int
    loo_flips: int
    loo_sets: int
    margin_se: float
    floor: float
    fragile: bool


# resamples decided at once (a batch's bootstrap means are [CHUNK, 2000, n] floats)
CHUNK = 125


def replicate(
    decide: Callable[[np.ndarray], np.ndarray],
    replicates: int,
    verdict: Verdict,
    margin_se: float,
    resamples: int,
    floor: float,
    seed: int = 0,
) -> Replication | None:
    """The :class:`Replication` of ``verdict``: ``decide(rows)`` recomputes the decision on
    each row of ``rows`` ``[B, m]`` (indices into the entry's replicates, with repeats),
    returning the ``[B]`` verdicts; None with fewer than three replicates (a leave-one-out
    set of one has no interval)."""
    if replicates < 3:
        return None
    if resamples < 1 or not 0 < floor <= 1:
        raise ValueError(f"need resamples >= 1 and a floor in (0, 1], got {resamples}, {floor}")
    rows = np.random.default_rng(seed).integers(0, replicates, (resamples, replicates))
    got = np.concatenate([decide(rows[i : i + CHUNK]) for i in range(0, resamples, CHUNK)])
    boot = Counter(str(v) for v in got)
    every = np.arange(replicates)
    loo = np.stack([np.delete(every, k) for k in range(replicates)])
    flips = sum(str(v) != verdict for v in decide(loo))
    share = boot.get(str(verdict), 0) / resamples
    return Replication(
        verdict=verdict,
        share=share,
        shares=MappingProxyType(
            {str(k): boot[str(k)] / resamples for k in Verdict if boot.get(str(k))}
        ),
        resamples=resamples,
        loo_flips=int(flips),
        loo_sets=replicates,
        margin_se=float(margin_se) if math.isfinite(margin_se) else math.nan,
        floor=float(floor),
        fragile=bool(verdict in DECIDED and share < floor),
    )
