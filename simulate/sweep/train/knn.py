"""The harness's second known-answer control: k-nearest-neighbour regression, whose rate
is proven (``theory.knn_exponent``).  Its squared error is at most the variance of an
average of k noisy values plus the squared bias of the k nearest points' spread,
``sigma^2 / k + C (k / n)^(2 alpha / p)`` at an alpha-Hoelder truth with alpha <= 1
(Gyorfi, Kohler, Krzyzak and Walk 2002, *A Distribution-Free Theory of Nonparametric
Regression*, Theorem 6.2: Lipschitz truths, p >= 3; the same proof for alpha <= 1 and any
p under a design density bounded below on the cube, as the sweeps' uniform design is,
where the k-th neighbour's distance is of order ``(k / n)^(1/p)``).  The exponent is
exact for both members, not only a bound: given the design, the noise average is
independent of the bias, so the risk is at least ``sigma^2 / k`` whatever the truth --
``n^(-2 alpha / (2 alpha + p))`` for the matched k (the upper bound's order) and a
constant for a fixed k.  Two members, run through the same sweep (same truths, data,
test points, reference, records, slopes and verdicts: ``verify.rates --tier knn``):

* ``knn-matched``: ``k = ceil(n^(2 alpha / (2 alpha + p)))``, the minimax order on the
  class, so its d^2 contracts at the class's exponent ``-2 alpha / (2 alpha + p)``: a known
  PASS of both tests where the design resolves it;
* ``knn-kK``: k fixed at K, so the variance ``sigma^2 / K`` does not shrink: exponent 0, a
  known FAIL of both tests.

The members need the truth's alpha (the matched k) and a rate that is proven for alpha <=
1 only: the sweep refuses other truths (``simulate.sweep.setup.config``).  The alpha used is
the truth's *nominal* smoothness, a property of the design as the matched Matern prior's
nu is; nothing of the truth's function reaches the fit.  The prediction is scikit-learn's
``KNeighborsRegressor`` (uniform weights, exact neighbours, a well-kept implementation):
a point estimator, so its d^2 is that of its point prediction (``simulate.sweep.train.foreign.
point_metrics``), as a named regressor's.
"""

from __future__ import annotations

import time

import numpy as np
from sklearn.neighbors import KNeighborsRegressor

from simulate.sweep.store.records import code_digest, versions
from simulate.sweep.store.rules import knn_k, knn_name
from simulate.sweep.train.cells import cell_inputs, point_record_head, reference, with_job_seconds
from simulate.sweep.train.foreign import point_metrics

__all__ = ["knn_k", "knn_name", "knn_predict", "run_knn_job"]


def knn_predict(X, y, Xt, k: int):
    """The k-NN regression estimate at the test points (uniform weights)."""
    model = KNeighborsRegressor(n_neighbors=int(k), algorithm="auto")
    return model.fit(np.asarray(X), np.asarray(y)).predict(np.asarray(Xt))


def run_knn_job(job) -> list[dict]:
    """One sweep job's cells for the k-NN control (the runner's estimator ``"knn"``): per
    replicate, every member of ``knn_ks`` of the job's config fitted on the cell's data
    and the same reference as ASVI's cells, on the same data.  Records hold each member's
    metrics under ``per_estimator`` and its neighbour count under ``knn_k``."""
    cfg = job.config
    t0 = time.perf_counter()
    f0s, X_all, y_all, data_seeds, test_seed, Xt = cell_inputs(job)
    ks = {knn_name(k): knn_k(k, job.n, job.truth.p, job.truth.alpha) for k in cfg.knn_ks}
    records = []
    for i, r in enumerate(job.replicates):
        f0t = f0s[i](Xt)
        per = {name: point_metrics(knn_predict(X_all[i], y_all[i], Xt, k), f0t, cfg.sigma)
               for name, k in ks.items()}  # fmt: skip
        records.append(
            {
                **point_record_head(job, r, f0s[i], cfg, (data_seeds[i], test_seed), per.values()),
                "metrics": per[knn_name(cfg.knn_ks[0])],
                "per_estimator": per,
                "knn_k": ks,
                "reference": reference(X_all[i], y_all[i], Xt, f0t, cfg, job),
                "timing": None,  # the job's, below
                "versions": versions(),
                "code": code_digest(),
            }
        )
    return with_job_seconds(records, t0)
