"""How a trainer's step runs (:class:`StepOptions`): one frozen object, validated when it is
made, built once at the edge (the sweep's ``SweepConfig.step_options``, the estimators'
``fit``, the experiments' drivers, the benchmark) and passed whole to
``simulate.core.Trainer``, which hands it to ``simulate.core.training_step.build_step``.

What it holds changes how the step computes, never what (the same numbers to float
rounding), except learned noise, which changes the model (the noise sd is estimated):
the hyperparameters of what is optimised are :class:`simulate.core.hyper.Hyper`'s.  The
checks that need both the options and the hyperparameters (the fused network pass needs
the hand-written step; learned noise needs the Gaussian likelihood) are made where both
are known, once: ``Trainer.__init__`` (learned noise, the fused pass's platform) and
``build_step`` (the fused pass's step path).
"""

from __future__ import annotations

from dataclasses import dataclass

from simulate.core.constraints import BOOL, INT_POSITIVE, POSITIVE, Options, validate_params
from simulate.core.steppath import MLP_KINDS, StepPath, path_of

__all__ = ["DEFAULT_OPTIONS", "StepOptions"]


@dataclass(frozen=True)
class StepOptions:
    """How the step runs (module docstring).

    * ``compile``: the step (and the sampler's draw) through ``torch.compile`` -- a
      one-time cost of seconds, cached by torch on disk;
    * ``chunk``: models per compiled call (compiled hand-written step only;
      ``simulate.core.training_step.chunk_bounds``; None: all of them in one call);
    * ``mlp``: the step path's name (``simulate.core.steppath``: ``"batched"``,
      ``"native"`` or ``"native-step"``), resolved to its object by :attr:`path`, which
      owns the checks (``compile`` must be False on the whole step in C);
    * ``autograd``: the autograd step path for any family (the hand-written kernels' check);
    * ``learn_noise``: each model's Gaussian noise sd learned with it by variational EM
      (``Trainer``), updated every ``noise_every`` steps in ``Trainer.fit`` and never below
      ``noise_floor`` (the two are read only with ``learn_noise``).

    Frozen and validated when made: a ``ValueError`` names the first bad field."""

    compile: bool = False
    chunk: int | None = None
    mlp: str = "batched"
    autograd: bool = False
    learn_noise: bool = False
    noise_every: int = 100
    noise_floor: float = 1e-3

    def __post_init__(self):
        validate_params(self, STEP_OPTIONS_CONSTRAINTS)
        self.path.check_options(compile=self.compile, autograd=self.autograd)

    @property
    def path(self) -> StepPath:
        """The step path ``mlp`` names (``simulate.core.steppath``)."""
        return path_of(self.mlp)


# every field's allowed values (simulate.core.constraints), checked as StepOptions is made
STEP_OPTIONS_CONSTRAINTS = {
    "compile": [BOOL],
    "chunk": [INT_POSITIVE, None],
    "mlp": [Options(MLP_KINDS)],
    "autograd": [BOOL],
    "learn_noise": [BOOL],
    "noise_every": [INT_POSITIVE],
    "noise_floor": [POSITIVE],
}

# the default options (frozen: one shared instance serves as every signature's default)
DEFAULT_OPTIONS = StepOptions()
