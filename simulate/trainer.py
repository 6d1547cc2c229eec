"""The trainer: E models, their streams and state, one step function chosen at
construction (eager, hand-written or compiled), stopping and failures (see
``simulate.core`` for the design)."""

from __future__ import annotations

from functools import partial

import torch

from . import rng
from .hyper import Hyper
from .layout import Layout, mlp_nll_and_grad, neg_log_lik
from .objective import (
    data_rows,
    draw_network,
    draw_step_inputs,
    iid_index,
    kl_terms,
    slab_noise,
    slab_noise_from_uniform,
)
from .state import (
    Batch,
    State,
    init_state,
    mark_failed,
)
from .step import adam_update, spike_slab_step

_RECOMPILE_LIMIT = 64


def chunk_bounds(E: int, chunk: int) -> list:
    """``ceil(E / chunk)`` contiguous model ranges of sizes differing by at most one (so a
    compiled step sees at most two shapes): their boundaries ``[0, ..., E]``."""
    k = -(-E // chunk)
    return [E * i // k for i in range(k + 1)]


class Trainer:
    """Trains E models at once: owns the layout, masks, keys, counters and the state.

    ``compile=True`` runs the step through ``torch.compile`` (a one-time cost of seconds to
    tens of seconds, cached by torch on disk): for the spike-and-slab family with the
    paper's L3, the whole hand-written :func:`spike_slab_step` as one graph, its random
    numbers and minibatch drawn by a second (:func:`draw_step_inputs`; only the normal
    transform between the two runs eagerly: one graph for both, with ATen's erfinv as an
    opaque op, was 10-20% slower, measured interleaved; why was not pinned down); otherwise
    its three pieces (sampling with L2 and L3 and their backward; the network's forward and
    hand-written backward; Adam).  The eager path computes the same numbers up to float
    rounding and is what most tests use.

    ``chunk`` (compiled spike-and-slab step only): models per compiled call; the step runs
    the models in ``ceil(E / chunk)`` consecutive calls (:func:`chunk_bounds`), which
    changes nothing but speed (models are independent; tested).  ``None`` (default): all
    models in one call.  Cache-sized calls can pay on a CPU, but measured here they did not
    reliably: at E = 100 (20-20-20-1, batch 1024, 2 cores), calls of 25 models against one
    call of 100, interleaved in one process, came out 12-14% faster in some processes and
    9-13% slower in others (paired medians over 40 alternations: 1.125 and 0.867; the same
    comparison of one call against itself: 1.03); so the default does not split.
    ``python -m simulate.bench --compare-paths --compile`` times both on a given machine.
    Compiling raises dynamo's per-function recompile limit to 64, process-wide: every
    trainer compiles the same functions, and past the default 8 dynamo would silently run
    later trainers' new shapes eagerly.
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
    ):
        hyper.validate()
        if chunk is not None and int(chunk) < 1:
            raise ValueError(f"chunk must be a positive number of models, got {chunk}")
        self.layout, self.hyper = layout, hyper
        self.device, self.dtype = device, dtype
        n = batch.X.shape[1]
        if batch.X.ndim != 3 or batch.X.shape[2] != layout.p:
            raise ValueError(f"X must be [D, n, {layout.p}], got {tuple(batch.X.shape)}")
        if batch.y.shape[:2] != batch.X.shape[:2]:
            raise ValueError(f"y must be [D, n] matching X, got {tuple(batch.y.shape)}")
        if n < hyper.batch_size:
            raise ValueError(f"batch_size ({hyper.batch_size}) must be <= n ({n})")
        di = torch.as_tensor(batch.data_index, dtype=torch.int64, device=device).reshape(-1)
        if di.numel() != layout.E or (di < 0).any() or (di >= batch.X.shape[0]).any():
            raise ValueError("data_index must give one dataset index in [0, D) per model")
        self.n = n
        # [D*n, p + 1] rows with a last column of ones (the bias input): one index_select
        # gathers every model's minibatch
        X = batch.X.to(device=device, dtype=dtype).reshape(-1, layout.p)
        self.X_aug = torch.cat([X, torch.ones_like(X[:, :1])], dim=1).contiguous()
        ydt = dtype if hyper.likelihood == "gaussian" else torch.int64
        self.y_flat = batch.y.to(device=device, dtype=ydt).reshape(-1)
        self.data_index = di
        self.seeds = torch.as_tensor(seeds, dtype=torch.int64, device=device).reshape(-1)
        if layout.node_scales != (hyper.family == "horseshoe"):
            raise ValueError(
                "the horseshoe family needs Layout(..., node_scales=True), and only it"
            )
        self.mask = layout.mask(device, dtype)
        self.H = self.mask[:, : layout.P_net].sum(-1)
        self.node_index = layout.node_index(device) if layout.node_scales else None
        counter = layout.counters(device)
        self.eps_stream = rng.Stream(rng.seed_key(self.seeds, rng.STREAM_EPS)[:, None], counter)
        self.gumbel_stream = rng.Stream(
            rng.seed_key(self.seeds, rng.STREAM_GUMBEL)[:, None], counter
        )
        key_perm = rng.seed_key(self.seeds, rng.STREAM_PERM)[:, None]
        self.iid_stream = rng.Stream(key_perm, torch.arange(hyper.batch_size, device=device)[None])
        self.perm_stream = rng.Stream(key_perm, torch.arange(n, device=device)[None] + (1 << 40))
        self.steps_per_epoch = n // hyper.batch_size
        self._buffers: dict = {}
        self.state = init_state(layout, hyper, self.seeds, device, dtype)
        self._sample_kl = self._sample_kl_impl
        self._mlp = partial(mlp_nll_and_grad, layout, hyper=hyper)
        self._adam = adam_update
        self.compiled = bool(compile)
        # the spike-and-slab family with the paper's L3 (the default) takes the hand-written
        # step (spike_slab_step); the baselines' families and the exact L3 go through autograd
        self.fused = hyper.family == "spike_slab" and hyper.l3 == "paper"
        self._fused_step = partial(spike_slab_step, layout, hyper, n)
        self._draw_inputs = None  # eager: the streams and minibatch() draw them
        self.chunk = layout.E
        if compile and self.fused:
            if chunk is not None:
                self.chunk = min(int(chunk), layout.E)
            # every Trainer compiles the same functions; dynamo's default of 8 graphs per
            # function would silently send later trainers (other shapes) back to eager
            cfg = torch._dynamo.config
            cfg.recompile_limit = max(cfg.recompile_limit, _RECOMPILE_LIMIT)
            self._fused_step = torch.compile(
                partial(spike_slab_step, layout, hyper, n, functional=True), dynamic=False
            )
            self._draw_inputs = torch.compile(
                partial(draw_step_inputs, n=n, dtype=dtype), dynamic=False
            )
        elif compile:
            self._sample_kl = torch.compile(self._sample_kl_impl, dynamic=False)
            self._mlp = torch.compile(
                partial(mlp_nll_and_grad, layout, hyper=hyper, functional=True), dynamic=False
            )
            self._adam = torch.compile(adam_update, dynamic=False)

    # ----------------------------------------------------------------- sampling
    def draw(self, var, offset, hard_only=False):
        """``theta [E, P]``: one network per model for noise offset ``offset``."""
        return draw_network(
            var,
            self.hyper,
            self.layout,
            self.mask,
            self.eps_stream,
            self.gumbel_stream,
            offset,
            hard_only,
            self.node_index,
        )

    def gather(self, idx: torch.Tensor):
        """Inputs ``[E, m, p + 1]`` (last column ones) and targets ``[E, m]`` for per-model
        indices ``idx [E, m]`` into each model's own dataset."""
        flat = data_rows(self.data_index, idx, self.n)
        E, mb = idx.shape
        key = ("gather", E, mb)
        if key not in self._buffers:  # reused every step (see simulate._alloc)
            self._buffers[key] = (
                self.X_aug.new_empty(E * mb, self.X_aug.shape[1]),
                self.y_flat.new_empty(E * mb),
            )
        xb, yb = self._buffers[key]
        torch.index_select(self.X_aug, 0, flat, out=xb)
        torch.index_select(self.y_flat, 0, flat, out=yb)
        return xb.view(E, mb, -1), yb.view(E, mb)

    def minibatch(self, state: State):
        """This step's minibatch of every model (:meth:`minibatch_index`, gathered)."""
        return self.gather(self.minibatch_index(state))

    def minibatch_index(self, state: State) -> torch.Tensor:
        """This step's minibatch indices ``[E, m]``, each model's into its own dataset, from
        its own stream.

        ``sampling="iid"`` (default): m indices drawn uniformly with replacement, the
        reading of Algorithm 1's "sample a minibatch of size m" that costs one hash per index;
        an epoch is then n/m steps.  ``sampling="permutation"``: each epoch a fresh
        permutation per model (an argsort of n hashed keys), ``floor(n/m)`` full minibatches
        taken in order, the remainder skipped.  At E = 100, n = 10^4 the sort costs about
        3.5 ms a step, a fifth of a whole step (measured on the 2-core machine).
        """
        h = self.hyper
        if h.sampling == "iid":
            return iid_index(self.iid_stream.uniform(state.step, torch.float64), self.n)
        epoch, b = divmod(state.step, self.steps_per_epoch)
        if state.perm is None or epoch != state.epoch:
            keys = self.perm_stream.uniform(epoch, torch.float64)
            state.perm = torch.argsort(keys, dim=1)
            state.epoch = epoch
        return state.perm[:, b * h.batch_size : (b + 1) * h.batch_size]

    def _draw_words(self, state: State) -> tuple:
        """This step's draw words for :func:`draw_step_inputs` (``[K, 2]`` for the K draws,
        ``[2]`` for the iid minibatch) and the permutation indices (None for iid)."""
        K, dev = self.hyper.mc_samples, self.device
        words = [rng.offset_words(state.step * K + k) for k in range(K)]
        return (
            torch.tensor(words, dtype=torch.int32, device=dev),
            torch.tensor(rng.offset_words(state.step), dtype=torch.int32, device=dev),
            None if self.hyper.sampling == "iid" else self.minibatch_index(state),
        )

    # ----------------------------------------------------------------- losses
    def _sample_kl_impl(self, var, offsets):
        """K networks per model ``[K*E, P]`` (draw k at offset ``offsets[k]``), L2 and L3."""
        thetas = torch.cat([self.draw(var, offsets[k]) for k in range(self.hyper.mc_samples)])
        return (thetas, *kl_terms(var, self.hyper, self.layout, self.mask, self.H, self.node_index))

    def _loss_impl(self, var, xb, yb, step_t):
        h, K = self.hyper, self.hyper.mc_samples
        mb = xb.shape[1]  # minibatch size (m of the paper; st.m is Adam's moment)
        thetas = torch.cat([self.draw(var, step_t * K + k) for k in range(K)])
        x = xb[..., :-1]
        out = self.layout.forward(thetas, x.repeat(K, 1, 1) if K > 1 else x)
        nll = neg_log_lik(out, yb.repeat(K, 1) if K > 1 else yb, h).sum(-1)
        L1 = nll.reshape(K, -1).mean(0) * (self.n / mb)
        L2, L3 = kl_terms(var, h, self.layout, self.mask, self.H, self.node_index)
        return L1, L2, L3

    def loss_terms(self, var, xb, yb, step: int):
        """Per-model (L1, L2, L3), each ``[E]``, for one minibatch and step ``step``'s noise:
        the plain-autograd reference for :meth:`step` (tests compare the two)."""
        return self._loss_impl(var, xb, yb, step)

    # ----------------------------------------------------------------- step
    def step(self) -> dict:
        """One Adam step for all models; returns the per-model terms (detached).

        The likelihood's gradient with respect to the sampled networks comes from the
        hand-written backward (:func:`mlp_nll_and_grad`).  For the spike-and-slab family
        with the paper's L3 the rest of the chain rule is hand-written too
        (:func:`spike_slab_step`: one graph, no host synchronisation); otherwise autograd
        carries it, with L2 and L3, back to the variational parameters through the
        sampler.  A model whose loss is not finite is marked failed at this step and frozen
        (its gradient zeroed from then on); its terms stay visible as the non-finite numbers
        they are, and ``state.failed`` / ``state.failed_step`` record it.
        """
        if self.fused:
            return self._step_fused()
        return self._step_autograd()

    def _adam_factors(self, t: int):
        """Adam's bias corrections at step t as tensors (so a compiled step is not
        re-specialised every step): ``lr / (1 - b1^t)`` and ``1 / (1 - b2^t)``."""
        b1, b2 = self.hyper.betas
        dev = self.state.var.device
        return (
            torch.tensor(self.hyper.lr / (1 - b1**t), dtype=self.dtype, device=dev),
            torch.tensor(1 / (1 - b2**t), dtype=self.dtype, device=dev),
        )

    def _step_fused(self) -> dict:
        st, h = self.state, self.hyper
        K, E = h.mc_samples, self.layout.E
        step_size, corr2 = self._adam_factors(st.step + 1)
        held = st.failed | st.frozen  # the step leaves these models' parameters alone
        if self._draw_inputs is None:
            offsets = [st.step * K + k for k in range(K)]
            xb, yb = self.minibatch(st)
            eps = [slab_noise(h, self.eps_stream, o, self.dtype) for o in offsets]
            u = [self.gumbel_stream.uniform(o, self.dtype) for o in offsets]
            eps, u = (eps[0][None], u[0][None]) if K == 1 else (torch.stack(eps), torch.stack(u))
            outs = self._fused_step(
                st.var, st.m, st.v, held, self.mask, self.H, xb, yb, eps, u, step_size, corr2
            )
        else:
            words, iid_words, idx = self._draw_words(st)
            bounds = chunk_bounds(E, self.chunk)
            parts = []
            for a, b in zip(bounds[:-1], bounds[1:], strict=True):
                part = slice(a, b)
                u_slab, u, xb, yb = self._draw_inputs(
                    self.eps_stream.base[part],
                    self.gumbel_stream.base[part],
                    self.iid_stream.base[part],
                    words,
                    iid_words,
                    self.X_aug,
                    self.y_flat,
                    self.data_index[part],
                    None if idx is None else idx[part],
                )
                parts.append(
                    self._fused_step(
                        st.var[:, part],
                        st.m[:, part],
                        st.v[:, part],
                        held[part],
                        self.mask[part],
                        self.H[part],
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
        var, m, v, failed, L1, L2, L3 = outs
        mark_failed(st, failed & ~held, L1, L2, L3)
        st.var, st.m, st.v = var, m, v
        st.step += 1
        return {"L1": L1, "L2": L2, "L3": L3, "total": L1 + L2 + L3}

    def _step_autograd(self) -> dict:
        st, h = self.state, self.hyper
        K, E = h.mc_samples, self.layout.E
        xb, yb = self.minibatch(st)
        var = st.var.detach().requires_grad_(True)
        offsets = [st.step * K + k for k in range(K)]
        if self.compiled:  # tensors, so the compiled graph is not specialised per step
            offsets = torch.tensor(offsets, dtype=torch.int64, device=var.device)
        thetas, L2, L3 = self._sample_kl(var, offsets)
        mb = xb.shape[1]  # minibatch size (m of the paper; st.m is Adam's moment)
        with torch.no_grad():
            nll, dtheta = self._mlp(
                thetas.detach(),
                xb.repeat(K, 1, 1) if K > 1 else xb,
                yb.repeat(K, 1) if K > 1 else yb,
                scale=self.n / (mb * K),
            )
        L1 = nll.reshape(K, E).mean(0) * (self.n / mb)
        total = L1 + L2.detach() + L3.detach()
        newly = ~torch.isfinite(total) & ~st.failed & ~st.frozen
        if bool(newly.any()):
            mark_failed(st, newly, L1, L2.detach(), L3.detach())
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
        b1, b2 = h.betas
        step_size, corr2 = self._adam_factors(st.step + 1)
        with torch.no_grad():
            self._adam(
                st.var,
                st.m,
                st.v,
                grad,
                step_size,
                corr2,
                b1,
                b2,
                h.adam_eps,
                None if everyone else alive,
            )
        st.step += 1
        return {"L1": L1.detach(), "L2": L2.detach(), "L3": L3.detach(), "total": total.detach()}

    def fit(self, steps: int, progress=None, record_every: int = 0):
        """Run ``steps`` steps; ``progress`` a callable(i, steps) or None; every
        ``record_every`` steps the per-model terms go to ``state.history``."""
        for i in range(steps):
            terms = self.step()
            if record_every and (i % record_every == 0 or i == steps - 1):
                self.state.history.append(
                    {"step": self.state.step, **{k: v.tolist() for k, v in terms.items()}}
                )
            if progress is not None:
                progress(i + 1, steps)
        return self.state

    def fit_until(self, rule, progress=None):
        """Train each model until ``rule`` (:class:`simulate.stopping.StopRule`) stops it:
        converged models are frozen (``state.frozen``) while the others go on; the run ends
        when every model has converged or failed, or at ``rule.max_steps``.  Training
        continues from the current state.  Returns the per-model summary of
        :class:`simulate.stopping.Convergence` (``steps``, ``converged``, ``rel_change``,
        ``kl_change``).
        A model stopped inside the batch ends exactly where it would trained alone (models
        are independent and each decision uses only its own objective; tested)."""
        from .stopping import Convergence

        conv = Convergence(rule, self.layout.E, self.state.var.device)
        conv.done |= self.state.failed.cpu() | self.state.frozen.cpu()
        for i in range(rule.max_steps):
            terms = self.step()
            newly = conv.update(terms["total"], self.state.failed, terms["L2"] + terms["L3"])
            if newly is not None:
                if bool(newly.any()):
                    self.state.frozen = self.state.frozen | newly.to(self.state.frozen.device)
                if bool(conv.done.all()):
                    break
            if progress is not None:
                progress(i + 1, rule.max_steps)
        return conv.summary()
