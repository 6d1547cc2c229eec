"""The estimator kinds a sweep can run, as objects in one registry (:data:`KINDS`, by
``SweepConfig.estimator``): ASVI (and its arms), the Gaussian-process known-answer control,
the k-NN known-answer control and a named scikit-learn-style regressor.

Each kind owns what differs between them, as ``simulate.core.steppath.StepPath`` owns a
step: its names (the configuration's ``estimator``, the names its records and results
carry: :meth:`EstimatorKind.members`, :meth:`EstimatorKind.owns`), its configuration check
(:meth:`~EstimatorKind.check`, with the settings only it may set, :attr:`~EstimatorKind.own`),
its cell configuration (what a record's ``config`` holds), its job's memory and cost, what a
run checks before it trains (a network's step, a regressor's class), the words a dry run
prints, and its known exponent (a known-answer control's proven rate; None: the truth
class's band).  The job runner of each kind is ``simulate.sweep.run.runner.RUNNERS``, by the
same names (the runners import the training; this module imports none of it, so the
configuration reads its kind without importing what trains it); a test holds the two key
sets equal.  Outside this module no code compares an estimator's name: it asks the kind
(``cfg.kind``, :func:`kind_of_name`).

A new kind is a subclass here with its entry in :data:`KINDS`, its job runner in its own
module and its line in ``RUNNERS``.
"""

from __future__ import annotations

from collections.abc import Callable

from simulate.core.layout import Layout
from simulate.sweep.setup.regressor_class import (
    check_regressor,
    check_regressor_data,
    identity,
    regressor_name,
)
from simulate.sweep.store.rules import KNN_MATCHED, gp_name, knn_name
from theory import gp_matern_exponent, knn_exponent

__all__ = [
    "ASVI",
    "ASVI_ARMS",
    "ASVI_NAMES",
    "GP",
    "KINDS",
    "KNN",
    "KNOWN_ANSWER",
    "REGRESSOR",
    "EstimatorKind",
    "KindNames",
    "gp_job_bytes",
    "is_asvi",
    "kind_of_name",
    "knn_gamma",
]

# ASVI's results: the random start's, and the constructive start's where it is the only
# ASVI run (``start = "constructive"``)
ASVI_NAMES = ("asvi", "asvi-constructive")
# the constructive-start arms (``simulate.sweep.train.groups``) and their names as estimators in
# verify's results (``verify.reading.records``, ``verify.starts``): ASVI's too
ASVI_ARMS = {
    "R": "asvi",
    "W": "asvi-constructive",
    "W0": "constructive-start",
    "W0s": "constructive-start-scaled",
    "W0f": "constructive-start-fitted",
    "P": "plain-adam",
}


class EstimatorKind:
    """What one estimator kind owns (module docstring); the defaults are a point
    estimator's with no settings of its own."""

    name: str = ""
    # how a refusal names a job of it ("one job of this sweep needs ...")
    label: str = "sweep"
    # the kind's rate is proven (a known-answer control: its verdicts have known answers)
    known_answer: bool = False
    # its prospective power is computed from the protocol's pilot cvs (ASVI's, a known-answer
    # family's); False: from its own pilot's records (verify.reading.pilot)
    pilot_from_protocol: bool = True
    # it trains the ASVI network (candidate widths, a step path, a step cap, the budget
    # control's continuation)
    trains_network: bool = False
    # the cost table prices its cells (simulate.sweep.costs)
    priced: bool = True
    # its memory bound is a measured peak ("about") rather than a floor ("at least")
    measured_memory: bool = False
    # the cost table (simulate.sweep.costs): the largest power of n its cost is extrapolated
    # with, and the setting whose members each cost a cell's share (None: one per cell)
    cost_power_cap: float = 1.0
    members_setting: str | None = None
    # the settings only this kind sets, each with the line refusing it elsewhere
    own: dict[str, str] = {}
    # its job runner, where it is not one of ``simulate.sweep.run.runner.RUNNERS`` (a kind
    # defined elsewhere -- a test's toy kind -- carries its own; the built-in kinds' runners
    # import the training, which this module must not)
    run: Callable | None = None

    def check(self, cfg) -> None:
        """ValueError (one line) naming the first of the kind's own settings that is bad."""

    def members(self, cfg) -> list[str]:
        """The estimators' names its records and results carry for ``cfg``."""
        raise NotImplementedError

    def owns(self, name: str) -> bool:
        """Whether a result's estimator ``name`` is one of this kind's."""
        return False

    def exponent(self, truth, name: str, metric: str) -> float | None:
        """The proven exponent of ``name``'s ``metric`` on ``truth`` (a known-answer
        control's), or None: tested against the truth class's band."""
        return None

    def cell_config(self, cfg, n: int) -> dict | None:
        """A record's ``config`` at sample size n, or None for the network's
        (``SweepConfig.cell_config``)."""
        return None

    def job_parts(self, cfg, n: int) -> list | None:
        """The memory of a job beyond its data (``(bytes, what, fix)`` each), or None for
        the network's (``SweepConfig.job_parts``)."""
        return [(cfg.n_test * 8 * 4, f"predictions at {cfg.n_test} test points",
                 "give a smaller --n-test")]  # fmt: skip

    def cost(self, job) -> float:
        """A job's rough relative cost, for the order jobs are handed out in
        (``simulate.sweep.train.jobs.Job.cost``): n^3 per replicate for a point estimator."""
        return float(len(job.replicates) * job.n**3)

    def check_run(self, cfg) -> None:
        """What a run checks before it trains anything (ValueError, one line): nothing."""

    def identity(self, cfg) -> dict | None:
        """What the fingerprint adds of the kind beyond its settings (None: nothing)."""
        return None

    def words(self, cfg) -> str:
        """What a dry run says of the kind's settings after the design (``""``: nothing)."""
        return ""


class _ASVI(EstimatorKind):
    """ASVI: spike-and-slab variational inference over sparse ReLU networks, every
    candidate width trained (``simulate.sweep.train.groups``)."""

    name = "asvi"
    trains_network = True

    def members(self, cfg) -> list[str]:
        return ["asvi"]

    def owns(self, name: str) -> bool:
        """ASVI's own results and its arms' (:data:`ASVI_ARMS`)."""
        return name in ASVI_ARMS.values()

    def is_primary(self, name: str) -> bool:
        """ASVI's own result (:data:`ASVI_NAMES`), not an arm's beside it."""
        return name in ASVI_NAMES

    def job_parts(self, cfg, n: int) -> list | None:
        return None

    def cost(self, job) -> float:
        """The step cap at n times the replicates' models' parameter counts (one layout per
        candidate width), times 1.5 where the constructive arms train three more programs."""
        cfg = job.config
        per = sum(Layout(job.truth.p, cfg.depth, [w]).P for w in cfg.widths_at(job.n))
        arms = 1.5 if cfg.start != "random" else 1.0
        return float(len(job.replicates) * cfg.steps_cap(job.n) * per * arms)


class _GP(EstimatorKind):
    """The Gaussian-process known-answer control: exact posteriors under Matern priors
    (``simulate.sweep.train.gp``), their rates proven (``theory.gp_matern_exponent``)."""

    name = "gp"
    label = "GP control"
    known_answer = True
    measured_memory = True
    cost_power_cap = 3.0  # the exact posterior's solve: n^3
    members_setting = "gp_nus"

    def check(self, cfg) -> None:
        if not cfg.gp_nus or any(
            isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0 for v in cfg.gp_nus
        ):
            raise ValueError(f"gp_nus must be a non-empty list of numbers > 0: {cfg.gp_nus}")
        if any(t.kind != "holder" for t in cfg.truths):
            raise ValueError("the Gaussian-process control runs on holder truths only")

    def members(self, cfg) -> list[str]:
        return [gp_name(nu) for nu in cfg.gp_nus]

    def owns(self, name: str) -> bool:
        return name.startswith("gp-matern-")

    def exponent(self, truth, name: str, metric: str) -> float | None:
        nu = float(name.removeprefix("gp-matern-"))
        return float(gp_matern_exponent(truth.alpha, nu, truth.p, metric))

    def cell_config(self, cfg, n: int) -> dict | None:
        return {
            "estimator": "gp",
            "gp_nus": list(cfg.gp_nus),
            **{k: getattr(cfg, k) for k in ("gp_length_scale", "gp_amplitude", "sigma")},
            **{k: getattr(cfg, k) for k in ("n_test", "draws", "seed")},
            **({"protocol": cfg.protocol} if cfg.protocol is not None else {}),
        }

    def job_parts(self, cfg, n: int) -> list | None:
        what = f"posterior covariances of n_test = {cfg.n_test} test points, float64"
        return [(gp_job_bytes(n, cfg.n_test, cfg.draws), what, "give a smaller --n-test")]

    def words(self, cfg) -> str:
        return f", priors nu = {cfg.gp_nus}"


class _KNN(EstimatorKind):
    """The k-NN known-answer control (``simulate.sweep.train.knn``): k matched to the class (its
    proven rate, ``theory.knn_exponent``) and k fixed."""

    name = "knn"
    label = "k-NN control"
    known_answer = True
    own = {"knn_ks": "the k-NN control's members (knn_ks) go with estimator = 'knn' alone"}

    def check(self, cfg) -> None:
        ks = cfg.knn_ks
        ok = isinstance(ks, list) and ks and all(
            k == KNN_MATCHED or (isinstance(k, int) and not isinstance(k, bool) and k >= 1)
            for k in ks
        )  # fmt: skip
        if not ok or len(set(map(str, ks))) != len(ks):
            raise ValueError(
                f"knn_ks must be a non-empty list of distinct members, each 'matched' or an"
                f" integer k >= 1: {ks}"
            )
        for t in cfg.truths:
            if t.kind != "holder" or not float(t.alpha) <= 1:
                raise ValueError(
                    f"the k-NN control runs on Hoelder truths of alpha <= 1 (its proven rate,"
                    f" theory.knn_exponent): {t.key}"
                )

    def members(self, cfg) -> list[str]:
        return [knn_name(k) for k in cfg.knn_ks]

    def owns(self, name: str) -> bool:
        return name.startswith("knn-")

    def exponent(self, truth, name: str, metric: str) -> float | None:
        return float(knn_exponent(truth.alpha, truth.p, knn_gamma(truth, name), metric))

    def cell_config(self, cfg, n: int) -> dict | None:
        return {
            "estimator": "knn",
            "knn_ks": list(cfg.knn_ks),
            **{k: getattr(cfg, k) for k in ("sigma", "n_test", "seed")},
            **({"protocol": cfg.protocol} if cfg.protocol is not None else {}),
        }

    def words(self, cfg) -> str:
        return f", k-NN members {cfg.knn_ks}"


class _Regressor(EstimatorKind):
    """A named scikit-learn-style regressor (``simulate.sweep.train.foreign``): checked as data
    when the configuration is made, its class imported only by a run."""

    name = "regressor"
    priced = False
    pilot_from_protocol = False
    own = {"regressor": "a regressor is named (regressor) with estimator = 'regressor' alone"}

    def check(self, cfg) -> None:
        check_regressor_data(cfg.regressor, cfg.regressor_params, cfg.truths, cfg.ns)

    def members(self, cfg) -> list[str]:
        return [regressor_name(cfg.regressor)]

    def owns(self, name: str) -> bool:  # any name no other kind owns
        return not any(k.owns(name) for k in KINDS.values() if k is not self)

    def cell_config(self, cfg, n: int) -> dict | None:
        return {
            "estimator": "regressor",
            "regressor": cfg.regressor,
            "regressor_params": dict(cfg.regressor_params or {}),
            **{k: getattr(cfg, k) for k in ("sigma", "n_test", "seed")},
            **({"protocol": cfg.protocol} if cfg.protocol is not None else {}),
        }

    def check_run(self, cfg) -> None:
        """The class imported and checked
        (``simulate.sweep.setup.regressor_class.check_regressor``):
        a run's check, from the user's own command, never a reader's."""
        check_regressor(cfg.regressor, cfg.regressor_params, cfg.truths, cfg.ns)

    def identity(self, cfg) -> dict | None:
        """The class's qualified name and its package's version (``regressor_identity``)."""
        return identity(cfg.regressor)

    def words(self, cfg) -> str:
        given = ", ".join(f"{k}={v}" for k, v in (cfg.regressor_params or {}).items())
        return f", regressor {cfg.regressor}({given})"


ASVI, GP, KNN, REGRESSOR = _ASVI(), _GP(), _KNN(), _Regressor()
KINDS: dict[str, EstimatorKind] = {k.name: k for k in (ASVI, GP, REGRESSOR, KNN)}


class KindNames:
    """The ``estimator`` setting's constraint (``simulate.sweep.setup.parts``): one of the
    registry's names as it stands when a configuration is checked (so a kind registered
    later is one a configuration may name)."""

    @property
    def values(self) -> tuple:
        return tuple(KINDS)

    def accepts(self, v) -> bool:
        return isinstance(v, str) and v in KINDS

    def __str__(self) -> str:
        return f"one of {self.values}"


# the kinds that are known-answer controls (their rates proven)
KNOWN_ANSWER = tuple(k.name for k in KINDS.values() if k.known_answer)


def is_asvi(name: str) -> bool:
    """Whether a result's estimator ``name`` is ASVI's own from the random start (its
    convergence table, its sizing: the entries every tier decides)."""
    return name == ASVI_NAMES[0]


def kind_of_name(name: str) -> EstimatorKind:
    """The kind a result's estimator ``name`` is one of (a named regressor's: any name no
    other kind owns)."""
    for k in KINDS.values():
        if k is not REGRESSOR and k.owns(name):
            return k
    return REGRESSOR


def knn_gamma(truth, name: str) -> float:
    """The growth exponent of a k-NN control member's neighbour count, ``k`` of order
    ``n^gamma`` (``simulate.sweep.store.rules.knn_k``): ``2 alpha / (2 alpha + p)`` for
    ``knn-matched``, 0 for a fixed ``knn-kK``."""
    if name == knn_name(KNN_MATCHED):
        return 2 * float(truth.alpha) / (2 * float(truth.alpha) + truth.p)
    if not name.startswith("knn-k"):
        raise ValueError(f"not a k-NN control member: {name!r}")
    return 0.0


def gp_job_bytes(n: int, n_test: int, draws: int) -> int:
    """The peak memory of one replicate's posteriors at ``n`` points and ``n_test`` test
    points, in bytes: what the process's peak resident size grew by, measured here
    (scikit-learn 1.9, numpy's LAPACK; n from 250 to 6,000, n_test from 1,000 to 8,000,
    nu in {0.5, 2.5}), rounded up, in float64 matrices:

    * the fit (``kernel(X)``, its Cholesky factor, the Matern kernel's temporaries):
      3.5 ``n x n``;
    * the prediction (``simulate.sweep.train.gp.gp_posterior``): the factor (``n x n``), the
      cross covariance and its triangular solve (two ``n x n_test``), and 3.6 ``n_test x
      n_test`` (the prior covariance, ``V^T V``, their difference, the kernel's
      temporaries);
    * the draws (``simulate.sweep.train.gp.gp_metrics``): 4.1 ``n_test x n_test`` (the covariance,
      its jittered copy, LAPACK's copy of it and the Cholesky factor) and a few
      ``n_test x draws`` arrays.

    Hence ``max(3.5 n^2, n^2 + 2 n n_test + 4.25 n_test^2)`` (the last term covering both
    the prediction's and the draws'): every prior's posterior is freed before the next
    one's (``simulate.sweep.train.gp.run_gp_job``), so the peak is one prior's.  The default
    ``n_test`` = 20,000 needs about 14 GB at n = 4,000; a sweep whose jobs cannot fit is
    refused before it starts (``simulate.sweep.run.runner.check_memory``)."""
    n, m = int(n), int(n_test)
    peak = max(3.5 * n * n, n * n + 2 * n * m + 4.25 * m * m)
    return int(8 * (peak + 4 * m * int(draws)))
