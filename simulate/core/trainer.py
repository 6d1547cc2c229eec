"""The trainer: E models, their sampler, state and step, a plain loop over them, with the
stopping rule and failures (see ``simulate.core`` for the design).

One training step is ``inputs = sampler.draw(t, held)`` (:class:`simulate.core.sampler.
Sampler`) then ``state, info = step(state, inputs)`` (:func:`simulate.core.paths.build_step`):
the loop owns what is not the step's business -- which models the stopping rule holds
(``Trainer.frozen``) and the loss history (``Trainer.history``)."""

from __future__ import annotations

import torch

from simulate.core.hyper import Hyper
from simulate.core.layout import Layout, neg_log_lik
from simulate.core.objective import ELBOTerms, draw_network, family_of, kl_terms
from simulate.core.paths import Info, build_step
from simulate.core.sampler import Sampler
from simulate.core.state import Batch, init_state
from simulate.core.step import Consts

__all__ = ["Trainer"]


class Trainer:
    """Trains E models at once: owns the layout, masks, sampler, step and state.

    The step path (``simulate.core.paths``) is chosen once here: the hand-written step (eager,
    or with ``compile=True`` through ``torch.compile``: a one-time cost of seconds, cached
    by torch on disk), or autograd through the sampler for the exact L3 (and with
    ``autograd=True`` for any family: the hand-written kernels' check).  They compute the
    same numbers up to float rounding; the eager paths are what most tests use.  ``chunk`` (compiled
    hand-written step only): models per compiled call (``simulate.core.paths.chunk_bounds``);
    it changes nothing but speed, and by default all models go in one call
    (``BENCHMARKS.md`` has the measurements behind that default).  ``init_from``:
    variational parameters ``[3, E, P]`` to start from instead of the seeded random start
    (``simulate.references.constructive.encode``); the optimiser's moments start at zero either way,
    and the random streams are the seeds' as usual.

    ``state`` is replaced by every step.  The eager step reuses the buffers of the state
    it is given (the returned state holds the same tensors, updated), so keep a
    ``.clone()`` of anything you want to compare against later.
    """

    def __init__(
        self,
        layout: Layout,
        hyper: Hyper,
        seeds,
        batch: Batch,
        device=None,
        dtype=torch.float32,
        compile: bool = False,
        chunk: int | None = None,
        init_from: torch.Tensor | None = None,
        autograd: bool = False,
    ):
        hyper.validate()
        if chunk is not None and int(chunk) < 1:
            raise ValueError(f"chunk must be a positive number of models, got {chunk}")
        if layout.node_scales != family_of(hyper).node_scales:
            raise ValueError(
                "the horseshoe family needs Layout(..., node_scales=True), and only it"
            )
        self.layout, self.hyper = layout, hyper
        self.device, self.dtype = device, dtype
        self.seeds = torch.as_tensor(seeds, dtype=torch.int64, device=device).reshape(-1)
        self.sampler = Sampler(layout, hyper, self.seeds, batch, device, dtype, bool(compile))
        self.n = self.sampler.n
        self.mask = layout.mask(device, dtype)
        self.H = self.mask[:, : layout.P_net].sum(-1)
        self.node_index = layout.node_index(device) if layout.node_scales else None
        self.state = init_state(layout, hyper, self.seeds, device, dtype)
        if init_from is not None:
            start = torch.as_tensor(init_from)
            if tuple(start.shape) != tuple(self.state.params.shape):
                raise ValueError(
                    f"init_from must be [3, E, P] = {tuple(self.state.params.shape)}, "
                    f"got {tuple(start.shape)}"
                )
            if not bool(torch.isfinite(start).all()):
                raise ValueError("init_from holds non-finite values")
            self.state = self.state._replace(params=start.to(device=device, dtype=dtype).clone())
        self.frozen = torch.zeros(layout.E, dtype=torch.bool, device=device)
        self.history: list = []
        consts = Consts(self.mask, self.H, self.node_index)
        self.step_fn = build_step(
            layout, hyper, self.n, consts, bool(compile), chunk, autograd=autograd
        )

    @property
    def hand_written(self) -> bool:
        """Whether the step is the hand-written kernel (eager or compiled)."""
        return self.step_fn.hand_written

    @property
    def compiled(self) -> bool:
        """Whether the step runs through ``torch.compile``."""
        return self.step_fn.compiled

    @property
    def chunk(self) -> int:
        """Models per kernel call (all of them but for a chunked compiled step)."""
        return self.step_fn.chunk

    def posterior(self, params: torch.Tensor | None = None):
        """The models' variational posteriors (:class:`simulate.core.posterior.Posterior`) at the
        current parameters, or at ``params`` (e.g. a stopping rule's look at them mid-run)."""
        from simulate.core.posterior import (
            Posterior,  # posterior builds on the core: imported on use
        )

        return Posterior(
            self.layout, self.hyper, self.state.params if params is None else params, self.seeds
        )

    # ----------------------------------------------------------------- sampling
    def draw(self, params, offset, hard_only=False):
        """``theta [E, P]``: one network per model for noise offset ``offset``."""
        sm = self.sampler
        return draw_network(
            params, self.hyper, self.layout, self.mask, sm.eps_stream, sm.gumbel_stream, offset,
            hard_only, self.node_index,
        )  # fmt: skip

    def minibatch(self, t: int | None = None):
        """Step ``t``'s minibatch of every model (default: the next step's)."""
        return self.sampler.minibatch(self.state.count if t is None else t)

    # ----------------------------------------------------------------- losses
    def loss_terms(self, params, xb, yb, step: int) -> ELBOTerms:
        """Per-model (L1, L2, L3), each ``[E]``, for one minibatch and step ``step``'s noise,
        in plain autograd: what every step path is tested against."""
        h, K = self.hyper, self.hyper.mc_samples
        mb = xb.shape[1]  # minibatch size (m of the paper)
        thetas = torch.cat([self.draw(params, step * K + k) for k in range(K)])
        x = xb[..., :-1]
        out = self.layout.forward(thetas, x.repeat(K, 1, 1) if K > 1 else x)
        nll = neg_log_lik(out, yb.repeat(K, 1) if K > 1 else yb, h).sum(-1)
        L1 = nll.reshape(K, -1).mean(0) * (self.n / mb)
        return ELBOTerms(L1, *kl_terms(params, h, self.layout, self.mask, self.H, self.node_index))

    # ----------------------------------------------------------------- step
    def step(self) -> ELBOTerms:
        """One optimiser step for all models not held: the sampler's inputs for the next
        step, then the step function.  A model whose loss is not finite is marked failed at
        this step and held from then on (its terms stay visible as the non-finite numbers
        they are; ``state.health`` records it); a model the stopping rule stopped
        (``frozen``) is held too.  Returns the per-model terms (detached)."""
        return self.advance().terms

    def advance(self) -> Info:
        """:meth:`step`, returning the step's whole :class:`~simulate.core.paths.Info`."""
        held = self.state.health.failed | self.frozen
        inputs = self.sampler.draw(self.state.count, held)
        self.state, info = self.step_fn(self.state, inputs)
        return info

    def fit(self, steps: int, progress=None, record_every: int = 0):
        """Run ``steps`` steps; ``progress`` a callable(i, steps) or None; every
        ``record_every`` steps the per-model terms go to :attr:`history`."""
        for i in range(steps):
            terms = self.step()
            if record_every and (i % record_every == 0 or i == steps - 1):
                per_term = {k: v.tolist() for k, v in terms.as_dict().items()}
                self.history.append({"step": self.state.count, **per_term})
            if progress is not None:
                progress(i + 1, steps)
        return self.state

    def fit_until(self, rule, progress=None, risk=None):
        """Train each model until ``rule`` (:class:`simulate.core.stopping.StopRule`) stops it:
        converged models are frozen (:attr:`frozen`) while the others go on; the run ends
        when every model has converged or failed, or at ``rule.max_steps``.  Training
        continues from the current state.  Returns the per-model summary of
        :class:`simulate.core.stopping.Convergence` (``steps``, ``converged``, ``rel_change``,
        ``kl_change``, ``risk_change``).  ``risk``: with a rule that watches the held-out
        risk, a function of the current variational parameters returning each model's risk
        ``[E]`` (called at window ends only).
        A model stopped inside the batch ends exactly where it would trained alone (models
        are independent and each decision uses only its own objective; tested)."""
        from simulate.core.stopping import Convergence

        held = self.state.health.failed | self.frozen
        conv = Convergence(rule, self.layout.E, self.state.params.device, held)
        window_risk = None if risk is None else (lambda: risk(self.state.params))  # at call
        for i in range(rule.max_steps):
            newly = conv.update(self.advance(), window_risk)
            if newly is not None:
                if bool(newly.any()):
                    self.frozen = self.frozen | newly.to(self.frozen.device)
                if bool(conv.done.all()):
                    break
            if progress is not None:
                progress(i + 1, rule.max_steps)
        return conv.summary()
