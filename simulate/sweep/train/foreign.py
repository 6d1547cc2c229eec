"""Any scikit-learn-style regressor through the sweep (``estimator="regressor"``;
``python -m verify.rates --estimator MODULE:CLASS [--estimator-param NAME=VALUE ...]``).

The regressor trains on every cell of the sweep's design -- the same truths, nested data
(``simulate.sweep.train.cells.job_data``: all n points of the cell, none held out), test points,
class-matched reference and seeds as ASVI's and the Gaussian-process control's -- and its
metrics are recorded under ``per_estimator`` by its class's name (``CLASS`` of
``MODULE:CLASS``), as the control's are.

**Reading runs no code**: a configuration that names a regressor is checked as data when
it is made (:func:`check_regressor_data`: ``MODULE:CLASS`` of identifiers, every parameter
parsed and evaluated at every cell), which is all a records reader (``verify.rates
--records``, ``figures``, ``verify.sizing``, ``verify.starts``, a sweep's resume) needs;
the class is imported only by a run that trains it (:func:`check_regressor`, called by
``simulate.sweep.run.runner.check_kind_run`` before anything is written, and by the
fingerprint's :func:`identity`), from the user's own command.

**The class** (:func:`resolve`): ``MODULE:CLASS`` is imported (``importlib``); it must make an
object with its defaults that has ``fit``, ``predict`` and ``get_params`` (scikit-learn's
estimator interface).  Refused in one line otherwise: a module or class that does not import,
a class without ``fit``/``predict``, a parameter ``get_params()`` does not name, a value the
class's own parameter check refuses at some cell (scikit-learn's ``_validate_params``, run
on the unfitted estimator at every truth and n before anything trains, where the class
declares its constraints: a ``BaseEstimator`` subclass without ``_parameter_constraints``
is made with the values and not checked further).  A class defined in a script or a
notebook is ``__main__:CLASS``: it trains where ``__main__`` holds it (in the calling
process, ``workers=0``; a script's own workers re-import it under its ``if __name__ ==
"__main__"`` guard), and its records are read as any others' (nothing is imported).
A fit or prediction that fails while the sweep runs (a value valid only for some data,
e.g. more neighbours than points; a ``SystemExit`` raised by the user's code too, or a
prediction that is not one number per test point) is :class:`RegressorFailed`, one line
naming the cell; the cells done before it stay recorded.  A prediction that is a number per
test point but not finite, or whose error overflows a float (``DummyRegressor`` at
``constant=1e160``), is a *failed cell*: recorded with ``failed: true``, its non-finite
metrics as NaN and its ``failure`` saying why, read back as failed (never as damaged), and
the sweep goes on.

**The harness's data stay the harness's**: the regressor is given copies of the cell's X and
y and of the test points, so a class that writes into its inputs (standardising in place, a
``predict`` that overwrites X) changes neither the reference fitted on the same data nor the
truth's values the metrics compare with.

**Its parameters**: ``NAME=VALUE``, a Python literal, a bare word (the string) or a bounded
expression in ``n``, ``p`` and ``alpha``, evaluated per cell and rounded where the class
takes an int; from Python also an object (a GP's kernel: ``ObjectParam``, recorded by its
``repr``, each fit given a deep copy) (:mod:`simulate.sweep.setup.param_values`).

**Seeds**: a regressor with a ``random_state`` parameter the user does not set gets the
cell's own, ``stable_seed(seed, truth, n, replicate, "regressor") mod 2^32``, so a resumed
sweep writes the same records.

**Metrics** (:func:`point_metrics`): a point estimator's posterior is the point mass at its
prediction ``f_hat``, so the project's ``d2`` (the mean over posterior draws of the
test-point average of the squared Hellinger distance between the Gaussian regression models
of f and f0, ``theory.hellinger_sq_pointwise``) becomes the test-point average of
``h^2(f_hat(x) - f0(x))`` -- every draw is ``f_hat`` -- and ``d`` (the mean over draws of
its square root) that average's square root; ``l2sq`` the prediction's squared L2 error on
the test points, as for the others.

**Identity** (:func:`identity`): the class's qualified name (``__module__.__qualname__``) and
the installed version of the distribution that holds the module's top-level package
(``importlib.metadata``; ``"unknown"`` where none does), part of the sweep's fingerprint.
"""

from __future__ import annotations

import copy
import math
import time

import numpy as np

from simulate.sweep.setup.param_values import MAX_LENGTH, integer_names, parse_param, values_at
from simulate.sweep.setup.regressor_class import (
    check_regressor,
    check_regressor_data,
    first_line,
    identity,
    regressor_name,
    resolve,
)
from simulate.sweep.setup.truth_spec import stable_seed
from simulate.sweep.store.records import code_digest, versions
from simulate.sweep.train.cells import cell_inputs, point_record_head, reference
from theory import hellinger_sq_pointwise

__all__ = [
    "MAX_LENGTH",
    "RegressorFailed",
    "check_regressor",
    "check_regressor_data",
    "identity",
    "integer_names",
    "parse_param",
    "point_metrics",
    "regressor_name",
    "resolve",
    "run_regressor_job",
    "values_at",
]


class RegressorFailed(ValueError):
    """A named regressor's fit or prediction failed on a cell's data (one line)."""


def point_metrics(pred, f0t, sigma: float) -> dict:
    """``d2``, ``d`` and ``l2sq`` of a point prediction (module docstring); an error that
    overflows a float gives an infinite ``l2sq`` (a failed cell), without a warning."""
    with np.errstate(over="ignore", invalid="ignore"):
        err = np.asarray(pred, dtype=float) - np.asarray(f0t, dtype=float)
        finite = bool(np.all(np.isfinite(err)))  # else d2 is undefined: a failed cell
        d2 = float(np.mean(np.asarray(hellinger_sq_pointwise(err, sigma)))) if finite else math.nan
        l2sq = float(np.mean(err**2))
    return {"d2": d2, "d": math.sqrt(d2) if d2 >= 0 else float("nan"), "l2sq": l2sq}


def _prediction(model, Xt, n_test: int) -> np.ndarray:
    """The model's prediction at the test points (given a copy of them) as one float per
    point; :class:`TypeError` or :class:`ValueError` naming what it is otherwise (two
    columns, another length, strings)."""
    raw = np.asarray(model.predict(np.array(Xt, copy=True)))
    if raw.ndim == 2 and raw.shape[1] == 1:
        raw = raw[:, 0]
    if raw.shape != (n_test,):
        raise ValueError(
            f"predict returned an array of shape {raw.shape} for {n_test} test points;"
            f" give one number per point, shape ({n_test},)"
        )
    if not (np.issubdtype(raw.dtype, np.number) or raw.dtype == bool) or np.iscomplexobj(raw):
        raise TypeError(f"predict returned {raw.dtype} values; give real numbers")
    return raw.astype(float)


def _failure(m: dict, pred: np.ndarray) -> str | None:
    """Why a cell whose metrics are not all finite failed, or None (module docstring)."""
    if all(math.isfinite(v) for v in m.values()):
        return None
    bad = int(np.sum(~np.isfinite(pred)))
    if bad:
        return f"the prediction is not finite at {bad} of {pred.size} test points"
    return "the prediction's error overflows a float (its squared L2 error is not finite)"


def run_regressor_job(job) -> list[dict]:
    """One sweep job's cells for a named regressor (the runner's estimator
    ``"regressor"``): per replicate, the regressor fitted on the cell's data with its
    parameters at this n and the same reference as ASVI's cells; its metrics under
    ``per_estimator`` (module docstring)."""
    cfg = job.config
    cls, defaults = resolve(cfg.regressor)
    name, params = regressor_name(cfg.regressor), dict(cfg.regressor_params or {})
    t0 = time.perf_counter()
    f0s, X_all, y_all, data_seeds, test_seed, Xt = cell_inputs(job)
    values = values_at(params, integer_names(cls, defaults), job.n, job.truth.p, job.truth.alpha)
    records = []
    for i, r in enumerate(job.replicates):
        f0t = f0s[i](Xt)
        kw = copy.deepcopy(values)  # an object a fit may change in place: each fit its own
        if "random_state" in defaults and "random_state" not in params:
            kw["random_state"] = stable_seed(cfg.seed, job.truth.key, job.n, r, "regressor") % 2**32
        t1 = time.perf_counter()
        try:  # copies: the harness's data stay the harness's (module docstring)
            X, y = np.array(X_all[i], copy=True), np.array(y_all[i], copy=True)
            model = cls(**kw).fit(X, y)
            t2 = time.perf_counter()
            pred = _prediction(model, Xt, len(f0t))
        except (Exception, SystemExit) as exc:  # the user's class on this cell: one line
            raise RegressorFailed(
                f"--estimator {cfg.regressor} failed at {job.truth.key}, n = {job.n},"
                f" replicate {r} ({type(exc).__name__}: {first_line(exc)}); the cells"
                " done before it stay recorded"
            ) from None
        m = point_metrics(pred, f0t, cfg.sigma)
        failure = _failure(m, pred)
        if failure is not None:  # a failed cell: its undefined metrics NaN, read as failed
            m = {k: v if math.isfinite(v) else float("nan") for k, v in m.items()}
        ref = reference(X_all[i], y_all[i], Xt, f0t, cfg, job)
        records.append(
            {
                **point_record_head(job, r, f0s[i], cfg, (data_seeds[i], test_seed), [m]),
                "metrics": m,
                "per_estimator": {name: m},
                **({} if failure is None else {"failure": failure}),
                "regressor_values": _jsonable(values),
                "reference": ref,
                "timing": {
                    "job_train_s": t2 - t1,
                    "job_eval_s": time.perf_counter() - t2,
                    "job_s": time.perf_counter() - t0,
                },
                "versions": versions(),
                "code": code_digest(),
            }
        )
    return records


def _jsonable(values: dict) -> dict:
    """Each cell's values as JSON holds them (a tuple as a list, anything else by repr)."""
    out = {}
    for k, v in values.items():
        if isinstance(v, (bool, int, float, str)) or v is None:
            out[k] = v
        elif isinstance(v, (list, tuple)) and all(isinstance(x, (int, float, str)) for x in v):
            out[k] = list(v)
        else:
            out[k] = repr(v)
    return out
