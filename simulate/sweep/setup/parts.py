"""The parts a sweep's configuration (``simulate.sweep.setup.config.SweepConfig``) is composed
of, each a frozen dataclass whose fields are declared once (``simulate.sweep.setup.settings``:
default, bounds, help, flag, and how records, fingerprints and recipes treat them):

* :class:`Design` -- the cells (truths, sample sizes, replicates, seeds), the network and
  the evaluation of each cell;
* :class:`Training` -- the training hyperparameters copied into each cell's ``Hyper``;
* :class:`Stopping` -- the stopping rule (``StopRule``) and the held-out risk stop;
* :class:`PerN` -- the rules that grow a setting with the sample size;
* :class:`Step` -- how the step runs (``StepOptions``: float rounding only);
* :class:`Estimator` -- ASVI, the Gaussian-process known-answer control, or a named
  regressor (``simulate.sweep.train.foreign``);
* :class:`Provenance` -- the protocol a pre-registered run is made under.

Defaults said elsewhere, once, are read here: the training hyperparameters' are ``Hyper``'s
(``HYPER_DEFAULTS``) and so are their bounds, the stopping rule's ``StopRule``'s
(``STOP_DEFAULTS``), the step's ``StepOptions``'s, ``lambda_s_a`` the rule's a for
regression (``LAMBDA_S_A``).  The one override: ``batch_size`` 128 (Hyper's 1024 is the
teacher experiment's at n = 10,000; the sweeps start at n = 128-250, and every record since
the first was trained at 128).

The bounds here are checked as given, before any conversion (``StopRule`` and ``Hyper``
would see the stopping rule's and training settings only after ``int()`` / ``float()``:
10.5 -> 10 and True -> 1 slipped through once)."""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral, Real

from simulate.core.constraints import BOOL, INT_POSITIVE, POSITIVE, Interval, Options
from simulate.core.hyper import DEPTH, HYPER_CONSTRAINTS, HYPER_DEFAULTS, LAMBDA_S_A
from simulate.core.native.network import MAX_HIDDEN_LAYERS
from simulate.core.options import DEFAULT_OPTIONS, STEP_OPTIONS_CONSTRAINTS
from simulate.core.posterior import ELBO_DRAWS, MIN_ELBO_DRAWS, PREDICT_DRAWS, RISK_DRAWS
from simulate.core.steppath import DEPTH_EVERY_PATH, MLP_KINDS, mlp_help
from simulate.core.stopping import STOP_DEFAULTS
from simulate.sweep.setup.kinds import KINDS, KindNames
from simulate.sweep.setup.kinds import KNOWN_ANSWER as KINDS_KNOWN_ANSWER
from simulate.sweep.setup.settings import Flag, setting

__all__ = ["PARTS", "Design", "Estimator", "PerN", "Provenance", "Step", "Stopping", "Training"]

_H, _HC, _STOP = HYPER_DEFAULTS, HYPER_CONSTRAINTS, STOP_DEFAULTS
_INT, _FLOAT = Flag(int), Flag(float)
_COUNT0 = Interval(Integral, 0, None, "left")
STARTS = ("random", "constructive", "both")
# the estimator kinds (simulate.sweep.setup.kinds), and those that are known-answer controls
# (their rates proven; every reader and the verdicts' known answers take this one list)
ESTIMATORS = tuple(KINDS)
KNOWN_ANSWER = KINDS_KNOWN_ANSWER


@dataclass(frozen=True)
class Design:
    """Which cells a sweep holds, the network each trains, and how each is scored."""

    truths: list = setting(
        help="the truths (simulate.sweep.setup.truth_spec.TruthSpec)", fingerprint="bookkeeping"
    )
    ns: list = setting(
        help="the sample sizes (3 or more to fit a slope; the largest n's data and truth"
        " values must fit in memory: simulate.sweep.run.runner.check_memory)",
        flag=Flag(int, nargs="+", name="--n"), fingerprint="bookkeeping",
    )  # fmt: skip
    replicates: int = setting(
        3, INT_POSITIVE,
        help="replicates per truth and n (every record, 4 KB or more, held at once: bounded"
        " by memory, simulate.sweep.run.runner.check_memory)", flag=_INT, fingerprint="bookkeeping",
    )  # fmt: skip
    # it changes which models share a batched program, and with it the float rounding and
    # the compiled shapes: part of the fingerprint
    replicate_block: int = setting(3, INT_POSITIVE, help="replicates trained in one program")
    seed: int = setting(
        0, Interval(Integral, 0, 2**63, "left"), help="the sweep's seed (data, starts, draws)",
        flag=_INT, record="always",
    )  # fmt: skip
    widths: list | None = setting(
        None, help="the candidate widths (default: candidate_widths(n, ...), growing with n; the"
        " widest group's training must fit in memory: simulate.sweep.run.runner.check_memory)",
        flag=Flag(int, nargs="+"),
    )  # fmt: skip
    # at most the C step's limit on every step path (steppath.DEPTH_EVERY_PATH says why)
    depth: int = setting(
        DEPTH, DEPTH_EVERY_PATH,
        help=f"hidden layers L ({DEPTH}; at most {MAX_HIDDEN_LAYERS}, the C step's limit, on"
        " every --mlp; bounded by memory: simulate.sweep.run.runner.check_memory)",
        flag=_INT, record="always",
    )  # fmt: skip
    n_test: int = setting(
        20_000, INT_POSITIVE,
        help="test points of every cell's metrics (20,000; their truth values and the draws'"
        " outputs must fit in memory: simulate.sweep.run.runner.check_memory)", flag=_INT,
        record="always",
    )  # fmt: skip
    draws: int = setting(
        PREDICT_DRAWS, INT_POSITIVE,
        help="posterior draws of each cell's metrics (their outputs at the test points must"
        " fit in memory: simulate.sweep.run.runner.check_memory)",
        record="always",
    )  # fmt: skip
    elbo_draws: int = setting(
        ELBO_DRAWS, Interval(Integral, MIN_ELBO_DRAWS, None, "left"),
        help="posterior draws of the ELBO the widths are selected by (eq. (13); bounded by"
        " memory: simulate.sweep.run.runner.check_memory)", record="always",
    )  # fmt: skip
    start: str = setting(
        "random", Options(STARTS),
        help="the candidates' start: random (the core's seeded start), constructive (train"
        " from a hand-built posterior, the linear spline or the teacher encoded, with the"
        " untrained start and the plain-network control beside it:"
        " simulate.references.constructive), or both (the random start and the constructive"
        " arms on the same cells)",
        flag=Flag(str, choices=STARTS), fingerprint="later", record="always",
    )  # fmt: skip
    plain_arm: bool = setting(
        True, BOOL,
        help="with a constructive start: train the plain-network control P beside the"
        " constructive arms (plain Adam on squared error from the start, on all n points, its"
        " full-data ELBO evaluated: at n = 512,000 most of a cell's cost); False: the"
        " arms W0, W0s, W0f and W only (the risk split, verify.split, reads no P)",
        flag=Flag(boolean=True), fingerprint="later", record="unless-default",
    )  # fmt: skip


@dataclass(frozen=True)
class Training:
    """The training hyperparameters each cell's ``Hyper`` is made from
    (``SweepConfig.hyper_at``), and how many starts each candidate has."""

    lr: float = setting(
        _H["lr"], *_HC["lr"], help="Adam's learning rate", record="always", recipe=True
    )
    lr_inclusion: float | None = setting(
        _H["lr_inclusion"], *_HC["lr_inclusion"],
        help="the inclusion logits' learning rate (None: lr)", fingerprint="later",
        record="unless-default", recipe=True,
    )  # fmt: skip
    sigma: float = setting(_H["sigma"], *_HC["sigma"], help="the noise sd", record="always")
    sigma_0: float = setting(
        _H["sigma_0"], *_HC["sigma_0"], help="the prior slab sd", record="always"
    )
    lambda_s: float | None = setting(
        None, POSITIVE, None, help="a fixed lambda_s (default: the rule a (L + 1) log n at"
        " each n, simulate.sweep.setup.config.cell_lambda_s)", flag=_FLOAT,
    )  # fmt: skip
    lam: float = setting(
        _H["lam"], *_HC["lam"], help=f"the width prior's lambda ({_H['lam']:g})", flag=_FLOAT,
        record="always",
    )  # fmt: skip
    l3: str = setting(
        _H["l3"], *_HC["l3"],
        help=f"the L3 term: paper (eq. (loss3) as printed) or exact ({_H['l3']})",
        flag=Flag(str, choices=_HC["l3"][0].values), record="always",
    )  # fmt: skip
    init_nu: float = setting(
        _H["init_nu"], *_HC["init_nu"], help="the initial inclusion probability",
        record="always",
    )  # fmt: skip
    init_sigma: float = setting(
        _H["init_sigma"], *_HC["init_sigma"], help="the initial slab sd", record="always"
    )
    kl_warmup: int = setting(
        _H["kl_warmup"], *_HC["kl_warmup"],
        help="steps over which the KL part's gradient weight rises from 0 to 1"
        " (Hyper.kl_warmup; 0: none)", fingerprint="later", record="unless-default", recipe=True,
    )  # fmt: skip
    batch_size: int = setting(128, INT_POSITIVE, help="the minibatch (128; at most n)", flag=_INT)
    restarts: int = setting(
        1, INT_POSITIVE,
        help="random starts per candidate (seeds simulate.sweep.train.groups.restart_seeds); each"
        " candidate keeps the one of highest ELBO on its training points (1: no restarts)",
        fingerprint="later", record="unless-default", recipe=True,
    )  # fmt: skip
    continuation: bool = setting(
        False, BOOL,
        help="width continuation: candidates trained one width at a time, narrowest first,"
        " each started from the narrower one's trained posterior with its new units near zero"
        " (simulate.core.state.widen); False: every candidate from its own random start",
        fingerprint="later", record="unless-default", recipe=True,
    )  # fmt: skip


@dataclass(frozen=True)
class Stopping:
    """The stopping rule (``simulate.core.stopping.StopRule``) and the held-out risk stop."""

    max_steps: int = setting(
        _STOP["max_steps"], INT_POSITIVE, help="step cap of every candidate (stop rule)",
        flag=_INT,
    )  # fmt: skip
    stop_window: int = setting(_STOP["window"], INT_POSITIVE, help="the rule's window (steps)")
    stop_tol: float = setting(
        _STOP["tol"], POSITIVE, help="relative-improvement tolerance (stop rule)", flag=_FLOAT
    )
    stop_patience: int = setting(
        _STOP["patience"], INT_POSITIVE, help="quiet windows before a stop"
    )
    stop_kl_abs: float = setting(
        _STOP["kl_abs"], POSITIVE, help="the KL test's absolute floor (stop rule)"
    )
    stop_risk_tol: float | None = setting(
        _STOP["risk_tol"], POSITIVE, None,
        help="None: off; else the rule also waits for a held-out risk (StopRule.risk_tol):"
        " each replicate's last stop_val_fraction of its n points (at least 2) are held out of"
        " training, and the rule watches the posterior mean's squared error on their y from"
        " risk_draws posterior draws (n_val_at; simulate.sweep.train.groups) -- never the truth",
        fingerprint="later", silences=("stop_val_fraction", "risk_draws"),
    )  # fmt: skip
    stop_val_fraction: float = setting(
        0.2, Interval(Real, 0, 0.5, "right"), help="the risk stop's held-out fraction"
    )
    risk_draws: int = setting(
        RISK_DRAWS, INT_POSITIVE, help="posterior draws of the risk stop's held-out risk"
    )
    stop_lr_decays: int = setting(
        _STOP["lr_decays"], _COUNT0,
        help="plateaus that lower each model's learning rate by stop_lr_factor before one"
        " stops it (StopRule.lr_decays; 0: off, the constant rate)", fingerprint="later",
        silences=("stop_lr_factor",), recipe=True,
    )  # fmt: skip
    stop_lr_factor: float = setting(
        _STOP["lr_factor"], Interval(Real, 0, 1, "neither"),
        help="the learning rate's factor at each plateau", recipe=True,
    )  # fmt: skip


@dataclass(frozen=True)
class PerN:
    """The rules that grow a setting with the sample size n (``SweepConfig``'s ``*_at``)."""

    max_epochs: float | None = setting(
        None, POSITIVE, None,
        help="grow the cap with n: max(max_steps, ceil(max_epochs * n / batch_size)) (None:"
        " max_steps at every n)", flag=_FLOAT, fingerprint="later", record="always",
    )  # fmt: skip
    batch_fraction: float | None = setting(
        None, Interval(Real, 0, 1, "right"), None,
        help="None: the batch is batch_size at every n; else max(batch_size, ceil("
        "batch_fraction n)), at most n", fingerprint="later", record="unless-default",
        recipe=True,
    )  # fmt: skip
    lr_inclusion_ramp: float | None = setting(
        None, POSITIVE, None,
        help="None: the logits' rate is lr_inclusion at every n; else min(lr_inclusion, lr"
        " max(1, n / lr_inclusion_ramp))", fingerprint="later", record="unless-default",
        recipe=True,
    )  # fmt: skip
    lambda_s_a: float = setting(
        LAMBDA_S_A["gaussian"], POSITIVE,
        help=f"a in lambda_s = a (L + 1) log n, L hidden layers ({LAMBDA_S_A['gaussian']:g})",
        flag=_FLOAT,
    )  # fmt: skip
    width_min: int = setting(2, INT_POSITIVE, help="the narrowest candidate width")
    width_scale: float = setting(
        1.0, POSITIVE, help="the widest candidate: the first power of two >= scale sqrt(n)"
    )
    width_max: int = setting(256, INT_POSITIVE, help="the widest candidate width at any n")
    width_edge_max: int | None = setting(
        None, INT_POSITIVE, None,
        help="grow each replicate's ladder at its edge: while its penalised ELBO selects its"
        " widest candidate, the next power of two is trained for it, up to this width (None:"
        " the ladder candidate_widths gives; simulate.sweep.train.asvi_job)", flag=_INT,
        fingerprint="later", record="unless-default",
    )  # fmt: skip


@dataclass(frozen=True)
class Step:
    """How the step runs (``simulate.core.options.StepOptions``): float rounding only."""

    compile: bool = setting(
        DEFAULT_OPTIONS.compile, *STEP_OPTIONS_CONSTRAINTS["compile"],
        help="run the step through torch.compile (the batched torch step; about 3x faster per"
        " step on 2 cores, plus 5-12 s of compilation per candidate group and n; needs a C++"
        " compiler); --no-compile: eager steps, the same numbers to float rounding",
        flag=Flag(boolean=True), record="always",
    )  # fmt: skip
    mlp: str = setting(
        DEFAULT_OPTIONS.mlp, *STEP_OPTIONS_CONSTRAINTS["mlp"],
        help=mlp_help(f"{DEFAULT_OPTIONS.mlp} unless a tier or a --config file names another"),
        flag=Flag(str, choices=MLP_KINDS), fingerprint="later", record="unless-default",
    )  # fmt: skip


@dataclass(frozen=True)
class Estimator:
    """What a cell's posterior is: ASVI's, the known-answer control's (exact
    Gaussian-process posteriors under Matern priors, ``simulate.sweep.train.gp``), a named
    regressor's point prediction (``simulate.sweep.train.foreign``), or the k-NN known-answer
    control's (``simulate.sweep.train.knn``)."""

    estimator: str = setting(
        "asvi", KindNames(),
        help="asvi, gp: the known-answer control, regressor: the class named by regressor, or"
        " knn: the k-NN known-answer control",
    )  # fmt: skip
    gp_nus: list | None = setting(None, help="the Matern priors' smoothnesses (gp)")
    gp_length_scale: float = setting(1.0, POSITIVE, help="the Matern length scale (gp)")
    gp_amplitude: float = setting(1.0, POSITIVE, help="the Matern amplitude (gp)")
    # added later: left out of the fingerprint at None, so every earlier sweep keeps its own
    regressor: str | None = setting(
        None, help="MODULE:CLASS of a scikit-learn-style regressor (regressor)",
        fingerprint="later",
    )  # fmt: skip
    regressor_params: dict | None = setting(
        None, help="the regressor's parameters, NAME -> the text given: a Python literal or an"
        " expression in n, p and alpha (simulate.sweep.train.foreign)", fingerprint="later",
    )  # fmt: skip
    knn_ks: list | None = setting(
        None, help="the k-NN control's members: 'matched' (k of order n^(2 alpha/(2 alpha +"
        " p))) or a fixed k (knn; simulate.sweep.train.knn)", fingerprint="later",
    )  # fmt: skip


@dataclass(frozen=True)
class Provenance:
    """The protocol a sweep runs under: written into every record's config and part of the
    fingerprint, so records of a pre-registered run name the protocol committed before
    them."""

    protocol: str | None = setting(
        None, help="the protocol (NAME@DIGEST, verify.protocol), or None", fingerprint="later",
        record="unless-default",
    )  # fmt: skip


# the parts in the order SweepConfig's fields are listed (and positional arguments taken)
PARTS = (Design, Stopping, Training, PerN, Step, Estimator, Provenance)
