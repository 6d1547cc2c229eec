"""How a :class:`~simulate.trainer.Trainer` runs one step of all its models: three *step
paths*, one chosen once when the trainer is built (:func:`choose_path`).

* :class:`HandWrittenStep` -- the spike-and-slab family with the paper's L3 (the default),
  Dense-BNN and HS-BNN: random numbers and the minibatch drawn from the models' streams,
  then the whole step with every gradient written by hand
  (:func:`simulate.step.spike_slab_step`, :func:`simulate.step.horseshoe_step`), in place.
* :class:`CompiledHandWrittenStep` -- the same step through ``torch.compile``: one graph
  draws the step's inputs (:func:`simulate.objective.draw_step_inputs`), a second runs the
  step; only the normal transform between the two runs eagerly.  ``chunk`` splits the
  models into consecutive calls (:func:`chunk_bounds`).
* :class:`AutogradStep` -- the exact L3 and the families without normal slab noise (the
  reference for the other two, tested against them): the network's hand-written
  backward, then autograd through the sampler, L2 and L3 back to the variational
  parameters, then the optimiser; with ``compile`` its three pieces are compiled separately.

A path is called as ``path(trainer)``: it reads and replaces ``trainer.state``
(parameters, the optimiser's moments, step counter, failures) and returns the step's
:class:`~simulate.objective.ELBOTerms`.  The three compute the same numbers up to float
rounding (tested).  Timings of the paths against one another: ``python -m simulate.bench
--compare-paths`` and the benchmark notes in ``BENCHMARKS.md``.
"""

from __future__ import annotations

from functools import partial

import torch

from . import rng
from .layout import mlp_nll_and_grad
from .objective import (
    ELBOTerms,
    draw_step_inputs,
    family_of,
    kl_terms,
    slab_noise,
    slab_noise_from_uniform,
)
from .state import mark_failed
from .step import horseshoe_step, optimizer_update, spike_slab_step

__all__ = [
    "AutogradStep",
    "CompiledHandWrittenStep",
    "HandWrittenStep",
    "optimizer_factors",
    "choose_path",
    "hand_written_step_fn",
    "chunk_bounds",
    "draw_words",
]

# Every trainer compiles the same functions; past dynamo's default of 8 graphs per function
# it would silently run later trainers' new shapes eagerly.
_RECOMPILE_LIMIT = 64


def chunk_bounds(E: int, chunk: int) -> list:
    """``ceil(E / chunk)`` contiguous model ranges of sizes differing by at most one (so a
    compiled step sees at most two shapes): their boundaries ``[0, ..., E]``."""
    k = -(-E // chunk)
    return [E * i // k for i in range(k + 1)]


def optimizer_factors(hyper, t: int, dtype, device):
    """The optimiser's step-t factors as tensors (so a compiled step is not re-specialised
    every step): Adam's bias corrections ``lr / (1 - b1^t)`` and ``1 / (1 - b2^t)``;
    RMSprop's ``lr`` and 1 (no bias correction)."""
    if hyper.optimizer == "rmsprop":
        a, b = hyper.lr, 1.0
    else:
        b1, b2 = hyper.betas
        a, b = hyper.lr / (1 - b1**t), 1 / (1 - b2**t)
    return (
        torch.tensor(a, dtype=dtype, device=device),
        torch.tensor(b, dtype=dtype, device=device),
    )


def draw_words(tr) -> tuple:
    """The trainer's current step's draw words for :func:`draw_step_inputs` (``[K, 2]`` for
    the K draws, ``[2]`` for the iid minibatch) and the permutation indices (None for iid
    minibatches)."""
    st, K, dev = tr.state, tr.hyper.mc_samples, tr.device
    words = [rng.offset_words(st.step * K + k) for k in range(K)]
    return (
        torch.tensor(words, dtype=torch.int32, device=dev),
        torch.tensor(rng.offset_words(st.step), dtype=torch.int32, device=dev),
        None if tr.hyper.sampling == "iid" else tr.minibatch_index(st),
    )


def hand_written_step_fn(tr, functional: bool = False):
    """The trainer's family's hand-written step with its layout, hyper-parameters and n
    bound: :func:`horseshoe_step` for node scales, else :func:`spike_slab_step` (with or
    without indicators)."""
    fam = family_of(tr.hyper)
    if fam.node_scales:
        return partial(horseshoe_step, tr.layout, tr.hyper, tr.n, functional=functional)
    return partial(
        spike_slab_step, tr.layout, tr.hyper, tr.n, functional=functional,
        indicators=fam.indicators,
    )  # fmt: skip


def _finish(tr, outs, held) -> ELBOTerms:
    """Store a hand-written step's ``(var, m, v, failed, L1, L2, L3)`` in the trainer's
    state: the models that failed at this step are marked (and frozen) once, here."""
    st = tr.state
    var, m, v, failed, L1, L2, L3 = outs
    mark_failed(st, failed & ~held, L1, L2, L3)
    st.var, st.m, st.v = var, m, v
    st.step += 1
    return ELBOTerms(L1, L2, L3)


class HandWrittenStep:
    """The eager hand-written spike-and-slab step (inputs drawn by the trainer's streams)."""

    compiled = False

    def __init__(self, tr):
        self._step = hand_written_step_fn(tr)

    def __call__(self, tr) -> ELBOTerms:
        st, h, K = tr.state, tr.hyper, tr.hyper.mc_samples
        step_size, corr2 = optimizer_factors(h, st.step + 1, tr.dtype, st.var.device)
        held = st.failed | st.frozen  # the step leaves these models' parameters alone
        offsets = [st.step * K + k for k in range(K)]
        xb, yb = tr.minibatch(st)
        eps = [slab_noise(h, tr.eps_stream, o, tr.dtype) for o in offsets]
        u = [tr.gumbel_stream.uniform(o, tr.dtype) for o in offsets]
        eps, u = (eps[0][None], u[0][None]) if K == 1 else (torch.stack(eps), torch.stack(u))
        outs = self._step(st.var, st.m, st.v, held, tr.mask, tr.H, xb, yb, eps, u, step_size, corr2)
        return _finish(tr, outs, held)


class CompiledHandWrittenStep:
    """The hand-written step and its input draw as two ``torch.compile`` graphs, run on
    ``chunk`` models per call (all of them by default)."""

    compiled = True

    def __init__(self, tr, chunk: int | None = None):
        _raise_recompile_limit()
        self.chunk = tr.layout.E if chunk is None else min(int(chunk), tr.layout.E)
        self._step = torch.compile(hand_written_step_fn(tr, functional=True), dynamic=False)
        self._draw = torch.compile(partial(draw_step_inputs, n=tr.n, dtype=tr.dtype), dynamic=False)

    def __call__(self, tr) -> ELBOTerms:
        st, h = tr.state, tr.hyper
        step_size, corr2 = optimizer_factors(h, st.step + 1, tr.dtype, st.var.device)
        held = st.failed | st.frozen
        words, iid_words, idx = draw_words(tr)
        bounds = chunk_bounds(tr.layout.E, self.chunk)
        parts = []
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            part = slice(a, b)
            u_slab, u, xb, yb = self._draw(
                tr.eps_stream.base[part],
                tr.gumbel_stream.base[part],
                tr.iid_stream.base[part],
                words,
                iid_words,
                tr.X_aug,
                tr.y_flat,
                tr.data_index[part],
                None if idx is None else idx[part],
            )
            parts.append(
                self._step(
                    st.var[:, part],
                    st.m[:, part],
                    st.v[:, part],
                    held[part],
                    tr.mask[part],
                    tr.H[part],
                    xb,
                    yb,
                    slab_noise_from_uniform(h, u_slab),
                    u,
                    step_size,
                    corr2,
                )
            )
        dims = (1, 1, 1, 0, 0, 0, 0)  # var, m, v [3, E, P]; failed, L1, L2, L3 [E]
        outs = (
            parts[0]
            if len(parts) == 1
            else [torch.cat([p[i] for p in parts], dim=d) for i, d in enumerate(dims)]
        )
        return _finish(tr, outs, held)


class AutogradStep:
    """Hand-written network backward, autograd through the sampler and the KL terms, the
    optimiser;
    with ``compile`` the three pieces compiled apart."""

    def __init__(self, tr, compile: bool = False):
        self.compiled = bool(compile)
        self._sample_kl = partial(self._sample_kl_impl, tr)
        self._mlp = partial(mlp_nll_and_grad, tr.layout, hyper=tr.hyper)
        self._update = partial(optimizer_update, tr.hyper)
        if compile:
            _raise_recompile_limit()
            self._sample_kl = torch.compile(self._sample_kl, dynamic=False)
            self._mlp = torch.compile(
                partial(mlp_nll_and_grad, tr.layout, hyper=tr.hyper, functional=True),
                dynamic=False,
            )
            self._update = torch.compile(self._update, dynamic=False)

    @staticmethod
    def _sample_kl_impl(tr, var, offsets):
        """K networks per model ``[K*E, P]`` (draw k at offset ``offsets[k]``), L2 and L3."""
        thetas = torch.cat([tr.draw(var, offsets[k]) for k in range(tr.hyper.mc_samples)])
        return (thetas, *kl_terms(var, tr.hyper, tr.layout, tr.mask, tr.H, tr.node_index))

    def __call__(self, tr) -> ELBOTerms:
        st, h = tr.state, tr.hyper
        K, E = h.mc_samples, tr.layout.E
        xb, yb = tr.minibatch(st)
        var = st.var.detach().requires_grad_(True)
        offsets = [st.step * K + k for k in range(K)]
        if self.compiled:  # tensors, so the compiled graph is not specialised per step
            offsets = torch.tensor(offsets, dtype=torch.int64, device=var.device)
        thetas, L2, L3 = self._sample_kl(var, offsets)
        mb = xb.shape[1]  # minibatch size (m of the paper; st.m is the optimiser's)
        with torch.no_grad():
            nll, dtheta = self._mlp(
                thetas.detach(),
                xb.repeat(K, 1, 1) if K > 1 else xb,
                yb.repeat(K, 1) if K > 1 else yb,
                scale=tr.n / (mb * K),
            )
        L1 = nll.reshape(K, E).mean(0) * (tr.n / mb)
        terms = ELBOTerms(L1, L2.detach(), L3.detach())
        newly = ~torch.isfinite(terms.total) & ~st.failed & ~st.frozen
        if bool(newly.any()):
            mark_failed(st, newly, *terms)
        alive = ~(st.failed | st.frozen)
        everyone = bool(alive.all())  # one check; the masking below only if needed
        if everyone:
            kl = (L2 + L3).sum()
        else:
            kl = torch.where(alive, L2 + L3, torch.zeros_like(L2)).sum()
            dtheta = torch.where(alive.repeat(K)[:, None], dtheta, torch.zeros_like(dtheta))
        (grad,) = torch.autograd.grad([thetas, kl], var, grad_outputs=[dtheta, None])
        if not everyone:
            grad = torch.where(alive[None, :, None], grad, torch.zeros_like(grad))
        step_size, corr2 = optimizer_factors(h, st.step + 1, tr.dtype, var.device)
        with torch.no_grad():
            alive_or_none = None if everyone else alive
            self._update(st.var, st.m, st.v, grad, step_size, corr2, alive_or_none)
        st.step += 1
        return terms


def _raise_recompile_limit() -> None:
    cfg = torch._dynamo.config
    cfg.recompile_limit = max(cfg.recompile_limit, _RECOMPILE_LIMIT)


def choose_path(tr, compile: bool = False, chunk: int | None = None):
    """The step path of a trainer, chosen once: the spike-and-slab family with the paper's
    L3 and the Dense-BNN and HS-BNN families take the hand-written step (compiled with
    ``compile``); the exact L3 goes through autograd.  ``chunk`` applies to the compiled
    hand-written step only (elsewhere it changes nothing)."""
    h = tr.hyper
    fam = family_of(h)
    # The families without indicators draw every slot from normals (their ``draw``); their
    # hand-written steps take the slab noise, normal only for the Gaussian slab
    dense_ok = not fam.indicators and h.slab == "gaussian"
    if fam.hand_written_step and (h.l3 == "paper" if fam.indicators else dense_ok):
        return CompiledHandWrittenStep(tr, chunk) if compile else HandWrittenStep(tr)
    return AutogradStep(tr, compile)
