"""Estimators with the scikit-learn contract around the batched core.

* :class:`ASVIRegressor` / :class:`ASVIClassifier`: train every candidate width at once
  (one batched program, Algorithm 1's "for all N in parallel"), then select the width by the
  penalised ELBO (eq. (13)).
* :class:`SVIRegressor` / :class:`SVIClassifier`: one fixed width.

Contract: the constructor only stores keyword parameters; ``fit`` validates, learns and
returns ``self``; learned attributes end in ``_``; ``predict(X, return_std=False)``;
``score`` (R^2 for regressors, accuracy for classifiers); ``get_params`` / ``set_params``.
Training length is given in epochs of ``n / batch_size`` steps (the paper's teacher
experiment: 7000 epochs).
"""

from __future__ import annotations

import inspect
import math
import time

import numpy as np
import torch

from .core import Batch, Hyper, Layout, Trainer
from .posterior import Posterior, select_width
from .progress import Progress

__all__ = [
    "ASVIRegressor",
    "SVIRegressor",
    "ASVIClassifier",
    "SVIClassifier",
    "DenseBNNRegressor",
    "HSBNNRegressor",
    "resolve_device",
]

PAPER_WIDTHS = (2, 4, 6, 8, 10, 12, 14, 16, 18, 20)


def resolve_device(device) -> torch.device:
    """``torch.device`` for a user's ``device``; CUDA only when asked for and present."""
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' was asked for but torch.cuda.is_available() is False")
    return dev


def _check_widths(widths) -> list[int]:
    try:
        ws = [w for w in widths]
    except TypeError as exc:
        raise ValueError(f"widths must be a list of positive integers, got {widths!r}") from exc
    if not ws:
        raise ValueError("widths must be a non-empty list of positive integers")
    for w in ws:
        if isinstance(w, bool) or not float(w).is_integer() or w < 1:
            raise ValueError(f"every width must be an integer >= 1, got {w!r}")
    return [int(w) for w in ws]


def _check_X(X, p=None) -> np.ndarray:
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"X must be a non-empty 2-d array (n, p), got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError("X contains NaN or infinite values")
    if p is not None and X.shape[1] != p:
        raise ValueError(f"X has {X.shape[1]} features, the model was fitted with {p}")
    return X


def _store(obj, params: dict) -> None:
    """The constructor's only job (sklearn contract): store every keyword parameter."""
    for k, v in params.items():
        if k not in ("self", "__class__"):
            setattr(obj, k, v)


class _Base:
    _likelihood = "gaussian"
    _family = "spike_slab"

    # ---------------------------------------------------------- sklearn params
    @classmethod
    def _param_names(cls):
        sig = inspect.signature(cls.__init__)
        return [p for p in sig.parameters if p != "self"]

    def get_params(self, deep: bool = True) -> dict:
        return {k: getattr(self, k) for k in self._param_names()}

    def set_params(self, **params):
        names = self._param_names()
        for k, v in params.items():
            if k not in names:
                raise ValueError(f"invalid parameter {k!r} for {type(self).__name__}")
            setattr(self, k, v)
        return self

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    # ---------------------------------------------------------- fitting
    def _candidate_widths(self) -> list[int]:
        raise NotImplementedError

    def _hyper(self) -> Hyper:
        return Hyper(
            likelihood=self._likelihood,
            sigma=float(self.sigma),
            sigma_0=float(self.sigma_0),
            slab=self.slab,
            lambda_s=float(self.lambda_s),
            lam=float(self.lam),
            batch_size=int(self.batch_size),
            mc_samples=int(self.mc_samples),
            lr=float(self.lr),
            l3=self.l3,
            sampling=self.sampling,
            family=self._family,
        )

    def _encode_y(self, y, n):
        raise NotImplementedError

    def fit(self, X, y):
        """Train every candidate width in one batched program and select (ASVI)."""
        widths = _check_widths(self._candidate_widths())
        X = _check_X(X)
        n, p = X.shape
        y = np.asarray(y)
        if y.ndim != 1 or y.shape[0] != n:
            raise ValueError(f"y must be 1-d with {n} entries to match X, got shape {y.shape}")
        y_enc, out_dim = self._encode_y(y, n)
        if int(self.batch_size) > n:
            raise ValueError(f"batch_size ({self.batch_size}) must be <= n ({n})")
        if int(self.depth) < 1:
            raise ValueError(f"depth must be >= 1, got {self.depth}")
        if not (float(self.epochs) > 0):
            raise ValueError(f"epochs must be > 0, got {self.epochs}")
        if int(self.elbo_draws) < 10:
            raise ValueError(f"elbo_draws must be >= 10 (selection rule), got {self.elbo_draws}")
        hyper = self._hyper()
        hyper.validate()
        dev = resolve_device(self.device)
        layout = Layout(
            p, int(self.depth), widths, out_dim, node_scales=self._family == "horseshoe"
        )
        seeds = [int(self.seed) * 1000 + k for k in range(len(widths))]
        Xt = torch.as_tensor(X, dtype=self.dtype).unsqueeze(0)
        yt = torch.as_tensor(y_enc).unsqueeze(0)
        batch = Batch(Xt, yt, torch.zeros(len(widths), dtype=torch.int64))
        tr = Trainer(
            layout, hyper, seeds, batch, device=dev, dtype=self.dtype, compile=bool(self.compile)
        )
        steps = max(1, math.ceil(float(self.epochs) * n / int(self.batch_size)))
        t0 = time.perf_counter()
        prog = Progress(type(self).__name__) if self.progress else None
        tr.fit(steps, progress=prog, record_every=max(1, steps // 100))
        self.fit_time_s_ = time.perf_counter() - t0
        st = tr.state
        self.failed_ = st.failed.cpu().numpy()
        self.failed_step_ = st.failed_step.cpu().numpy()
        if self.failed_.all():
            raise FloatingPointError(
                f"training stopped: every model hit a non-finite loss (at steps "
                f"{self.failed_step_.tolist()}); lower lr or check the data scale"
            )
        self.n_steps_ = steps
        self.history_ = st.history
        self.widths_ = widths
        self.n_features_in_ = p
        self.posterior_ = Posterior(layout, hyper, st.var, tr.seeds)
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

    def _check_fitted(self):
        if not hasattr(self, "posterior_"):
            raise RuntimeError(f"this {type(self).__name__} is not fitted yet; call fit first")


class _RegressorMixin:
    _likelihood = "gaussian"

    def _encode_y(self, y, n):
        y = np.asarray(y, dtype=float)
        if not np.all(np.isfinite(y)):
            raise ValueError("y contains NaN or infinite values")
        return y, 1

    def predict(self, X, return_std: bool = False):
        """Posterior-mean prediction from ``predict_draws`` draws (30, the paper's) of the
        selected width; with ``return_std`` also the predictive sd ``sqrt(Var_q f + sigma^2)``."""
        self._check_fitted()
        X = _check_X(X, self.n_features_in_)
        k, T = self.selected_index_, int(self.predict_draws)
        mean = self.posterior_.predict_mean(X, T)[k].cpu().numpy()
        if not return_std:
            return mean
        return mean, self.posterior_.predict_std(X, T)[k].cpu().numpy()

    def score(self, X, y) -> float:
        """Coefficient of determination R^2 of :meth:`predict`."""
        y = np.asarray(y, dtype=float)
        resid = ((y - self.predict(X)) ** 2).sum()
        return float(1 - resid / ((y - y.mean()) ** 2).sum())


class _ClassifierMixin:
    _likelihood = "categorical"

    def _encode_y(self, y, n):
        classes, idx = np.unique(y, return_inverse=True)
        if len(classes) < 2:
            raise ValueError("y must contain at least two classes")
        self.classes_ = classes
        return idx.astype(np.int64), len(classes)

    def predict_proba(self, X):
        """Posterior-mean class probabilities ``(m, classes)`` of the selected width."""
        self._check_fitted()
        X = _check_X(X, self.n_features_in_)
        probs = self.posterior_.predict_mean(X, int(self.predict_draws))
        return probs[self.selected_index_].T.cpu().numpy()

    def predict(self, X):
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]

    def score(self, X, y) -> float:
        """Accuracy of :meth:`predict`."""
        return float(np.mean(self.predict(X) == np.asarray(y)))


_COMMON_DOC = """
    Parameters (defaults: the paper's teacher experiment, appendix C.1): ``depth`` hidden
    layers; ``sigma`` the known noise sd (regression); ``sigma_0`` the Gaussian prior slab
    sd; ``lambda_s``, ``lam`` the priors on sparsity and width; ``batch_size`` m;
    ``mc_samples`` K; Adam ``lr``; ``epochs`` of n/m steps; ``slab`` "gaussian" or
    "uniform"; ``l3`` "paper" (eq. (loss3) as printed) or "exact"; ``sampling`` of
    minibatches; ``elbo_draws`` (>= 10) for selection; ``predict_draws`` (30); ``seed``;
    ``device``, ``dtype``; ``compile`` (torch.compile the step); ``progress`` (a bar on
    stderr).
"""


class ASVIRegressor(_RegressorMixin, _Base):
    __doc__ = "Adaptive sparse variational inference: selects the width (eq. (13))." + _COMMON_DOC

    def __init__(
        self,
        widths=PAPER_WIDTHS,
        depth=2,
        sigma=1.0,
        sigma_0=0.8,
        lambda_s=3.0,
        lam=10.0,
        batch_size=1024,
        mc_samples=1,
        lr=5e-3,
        epochs=7000,
        slab="gaussian",
        l3="paper",
        sampling="iid",
        elbo_draws=10,
        predict_draws=30,
        seed=0,
        device="cpu",
        dtype=torch.float32,
        compile=False,
        progress=False,
    ):
        _store(self, locals())

    def _candidate_widths(self):
        return self.widths


class SVIRegressor(_RegressorMixin, _Base):
    __doc__ = "Sparse variational inference at one fixed width." + _COMMON_DOC

    def __init__(
        self,
        width=10,
        depth=2,
        sigma=1.0,
        sigma_0=0.8,
        lambda_s=3.0,
        lam=10.0,
        batch_size=1024,
        mc_samples=1,
        lr=5e-3,
        epochs=7000,
        slab="gaussian",
        l3="paper",
        sampling="iid",
        elbo_draws=10,
        predict_draws=30,
        seed=0,
        device="cpu",
        dtype=torch.float32,
        compile=False,
        progress=False,
    ):
        _store(self, locals())

    def _candidate_widths(self):
        return [self.width]


class ASVIClassifier(_ClassifierMixin, _Base):
    __doc__ = "ASVI with a categorical likelihood (the paper's MNIST experiment)." + _COMMON_DOC

    def __init__(
        self,
        widths=(400, 500, 600, 700, 800),
        depth=2,
        sigma=1.0,
        sigma_0=2.0,
        lambda_s=50.0,
        lam=600.0,
        batch_size=512,
        mc_samples=1,
        lr=5e-3,
        epochs=300,
        slab="gaussian",
        l3="paper",
        sampling="iid",
        elbo_draws=10,
        predict_draws=30,
        seed=0,
        device="cpu",
        dtype=torch.float32,
        compile=False,
        progress=False,
    ):
        _store(self, locals())

    def _candidate_widths(self):
        return self.widths


class SVIClassifier(_ClassifierMixin, _Base):
    __doc__ = "SVI with a categorical likelihood at one fixed width." + _COMMON_DOC

    def __init__(
        self,
        width=400,
        depth=2,
        sigma=1.0,
        sigma_0=2.0,
        lambda_s=50.0,
        lam=600.0,
        batch_size=512,
        mc_samples=1,
        lr=5e-3,
        epochs=300,
        slab="gaussian",
        l3="paper",
        sampling="iid",
        elbo_draws=10,
        predict_draws=30,
        seed=0,
        device="cpu",
        dtype=torch.float32,
        compile=False,
        progress=False,
    ):
        _store(self, locals())

    def _candidate_widths(self):
        return [self.width]


class DenseBNNRegressor(SVIRegressor):
    """Dense-BNN baseline (Bayes by Backprop): Gaussian mean-field over every weight and
    bias with a ``N(0, sigma_0^2)`` prior (``simulate.families``); same parameters and
    interface as :class:`SVIRegressor` (``lambda_s``, ``lam`` and ``l3`` are unused)."""

    _family = "dense"


class HSBNNRegressor(SVIRegressor):
    """HS-BNN baseline: horseshoe prior on node pre-activations with a log-normal
    variational family on the scales (``simulate.families``); same parameters and interface
    as :class:`SVIRegressor` (``lambda_s``, ``lam`` and ``l3`` are unused)."""

    _family = "horseshoe"
