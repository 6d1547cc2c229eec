"""How the estimators train: the learned noise's start and floor, when the step is compiled
(``COMPILE_FROM_STEPS``), the step path chosen for a fit (``_step_options``, "auto" resolved
here), the halving race between candidate widths (:class:`Halving`) and the progress bar."""

from __future__ import annotations

import math
import sys
import warnings

import numpy as np
import torch

from simulate.core import native
from simulate.core.options import DEFAULT_OPTIONS, StepOptions
from simulate.core.steppath import BATCHED, MLP_KINDS, NATIVE, NATIVE_STEP, path_of
from simulate.core.training_step import uses_hand_written
from simulate.progress import Progress
from theory import log_prior_N

NOISE_FLOOR = DEFAULT_OPTIONS.noise_floor  # learned noise sd's floor, standardised units
# Where the learned noise sd starts, in standardised units (a tenth of y's sd): small, so the
# network fits before the noise settles (with the warm-up of
# ``simulate.core.training.fit_trainer``).  A start at y's own sd (the constant fit's) let a narrow
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


def _step_options(
    mlp, compile, hyper, device, dtype, budget: int, depth: int | None = None, **rest
) -> StepOptions:
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
    False).  ``depth`` (the hidden layers; None: not checked): the C paths take at most
    ``StepPath.max_depth`` (``simulate.core.native.network.MAX_HIDDEN_LAYERS``), so "auto"
    is the batched pass for a deeper network, without a word (the C code does not serve
    it: nothing is lost), and a C path named outright is refused (``StepPath.check_depth``;
    ``fit`` refuses it sooner, with the parameters)."""
    if isinstance(mlp, str) and mlp == "auto":
        path = BATCHED
        serves = (
            uses_hand_written(hyper)
            and not native.scope_problems(hyper.likelihood, 1, device, dtype)
            and (depth is None or NATIVE.max_depth is None or depth <= NATIVE.max_depth)
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
        if depth is not None:
            path.check_depth(depth, "mlp")
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
