"""The public estimators (``BNNRegressor``, ``ASVIRegressor``, ...): their shared parameter
documentation, their defaults (the regression and classification recipes,
``recipe_params``) and the keyword-only constructors."""

from __future__ import annotations

import difflib
import inspect

from simulate.core.hyper import (
    DEPTH,
    HYPER_DEFAULTS,
    PAPER_MNIST,
    PAPER_MNIST_WIDTHS,
    PAPER_WIDTHS,
)
from simulate.core.posterior import (
    ELBO_DRAWS,
    PREDICT_DRAWS,
)
from simulate.estimators.base import _Classifier, _Regressor
from simulate.estimators.inputs import SEED_DEPRECATED
from simulate.sweep.setup.recipes import DEFAULT_RECIPE, RECIPE_DEFAULTS, recipe_settings

_COMMON_DOC = """
    Parameters (module docstring for the practitioner's defaults; otherwise the paper's
    teacher experiment, appendix C.1): ``depth`` hidden layers; ``sigma`` "auto" (learned)
    or the known noise sd in y's units (regression; a learned sd needs at least 2 points
    and warns, ``SmallSampleWarning``, below ``MIN_NOISE_POINTS`` = 10, where its own error
    is over 1/sqrt(2 n) = 22% and a network fits the points exactly:
    ``simulate.estimators.inputs``); ``standardize_y``; ``sigma_0`` the
    Gaussian prior slab sd; ``lambda_s`` ("auto": the paper's rule) and ``lam`` the priors
    on sparsity and width; ``batch_size`` m; ``mc_samples`` K; ``optimizer`` "adam" or
    "rmsprop" (``torch.optim.RMSprop``'s form; the paper's MNIST runs) and its ``lr``
    (``lr_inclusion``: the inclusion logits' own, None: ``lr``; ``lr_inclusion_ramp``: with
    it set, the logits' rate grows with n from ``lr`` at n = ``lr_inclusion_ramp`` up to
    ``lr_inclusion``, ``simulate.core.hyper.inclusion_rate``; ``lr_decays``: plateaus of
    the stopping rule that lower the learning rate tenfold before one stops a candidate,
    ``simulate.core.stopping.StopRule``);
    ``epochs`` of n/m steps (None: to convergence) and ``max_epochs`` its cap ("auto", the
    regressors' default: the larger of the paper's 7000 epochs and 40,000 steps,
    ``simulate.estimators.inputs.cap_steps``); ``race``
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

    Sizes: ``widths`` (``width``), ``depth``, ``batch_size``, ``mc_samples``, ``elbo_draws``
    and ``predict_draws`` are bounded by memory, not by fixed numbers: ``fit`` refuses,
    before any tensor is made, a fit whose training, ELBO or one-point prediction needs more
    than this process may hold (the machine's memory, or ``ulimit -v``), with a
    ``ValueError`` printing the lower-bound estimate and what to lower
    (``simulate.estimators.inputs.check_fit_sizes``, ``simulate.core.sizes``); ``predict``
    checks its points the same way.  A width of 12,000 on one input trains ~144 million
    parameters a candidate and needs ~10 GiB.

    The paper's teacher setting: ``sigma=1.0, standardize_y=False, lambda_s=3.0,
    epochs=7000, **recipe_params("baseline")`` (one learning rate, no plateaus).  The
    regressors' optimiser defaults are the sweeps' default training recipe
    (``simulate.sweep.setup.recipes.DEFAULT_RECIPE``, ``logit-ramp-plateau``: the logits' rate
    ``lr max(1, n / 1,000)`` up to 0.1, two plateau decays), chosen and judged on the
    sweeps' truths at batch 128 (docs/results/optimiser.md, "ASVI's optimiser against its
    own objective"); at n <= 1,000 the logits train at ``lr``, so scikit-learn's small check
    problems train as before.  The classifiers keep the paper's MNIST optimiser.
"""


# the estimators' parameters a training recipe sets (recipe_params): estimator parameter
# -> the sweep's setting (simulate.sweep.setup.config.SweepConfig)
_RECIPE_SETTING = {
    "lr": "lr",
    "lr_inclusion": "lr_inclusion",
    "lr_inclusion_ramp": "lr_inclusion_ramp",
    "lr_decays": "stop_lr_decays",
}
RECIPE_PARAMS = tuple(_RECIPE_SETTING)


def recipe_params(name: str) -> dict:
    """The estimators' parameters of training recipe ``name`` (``simulate.sweep.setup.recipes``,
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
    epochs=None, max_epochs="auto",
    validation_fraction=None, slab=_H["slab"], l3=_H["l3"], sampling=_H["sampling"],
    elbo_draws=ELBO_DRAWS, init_from="random", predict_draws=PREDICT_DRAWS, random_state=0,
    seed=SEED_DEPRECATED, device="cpu",
    dtype="float32", compile="auto", mlp="auto", race="halving", progress="auto",
)  # fmt: skip
_CLASSIFICATION = {
    k: v for k, v in _REGRESSION.items() if k not in ("sigma", "standardize_y")
} | {
    **{k: PAPER_MNIST[k] for k in ("sigma_0", "lam", "batch_size")}, "max_epochs": 300,
    "optimizer": PAPER_MNIST["optimizer"], **recipe_params("baseline"),
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

    def __init__(self, *args, **kwargs):
        unknown = sorted(set(kwargs) - set(params))
        if args or unknown:  # scikit-learn's habit: name what is accepted
            cls = type(self).__name__
            what = (f"takes keyword arguments only, got {len(args)} positional" if args
                    else f"got an unknown parameter {', '.join(map(repr, unknown))}")  # fmt: skip
            near = [m for u in unknown for m in difflib.get_close_matches(u, params, 1)]
            hint = f"; did you mean {', '.join(map(repr, near))}?" if near else ""
            valid = ", ".join(k for k in params if k != "seed")  # (seed: the former name)
            raise TypeError(f"{cls}() {what}{hint}; its parameters: {valid}")
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
