"""Estimators with the scikit-learn contract around the batched core.

* :class:`ASVIRegressor` / :class:`ASVIClassifier`: train every candidate width at once
  (one batched program, Algorithm 1's "for all N in parallel"), then select the width by the
  penalised ELBO (eq. (13)).
* :class:`SVIRegressor` / :class:`SVIClassifier`: one fixed width.

Contract: scikit-learn's, checked by its own ``parametrize_with_checks`` in the tests.
The estimators derive from ``sklearn.base.BaseEstimator`` and ``RegressorMixin`` /
``ClassifierMixin``; the constructor only stores keyword-only parameters; ``fit`` validates
every parameter and the data (``sklearn.utils.validation.validate_data``: finite, real, 2-d
X; 1-d y), learns and returns ``self``; learned attributes end in ``_`` (with
``n_features_in_``); an unfitted estimator raises ``NotFittedError``; ``predict(X,
return_std=False)``; ``score`` (R^2 for regressors, accuracy for classifiers).  Training
length is given in epochs of ``n / batch_size`` steps (the paper's teacher experiment: 7000
epochs).  Choices: ``batch_size`` larger than n trains full-batch (m = n); ``dtype`` is
"float32" or "float64" (a torch dtype is accepted too).
"""

from __future__ import annotations

import inspect
import math
import numbers
import time

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from simulate.core import Hyper, Layout
from simulate.core.constraints import POSITIVE, Interval, check
from simulate.core.hyper import PAPER_WIDTHS
from simulate.core.posterior import select_width
from simulate.core.recipe import train_models
from simulate.progress import Progress

__all__ = [
    "BNNRegressor",
    "BNNClassifier",
    "ASVIRegressor",
    "SVIRegressor",
    "ASVIClassifier",
    "SVIClassifier",
    "DenseBNNRegressor",
    "HSBNNRegressor",
    "resolve_device",
]


def resolve_device(device) -> torch.device:
    """``torch.device`` for a user's ``device``; CUDA only when asked for and present."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:  # torch's own message lists twenty device types
        raise ValueError(
            f"device must be a torch device such as 'cpu' or 'cuda', got {device!r}"
        ) from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' was asked for but torch.cuda.is_available() is False")
    return dev


def _check_widths(widths) -> list[int]:
    if isinstance(widths, (str, bytes)):  # "24" iterates as "2", "4"
        raise ValueError(f"widths must be a list of positive integers, got {widths!r}")
    try:
        ws = [w for w in widths]
    except TypeError as exc:
        raise ValueError(f"widths must be a list of positive integers, got {widths!r}") from exc
    if not ws:
        raise ValueError("widths must be a non-empty list of positive integers")
    for w in ws:
        if not isinstance(w, numbers.Real) or isinstance(w, bool):
            raise ValueError(f"every width must be an integer >= 1, got {w!r}")
        if not float(w).is_integer() or w < 1:
            raise ValueError(f"every width must be an integer >= 1, got {w!r}")
    return [int(w) for w in ws]


_DTYPES = {"float32": torch.float32, "float64": torch.float64}
_SEED_MAX = (2**63 - 1) // 1000 - 1000  # model seeds are seed * 1000 + k in int64


def _dtype(x) -> torch.dtype:
    if isinstance(x, torch.dtype) and x in _DTYPES.values():
        return x
    if isinstance(x, str) and x in _DTYPES:
        return _DTYPES[x]
    raise ValueError(f"dtype must be 'float32' or 'float64', got {x!r}")


def _integer(name, v, lo=1, hi=None) -> int:
    """``v`` as an int when an integer in [lo, hi] (``simulate.core.constraints``)."""
    return int(check(name, v, Interval(numbers.Integral, lo, hi, "both")))


class _Base(BaseEstimator):
    _likelihood = "gaussian"
    _family = "spike_slab"  # the fixed family of the named estimators

    def _family_name(self) -> str:
        """``family`` where the estimator has that parameter (BNN*), else the class's."""
        return getattr(self, "family", self._family)

    # ---------------------------------------------------------- fitting
    def _candidate_widths(self) -> list[int]:
        raise NotImplementedError

    def _hyper(self, n: int) -> Hyper:
        """The training hyperparameters (checked by ``Hyper.validate``: one rule per
        field); the batch at most n."""
        return Hyper(
            likelihood=self._likelihood,
            sigma=self.sigma,
            sigma_0=self.sigma_0,
            slab=self.slab,
            lambda_s=self.lambda_s,
            lam=self.lam,
            batch_size=min(_integer("batch_size", self.batch_size), n),
            mc_samples=self.mc_samples,
            lr=self.lr,
            optimizer=self.optimizer,
            l3=self.l3,
            sampling=self.sampling,
            family=self._family_name(),
        )

    def _encode_y(self, y, n):
        raise NotImplementedError

    def fit(self, X, y):
        """Train every candidate width in one batched program and select (ASVI)."""
        widths = _check_widths(self._candidate_widths())
        depth = _integer("depth", self.depth)
        check("epochs", self.epochs, POSITIVE)
        _integer("elbo_draws", self.elbo_draws, lo=10)  # the selection rule needs >= 10
        _integer("predict_draws", self.predict_draws)
        seed = _integer("seed", self.seed, lo=0, hi=_SEED_MAX)
        dtype = _dtype(self.dtype)
        X, y = validate_data(self, X, y, y_numeric=self._likelihood == "gaussian")
        n, p = X.shape
        y_enc, out_dim = self._encode_y(y, n)
        hyper = self._hyper(n)
        hyper.validate()
        dev = resolve_device(self.device)
        seeds = [seed * 1000 + k for k in range(len(widths))]
        Xt = torch.tensor(X, dtype=dtype).unsqueeze(0)  # a copy: X may be read-only
        yt = torch.tensor(y_enc).unsqueeze(0)
        steps = max(1, math.ceil(float(self.epochs) * n / hyper.batch_size))
        init = self._start(X, y, widths, depth, hyper, seed, dtype)
        t0 = time.perf_counter()
        trained = train_models(
            hyper, widths, seeds, Xt, yt, [0] * len(widths),
            depth=depth, out_dim=out_dim, steps=steps, compile=bool(self.compile), device=dev,
            dtype=dtype, progress=Progress(type(self).__name__) if self.progress else None,
            record_every=max(1, steps // 100), init_from=init,
        )  # fmt: skip
        self.fit_time_s_ = time.perf_counter() - t0
        tr = trained.trainer
        health = tr.state.health
        self.failed_ = health.failed.cpu().numpy()
        self.failed_step_ = health.failed_step.cpu().numpy()
        if self.failed_.all():
            raise FloatingPointError(
                f"training stopped: every model hit a non-finite loss (at steps "
                f"{self.failed_step_.tolist()}); lower lr or check the data scale"
            )
        self.n_steps_ = steps
        self.history_ = tr.history
        self.widths_ = widths
        self.posterior_ = trained.posterior
        terms = self.posterior_.elbo(Xt.to(dev), yt.to(dev), draws=int(self.elbo_draws))
        self.loss_terms_ = {k: terms[k] for k in ("L1", "L2", "L3")}
        self.elbo_ = terms["elbo"]
        sel = select_width(self.elbo_, widths, float(self.lam), failed=self.failed_)
        self.selection_ = sel
        self.penalized_elbo_ = sel["penalized"]
        self.selected_index_ = sel["index"]
        self.selected_width_ = sel["width"]
        edges = self.posterior_.edges()
        self.n_edges_all_ = edges["sum_nu"]
        self.n_edges_ = float(edges["sum_nu"][sel["index"]])
        self.n_edges_gt_half_ = int(edges["n_nu_gt_half"][sel["index"]])
        return self

    def _start(self, X, y, widths, depth, hyper, seed, dtype):
        """``init_from``: "random" (the core's seeded start: None here) or "spline" (the
        least-squares linear spline with its mesh chosen on a validation split, encoded
        exactly in each candidate: ``simulate.references.constructive``; p = 1 regression with the
        spike-and-slab family only)."""
        if self.init_from == "random":
            return None
        if self.init_from != "spline":
            raise ValueError(f"init_from must be 'random' or 'spline', got {self.init_from!r}")
        if self._likelihood != "gaussian" or X.shape[1] != 1 or hyper.family != "spike_slab":
            raise ValueError(
                "init_from='spline' is for spike-and-slab regression on one input feature"
            )
        from simulate.references.constructive import encode, spline_starts

        layout = Layout(1, depth, widths)
        return encode(layout, spline_starts(X, y, widths, depth, seed=seed), hyper, dtype)

    def _check_fitted(self):
        check_is_fitted(self, "posterior_")  # sklearn's NotFittedError

    def _X_for_predict(self, X) -> np.ndarray:
        self._check_fitted()
        return validate_data(self, X, reset=False)


class _Regressor(RegressorMixin, _Base):
    _likelihood = "gaussian"

    def _encode_y(self, y, n):
        return np.asarray(y, dtype=float), 1

    def predict(self, X, return_std: bool = False):
        """Posterior-mean prediction from ``predict_draws`` draws (30, the paper's) of the
        selected width; with ``return_std`` also the predictive sd ``sqrt(Var_q f + sigma^2)``."""
        X = self._X_for_predict(X)
        k, T = self.selected_index_, int(self.predict_draws)
        mean = self.posterior_.predict_mean(X, T)[k].cpu().numpy()
        if not return_std:
            return mean
        return mean, self.posterior_.predict_std(X, T)[k].cpu().numpy()


class _Classifier(ClassifierMixin, _Base):
    _likelihood = "categorical"

    def _encode_y(self, y, n):
        check_classification_targets(y)
        classes, idx = np.unique(y, return_inverse=True)
        if len(classes) < 2:
            raise ValueError(f"y must contain at least two classes, got one class {classes!r}")
        self.classes_ = classes
        return idx.astype(np.int64), len(classes)

    def predict_proba(self, X):
        """Posterior-mean class probabilities ``(m, classes)`` of the selected width."""
        X = self._X_for_predict(X)
        probs = self.posterior_.predict_mean(X, int(self.predict_draws))
        return probs[self.selected_index_].T.cpu().numpy()

    def predict(self, X):
        proba = self.predict_proba(X)  # checks fitted first
        return self.classes_[np.argmax(proba, axis=1)]


_COMMON_DOC = """
    Parameters (defaults: the paper's teacher experiment, appendix C.1): ``depth`` hidden
    layers; ``sigma`` the known noise sd (regression); ``sigma_0`` the Gaussian prior slab
    sd; ``lambda_s``, ``lam`` the priors on sparsity and width; ``batch_size`` m;
    ``mc_samples`` K; ``optimizer`` "adam" or "rmsprop" (``torch.optim.RMSprop``'s form;
    the paper's MNIST runs) and its ``lr``; ``epochs`` of n/m steps; ``slab`` "gaussian" or
    "uniform"; ``l3`` "paper" (eq. (loss3) as printed) or "exact"; ``sampling`` of
    minibatches; ``elbo_draws`` (>= 10) for selection; ``predict_draws`` (30); ``seed``;
    ``device``, ``dtype`` ("float32" or "float64"); ``compile`` (torch.compile the step);
    ``progress`` (a bar on stderr); ``init_from`` "random" (the core's start) or "spline"
    (regression on one feature: each candidate starts from the validation-chosen linear
    spline encoded exactly, ``simulate.references.constructive``).
"""


# The regression (teacher) defaults, appendix C.1; the classifiers' are the paper's MNIST ones.
_REGRESSION = dict(
    depth=2, sigma=1.0, sigma_0=0.8, lambda_s=3.0, lam=10.0, batch_size=1024, mc_samples=1,
    lr=5e-3, optimizer="adam", epochs=7000, slab="gaussian", l3="paper", sampling="iid",
    elbo_draws=10, init_from="random",
    predict_draws=30, seed=0, device="cpu", dtype="float32", compile=False, progress=False,
)  # fmt: skip
_CLASSIFICATION = {
    **_REGRESSION, "sigma_0": 2.0, "lambda_s": 50.0, "lam": 600.0, "batch_size": 512,
    "epochs": 300, "optimizer": "rmsprop",
}  # fmt: skip


def _keyword_init(params: dict):
    """An ``__init__`` that only stores the keyword-only ``params`` (with these defaults),
    with an explicit signature: scikit-learn reads the parameters from it, and one
    parameter table serves every estimator instead of a copied 20-keyword signature."""
    sig = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        + [
            inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=v)
            for k, v in params.items()
        ]
    )

    def __init__(self, **kwargs):
        bound = sig.bind(self, **kwargs)
        bound.apply_defaults()
        for k, v in bound.arguments.items():
            if k != "self":
                setattr(self, k, v)

    __init__.__signature__ = sig
    return __init__


class BNNRegressor(_Regressor):
    __doc__ = (
        'One regressor for every method: ``family`` "spike_slab" (SVI; with several'
        ' ``widths`` ASVI, which selects one by eq. (13)), "dense" (Dense-BNN) or'
        ' "horseshoe" (HS-BNN); the classes below are this one with fixed choices.' + _COMMON_DOC
    )
    __init__ = _keyword_init({"family": "spike_slab", "widths": PAPER_WIDTHS, **_REGRESSION})

    def _candidate_widths(self):
        return self.widths


class BNNClassifier(_Classifier):
    __doc__ = "The classifier counterpart of :class:`BNNRegressor`." + _COMMON_DOC
    __init__ = _keyword_init(
        {"family": "spike_slab", "widths": (400, 500, 600, 700, 800), **_CLASSIFICATION}
    )

    def _candidate_widths(self):
        return self.widths


class ASVIRegressor(_Regressor):
    __doc__ = "Adaptive sparse variational inference: selects the width (eq. (13))." + _COMMON_DOC
    __init__ = _keyword_init({"widths": PAPER_WIDTHS, **_REGRESSION})

    def _candidate_widths(self):
        return self.widths


class SVIRegressor(_Regressor):
    __doc__ = "Sparse variational inference at one fixed width." + _COMMON_DOC
    __init__ = _keyword_init({"width": 10, **_REGRESSION})

    def _candidate_widths(self):
        return [self.width]


class ASVIClassifier(_Classifier):
    __doc__ = "ASVI with a categorical likelihood (the paper's MNIST experiment)." + _COMMON_DOC
    __init__ = _keyword_init({"widths": (400, 500, 600, 700, 800), **_CLASSIFICATION})

    def _candidate_widths(self):
        return self.widths


class SVIClassifier(_Classifier):
    __doc__ = "SVI with a categorical likelihood at one fixed width." + _COMMON_DOC
    __init__ = _keyword_init({"width": 400, **_CLASSIFICATION})

    def _candidate_widths(self):
        return [self.width]


class DenseBNNRegressor(SVIRegressor):
    """Dense-BNN baseline (Bayes by Backprop): Gaussian mean-field over every weight and
    bias with a ``N(0, sigma_0^2)`` prior (``simulate.core.families``); same parameters and
    interface as :class:`SVIRegressor` (``lambda_s``, ``lam`` and ``l3`` are unused)."""

    _family = "dense"


class HSBNNRegressor(SVIRegressor):
    """HS-BNN baseline: horseshoe prior on node pre-activations with a log-normal
    variational family on the scales (``simulate.core.families``); same parameters and interface
    as :class:`SVIRegressor` (``lambda_s``, ``lam`` and ``l3`` are unused)."""

    _family = "horseshoe"
