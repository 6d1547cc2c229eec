"""The scikit-learn surface over the core: ``_Base.fit`` (every candidate width in one batched
program through ``simulate.core.training.train_models``, then eq. (13)'s selection), the
regressors' and classifiers' predictions and intervals."""

from __future__ import annotations

import math
import numbers
import time
import warnings
from dataclasses import replace

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from simulate.core import Hyper, Layout
from simulate.core.constraints import POSITIVE, Interval, check
from simulate.core.hyper import (
    LAMBDA_S_A,
    PAPER_EPOCHS,
    inclusion_rate,
    lambda_s_at,
)
from simulate.core.options import DEFAULT_OPTIONS
from simulate.core.posterior import (
    MIN_ELBO_DRAWS,
    RISK_DRAWS,
    mixture_quantiles,
    select_width,
)
from simulate.core.stopping import STOP_DEFAULTS, StopRule
from simulate.core.training import train_models
from simulate.estimators.inputs import (
    EPOCH_COUNT,
    MIN_NOISE_POINTS,
    Y_SCALE_RANGE,
    _check_core_range,
    _check_widths,
    _dtype,
    _integer,
    _standardise,
    cap_steps,
    check_c_depth,
    check_depth_bound,
    check_fit_sizes,
    check_noise_points,
    check_predict_sizes,
    resolve_device,
    seed_of,
    validate_numeric,
)
from simulate.estimators.policy import (
    NOISE_FLOOR,
    NOISE_START,
    Halving,
    _progress,
    _step_options,
)
from simulate.estimators.summary import FitSummaryMixin, store_fit_details
from simulate.references.constructive import encode, spline_starts

# the estimators' parameters that are Hyper's fields under the same names, copied into
# the fit's Hyper as they are (``_Base._hyper``; the others are derived there)
ESTIMATOR_HYPER = ("sigma_0", "slab", "lam", "mc_samples", "lr", "optimizer", "l3", "sampling")


class _Base(FitSummaryMixin, BaseEstimator):
    _likelihood = "gaussian"
    _family = "spike_slab"  # the fixed family of the named estimators

    def _family_name(self) -> str:
        """``family`` where the estimator has that parameter (BNN*), else the class's."""
        return getattr(self, "family", self._family)

    # ---------------------------------------------------------- fitting
    def _candidate_widths(self) -> list[int]:
        raise NotImplementedError

    def _lambda_s(self, n: int, depth: int) -> float:
        """``lambda_s``: the paper's rule for "auto" (``simulate.core.hyper.lambda_s_at`` with
        the likelihood's a, ``LAMBDA_S_A``), else the number."""
        if isinstance(self.lambda_s, str):
            if self.lambda_s != "auto":
                raise ValueError(f"lambda_s must be a number or 'auto', got {self.lambda_s!r}")
            return lambda_s_at(max(n, 2), depth, LAMBDA_S_A[self._likelihood])
        return self.lambda_s

    def _sigma(self, y_scale: float):
        """The step's starting (learned) or known noise sd in the units the model is fitted
        in (standardised targets: ``sigma / y_scale``); ``(sd, learn)``."""
        if self._likelihood != "gaussian":
            return 1.0, False  # unused by the categorical likelihood
        if isinstance(self.sigma, str):
            if self.sigma != "auto":
                raise ValueError(f"sigma must be a positive number or 'auto', got {self.sigma!r}")
            return NOISE_START, True
        if isinstance(self.sigma, bool) or not isinstance(self.sigma, numbers.Real):
            raise ValueError(f"sigma must be a positive number or 'auto', got {self.sigma!r}")
        return float(self.sigma) / y_scale, False

    def _hyper(self, n: int, depth: int, sigma: float) -> Hyper:
        """The training hyperparameters (checked as ``Hyper`` is made: one rule per field);
        the batch at most n."""
        return Hyper(
            **{k: getattr(self, k) for k in ESTIMATOR_HYPER},
            likelihood=self._likelihood,
            sigma=sigma,
            lambda_s=self._lambda_s(n, depth),
            batch_size=min(_integer("batch_size", self.batch_size), n),
            lr_inclusion=inclusion_rate(
                self.lr,
                self.lr_inclusion,
                check("lr_inclusion_ramp", self.lr_inclusion_ramp, POSITIVE, None),
                n,
            ),
            family=self._family_name(),
        )

    def _encode_y(self, y, n, dtype):
        raise NotImplementedError

    def _budget(self, n: int, batch: int):
        """``(steps, rule)``: a fixed number of steps (``epochs`` given) or the stopping
        rule capped at ``max_epochs`` (``epochs=None``; "auto": ``inputs.cap_steps``), its
        window a twentieth of the cap between 50 steps (a shorter window's mean is too noisy
        for the rule's tolerance: with windows of 1 step a model "converged" after 5) and 500
        (the sweeps')."""
        per_epoch = n / batch  # epochs and max_epochs: whole numbers (EPOCH_COUNT, in fit)
        if self.epochs is not None:
            return max(1, math.ceil(float(int(self.epochs)) * per_epoch)), None
        cap = cap_steps(self.max_epochs, per_epoch, PAPER_EPOCHS)
        window = min(STOP_DEFAULTS["window"], max(50, cap // 20))
        return None, StopRule(max_steps=cap, window=window, lr_decays=self.lr_decays)

    def _validation(self, n: int, seed: int):
        """``(fit_idx, val_idx)``: with ``validation_fraction`` that fraction of the points
        (at least one, at most n - 2) held out for the stopping rule, else (all, None)."""
        v = self.validation_fraction
        if v is None:
            return np.arange(n), None
        check("validation_fraction", v, Interval(numbers.Real, 0, 1, "neither"))
        if self.epochs is not None:
            raise ValueError("validation_fraction is for the stopping rule: set epochs=None")
        k = min(max(1, int(round(v * n))), n - 2)
        if k < 1:
            raise ValueError(f"validation_fraction needs at least 3 points, got n = {n}")
        perm = np.random.default_rng(seed).permutation(n)
        return np.sort(perm[k:]), np.sort(perm[:k])

    def _seed(self) -> int:
        """The fit's seed (``simulate.estimators.inputs.seed_of``: ``random_state``, or the
        former ``seed`` with a ``FutureWarning``)."""
        return seed_of(type(self).__name__, self.random_state, self.seed)

    def _checked_params(self):
        """The parameters a fit reads before any work, checked: ``(widths, depth, seed,
        dtype)`` (and the draws' and epochs' bounds; a depth past the C code's limit where
        ``mlp`` names a C path, ``check_c_depth``)."""
        widths = _check_widths(self._candidate_widths())
        depth = _integer("depth", self.depth)
        check_c_depth(depth, self.mlp)
        _integer("elbo_draws", self.elbo_draws, lo=MIN_ELBO_DRAWS)  # the selection rule's floor
        _integer("predict_draws", self.predict_draws)
        seed = self._seed()
        dtype = _dtype(self.dtype)
        check("epochs", self.epochs, EPOCH_COUNT, None)  # before any work (MAX_EPOCHS)
        cap_steps(self.max_epochs, 1.0, PAPER_EPOCHS)  # "auto" or a whole number of epochs
        return widths, depth, seed, dtype

    def fit(self, X, y):
        """Train every candidate width in one batched program and select (ASVI)."""
        widths, depth, seed, dtype = self._checked_params()
        X, y = validate_numeric(self, X, y, y_numeric=self._likelihood == "gaussian")
        _check_core_range(
            "X", X, dtype, "scale the features (a StandardScaler) or use dtype='float64'"
        )
        y_enc, out_dim = self._encode_y(y, X.shape[0], dtype)
        fit_idx, val_idx = self._validation(X.shape[0], seed)
        X, y_enc, Xv, yv = (
            X[fit_idx],
            y_enc[fit_idx],
            *((None, None) if val_idx is None else (X[val_idx], y_enc[val_idx])),
        )
        n, p = X.shape
        sigma, learn_noise = self._sigma(getattr(self, "y_scale_", 1.0))
        self.noise_points_ = n if learn_noise else None  # the learned sd's points
        if learn_noise:
            check_noise_points(type(self).__name__, n)
        hyper = self._hyper(n, depth, sigma)
        check_fit_sizes(
            type(self).__name__, widths, depth, (n, p, out_dim), hyper,
            (self.elbo_draws, self.predict_draws), torch.finfo(dtype).bits // 8,
        )  # fmt: skip
        check_depth_bound(type(self).__name__, depth)
        steps, rule = self._budget(n, hyper.batch_size)
        progress = _progress(self.progress, type(self).__name__)
        dev = resolve_device(self.device)
        seeds = [seed * 1000 + k for k in range(len(widths))]
        Xt = torch.tensor(X, dtype=dtype).unsqueeze(0)  # a copy: X may be read-only
        yt = torch.tensor(y_enc).unsqueeze(0)
        init = self._start(X, y_enc, widths, depth, hyper, seed, dtype)
        risk = None
        if Xv is not None:
            # the held-out criterion's tolerance: 10% per window (the sweep's stop_risk_tol
            # as the rate tiers once used it, HISTORY.md)
            rule = replace(rule, risk_tol=0.1)
            risk = self._validation_risk(Xv, yv)
        options = _step_options(
            self.mlp, self.compile, hyper, dev, dtype, steps if rule is None else rule.max_steps,
            depth=depth, learn_noise=learn_noise,
            noise_every=DEFAULT_OPTIONS.noise_every if rule is None else rule.window,
            noise_floor=NOISE_FLOOR,
        )  # fmt: skip
        self.step_path_ = {"mlp": options.mlp, "compiled": options.compile}
        race = self._race(widths, rule)  # a bad value refused before the trainer is built
        t0 = time.perf_counter()
        trained = train_models(
            hyper, widths, seeds, Xt, yt, [0] * len(widths), steps=steps, rule=rule,
            progress=progress, record_every=0 if steps is None else max(1, steps // 100),
            risk=risk, race=race, depth=depth, out_dim=out_dim, options=options, device=dev,
            dtype=dtype, init_from=init,
        )  # fmt: skip
        self.fit_time_s_ = time.perf_counter() - t0
        self._select(trained, steps, widths, Xt.to(dev), yt.to(dev), learn_noise)
        store_fit_details(self, rule, trained.convergence, n)  # what summary() reads
        return self

    def _select(self, trained, steps, widths, Xt, yt, learn_noise: bool) -> None:
        """What the fit says after training: the failures, the budget each candidate used,
        the candidates' ELBO on the fit's data (with learned noise, after the exact M-step),
        eq. (13)'s selection and the kept edges, as the fitted attributes."""
        tr, conv, n = trained.trainer, trained.convergence, Xt.shape[1]
        health = tr.state.health
        self.failed_ = health.failed.cpu().numpy()
        self.failed_step_ = health.failed_step.cpu().numpy()
        if self.failed_.all():
            raise FloatingPointError(
                f"training stopped: every model hit a non-finite loss (at steps "
                f"{self.failed_step_.tolist()}); lower lr or check the data scale"
            )
        self._record_budget(conv, steps, widths)
        self.history_ = tr.history
        self.widths_ = widths
        self.posterior_ = trained.posterior
        terms = self.posterior_.elbo(Xt, yt, draws=int(self.elbo_draws))
        if learn_noise:  # the exact M-step on the full data: sigma^2 = E_q[RSS] / n
            sd = np.maximum(np.sqrt(terms["rss"] / n), NOISE_FLOOR)
            # the Posterior made again with its noise_sd argument (checked, in its dtype)
            self.posterior_ = replace(self.posterior_, noise_sd=sd)
            terms["L1"] = 0.5 * n * np.log(2 * np.pi * sd**2) + terms["rss"] / (2 * sd**2)
            terms["elbo"] = -(terms["L1"] + terms["L2"] + terms["L3"])
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
        self._set_noise()

    def _set_noise(self) -> None:
        """The regressors' ``sigma_`` (selected candidate) and ``sigma_all_``, in y's units."""

    def _race(self, widths, rule):
        """The race between candidates (``race``: "halving", :class:`Halving`, or None):
        only where there is one (two or more candidates) and a stopping rule to race
        under (``epochs=None``)."""
        if self.race is None:
            return None
        if not (isinstance(self.race, str) and self.race == "halving"):
            raise ValueError(f"race must be 'halving' or None, got {self.race!r}")
        if rule is None or len(widths) < 2:
            return None
        return Halving(widths, float(self.lam))

    def _record_budget(self, conv, steps, widths) -> None:
        """``n_iter_`` (steps each candidate trained), ``converged_`` (bool per candidate;
        all False for a fixed budget), ``retired_`` (the candidates the race stopped:
        :class:`Halving`), ``n_steps_`` (the most steps any trained), and a
        ``ConvergenceWarning`` naming the candidates the cap stopped."""
        E = len(widths)
        self.retired_ = np.zeros(E, dtype=bool)
        if conv is None:
            self.n_iter_ = np.full(E, steps)
            self.converged_ = np.zeros(E, dtype=bool)
        else:
            self.n_iter_ = np.asarray(conv["steps"])
            self.converged_ = np.asarray(conv["converged"], dtype=bool)
            self.retired_ = np.asarray(conv.get("retired", [False] * E), dtype=bool)
            capped = ~self.converged_ & ~self.failed_ & ~self.retired_
            if capped.any():
                warnings.warn(
                    f"{type(self).__name__}: max_epochs={self.max_epochs!r} stopped widths "
                    f"{[w for w, c in zip(widths, capped, strict=True) if c]} before the "
                    "stopping rule held; raise max_epochs (or set epochs for a fixed budget)",
                    ConvergenceWarning,
                    stacklevel=3,
                )
        self.n_steps_ = int(self.n_iter_.max())

    def _validation_risk(self, Xv, yv):
        raise ValueError("validation_fraction is for regression")

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

        layout = Layout(1, depth, widths)
        return encode(layout, spline_starts(X, y, widths, depth, seed=seed), hyper, dtype)

    def _check_fitted(self):
        check_is_fitted(self, "posterior_")  # sklearn's NotFittedError

    def _X_for_predict(self, X) -> np.ndarray:
        self._check_fitted()
        return validate_numeric(self, X, reset=False)


class _Regressor(RegressorMixin, _Base):
    _likelihood = "gaussian"

    def _encode_y(self, y, n, dtype):
        """Targets in the units the model is fitted in: standardised with the training
        targets' mean and sd (``y_mean_``, ``y_scale_``; sd 1 where every target is the
        same number) unless ``standardize_y`` is False.

        The mean and sd are found without under- or overflow (``_standardise``), so targets
        of scale 1e-300 or 1e300 are fitted like the same targets at scale 1, with a
        ``UserWarning`` where the sd is outside ``Y_SCALE_RANGE`` (predictions, ``sigma_``
        and intervals come back in y's units, in float64).  Unstandardised targets enter the
        core as they are: in float32 those that would overflow, or all flush to zero, are
        refused (``ValueError``)."""
        y = np.asarray(y, dtype=float)
        if not isinstance(self.standardize_y, (bool, np.bool_)):
            raise ValueError(f"standardize_y must be True or False, got {self.standardize_y!r}")
        if not self.standardize_y:
            _check_core_range("y", y, dtype, "use standardize_y=True or dtype='float64'")
            self.y_mean_, self.y_scale_ = 0.0, 1.0
            return y.copy(), 1
        self.y_mean_, sd, z = _standardise(y)
        if sd == 0.0:  # a constant target: centred, in y's units
            self.y_scale_ = 1.0
            return z, 1
        lo, hi = Y_SCALE_RANGE
        if not lo <= sd <= hi:
            warnings.warn(
                f"{type(self).__name__}: y's sd {sd:.3g} is outside [{lo:g}, {hi:g}] "
                "(float32 training): fitted on standardised targets, predictions scaled back",
                UserWarning,
                stacklevel=3,
            )
        self.y_scale_ = sd
        return z, 1

    def _set_noise(self) -> None:
        self.sigma_all_ = self.posterior_.noise_sd_all().cpu().numpy() * self.y_scale_
        self.sigma_ = float(self.sigma_all_[self.selected_index_])

    def _validation_risk(self, Xv, yv):
        """The stopping rule's held-out criterion: each model's posterior-mean MSE on the
        validation points (standardised units), at fixed evaluation draws."""

        def risk(tr, params):
            m = tr.posterior(params).predict_mean(Xv, RISK_DRAWS)
            return ((m - torch.as_tensor(yv).to(m)) ** 2).mean(-1)

        return risk

    def _warn_few_points(self) -> None:
        """An interval from a noise sd learned on too few points says so again
        (``simulate.estimators.inputs.check_noise_points``)."""
        n = getattr(self, "noise_points_", None)
        if n is not None and n < MIN_NOISE_POINTS:
            check_noise_points(type(self).__name__, n, stacklevel=4)

    def predict(self, X, return_std: bool = False):
        """Posterior-mean prediction from ``predict_draws`` draws (30, the paper's) of the
        selected width, in y's units; with ``return_std`` also the predictive sd
        ``sqrt(Var_q f + sigma^2)`` (sigma the learned ``sigma_`` or the known one)."""
        X = self._X_for_predict(X)
        k, T = self.selected_index_, int(self.predict_draws)
        check_predict_sizes(type(self).__name__, self.posterior_, T, X.shape[0])
        mean = self.posterior_.predict_mean(X, T)[k].cpu().numpy() * self.y_scale_ + self.y_mean_
        if not return_std:
            return mean
        self._warn_few_points()
        return mean, self.posterior_.predict_std(X, T)[k].cpu().numpy() * self.y_scale_

    def predict_interval(self, X, level: float = 0.9):
        """The central ``level`` predictive interval ``(lower, upper)`` of the selected
        width, in y's units: the quantiles of the predictive mixture ``(1/T) sum_t N(f_t(x),
        sigma^2)`` over ``predict_draws`` draws (``simulate.core.posterior.
        mixture_quantiles``), the same predictive distribution as ``predict``."""

        X = self._X_for_predict(X)
        check("level", level, Interval(numbers.Real, 0, 1, "neither"))
        k, T = self.selected_index_, int(self.predict_draws)
        check_predict_sizes(type(self).__name__, self.posterior_, T, X.shape[0])
        self._warn_few_points()
        post = self.posterior_
        f = post.outputs(X, T)[:, k, 0, :].cpu().numpy()
        s = float(post.noise_sd_all()[k])
        a = (1 - float(level)) / 2
        lo, hi = mixture_quantiles(f, s, (a, 1 - a))
        return lo * self.y_scale_ + self.y_mean_, hi * self.y_scale_ + self.y_mean_


class _Classifier(ClassifierMixin, _Base):
    _likelihood = "categorical"

    def _encode_y(self, y, n, dtype):
        check_classification_targets(y)
        classes, idx = np.unique(y, return_inverse=True)
        if len(classes) < 2:
            raise ValueError(f"y must contain at least two classes, got one class {classes!r}")
        self.classes_ = classes
        return idx.astype(np.int64), len(classes)

    def predict_proba(self, X):
        """Posterior-mean class probabilities ``(m, classes)`` of the selected width."""
        X = self._X_for_predict(X)
        check_predict_sizes(type(self).__name__, self.posterior_, int(self.predict_draws), len(X))
        probs = self.posterior_.predict_mean(X, int(self.predict_draws))
        return probs[self.selected_index_].T.cpu().numpy()

    def predict(self, X):
        proba = self.predict_proba(X)  # checks fitted first
        return self.classes_[np.argmax(proba, axis=1)]
