"""The step paths: how the hand-written step computes, one registry (:data:`PATHS`).

A path is chosen by name (``StepOptions.mlp``, the records' ``config.mlp``, every
command's ``--mlp``) and resolved once, at the edge, to a :class:`StepPath`; everything
downstream asks the path object (:attr:`StepPath.runs_c`, :attr:`~StepPath.whole_step`,
:meth:`~StepPath.check_options`, :meth:`~StepPath.check_kernel`,
:meth:`~StepPath.check_platform`, :meth:`~StepPath.require`) instead of comparing names.
The names are the records' own (a record's ``config.mlp``): they never change.

* ``batched`` -- the network's pass as one batched product per layer over all models
  (``simulate.core.layout.mlp_nll_and_grad``), in torch; the only path ``torch.compile``
  and the autograd path take;
* ``native`` -- the network's pass fused per model in C (``simulate.core.native``); the
  rest of the hand-written step in torch, eager or compiled;
* ``native-step`` -- the whole step in C per model: the draws, the network pass, the
  terms, the gradients and the optimiser, several steps a call, its noise drawn by the
  step itself (the sampler's ``noise_in_step``); nothing left to compile.

Each path computes the same numbers to float rounding (tested); what differs is speed,
what it needs (a C compiler for the two C paths) and what it covers (the C paths the
hand-written step; the whole step the SVI / ASVI family with the Gaussian slab and
Dense-BNN, ``simulate.core.native.step_scope_problems``).  Whether torch.compile is worth
its cost is the caller's rule (the estimators' ``COMPILE_FROM_STEPS``, a tier's
declaration); whether a path may be compiled at all is the path's
(:attr:`StepPath.compilable`).
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral

from simulate.core import native
from simulate.core.constraints import Interval
from simulate.core.native.network import MAX_HIDDEN_LAYERS

__all__ = [
    "BATCHED",
    "DEPTH_EVERY_PATH",
    "MLP_KINDS",
    "NATIVE",
    "NATIVE_KINDS",
    "NATIVE_STEP",
    "PATHS",
    "StepPath",
    "mlp_help",
    "path_of",
]


@dataclass(frozen=True)
class StepPath:
    """One way the step computes (module docstring).

    * ``name``: the path's name in options, records and command lines;
    * ``summary``: what it is, one phrase (the command lines' help is made of these);
    * ``runs_c``: it runs C code (``simulate.core.native``): a C compiler is needed;
    * ``fused_pass``: the torch hand-written step's network pass is the fused C one
      (``simulate.core.step.StepSpec``; False on the whole step in C, which runs no torch
      step);
    * ``whole_step``: the whole step runs in C (``simulate.core.training_step.NativeStep``),
      drawing its own noise (the sampler's ``noise_in_step``), several steps a call."""

    name: str
    summary: str
    runs_c: bool
    fused_pass: bool
    whole_step: bool

    @property
    def compilable(self) -> bool:
        """Whether ``torch.compile`` has a step to compile on this path (the whole step in
        C has none)."""
        return not self.whole_step

    def check_options(self, *, compile: bool, autograd: bool) -> None:
        """``ValueError`` where this path cannot run with these options (checked as
        ``simulate.core.options.StepOptions`` is made): a C path is the hand-written
        step's, not the autograd path's; the whole step in C is not compiled."""
        if self.runs_c and autograd:
            raise ValueError(
                f"mlp={self.name!r} runs in the hand-written step; autograd=True takes the"
                " autograd path, whose network pass is the batched one"
            )
        if compile and not self.compilable:
            raise ValueError(
                f"mlp={self.name!r} runs the whole step in C: there is nothing to compile "
                "(compile=False)"
            )

    @property
    def max_depth(self) -> int | None:
        """The most hidden layers this path trains: on a C path the C code's limit
        (``simulate.core.native.network.MAX_HIDDEN_LAYERS``, 63: its activation buffers'
        array); None on the torch path, which has no limit of its own (memory bounds it:
        ``simulate.core.sizes``)."""
        return MAX_HIDDEN_LAYERS if self.runs_c else None

    def check_depth(self, depth: int, flag: str = "--mlp") -> None:
        """``ValueError`` (one line) where this path cannot train networks of ``depth``
        hidden layers (:attr:`max_depth`), naming the limit and the torch path as the way
        out; checked where a configuration is made (the estimators' parameters, a sweep's
        configuration) -- the C code's own check (``_check_layout``) comes only once the
        models, their data and their trainer are built, 200 s for a million layers.
        ``flag``: the name the user gave the path by, ``--mlp`` (a command line's flag:
        ``--mlp batched``) or ``mlp`` (a parameter: ``mlp='batched'``)."""
        if self.max_depth is not None and depth > self.max_depth:
            raise ValueError(
                f"depth {depth}: {_named(flag, self.name)} runs C code, which takes at most"
                f" {self.max_depth} hidden layers (simulate.core.native.network"
                f".MAX_HIDDEN_LAYERS); {_named(flag, BATCHED.name)} trains deeper networks"
            )

    def check_kernel(self, hand_written: bool) -> None:
        """``ValueError`` where the hyperparameters take the autograd path
        (``hand_written`` False: ``simulate.core.training_step.uses_hand_written`` or
        ``autograd=True``) and this path needs the hand-written step (the C paths)."""
        if self.runs_c and not hand_written:
            raise ValueError(
                f"mlp={self.name!r} runs in the hand-written step; this family, L3 or "
                "autograd=True takes the autograd path, whose network pass is the batched one"
            )

    def check_platform(self, layout, hyper, device, dtype) -> None:
        """``ValueError`` where the C code does not cover these models, device or dtype
        (``simulate.core.native.check_supported`` for the fused pass,
        ``check_step_supported`` for the whole step); nothing for the torch path."""
        if self.whole_step:
            native.check_step_supported(layout, hyper, device, dtype)
        elif self.fused_pass:
            native.check_supported(layout, hyper, device, dtype)

    def available(self) -> bool:
        """Whether this path can run here: the torch path always; a C path where its
        library builds or loads (``simulate.core.native.available``)."""
        return not self.runs_c or native.available()

    def require(self, flag: str = "--mlp") -> None:
        """``ValueError`` (one line) where this path's C code cannot be built or loaded here
        (no C compiler, its first error, an unwritable or untrusted cache), naming the
        torch path as the way out; nothing for the torch path."""
        if not self.runs_c:
            return
        try:
            native.load()
        except native.NativeUnavailable as exc:
            raise ValueError(
                f"{flag} {self.name}: {str(exc).splitlines()[0]}"
                f" ({flag} {BATCHED.name} runs without one)"
            ) from None


BATCHED = StepPath(
    "batched", "the torch step, one product per layer over all models (compiled with"
    " --compile)", runs_c=False, fused_pass=False, whole_step=False,
)  # fmt: skip
NATIVE = StepPath(
    "native", "the network's pass fused per model in C, the rest in torch (faster at"
    " batch 1024)", runs_c=True, fused_pass=True, whole_step=False,
)  # fmt: skip
NATIVE_STEP = StepPath(
    "native-step", "the whole step in C per model (faster on the rate tiers' small"
    " programs; never compiled)", runs_c=True, fused_pass=False, whole_step=True,
)  # fmt: skip


def _named(flag: str, name: str) -> str:
    """A path as the user names it: ``--mlp NAME`` on a command line, ``mlp='NAME'`` as a
    parameter."""
    return f"{flag} {name}" if flag.startswith("-") else f"{flag}={name!r}"


# every path by name, in the order the command lines list them
PATHS = {p.name: p for p in (BATCHED, NATIVE, NATIVE_STEP)}
MLP_KINDS = tuple(PATHS)
# the paths that run C code (``simulate.core.native``): a compiler is needed
NATIVE_KINDS = tuple(name for name, p in PATHS.items() if p.runs_c)


def path_of(name: str) -> StepPath:
    """The path named ``name`` (``ValueError`` naming the paths otherwise)."""
    try:
        return PATHS[name]
    except (KeyError, TypeError):
        raise ValueError(f"mlp must be one of {', '.join(MLP_KINDS)}, got {name!r}") from None


def mlp_help(default: str) -> str:
    """A command line's help for ``--mlp``: ``default`` (what this command does without
    the flag), then each path's summary; the same numbers to float rounding on each."""
    paths = "; ".join(f"{p.name}: {p.summary}" for p in PATHS.values())
    return (
        f"the step path ({default}): {paths}; the C paths need a C compiler; each computes"
        " the same numbers to float rounding"
    )


@dataclass(frozen=True)
class _DepthEveryPath(Interval):
    """:class:`simulate.core.constraints.Interval` whose description says why its top is
    the C code's limit."""

    def __str__(self) -> str:
        return (
            f"{super().__str__()} (the C step's limit, simulate.core.native.network"
            ".MAX_HIDDEN_LAYERS, kept on every --mlp)"
        )


# A depth every step path trains: 1 .. the C code's limit.  The sweep's ``depth`` takes it
# (``simulate.sweep.setup.parts.Design``): every ASVI tier trains on the C step (``native-step``,
# ``simulate.sweep.setup.tiers``), ``verify.rates`` falls back to the batched one only where no C
# compiler builds it, and ``SweepConfig`` is checked per field, without its ``mlp``
# beside -- so a sweep's configuration is bounded by the tightest path, valid on every
# path and machine, and a depth of 64 is one line when it is made instead of a crash in
# the first job (exit 4 from verify.rates, a traceback from simulate.sweep).
DEPTH_EVERY_PATH = _DepthEveryPath(Integral, 1, MAX_HIDDEN_LAYERS, "both")
