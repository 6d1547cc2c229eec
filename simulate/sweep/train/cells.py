"""What every sweep job computes around its estimator, shared by ASVI's jobs
(``simulate.sweep.train.asvi_job``) and the Gaussian-process control's
(``simulate.sweep.train.gp``): each
replicate's nested data, the class-matched reference on it, and the truth's description in
the record, and the head of a record with no width search (the known-answer and regressor
cells).  (Once in ``job.py``, which ``gp.py`` imported back from: an import cycle.)"""

from __future__ import annotations

import math
import time
from dataclasses import asdict
from typing import NamedTuple

import numpy as np

from simulate.references.classical import oracle_piecewise, spline_reference
from simulate.sweep.setup.config import SweepConfig
from simulate.sweep.setup.truth_spec import f0_describe, stable_seed
from simulate.sweep.store.rules import SCHEMA
from simulate.sweep.train.jobs import Job

__all__ = [
    "CellInputs", "cell_inputs", "f0_describe", "job_data", "point_record_head", "reference",
    "with_job_seconds",
]  # fmt: skip


def job_data(job: Job, cfg: SweepConfig, f0s):
    """Each replicate's first n points of its dataset drawn for the largest n (nested data)
    from its own truth ``f0s[i]``: ``X [R, n, p]``, ``y [R, n]`` and the data seeds."""
    n_max, p = max(cfg.ns), job.truth.p
    X_all, y_all, seeds = [], [], []
    for r, f0 in zip(job.replicates, f0s, strict=True):
        ds = stable_seed(cfg.seed, job.truth.key, "data", r)
        rng = np.random.default_rng(ds)
        X = rng.uniform(-1, 1, size=(n_max, p))
        noise = rng.standard_normal(n_max)
        X_all.append(X[: job.n])
        y_all.append(f0(X[: job.n]) + cfg.sigma * noise[: job.n])
        seeds.append(ds)
    return X_all, y_all, seeds


class CellInputs(NamedTuple):
    """What a known-answer or regressor job fits and scores on (:func:`cell_inputs`)."""

    f0s: list  # each replicate's truth
    X: list  # each replicate's first n points [n, p] (nested data)
    y: list
    data_seeds: list
    test_seed: int
    Xt: np.ndarray  # the test points [n_test, p], shared by the job's replicates


def cell_inputs(job: Job) -> CellInputs:
    """A job's truths, nested data (:func:`job_data`) and test points (uniform on the cube,
    from the truth's own test seed), as ASVI's jobs draw them."""
    cfg = job.config
    f0s = [job.truth.build(r) for r in job.replicates]
    X_all, y_all, data_seeds = job_data(job, cfg, f0s)
    test_seed = stable_seed(cfg.seed, job.truth.key, "test")
    Xt = np.random.default_rng(test_seed).uniform(-1, 1, size=(cfg.n_test, job.truth.p))
    return CellInputs(f0s, X_all, y_all, data_seeds, test_seed, Xt)


def with_job_seconds(records: list[dict], t0: float) -> list[dict]:
    """``records`` (one job's), each with the job's seconds since ``t0`` as its
    ``timing.job_s``: every record of a job holds the same (``simulate.sweep.costs``
    divides them by the records that share them, the replicates of the block)."""
    timing = {"job_s": time.perf_counter() - t0}
    for rec in records:
        rec["timing"] = dict(timing)
    return records


def reference(X, y, Xt, f0t, cfg: SweepConfig, job: Job) -> dict:
    """The class-matched reference on one replicate's data (``classical.spline_reference``:
    the linear spline, its mesh by cross-validation on the training data), with the
    piecewise-polynomial oracle (bins by true error on the test points) as a second,
    labelled curve under ``oracle``."""
    ref = spline_reference(X, y, Xt, f0t, cfg.sigma, seed=stable_seed(cfg.seed, "cv", job.n))
    ref["oracle"] = oracle_piecewise(X, y, Xt, f0t, cfg.sigma, job.truth.alpha)
    return ref


def point_record_head(job: Job, r: int, f0, cfg: SweepConfig, seeds, metrics) -> dict:
    """The first fields of a known-answer or regressor cell's record (replicate ``r``, its
    truth ``f0``, ``seeds = (data seed, test seed)``), in the order the records keep: no
    width was searched, and the cell failed if any of ``metrics`` (an iterable of the
    estimators' metric dicts) is not finite."""
    data_seed, test_seed = seeds
    return {
        "schema": SCHEMA,
        "failed": not all(math.isfinite(v) for m in metrics for v in m.values()),
        "cell": {"truth": job.truth.key, "n": job.n, "replicate": r},
        "truth": {**asdict(job.truth), "function": f0_describe(f0)},
        "config": cfg.cell_config(job.n, None),
        "seeds": {"data": data_seed, "test": test_seed},
        "selected_width": None,
        "selected_at_top": False,
    }
