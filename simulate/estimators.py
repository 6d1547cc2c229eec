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
return_std=False)``; ``score`` (R^2 for regressors, accuracy for classifiers).  Choices:
``batch_size`` larger than n trains full-batch (m = n); ``dtype`` is "float32" or "float64"
(a torch dtype is accepted too).

As a practitioner meets them (the paper's own settings are one argument away):

* **Noise** (regressors): ``sigma="auto"`` (the default) learns each candidate's noise sd
  with it, the point estimate that maximises the ELBO (``simulate.core.Trainer``'s
  ``learn_noise``: variational EM, the exact maximiser ``E_q[RSS] / n`` at every stopping
  window, and once more on the full data after training); ``sigma_`` is the selected
  candidate's, in y's units.  ``sigma=<number>`` is the paper's known-noise model (sd in
  y's units).  Why a point estimate and not a posterior on the precision: the ELBO
  maximiser is what the paper's theory is about (the ELBO maximised over the variational
  family), it costs nothing (the steps' own likelihood terms estimate E_q[RSS]), and with
  n in the hundreds or more a Gamma posterior on the precision would be as narrow as the
  point's sampling error.
* **Targets** are standardised inside ``fit`` (``standardize_y=True``: mean ``y_mean_`` and
  sd ``y_scale_`` of the training targets, found without under- or overflow at any scale
  float64 holds: ``_standardise``; a ``UserWarning`` where the sd is outside float32's
  range, ``Y_SCALE_RANGE``); predictions and predictive sds come back in y's units.
  Features are the user's: put a ``StandardScaler`` in a ``Pipeline`` in front (the priors
  are on the weights, so the features' scale matters; values that the float32 cast would
  make inf, or a column it would flush to zero, are refused).  ``standardize_y=False`` is
  the paper's teacher experiment (targets as generated, sigma = 1).
* **Training length**: by default each candidate trains until the sweeps' stopping rule
  holds (``simulate.core.stopping.StopRule``: its windowed objective and KL quiet for two
  windows; with ``validation_fraction``, also the posterior mean's validation MSE, the
  held-out criterion that stands in for the sweep's risk against a truth), with
  ``max_epochs`` as a cap; ``n_iter_`` (steps) and ``converged_`` per candidate, and a
  ``ConvergenceWarning`` when the cap binds.  ``race="halving"`` (the default, ASVI's
  candidates under the rule): successive halving by the penalised ELBO stops candidates
  far behind the leader (:class:`Halving`; ``retired_``), so the widest, slowest
  candidates stop setting the fit's length; ``race=None`` trains every candidate to its
  own stop.  ``epochs=<number>`` trains a fixed budget
  (the paper's teacher experiment: 7000 epochs of ``n / batch_size`` steps).  Both are
  whole numbers in [1, ``MAX_EPOCHS``] (a million; why: at ``MAX_EPOCHS``).
* **Sparsity prior**: ``lambda_s="auto"`` is the paper's rule ``a (L + 1) log n``
  (``theory.lambda_s_rule``) with a = 0.1 for regression and 1.5 for classification (the
  values that reproduce the paper's printed 3 and 50); a number is used as given.
* **Speed**: ``mlp="auto"`` and ``compile="auto"`` (the defaults) take the fastest path
  the fit has (``_step_options``): the whole step in C per model (``mlp="native-step"``,
  ``simulate.core.native.fused_steps``: the spike-and-slab family with the Gaussian slab
  and the paper's L3, or Dense-BNN; nothing compiled) wherever it serves the fit
  (regression, float32 on the CPU) and a C compiler builds it; else the network's pass
  fused in C (``mlp="native"``) where that serves, with the step compiled
  (``torch.compile``) when the budget is at least ``COMPILE_FROM_STEPS`` steps, where the
  compilation's seconds are repaid; without a compiler the batched pass and a one-line
  ``FallbackWarning``.  ``compile=True`` asks for the compiled step, so with
  ``mlp="auto"`` it takes the fused network pass, not the whole step in C.  ``fit``
  records what it took in ``step_path_``.  The paths compute the same numbers to float
  rounding; ``mlp="batched", compile=False`` is the plain eager path.
* **Progress**: ``progress="auto"`` draws a bar on stderr when it is a terminal and the fit
  has run for more than 3 seconds; True always, False never.
"""

from __future__ import annotations

import inspect
import math
import numbers
import sys
import time
import warnings
from dataclasses import replace

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from simulate.core import Hyper, Layout, native
from simulate.core.constraints import POSITIVE, Count, Interval, check
from simulate.core.hyper import (
    DEPTH,
    HYPER_DEFAULTS,
    LAMBDA_S_A,
    PAPER_EPOCHS,
    PAPER_MNIST,
    PAPER_MNIST_WIDTHS,
    PAPER_WIDTHS,
    inclusion_rate,
    lambda_s_at,
)
from simulate.core.options import DEFAULT_OPTIONS, StepOptions
from simulate.core.paths import uses_hand_written
from simulate.core.posterior import (
    ELBO_DRAWS,
    MIN_ELBO_DRAWS,
    PREDICT_DRAWS,
    RISK_DRAWS,
    mixture_quantiles,
    select_width,
)
from simulate.core.recipe import train_models
from simulate.core.steppath import BATCHED, MLP_KINDS, NATIVE, NATIVE_STEP, path_of
from simulate.core.stopping import STOP_DEFAULTS, StopRule
from simulate.progress import Progress
from simulate.references.constructive import encode, spline_starts
from simulate.sweep.recipes import DEFAULT_RECIPE, RECIPE_DEFAULTS, recipe_settings
from theory import log_prior_N

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


# ``epochs`` and ``max_epochs``: whole numbers in [1, MAX_EPOCHS].  Why a million: it is
# 140 times the paper's 7000 epochs (the regressors' default cap) and past any budget a fit
# here has used, so a larger number is a slip (``epochs=1e30`` trained without end), not a
# plan.  Within it the step count is exact: the count itself is a Python int
# (``State.count``), ``ceil(epochs * n / m)`` is formed in float64 from numbers far below
# 2**53 (epochs <= 1e6 and n / m <= n), and the sampler's draw numbers ``t K + k`` stay
# below the 2**64 that ``rng.offset_words`` hashes (1e6 n K < 2**64 for any n K under
# 1.8e13).  An integral float (``7000.0``, what ``teacher --epochs`` parses) is accepted as
# the whole number it is; a fraction of an epoch (1.5) is refused.
MAX_EPOCHS = 10**6
EPOCH_COUNT = Count(1, MAX_EPOCHS)
# Targets whose sd lies outside [1e-30, 1e30] are fitted (standardised: ``_standardise``)
# with a warning: float32, the core's training dtype, holds about [1.2e-38, 3.4e38], so such
# targets could not have entered it as they are; the margin of 1e8 leaves room for the
# squares and products of y's units that a user may go on to form in float32.
Y_SCALE_RANGE = (1e-30, 1e30)
_F32 = np.finfo(np.float32)


def _standardise(y: np.ndarray) -> tuple[float, float, np.ndarray]:
    """``(mean, sd, (y - mean) / sd)`` of finite targets at any scale float64 holds.

    ``y.std()`` squares y's deviations: at a scale of 1e-300 the squares underflow to 0 (the
    targets were taken as constant and fitted as such, silently) and at 1e300 they overflow
    to inf.  Here y is first multiplied by ``2**-e``, the power of two just above max|y| (an
    exact scaling: only the exponent changes), so its values lie in (-1, 1), where neither
    the mean nor the squares can under- or overflow; the mean and sd found there are scaled
    back by ``2**e`` and the standardised values are formed there.  Scaling by a power of two
    commutes with every rounding, so where nothing under- or overflows this is ``y.mean()``,
    ``y.std()`` and ``(y - y.mean()) / y.std()`` bit for bit: fits at ordinary scales do not
    move.  When every target is the same number, sd is 0 and the mean is that number (where
    ``y.mean()`` can round off it: three 0.1s give 0.1 + 1.4e-17, which ``y.std()`` took for a
    spread of 1.4e-17 and the fit for a signal).  A spread that float64 cannot hold (targets
    0 and 5e-324: the sd is 2**-1075) is a ``ValueError``, never a sd of 0 beside
    standardised values."""
    top = float(np.max(np.abs(y)))
    if top == 0.0 or np.all(y == y[0]):  # constant: no spread to measure (y - mean: zeros)
        mean = float(y.mean()) if top == 0.0 else float(y[0])
        return mean, 0.0, y - mean
    e = math.frexp(top)[1]  # top = f 2**e with f in [0.5, 1)
    z = np.ldexp(y, -e)
    mz, sz = float(z.mean()), float(z.std())
    sd = math.ldexp(sz, e)
    if sd == 0.0 or not math.isfinite(sd):  # the spread itself is below float64's range
        raise ValueError(
            f"y's spread ({sz:.3g} x 2**{e}) is below the smallest float64; multiply y by a"
            " power of ten (and the predictions back by its inverse)"
        )
    return math.ldexp(mz, e), sd, (z - mz) / sz


def _check_core_range(name: str, a: np.ndarray, dtype: torch.dtype, fix: str) -> None:
    """Refuse values that the cast to float32 (the core's default dtype) would turn into
    inf, or that it would flush to zero or subnormals in a whole column (a feature or
    target that silently becomes constant): ``ValueError`` naming ``fix``."""
    if dtype != torch.float32 or a.size == 0:
        return
    top = np.max(np.abs(a.reshape(a.shape[0], -1)), axis=0)
    if np.any(top > _F32.max):
        raise ValueError(
            f"{name} has values beyond float32's range ({top.max():.3g} > {_F32.max:.3g}): {fix}"
        )
    low = (top > 0) & (top < _F32.tiny)
    if np.any(low):
        raise ValueError(
            f"{name} has a column of values below float32's normal range "
            f"(max |value| {top[low].max():.3g} < {_F32.tiny:.3g}): {fix}"
        )


NOISE_FLOOR = DEFAULT_OPTIONS.noise_floor  # learned noise sd's floor, standardised units
# Where the learned noise sd starts, in standardised units (a tenth of y's sd): small, so the
# network fits before the noise settles (with the warm-up of
# ``simulate.core.recipe.fit_trainer``).  A start at y's own sd (the constant fit's) let a narrow
# network's posterior collapse to the constant fit, an optimisation trap far below the fitted ELBO
# (measured: SVI width 2 on y = x_1 + N(0, 0.1^2), n = 300: R^2 0.00 and ELBO -425 from sd 1; R^2
# 0.97 and ELBO +14 from 0.1 with the warm-up; tests/simulate/test_practitioner.py).
NOISE_START = 0.1
# ``compile="auto"`` compiles the step when the budget (the fixed steps, or the stopping
# rule's cap) reaches this many steps.  Why 20,000: measured on a 2-core AVX2 CPU (the
# regressors' default program, ten widths 2..20 at batch 1,024, p = 10, one thread), the
# fused pass's step takes 5.4 ms eager and 3.2 ms compiled, and the compilation 3 s with a
# warm cache (measured) and about 25 s cold (the default fit's first run, 59 s against 34 s
# warm, docs/results/estimator-defaults.md): repaid after 1,400 and 11,400 steps; with the
# stopping rule the run ends before its cap, and the narrowest candidates converge near a
# fifth of it (13,500 of 68,360 steps in the default fit), so a cap of 20,000 is where
# compiling pays even cold.  Smaller problems (scikit-learn's checks, most tests) stay eager.
COMPILE_FROM_STEPS = 20_000


class FallbackWarning(UserWarning):
    """The estimator took a slower path than ``"auto"`` would take where the fused network
    pass can be built (no C compiler here): a one-line note, shown once per call site by
    Python's default warning filter."""


class Halving:
    """The race between candidate widths (``race="halving"``, the default): successive
    halving with the ELBO as the only criterion, asked by ``Trainer.fit_until`` at every
    window end with each candidate's last window mean of the objective (minus the ELBO,
    estimated on the window's minibatches) and the candidates still training.

    At rungs ``first``, ``2 first``, ``4 first``, ... windows into the race, every candidate
    with an estimate is ranked by its penalised ELBO (eq. (13): ``-objective + log pi(N)``,
    ``theory.log_prior_N``), converged ones included; of the candidates still training,
    those ranked below the better half of the candidates not yet out (at least ``keep``
    stay) stop there if they trail the leader by more than ``margin`` -- ``margin_rel``
    of the leader's |objective|, at least ``margin_abs`` nats.  Why that margin: between
    two 500-step windows the objective's mean moves by about 5e-3 of itself from the
    minibatches alone (``simulate.core.stopping``), so a difference of two candidates'
    windows has a noise sd near 0.5% of |objective|: 1.5% is three of those.  A candidate
    so far behind the leader, and in the worse half, is not expected to win the final
    selection; it stops where it is (``retired_``), and its ELBO is still computed on the
    full data and still eligible for selection.  No truth, test point or held-out score
    enters.  Failed candidates (a NaN estimate) are neither ranked nor counted."""

    def __init__(self, widths, lam: float, first: int = 4, keep: int = 2,
                 margin_rel: float = 0.015, margin_abs: float = 5.0):  # fmt: skip
        self.log_prior = torch.tensor(
            [float(log_prior_N(int(w), float(lam))) for w in widths], dtype=torch.float64
        )
        self.keep, self.margin_rel, self.margin_abs = keep, margin_rel, margin_abs
        self.windows, self.next_rung = 0, first
        self.out = torch.zeros(len(widths), dtype=torch.bool)

    def __call__(self, objective: torch.Tensor, running: torch.Tensor) -> torch.Tensor:
        self.windows += 1
        lost = torch.zeros_like(self.out)
        if self.windows < self.next_rung:
            return lost
        self.next_rung *= 2
        objective = objective.to(torch.float64).cpu()
        running = running.cpu()
        pen = -objective + self.log_prior
        ranked = torch.isfinite(pen) & ~self.out
        if int(ranked.sum()) <= self.keep:
            return lost
        order = torch.argsort(torch.where(ranked, pen, -torch.inf), descending=True)
        n_keep = max(self.keep, math.ceil(int(ranked.sum()) / 2))
        best = int(order[0])
        margin = max(self.margin_abs, self.margin_rel * abs(float(objective[best])))
        for k in order[n_keep : int(ranked.sum())].tolist():
            if bool(running[k]) and float(pen[best] - pen[k]) > margin:
                lost[k] = True
        self.out |= lost
        return lost


def _step_options(mlp, compile, hyper, device, dtype, budget: int, **rest) -> StepOptions:
    """The :class:`StepOptions` for ``mlp`` and ``compile`` as the estimator was given them
    (module docstring, "Speed"): ``"auto"`` resolved here, other values checked as
    ``StepOptions`` is made; ``budget`` the steps the fit may run (its cap); ``rest`` the
    other options (learned noise).  The fused pass needs the hand-written step, the
    Gaussian likelihood with one output, float32 and the CPU
    (``simulate.core.native.scope_problems``; regression has one output); where the fit is
    outside that, "auto" is the batched pass without a word (nothing is lost), and where
    only the compiler is missing, with a :class:`FallbackWarning`.  Where the whole step in
    C serves too (``simulate.core.native.step_scope_problems``) and ``compile`` is not
    True, "auto" is ``"native-step"`` (nothing to compile: ``compile="auto"`` then means
    False)."""
    if isinstance(mlp, str) and mlp == "auto":
        path = BATCHED
        serves = uses_hand_written(hyper) and not native.scope_problems(
            hyper.likelihood, 1, device, dtype
        )
        whole = (
            serves
            and compile is not True
            and not native.step_scope_problems(hyper, 1, device, dtype)
        )
        if serves and native.available():
            path = NATIVE_STEP if whole else NATIVE
        elif serves:
            warnings.warn(
                "the fused network pass could not be built here (no working C compiler: "
                "simulate.core.native); training with the slower batched pass "
                "(mlp='batched' says so and silences this)",
                FallbackWarning,
                stacklevel=3,
            )
    elif isinstance(mlp, str) and mlp in MLP_KINDS:
        path = path_of(mlp)
    else:
        kinds = ", ".join(map(repr, ("auto", *MLP_KINDS)))
        raise ValueError(f"mlp must be one of {kinds}, got {mlp!r}")
    if isinstance(compile, str) and compile == "auto":
        compile = budget >= COMPILE_FROM_STEPS and path.compilable
    elif not isinstance(compile, (bool, np.bool_)):
        raise ValueError(f"compile must be True, False or 'auto', got {compile!r}")
    return StepOptions(compile=bool(compile), mlp=path.name, **rest)


def _progress(setting, label: str):
    """The progress callable for ``progress`` (True, False or "auto": a terminal, after 3 s)."""
    if setting == "auto":
        isatty = getattr(sys.stderr, "isatty", None)
        return Progress(label, delay=3.0) if isatty is not None and isatty() else None
    if isinstance(setting, (bool, np.bool_)):
        return Progress(label) if setting else None
    raise ValueError(f"progress must be True, False or 'auto', got {setting!r}")


class _Base(BaseEstimator):
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
        rule capped at ``max_epochs`` (``epochs=None``), its window a twentieth of the cap
        between 50 steps (a shorter window's mean is too noisy for the rule's tolerance: with
        windows of 1 step a model "converged" after 5) and 500 (the sweeps')."""
        per_epoch = n / batch  # epochs and max_epochs: whole numbers (EPOCH_COUNT, in fit)
        if self.epochs is not None:
            return max(1, math.ceil(float(int(self.epochs)) * per_epoch)), None
        cap = max(1, math.ceil(float(int(self.max_epochs)) * per_epoch))
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

    def fit(self, X, y):
        """Train every candidate width in one batched program and select (ASVI)."""
        widths = _check_widths(self._candidate_widths())
        depth = _integer("depth", self.depth)
        _integer("elbo_draws", self.elbo_draws, lo=MIN_ELBO_DRAWS)  # the selection rule's floor
        _integer("predict_draws", self.predict_draws)
        seed = _integer("seed", self.seed, lo=0, hi=_SEED_MAX)
        dtype = _dtype(self.dtype)
        check("epochs", self.epochs, EPOCH_COUNT, None)  # before any work (MAX_EPOCHS)
        check("max_epochs", self.max_epochs, EPOCH_COUNT)
        X, y = validate_data(self, X, y, y_numeric=self._likelihood == "gaussian")
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
        hyper = self._hyper(n, depth, sigma)
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
            learn_noise=learn_noise,
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
        tr, conv = trained.trainer, trained.convergence
        self.fit_time_s_ = time.perf_counter() - t0
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
        terms = self.posterior_.elbo(Xt.to(dev), yt.to(dev), draws=int(self.elbo_draws))
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
        return self

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
                    f"{type(self).__name__}: max_epochs={self.max_epochs} stopped widths "
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
        return validate_data(self, X, reset=False)


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

    def predict(self, X, return_std: bool = False):
        """Posterior-mean prediction from ``predict_draws`` draws (30, the paper's) of the
        selected width, in y's units; with ``return_std`` also the predictive sd
        ``sqrt(Var_q f + sigma^2)`` (sigma the learned ``sigma_`` or the known one)."""
        X = self._X_for_predict(X)
        k, T = self.selected_index_, int(self.predict_draws)
        mean = self.posterior_.predict_mean(X, T)[k].cpu().numpy() * self.y_scale_ + self.y_mean_
        if not return_std:
            return mean
        return mean, self.posterior_.predict_std(X, T)[k].cpu().numpy() * self.y_scale_

    def predict_interval(self, X, level: float = 0.9):
        """The central ``level`` predictive interval ``(lower, upper)`` of the selected
        width, in y's units: the quantiles of the predictive mixture ``(1/T) sum_t N(f_t(x),
        sigma^2)`` over ``predict_draws`` draws (``simulate.core.posterior.
        mixture_quantiles``), the same predictive distribution as ``predict``."""

        X = self._X_for_predict(X)
        check("level", level, Interval(numbers.Real, 0, 1, "neither"))
        k, T = self.selected_index_, int(self.predict_draws)
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
        probs = self.posterior_.predict_mean(X, int(self.predict_draws))
        return probs[self.selected_index_].T.cpu().numpy()

    def predict(self, X):
        proba = self.predict_proba(X)  # checks fitted first
        return self.classes_[np.argmax(proba, axis=1)]


_COMMON_DOC = """
    Parameters (module docstring for the practitioner's defaults; otherwise the paper's
    teacher experiment, appendix C.1): ``depth`` hidden layers; ``sigma`` "auto" (learned)
    or the known noise sd in y's units (regression); ``standardize_y``; ``sigma_0`` the
    Gaussian prior slab sd; ``lambda_s`` ("auto": the paper's rule) and ``lam`` the priors
    on sparsity and width; ``batch_size`` m; ``mc_samples`` K; ``optimizer`` "adam" or
    "rmsprop" (``torch.optim.RMSprop``'s form; the paper's MNIST runs) and its ``lr``
    (``lr_inclusion``: the inclusion logits' own, None: ``lr``; ``lr_inclusion_ramp``: with
    it set, the logits' rate grows with n from ``lr`` at n = ``lr_inclusion_ramp`` up to
    ``lr_inclusion``, ``simulate.core.hyper.inclusion_rate``; ``lr_decays``: plateaus of
    the stopping rule that lower the learning rate tenfold before one stops a candidate,
    ``simulate.core.stopping.StopRule``);
    ``epochs`` of n/m steps (None: to convergence) and ``max_epochs`` its cap; ``race``
    ("halving" or None: the candidates' race under the rule, :class:`Halving`);
    ``validation_fraction`` (None, or the fraction held out for the stopping rule's
    validation criterion); ``slab`` "gaussian" or "uniform"; ``l3`` "paper" (eq. (loss3)
    as printed) or "exact"; ``sampling`` of minibatches; ``elbo_draws`` (>= 10) for
    selection; ``predict_draws`` (30); ``seed``; ``device``, ``dtype`` ("float32" or
    "float64"); ``compile`` (torch.compile the step: True, False or "auto") and ``mlp`` (the
    network's pass: "batched", "native" or "auto"; module docstring, "Speed");
    ``progress`` (True, False or "auto");
    ``init_from`` "random" (the core's start) or "spline" (regression on one feature: each
    candidate starts from the validation-chosen linear spline encoded exactly,
    ``simulate.references.constructive``).

    The paper's teacher setting: ``sigma=1.0, standardize_y=False, lambda_s=3.0,
    epochs=7000, **recipe_params("baseline")`` (one learning rate, no plateaus).  The
    regressors' optimiser defaults are the sweeps' default training recipe
    (``simulate.sweep.recipes.DEFAULT_RECIPE``, ``logit-ramp-plateau``: the logits' rate
    ``lr max(1, n / 1,000)`` up to 0.1, two plateau decays), chosen and judged on the
    sweeps' truths at batch 128 (docs/results/optimiser.md, "ASVI's optimiser against its
    own objective"); at n <= 1,000 the logits train at ``lr``, so scikit-learn's small check
    problems train as before.  The classifiers keep the paper's MNIST optimiser.
"""


# the estimators' parameters a training recipe sets (recipe_params): estimator parameter
# -> the sweep's setting (simulate.sweep.config.SweepConfig)
_RECIPE_SETTING = {
    "lr": "lr",
    "lr_inclusion": "lr_inclusion",
    "lr_inclusion_ramp": "lr_inclusion_ramp",
    "lr_decays": "stop_lr_decays",
}
RECIPE_PARAMS = tuple(_RECIPE_SETTING)


def recipe_params(name: str) -> dict:
    """The estimators' parameters of training recipe ``name`` (``simulate.sweep.recipes``,
    where the recipes and ``DEFAULT_RECIPE`` are said once): the inclusion logits' rate
    and its growth with n, and the plateaus that lower the learning rate (the sweeps'
    ``stop_lr_decays``; the factor is the stopping rule's 0.1).  The recipes that change
    the batch, the cap, restarts, continuation or a warm-up have no estimator form: a
    ``ValueError``."""
    s = recipe_settings(name)
    own = set(_RECIPE_SETTING.values())
    other = [k for k, v in s.items()
             if k not in own and (k not in RECIPE_DEFAULTS or v != RECIPE_DEFAULTS[k])]  # fmt: skip
    if other:  # stop_lr_factor among them unless it is the stopping rule's own
        raise ValueError(f"recipe {name!r} has no estimator form (it sets {other})")
    return {param: s[setting] for param, setting in _RECIPE_SETTING.items()}


# The regression defaults: the teacher experiment's network (appendix C.1): the training
# hyperparameters at Hyper's defaults (``simulate.core.hyper.HYPER_DEFAULTS``, said there
# once), with the practitioner's noise, targets, length and lambda_s (module docstring:
# sigma and lambda_s "auto", by name) and the sweeps' default training recipe
# (``recipe_params``: lr, the logits' rate and the plateaus); the classifiers' are the
# paper's MNIST ones (``PAPER_MNIST``: sigma_0, lam, batch, the RMSprop optimiser) at the
# baseline recipe (the recipes were measured on regression only).
_H = HYPER_DEFAULTS
_REGRESSION = dict(
    depth=DEPTH, sigma="auto", standardize_y=True, sigma_0=_H["sigma_0"], lambda_s="auto",
    lam=_H["lam"], batch_size=_H["batch_size"], mc_samples=_H["mc_samples"],
    **recipe_params(DEFAULT_RECIPE), optimizer=_H["optimizer"],
    epochs=None, max_epochs=PAPER_EPOCHS,
    validation_fraction=None, slab=_H["slab"], l3=_H["l3"], sampling=_H["sampling"],
    elbo_draws=ELBO_DRAWS, init_from="random", predict_draws=PREDICT_DRAWS, seed=0, device="cpu",
    dtype="float32", compile="auto", mlp="auto", race="halving", progress="auto",
)  # fmt: skip
_CLASSIFICATION = {
    k: v for k, v in _REGRESSION.items() if k not in ("sigma", "standardize_y")
} | {
    **{k: PAPER_MNIST[k] for k in ("sigma_0", "lam", "batch_size")}, "max_epochs": 300,
    "optimizer": PAPER_MNIST["optimizer"], **recipe_params("baseline"),
}  # fmt: skip
# the estimators' parameters that are Hyper's fields under the same names, copied into
# the fit's Hyper as they are (``_Base._hyper``; the others are derived there)
ESTIMATOR_HYPER = ("sigma_0", "slab", "lam", "mc_samples", "lr", "optimizer", "l3", "sampling")


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
        {"family": "spike_slab", "widths": PAPER_MNIST_WIDTHS, **_CLASSIFICATION}
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
    __init__ = _keyword_init({"widths": PAPER_MNIST_WIDTHS, **_CLASSIFICATION})

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
