"""Hyperparameters of the batched core (:class:`Hyper`), validated where they are made, and
the one table of the training hyperparameters' defaults (:data:`HYPER_DEFAULTS`: Hyper's
own), from which the sweeps (``simulate.sweep.setup.config.SweepConfig``), the training recipes
(``simulate.sweep.setup.recipes``), the estimators (``simulate.estimators``) and the drivers
derive theirs, overriding by name only where they must; with the paper's other settings
said once (:data:`PAPER_MNIST`, :data:`PAPER_UCI`, :data:`LAMBDA_S_A`) and the sparsity
price's rule at n (:func:`lambda_s_at`)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from numbers import Integral, Real

from simulate.core.constraints import INT_POSITIVE, POSITIVE, Interval, Options, validate_params
from simulate.core.families import FAMILIES
from simulate.core.likelihoods import LIKELIHOODS
from simulate.core.optim import OPTIMIZERS
from simulate.core.slabs import SLABS
from theory import lambda_s_rule

# the teacher experiment's candidate widths (Table 1, appendix C.1), beside its defaults below
PAPER_WIDTHS = (2, 4, 6, 8, 10, 12, 14, 16, 18, 20)
# its training length (appendix C.1: 7000 epochs; the estimators' default cap, the paper tier's)
PAPER_EPOCHS = 7000
# hidden layers of the student network: the paper's two (appendix C.1, and the MNIST
# experiment's), the default of every driver (the sweeps', the estimators', Table 1's)
DEPTH = 2


@dataclass(frozen=True)
class Hyper:
    """Hyperparameters; defaults are the paper's teacher experiment (appendix C.1).  Frozen
    and validated when made (:meth:`validate`): a Hyper that exists is a valid one."""

    likelihood: str = "gaussian"  # "gaussian" or "categorical"
    sigma: float = 1.0  # Gaussian noise sd: known, or where learned its start (Trainer)
    sigma_0: float = 0.8  # Gaussian prior slab sd
    B0: float = 2.0  # uniform prior slab half-width
    slab: str = "gaussian"  # or "uniform"
    lambda_s: float = 3.0
    lam: float = 10.0  # prior on the width: pi(N) with N = width
    tau: float = 0.5  # Gumbel-sigmoid temperature
    batch_size: int = 1024
    mc_samples: int = 1  # K
    lr: float = 5e-3
    # the inclusion logits' learning rate (None: lr): the edges' pruning speed
    lr_inclusion: float | None = None
    optimizer: str = "adam"  # or "rmsprop" (simulate.core.optim)
    betas: tuple = (0.9, 0.999)  # Adam's
    rmsprop_alpha: float = 0.99  # RMSprop's smoothing constant (torch.optim.RMSprop's)
    adam_eps: float = 1e-8  # the optimiser's eps (Adam's and RMSprop's)
    l3: str = "paper"  # or "exact"
    sampling: str = "iid"  # minibatches: "iid" (with replacement) or "permutation" (epochs)
    init_mu: float = 0.6  # mu ~ U(-init_mu, init_mu)
    init_sigma: float = 0.0025  # softplus(-6), the predecessor paper's code
    init_nu: float = 0.99
    family: str = "spike_slab"  # or the baselines "dense", "horseshoe" (simulate.core.families)
    hs_b0: float = 1.0  # horseshoe: unit-scale prior C+(0, b0)
    hs_bg: float = 1e-5  # horseshoe: layer-scale prior C+(0, bg)
    # KL warm-up: over the first kl_warmup steps the gradient of the KL part (L2 + L3) is
    # weighted by t / kl_warmup (the terms reported stay the ELBO's); 0: none
    kl_warmup: int = 0

    def __post_init__(self):
        self.validate()

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first field outside :data:`HYPER_CONSTRAINTS`,
        or the uniform slab's ``init_mu >= B0`` (run at construction)."""
        validate_params(self, HYPER_CONSTRAINTS)
        b = self.betas
        if not (isinstance(b, (tuple, list)) and len(b) == 2 and all(map(_BETA.accepts, b))):
            raise ValueError(f"betas must be two numbers in [0, 1), got {self.betas!r}")
        if self.slab == "uniform" and self.init_mu >= self.B0:
            raise ValueError("init_mu must be < B0 for the uniform slab")


_BETA = Interval(Real, 0, 1, "left")

# Every training hyperparameter's default, by name: Hyper's own fields, the one place each
# is written.  A configuration that holds some of them (SweepConfig, the estimators'
# parameter tables, the recipes' baseline) takes its defaults from here and overrides by
# name only those it must (each override says why where it is made).
HYPER_DEFAULTS = {f.name: f.default for f in fields(Hyper)}

# The paper's MNIST experiment (appendix): where its settings differ from the teacher's
# defaults above (the classifiers' defaults, ``simulate.estimators``, and the MNIST-1D
# driver, ``simulate.experiments.mnist``; lambda there is its width grid's middle)
PAPER_MNIST = {
    "likelihood": "categorical", "sigma_0": 2.0, "lam": 600.0, "batch_size": 512,
    "optimizer": "rmsprop",
}  # fmt: skip
# its candidate widths (the classifiers' default, ``simulate.estimators``)
PAPER_MNIST_WIDTHS = (400, 500, 600, 700, 800)

# The UCI protocol the paper follows (Hernandez-Lobato and Adams 2015;
# ``simulate.experiments.uci``): Adam at lr 1e-3, batch 256 (or n, if smaller), one hidden
# layer of 50 units
PAPER_UCI = {"lr": 1e-3, "batch_size": 256, "width": 50, "depth": 1}

# lambda_s = a (L + 1) log n, the paper's rule (theory.lambda_s_rule; L hidden layers): its
# a per likelihood, the values with which the rule reproduces the paper's printed lambda_s
# (3 for the teacher, a = 0.1; 50 for MNIST, a = 1.5).  The one table of a: the sweeps'
# default (SweepConfig.lambda_s_a, ``--lambda-s-a``), the estimators' ``lambda_s="auto"``
# and the real-data drivers read it by likelihood.
LAMBDA_S_A = {"gaussian": 0.1, "categorical": 1.5}


def lambda_s_at(n, depth: int, a: float) -> float:
    """The sparsity price ``lambda_s = a (depth + 1) log n`` of the paper's rule
    (``theory.lambda_s_rule``) at sample size ``n`` for ``depth`` hidden layers, as the
    float ``Hyper.lambda_s`` takes; ``a`` from :data:`LAMBDA_S_A` unless a caller names
    another (``--lambda-s-a``, a control's variant).  The one place the rule is applied."""
    return float(lambda_s_rule(n, depth, a))


def inclusion_rate(lr: float, lr_inclusion: float | None, ramp: float | None, n: int | None):
    """The inclusion logits' learning rate at sample size n (``Hyper.lr_inclusion``; None:
    ``lr``, the step's default path): ``lr_inclusion``, or with ``ramp`` set ``min(
    lr_inclusion, lr max(1, n / ramp))`` -- ``lr`` up to n = ``ramp``, then growing in
    proportion to n up to ``lr_inclusion``.  A rate equal to ``lr`` under a ramp is None, so
    that cells below it train by the default path bit for bit.

    Why a rate that grows with n (an optimiser recipe, ``simulate.sweep.setup.recipes``;
    exploratory, chosen on ``python -m verify.optimiser``): the pruning force on a logit is
    the KL part's gradient, which the per-point objective weighs by 1/n against the
    likelihood's, so at a fixed rate the logits of edges that should be off move the more
    slowly the larger n.  The benchmark measured the logits at 20x lr closing most of the
    teacher's gap at n = 32,000 and lowering the ELBO at n <= 1,000, where pruning that fast
    loses units the fit needs."""
    if lr_inclusion is None:
        return None
    rate = float(lr_inclusion)
    if ramp is not None and n is not None:
        rate = min(rate, float(lr) * max(1.0, int(n) / float(ramp)))
        if rate == float(lr):
            return None
    return rate


# every field's allowed values (simulate.core.constraints), checked by Hyper.validate (at
# construction)
HYPER_CONSTRAINTS = {
    "likelihood": [Options(tuple(LIKELIHOODS))],
    "slab": [Options(tuple(SLABS))],
    "family": [Options(tuple(FAMILIES))],
    "sampling": [Options(("iid", "permutation"))],
    "optimizer": [Options(tuple(OPTIMIZERS))],
    "l3": [Options(("paper", "exact"))],
    **dict.fromkeys(
        ("sigma", "sigma_0", "B0", "lambda_s", "lam", "tau", "lr", "init_sigma", "init_mu"),
        [POSITIVE],
    ),
    **dict.fromkeys(("adam_eps", "hs_b0", "hs_bg"), [POSITIVE]),
    "batch_size": [INT_POSITIVE],
    "mc_samples": [INT_POSITIVE],
    "rmsprop_alpha": [_BETA],
    "init_nu": [Interval(Real, 0, 1, "neither")],
    "kl_warmup": [Interval(Integral, 0, None, "left")],
    "lr_inclusion": [POSITIVE, None],
}
