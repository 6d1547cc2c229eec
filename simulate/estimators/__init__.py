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
  ``max_epochs`` as a cap (default "auto": the paper's 7000 epochs, at least 40,000 steps,
  ``inputs.cap_steps``); ``n_iter_`` (steps) and ``converged_`` per candidate, and a
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

from simulate.estimators.inputs import (
    MAX_EPOCHS,
    MIN_NOISE_POINTS,
    SmallSampleWarning,
    resolve_device,
)
from simulate.estimators.models import (
    RECIPE_PARAMS,
    ASVIClassifier,
    ASVIRegressor,
    BNNClassifier,
    BNNRegressor,
    DenseBNNRegressor,
    HSBNNRegressor,
    SVIClassifier,
    SVIRegressor,
    recipe_params,
)
from simulate.estimators.policy import COMPILE_FROM_STEPS, NOISE_START, FallbackWarning, Halving
from simulate.estimators.summary import FitSummary

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
    "recipe_params",
    "RECIPE_PARAMS",
    "COMPILE_FROM_STEPS",
    "MAX_EPOCHS",
    "NOISE_START",
    "FallbackWarning",
    "MIN_NOISE_POINTS",
    "SmallSampleWarning",
    "Halving",
    "FitSummary",
]
