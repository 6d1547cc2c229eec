"""The harness's known-answer control: Gaussian-process regression with a fixed Matern
prior, whose posterior contraction rate is proven (van der Vaart and van Zanten 2011,
``theory.gp_matern_exponent``): ``n^(-min(alpha, nu)/(2 nu + p))`` at a truth of smoothness
alpha under a prior of smoothness nu.  Run through the same sweep (same truths, data,
test points, reference, records, slope and verdict code: ``verify.rates --tier gp``), a
matched prior (nu = alpha) must be found to attain the class's rate and an over-smooth one
(nu = 2.5 at alpha = 0.5: d^2 exponent -1/6 against -1/2) to be slower.  If the harness
said otherwise, its verdicts could not be trusted on ASVI either.

The posterior is exact (scikit-learn's ``GaussianProcessRegressor`` with the kernel
``amplitude^2 * Matern(length_scale, nu)``, both fixed -- ``optimizer=None`` -- and the
known noise variance ``sigma^2`` as ``alpha``): its mean and covariance at the test
points, and ``draws`` joint draws from it (Cholesky of the covariance, a jitter of
``1e-10`` times its mean diagonal).  Metrics as the sweep computes ASVI's: ``d2`` the mean
over draws of the test-point average of the squared Hellinger distance, ``d`` the mean
over draws of its square root, ``l2sq`` the posterior mean's squared L2 error.

Fixed hyperparameters (``SweepConfig.gp_length_scale``, ``gp_amplitude``): the theorem
holds for any fixed values, but they set how soon the asymptotic slope shows.  Amplitude 1
matches the truths' (about 1 on [-1, 1]).  Length scale 1, measured (alpha = 0.5, three
truths, n = 250..8,000, d^2 slopes): nu = 0.5 -0.50, nu = 1.5 -0.28, nu = 2.5 -0.19
against the proven -0.5, -0.25, -0.167; at length scale 0.2 the over-smooth priors were
still pre-asymptotic (nu = 2.5 -0.34, local slopes drifting from -0.45 to -0.25), close
enough to the matched rate that the control could not show them slower.  Exact GP costs
O(n^3) time and O(n^2) memory: one fit at n = 8,000 takes about 9 s and 1 GB here.  The
test points cost more: the posterior covariance is ``n_test x n_test`` float64 (3.2 GB at
the default 20,000) and its computation holds several such matrices at once
(``simulate.sweep.setup.config.gp_job_bytes``, which the sweep's memory check uses).
"""

from __future__ import annotations

import time

import numpy as np
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import ConstantKernel, Matern

from simulate.sweep.setup.truth_spec import stable_seed
from simulate.sweep.store.records import code_digest, versions
from simulate.sweep.store.rules import gp_name
from simulate.sweep.train.cells import cell_inputs, point_record_head, reference, with_job_seconds
from theory import hellinger_sq_pointwise

__all__ = ["gp_name", "gp_posterior", "gp_metrics", "run_gp_job"]


def _regressor(nu: float, length_scale: float, amplitude: float, sigma: float):

    kernel = ConstantKernel(amplitude**2, "fixed") * Matern(length_scale, "fixed", nu=nu)
    return GaussianProcessRegressor(kernel, alpha=sigma**2, optimizer=None, normalize_y=False)


def gp_posterior(X, y, Xt, nu: float, length_scale: float, amplitude: float, sigma: float):
    """The exact posterior of f at the test points: ``(mean [m], cov [m, m])``."""
    gp = _regressor(nu, length_scale, amplitude, sigma).fit(np.asarray(X), np.asarray(y))
    mean, cov = gp.predict(np.asarray(Xt), return_cov=True)
    return mean, cov


def gp_metrics(mean, cov, f0t, sigma: float, draws: int, seed: int) -> dict:
    """``d2``, ``d`` (from ``draws`` joint posterior draws) and ``l2sq`` (posterior mean)."""
    m = mean.shape[0]
    jitter = 1e-10 * max(float(np.mean(np.diag(cov))), 1e-300)
    L = np.linalg.cholesky(cov + jitter * np.eye(m))
    Z = np.random.default_rng(seed).standard_normal((m, draws))
    F = mean[:, None] + L @ Z  # [m, draws]
    d2_draws = np.asarray(hellinger_sq_pointwise(F - np.asarray(f0t)[:, None], sigma)).mean(0)
    return {
        "d2": float(d2_draws.mean()),
        "d": float(np.sqrt(d2_draws).mean()),
        "l2sq": float(np.mean((mean - f0t) ** 2)),
    }


def run_gp_job(job) -> list[dict]:
    """One sweep job's cells for the known-answer control (the runner's estimator
    ``"gp"``, ``simulate.sweep.run.runner.RUNNERS``): per replicate, the exact GP posterior
    of every prior in ``gp_nus`` of the job's config and the same reference as ASVI's
    cells, on the same data.  Records hold each prior's metrics under ``per_estimator``."""
    cfg = job.config
    t0 = time.perf_counter()
    f0s, X_all, y_all, data_seeds, test_seed, Xt = cell_inputs(job)
    records = []
    for i, r in enumerate(job.replicates):
        f0t = f0s[i](Xt)
        per = {}
        for nu in cfg.gp_nus:
            mean, cov = gp_posterior(
                X_all[i], y_all[i], Xt, nu, cfg.gp_length_scale, cfg.gp_amplitude, cfg.sigma
            )
            seed = stable_seed(cfg.seed, job.truth.key, job.n, r, "gp", nu)
            per[gp_name(nu)] = gp_metrics(mean, cov, f0t, cfg.sigma, cfg.draws, seed)
            del mean, cov  # not held while the next prior's is computed (spec.gp_job_bytes)
        first = per[gp_name(cfg.gp_nus[0])]
        records.append(
            {
                **point_record_head(job, r, f0s[i], cfg, (data_seeds[i], test_seed), per.values()),
                "metrics": first,
                "per_estimator": per,
                "reference": reference(X_all[i], y_all[i], Xt, f0t, cfg, job),
                "timing": None,  # the job's, below
                "versions": versions(),
                "code": code_digest(),  # the worker's code (the sweep compares it with its own)
            }
        )
    return with_job_seconds(records, t0)
