"""The training step over :class:`~simulate.core.state.State`: ``step(state, inputs) ->
(state, info)``, built once per trainer by :func:`build_step` from one of two *step paths*.

* the **hand-written step** -- the spike-and-slab family with the paper's L3 (the
  default), Dense-BNN and HS-BNN: the kernel with every gradient written by hand
  (:func:`simulate.core.step.spike_slab_step`, :func:`simulate.core.step.horseshoe_step`), eager
  (reusing its buffers) or compiled (``torch.compile`` of the kernel, a pure function;
  ``chunk`` splits the models into consecutive calls, :func:`chunk_bounds`);
* the **autograd path** (:class:`AutogradKernel`) -- the exact L3 and the families' draws
  that the hand-written kernels do not cover: the network's hand-written backward, then
  autograd through the sampler, L2 and L3 back to the variational parameters, then the
  optimiser; with ``compile`` its three pieces are compiled apart.  It is the check
  the hand-written kernels are tested against.

Both have the kernel signature of ``simulate.core.step`` and compute the same numbers up to float
rounding (tested).  :class:`Step` wraps a kernel into the pure step: the optimiser's
step-t factors from ``state.count``, the kernel, the failures recorded
(:func:`simulate.core.state.record_failures`) and the count advanced, returning the new
:class:`~simulate.core.state.State` and the step's :class:`Info`.  Timings of the paths against
one another: ``python -m simulate.bench --compare-paths`` and ``BENCHMARKS.md``.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import torch

from simulate.core.layout import mlp_nll_and_grad
from simulate.core.native import fused_steps
from simulate.core.objective import ELBOTerms, family_of, kl_terms
from simulate.core.optim import OptState, optimizer_of
from simulate.core.options import DEFAULT_OPTIONS, StepOptions
from simulate.core.sampler import Inputs
from simulate.core.state import State, record_failures
from simulate.core.step import (
    Consts,
    StepSpec,
    horseshoe_step,
    repeat_draws,
    spike_slab_step,
)

__all__ = [
    "AutogradKernel",
    "Info",
    "NativeStep",
    "Step",
    "build_step",
    "chunk_bounds",
    "compile_unavailable",
    "hand_written_kernel",
]

# Every trainer compiles the same functions; past dynamo's default of 8 graphs per function
# it would silently run later trainers' new shapes eagerly.
_RECOMPILE_LIMIT = 64


class Info(NamedTuple):
    """What a step reports: its :class:`~simulate.core.objective.ELBOTerms` (each ``[E]``,
    detached; a failed model's terms are the non-finite numbers they are) and ``failed``,
    the models that failed at this step (``[E]`` bool)."""

    terms: ELBOTerms
    failed: torch.Tensor


def chunk_bounds(E: int, chunk: int) -> list:
    """``ceil(E / chunk)`` contiguous model ranges of sizes differing by at most one (so a
    compiled step sees at most two shapes): their boundaries ``[0, ..., E]``."""
    k = -(-E // chunk)
    return [E * i // k for i in range(k + 1)]


def hand_written_kernel(spec: StepSpec):
    """The family's hand-written kernel with ``spec`` bound: :func:`horseshoe_step` for node
    scales, else :func:`spike_slab_step` (with or without indicators)."""
    step = horseshoe_step if family_of(spec.hyper).node_scales else spike_slab_step
    return partial(step, spec)


def compile_unavailable() -> str | None:
    """Why ``torch.compile`` cannot build a step here (None: it can): on the CPU inductor
    compiles C++ with the compiler it finds (``$CXX``, else ``g++``; torch's own search,
    ``torch._inductor.cpp_builder.get_cpp_compiler``), and without one every compiled
    step fails at its first call, deep inside a worker.  Checked before a compiled sweep
    does any work (``simulate.sweep.run.runner.check_compile``)."""
    try:  # deferred: inductor's compiler search is only needed where a step compiles
        from torch._inductor.cpp_builder import get_cpp_compiler

        get_cpp_compiler()
    except Exception as exc:  # InvalidCxxCompiler, or a search that itself fails
        name = type(exc).__name__
        return f"torch.compile finds no working C++ compiler ({name}; set $CXX)"
    return None


def _raise_recompile_limit() -> None:
    cfg = torch._dynamo.config
    cfg.recompile_limit = max(cfg.recompile_limit, _RECOMPILE_LIMIT)


class AutogradKernel:
    """The autograd path as a kernel (module docstring): ``kernel(consts, params, opt, inputs,
    factors)``, the parameters and moments updated in place (eager or compiled)."""

    def __init__(self, spec: StepSpec, compile: bool = False):
        self.spec, self.compiled = spec, bool(compile)
        lay, h = spec.layout, spec.hyper
        self._sample_kl = partial(self._sample_kl_impl, spec)
        self._mlp = partial(mlp_nll_and_grad, lay, hyper=h)
        self._update = spec.optimizer.update
        if compile:
            _raise_recompile_limit()
            self._sample_kl = torch.compile(self._sample_kl, dynamic=False)
            self._mlp = torch.compile(
                partial(mlp_nll_and_grad, lay, hyper=h, functional=True), dynamic=False
            )
            self._update = torch.compile(self._update, dynamic=False)

    @staticmethod
    def _sample_kl_impl(spec, consts: Consts, params, noise, gumbel):
        """K networks per model ``[K*E, P]`` (draw k from ``noise[k]``, ``gumbel[k]``), L2
        and L3."""
        fam, h, lay = family_of(spec.hyper), spec.hyper, spec.layout
        K = noise.shape[0]
        us = [None] * K if gumbel is None else list(gumbel)
        thetas = torch.cat(
            [
                fam.draw(params, h, lay, consts.mask, noise[k], us[k], False, consts.node_index)
                for k in range(K)
            ]
        )
        return (thetas, *kl_terms(params, h, lay, consts.mask, consts.H, consts.node_index))

    def __call__(self, consts: Consts, params, opt: OptState, inputs: Inputs, factors):
        K, E = inputs.noise.shape[0], params.shape[1]
        n, xb, yb = self.spec.n, inputs.xb, inputs.yb
        params_g = params.detach().requires_grad_(True)
        thetas, L2, L3 = self._sample_kl(consts, params_g, inputs.noise, inputs.gumbel)
        mb = xb.shape[1]
        with torch.no_grad():
            nll, dtheta = self._mlp(
                thetas.detach(),
                repeat_draws(xb, K),
                repeat_draws(yb, K),
                scale=n / (mb * K),
                sd=repeat_draws(consts.noise_sd, K),
            )
        L1 = nll.reshape(K, E).mean(0) * (n / mb)
        terms = ELBOTerms(L1, L2.detach(), L3.detach())
        nonfinite = ~torch.isfinite(terms.total)
        alive = ~(inputs.held | nonfinite)
        everyone = bool(alive.all())  # one check; the masking below only if needed
        kl_w = L2 + L3
        if factors.kl_weight is not None:  # the KL warm-up (Hyper.kl_warmup)
            kl_w = kl_w * factors.kl_weight
        if everyone:
            kl = kl_w.sum()
        else:
            kl = torch.where(alive, kl_w, torch.zeros_like(L2)).sum()
            dtheta = torch.where(alive.repeat(K)[:, None], dtheta, torch.zeros_like(dtheta))
        (grad,) = torch.autograd.grad([thetas, kl], params_g, grad_outputs=[dtheta, None])
        if not everyone:
            grad = torch.where(alive[None, :, None], grad, torch.zeros_like(grad))
        with torch.no_grad():
            params, opt = self._update(grad, opt, params, factors, None if everyone else alive)
        return params, opt, nonfinite, terms


class Step:
    """The pure step ``step(state, inputs) -> (state, info)`` around a kernel (module
    docstring).  ``hand_written``: which path; ``compiled``; ``chunk``: models per kernel
    call (compiled hand-written step only; all of them otherwise); ``multi``: whether it
    also runs several steps per call (:class:`NativeStep`)."""

    multi = False

    def __init__(self, spec: StepSpec, consts: Consts, kernel, hand_written: bool, compiled: bool,
                 chunk: int):  # fmt: skip
        self.spec, self.consts, self.kernel = spec, consts, kernel
        self.hand_written, self.compiled, self.chunk = hand_written, compiled, chunk

    def __call__(self, state: State, inputs: Inputs) -> tuple[State, Info]:
        params = state.params
        if self.chunk >= params.shape[1]:
            f = self._factors(state, state.opt.lr_scale)
            params, opt, nonfinite, terms = self.kernel(self.consts, params, state.opt, inputs, f)
        else:
            params, opt, nonfinite, terms = self._chunked(state, inputs)
        newly = nonfinite & ~inputs.held
        health = record_failures(state.health, newly, terms, state.count)
        return State(params, opt, state.count + 1, health), Info(terms, newly)

    def _factors(self, state: State, lr_scale):
        """The optimiser's factors of the next step (its step size times ``lr_scale``, the
        multipliers of the models the kernel runs) and the KL warm-up's weight."""
        params = state.params
        factors = self.spec.optimizer.factors(state.count + 1, params.dtype, params.device,
                                              lr_scale)  # fmt: skip
        warm = self.spec.hyper.kl_warmup
        if warm:  # the KL part's weight t / kl_warmup, then 1 (a tensor throughout: one graph)
            w = min(1.0, (state.count + 1) / warm)
            factors = factors._replace(
                kl_weight=torch.tensor(w, dtype=params.dtype, device=params.device)
            )
        return factors

    def _chunked(self, state: State, inputs: Inputs):
        """The kernel on consecutive chunks of models, joined."""
        bounds = chunk_bounds(state.params.shape[1], self.chunk)
        parts, scale = [], state.opt.lr_scale
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            s = slice(a, b)
            part_scale = None if scale is None else scale[s]
            opt = OptState(state.opt.exp_avg[:, s], state.opt.exp_avg_sq[:, s], part_scale)
            consts = self.consts.part(s)
            f = self._factors(state, part_scale)
            parts.append(self.kernel(consts, state.params[:, s], opt, inputs.part(s), f))
        params = torch.cat([p[0] for p in parts], 1)
        opt = OptState(*(torch.cat([p[1][i] for p in parts], 1) for i in range(2)), scale)
        nonfinite = torch.cat([p[2] for p in parts])
        terms = ELBOTerms(*(torch.cat([p[3][i] for p in parts]) for i in range(3)))
        return params, opt, nonfinite, terms


_KNOWN_SD: dict = {}  # (E, sigma) -> the known noise sd [E], for NativeStep


class NativeStep(Step):
    """The whole step in C (``mlp="native-step"``): :func:`simulate.core.step.
    spike_slab_step` (Gaussian slab, the paper's L3; or Dense-BNN) as one pass per model
    (:func:`simulate.core.native.fused_steps`) -- the draws from the program's streams
    (``inputs.source``) at the step's count, the minibatch (drawn and gathered there too
    for iid sampling), the network pass, the terms, the gradients and the optimiser's
    update, the parameters and moments updated in place (the eager step's donation).
    ``step(state, inputs)`` is one step, as every :class:`Step`; :meth:`many` runs ``S``
    steps in one call (``multi``), the same numbers bit for bit, so a loop stops paying its
    per-step Python where nothing reads the state between steps (``Trainer.fit_until``
    between window ends).  Equal to :func:`~simulate.core.step.spike_slab_step` to float
    rounding (tested)."""

    multi = True

    def __init__(self, spec: StepSpec, consts: Consts):
        super().__init__(spec, consts, None, True, False, spec.layout.E)

    def __call__(self, state: State, inputs: Inputs) -> tuple[State, Info]:
        state, info = self.many(state, inputs, 1)
        return state, Info(ELBOTerms(*(t[0] for t in info.terms)), info.failed[0])

    def many(
        self, state: State, inputs: Inputs, S: int, skip_held: bool = False
    ) -> tuple[State, Info]:
        """Steps ``state.count .. + S - 1`` (``inputs`` from ``Sampler.draw_steps``): the new
        state and the :class:`Info` of every step, ``[S, E]`` each.  ``inputs.held`` holds
        its models throughout; a model that fails at a step is held from the next one on
        (as the trainer holds a failed model), its failure recorded at that step.
        ``skip_held``: the held models are not computed (only their moments' decay: the
        state is the same), their terms NaN (for a caller that reads no held model's
        terms: ``Trainer.fit_until``)."""
        spec, consts, params = self.spec, self.consts, state.params
        E, t = params.shape[1], state.count
        sd = consts.noise_sd
        if sd is None:  # the known sd: one tensor per (E, sigma), made once, only read by C
            key = (E, float(spec.hyper.sigma))
            sd = _KNOWN_SD.get(key)
            if sd is None:
                sd = _KNOWN_SD[key] = torch.full((E,), key[1], dtype=torch.float32)
        step, corr2 = spec.optimizer.schedule(t + 1, S, E, state.opt.lr_scale)  # [S, 3, E], [S]
        warm = spec.hyper.kl_warmup
        klw = [min(1.0, (u + 1) / warm) if warm else 1.0 for u in range(t, t + S)]
        nonfinite, terms = fused_steps(
            spec.layout, spec.hyper, spec.n, params, state.opt, consts.mask, consts.H,
            inputs.source, t, S, inputs.xb, inputs.yb, sd, inputs.held, step, corr2,
            torch.tensor(klw, dtype=torch.float32), consts.widths, skip_held,
        )  # fmt: skip
        # a model's failure: its first non-finite step while not held
        newly = nonfinite & (nonfinite.cumsum(0) == 1) & ~inputs.held
        health = state.health
        if bool(newly.any()):
            for s in torch.nonzero(newly.any(1)).reshape(-1).tolist():
                health = record_failures(health, newly[s], [x[s] for x in terms], t + s)
        return State(params, state.opt, t + S, health), Info(ELBOTerms(*terms), newly)


def uses_hand_written(hyper) -> bool:
    """Whether the hand-written kernel serves ``hyper``: the spike-and-slab family with the
    paper's L3, and the families without indicators (whose noise is normal whatever
    ``hyper.slab`` says: ``family.noise``); the exact L3 takes autograd."""
    fam = family_of(hyper)
    return fam.hand_written_step and (hyper.l3 == "paper" or not fam.indicators)


def build_step(
    layout, hyper, n: int, consts: Consts, options: StepOptions = DEFAULT_OPTIONS
) -> Step:
    """The step of E models (``layout.E``) on data of size ``n``, its path chosen once
    (:class:`~simulate.core.options.StepOptions`, validated where it was made): the
    hand-written kernel where it serves (:func:`uses_hand_written`) unless
    ``options.autograd``, else the autograd path; ``options.compile`` compiles it;
    ``options.chunk`` (compiled hand-written step only) models per kernel call;
    ``options.path`` (``simulate.core.steppath``; ``StepSpec``; hand-written step only)
    how the network's pass is computed (the whole step in C: :class:`NativeStep`).  The
    one check that needs the hyperparameters too, the path's own: the C paths need the
    hand-written step (``StepPath.check_kernel``)."""
    E = layout.E
    compile, chunk, mlp, path = options.compile, options.chunk, options.mlp, options.path
    hand = not options.autograd and uses_hand_written(hyper)
    path.check_kernel(hand)
    if path.whole_step:  # the whole step in C: eager, in place, every model in one call
        return NativeStep(StepSpec(layout, hyper, n, optimizer_of(hyper, donate=True), True, mlp),
                          consts)  # fmt: skip
    if hand:
        spec = StepSpec(layout, hyper, n, optimizer_of(hyper, donate=not compile), not compile, mlp)
        kernel = hand_written_kernel(spec)
        if compile:
            _raise_recompile_limit()
            kernel = torch.compile(kernel, dynamic=False)
            chunk = E if chunk is None else min(chunk, E)
        else:
            chunk = E
        return Step(spec, consts, kernel, True, bool(compile), chunk)
    spec = StepSpec(layout, hyper, n, optimizer_of(hyper, donate=True), True)
    return Step(spec, consts, AutogradKernel(spec, compile), False, bool(compile), E)
