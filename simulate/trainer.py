"""The trainer: E models, their streams and state, one step function chosen at
construction (eager, hand-written or compiled), stopping and failures (see
``simulate.core`` for the design)."""

from __future__ import annotations

import torch

from . import rng
from .hyper import Hyper
from .layout import Layout, neg_log_lik
from .likelihoods import likelihood_of
from .objective import ELBOTerms, data_rows, draw_network, family_of, iid_index, kl_terms
from .paths import CompiledHandWrittenStep, HandWrittenStep, choose_path, chunk_bounds
from .state import Batch, State, init_state

__all__ = ["Trainer", "chunk_bounds"]


class Trainer:
    """Trains E models at once: owns the layout, masks, keys, counters and the state.

    The step itself is one of three *step paths* (``simulate.paths``), chosen once here:
    the hand-written spike-and-slab step (eager, or with ``compile=True`` through
    ``torch.compile``: a one-time cost of seconds, cached by torch on disk), or autograd
    through the sampler for the baselines' families and the exact L3.  They compute the
    same numbers up to float rounding; the eager paths are what most tests use.
    ``chunk`` (compiled hand-written step only): models per compiled call
    (``simulate.paths.chunk_bounds``); it changes nothing but speed, and by default all
    models go in one call (``BENCHMARKS.md`` has the measurements behind that default).
    ``init_from``: variational parameters ``[3, E, P]`` to start from instead of the
    seeded random start (``simulate.constructive.encode``); the optimiser's moments start
    at zero either way, and the random streams are the seeds' as usual.
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
        ydt = likelihood_of(hyper).target_dtype(dtype)
        self.y_flat = batch.y.to(device=device, dtype=ydt).reshape(-1)
        self.data_index = di
        self.seeds = torch.as_tensor(seeds, dtype=torch.int64, device=device).reshape(-1)
        if layout.node_scales != family_of(hyper).node_scales:
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
        if init_from is not None:
            start = torch.as_tensor(init_from)
            if tuple(start.shape) != tuple(self.state.var.shape):
                raise ValueError(
                    f"init_from must be [3, E, P] = {tuple(self.state.var.shape)}, "
                    f"got {tuple(start.shape)}"
                )
            if not bool(torch.isfinite(start).all()):
                raise ValueError("init_from holds non-finite values")
            self.state.var = start.to(device=device, dtype=dtype).clone()
        self.path = choose_path(self, compile=bool(compile), chunk=chunk)

    @property
    def fused(self) -> bool:
        """Whether the step is the hand-written spike-and-slab step (eager or compiled)."""
        return isinstance(self.path, (HandWrittenStep, CompiledHandWrittenStep))

    @property
    def compiled(self) -> bool:
        """Whether the step path runs through ``torch.compile``."""
        return self.path.compiled

    @property
    def chunk(self) -> int:
        """Models per step call (all of them but for a chunked compiled step)."""
        return getattr(self.path, "chunk", self.layout.E)

    def posterior(self, var: torch.Tensor | None = None):
        """The models' variational posteriors (:class:`simulate.posterior.Posterior`) at the
        current parameters, or at ``var`` (e.g. a stopping rule's look at them mid-run)."""
        from .posterior import Posterior  # posterior builds on the core: imported on use

        return Posterior(
            self.layout, self.hyper, self.state.var if var is None else var, self.seeds
        )

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
        taken in order, the remainder skipped; the sort costs a fifth of a step at
        E = 100, n = 10^4 (BENCHMARKS.md).
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

    # ----------------------------------------------------------------- losses
    def loss_terms(self, var, xb, yb, step: int) -> ELBOTerms:
        """Per-model (L1, L2, L3), each ``[E]``, for one minibatch and step ``step``'s noise,
        in plain autograd: the reference every step path is tested against."""
        h, K = self.hyper, self.hyper.mc_samples
        mb = xb.shape[1]  # minibatch size (m of the paper; state.m is Adam's moment)
        thetas = torch.cat([self.draw(var, step * K + k) for k in range(K)])
        x = xb[..., :-1]
        out = self.layout.forward(thetas, x.repeat(K, 1, 1) if K > 1 else x)
        nll = neg_log_lik(out, yb.repeat(K, 1) if K > 1 else yb, h).sum(-1)
        L1 = nll.reshape(K, -1).mean(0) * (self.n / mb)
        return ELBOTerms(L1, *kl_terms(var, h, self.layout, self.mask, self.H, self.node_index))

    # ----------------------------------------------------------------- step
    def step(self) -> ELBOTerms:
        """One Adam step for all models through the chosen step path; returns the per-model
        terms (detached).  A model whose loss is not finite is marked failed at this step
        and frozen (its gradient zeroed from then on); its terms stay visible as the
        non-finite numbers they are, and ``state.failed`` / ``state.failed_step`` record it.
        """
        return self.path(self)

    def fit(self, steps: int, progress=None, record_every: int = 0):
        """Run ``steps`` steps; ``progress`` a callable(i, steps) or None; every
        ``record_every`` steps the per-model terms go to ``state.history``."""
        for i in range(steps):
            terms = self.step()
            if record_every and (i % record_every == 0 or i == steps - 1):
                self.state.history.append(
                    {"step": self.state.step, **{k: v.tolist() for k, v in terms.as_dict().items()}}
                )
            if progress is not None:
                progress(i + 1, steps)
        return self.state

    def fit_until(self, rule, progress=None, risk=None):
        """Train each model until ``rule`` (:class:`simulate.stopping.StopRule`) stops it:
        converged models are frozen (``state.frozen``) while the others go on; the run ends
        when every model has converged or failed, or at ``rule.max_steps``.  Training
        continues from the current state.  Returns the per-model summary of
        :class:`simulate.stopping.Convergence` (``steps``, ``converged``, ``rel_change``,
        ``kl_change``, ``risk_change``).  ``risk``: with a rule that watches the held-out
        risk, a function of the current variational parameters returning each model's risk
        ``[E]`` (called at window ends only).
        A model stopped inside the batch ends exactly where it would trained alone (models
        are independent and each decision uses only its own objective; tested)."""
        from .stopping import Convergence

        conv = Convergence(rule, self.layout.E, self.state.var.device)
        conv.done |= self.state.failed.cpu() | self.state.frozen.cpu()
        window_risk = None if risk is None else (lambda: risk(self.state.var))  # at call
        for i in range(rule.max_steps):
            terms = self.step()
            newly = conv.update(terms.total, self.state.failed, terms.kl, window_risk)
            if newly is not None:
                if bool(newly.any()):
                    self.state.frozen = self.state.frozen | newly.to(self.state.frozen.device)
                if bool(conv.done.all()):
                    break
            if progress is not None:
                progress(i + 1, rule.max_steps)
        return conv.summary()
