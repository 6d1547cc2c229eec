"""The trainer: E models, their sampler, state and step, a plain loop over them, with the
stopping rule and failures (see ``simulate.core`` for the design).

One training step is ``inputs = sampler.draw(t, held)`` (``simulate.core.sampler.Sampler``)
then ``state, info = step(state, inputs)`` (``simulate.core.training_step.build_step``): the
loop owns what is not the step's business -- which models the stopping rule holds
(``Trainer.frozen``) and the loss history (``Trainer.history``).  A step that runs several
steps per call (``step_fn.multi``: the whole step in C) is handed every step up to the next
point where the loop reads the state (``Trainer.advance_steps``): the same numbers."""

from __future__ import annotations

import torch

from simulate.core.hyper import Hyper
from simulate.core.layout import Layout
from simulate.core.noise import LearnedNoise
from simulate.core.objective import ELBOTerms, ModelSpec, draw_network, family_of, reference_terms
from simulate.core.optim import lower_lr, scale_rows, with_lr_scale
from simulate.core.options import DEFAULT_OPTIONS, StepOptions
from simulate.core.posterior import Posterior
from simulate.core.sampler import Sampler
from simulate.core.state import Batch, init_state
from simulate.core.step import Consts
from simulate.core.stopping import StopEvents, StopState, skip, update
from simulate.core.training_step import Info, build_step
from simulate.core.until import Resume, as_list, call_size, held_until_joined, race_stops

__all__ = ["Trainer"]

# A step that runs several steps per call (the whole step in C) takes at most this many per
# call: a stopping window (500 by default) in one call, and progress and Ctrl-C at least
# every ~0.05-2 s on the rate tiers' programs.
STEPS_PER_CALL = 500
# ... and with permutation sampling at most as many as keep the call's minibatches (gathered
# by the sampler for the whole call, ``[S, E, m, p + 1]`` floats and ``[S, E, m]``) within this.
MINIBATCH_BYTES = 64 << 20


class Trainer(LearnedNoise):
    """Trains E models at once: owns the layout, masks, sampler, step and state.

    How the step runs is ``options`` (:class:`simulate.core.options.StepOptions`, made and
    validated by the caller, passed whole).  The step path (``simulate.core.training_step``) is
    chosen once here: the hand-written step (eager, or with ``options.compile`` through
    ``torch.compile``: a one-time cost of seconds, cached by torch on disk), or autograd
    through the sampler for the exact L3 (and with ``options.autograd`` for any family: the
    hand-written kernels' check).  They compute the same numbers up to float rounding; the
    eager paths are what most tests use.  ``options.chunk`` (compiled hand-written step
    only): models per compiled call (``simulate.core.training_step.chunk_bounds``); it changes
    nothing but speed, and by default all models go in one call (``BENCHMARKS.md`` has the
    measurements behind that default).  ``init_from``: variational parameters ``[3, E, P]``
    to start from instead of the seeded random start
    (``simulate.references.constructive.encode``); the optimiser's moments start at zero
    either way, and the random streams are the seeds' as usual.  ``options.mlp``: how the
    hand-written step computes the network's pass -- ``"batched"`` (one product per layer
    over all models, the default) or ``"native"`` (fused per model in C,
    ``simulate.core.native``: the Gaussian likelihood on the CPU in float32; the same
    numbers to float rounding, faster at batch 1024: BENCHMARKS.md).  The checks that need
    the options and the hyperparameters together are made here before anything is built
    (learned noise, the fused pass's platform) and in ``build_step`` (the fused pass's step
    path).

    ``options.learn_noise`` (Gaussian likelihood only): each model's noise sd is learned with it, a
    point estimate maximising the ELBO, by variational EM: the step treats the current sd
    as known (``Consts.noise_sd``, starting at ``hyper.sigma``), and
    :meth:`update_noise` sets each model's sd to the ELBO's exact maximiser given its
    current variational posterior, ``sigma^2 = E_q[sum_i (y_i - f(x_i))^2] / n`` (the
    ELBO's sigma-dependent part is ``-(n/2) log sigma^2 - E_q[RSS] / (2 sigma^2)``), with
    ``E_q[RSS]`` estimated free of charge from the steps' own minibatch likelihood terms
    since the last update (unbiased: each step's L1 is an unbiased estimate of the
    expected negative log-likelihood).  Alternating gradient steps on q with this exact
    step on sigma is an ascent of the joint ELBO; at a fixed point, sigma maximises the ELBO
    given q.  :meth:`fit` updates every ``options.noise_every`` steps, :meth:`fit_until` at
    every window end; the sd never falls below ``options.noise_floor`` (an interpolating fit
    would drive it to zero).  Held models' sds stay where they are, and so do all of them
    after :meth:`pause_noise` until :meth:`resume_noise` (a warm-up at the start value).

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
        *,
        options: StepOptions = DEFAULT_OPTIONS,
        device=None,
        dtype=torch.float32,
        init_from: torch.Tensor | None = None,
    ):
        if options.learn_noise and hyper.likelihood != "gaussian":
            raise ValueError("learn_noise is for the Gaussian likelihood (regression)")
        if layout.node_scales != family_of(hyper).node_scales:
            raise ValueError(
                "the horseshoe family needs Layout(..., node_scales=True), and only it"
            )
        options.path.check_platform(layout, hyper, torch.device(device or "cpu"), dtype)
        self.layout, self.hyper, self.options = layout, hyper, options
        self.device, self.dtype = device, dtype
        self.seeds = torch.as_tensor(seeds, dtype=torch.int64, device=device).reshape(-1)
        # the whole step in C draws its noise itself
        self.sampler = Sampler(layout, hyper, self.seeds, batch, device, dtype, options.compile,
                               noise_in_step=options.path.whole_step)  # fmt: skip
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
        self.convergence = None  # the last fit_until's bookkeeping, current (StopState)
        self.plateau_states = []  # the last fit_until's Resumes at first plateaus (shadowed)
        self.noise_sd = None
        if options.learn_noise:
            self.noise_sd = torch.full((layout.E,), float(hyper.sigma), device=device, dtype=dtype)
            self.noise_every, self.noise_floor = options.noise_every, options.noise_floor
            self.noise_updates = True  # False: the sds stay where they are (pause_noise)
            self._rss_sum = torch.zeros(layout.E, dtype=torch.float64, device=device)
            self._rss_steps = 0
        widths = torch.as_tensor(layout.widths, dtype=torch.int64, device=device)
        consts = Consts(self.mask, self.H, self.node_index, self.noise_sd, widths)
        self.step_fn = build_step(layout, hyper, self.n, consts, options)

    def capped_models(self) -> torch.Tensor:
        """The models (int64 ``[k]``) that the last :meth:`fit_until`, run with a ``shadow``
        rule, took to its cap with no plateau and no failure, the cap at a window's end:
        those whose state now is the state of a run under the shadow rule at this step
        (:meth:`resume_from`).  Empty where the run had no shadow rule."""
        conv = self.convergence
        if conv is None or conv.shadow is None or conv.count != 0:
            return torch.zeros(0, dtype=torch.int64)
        ok = ~conv.done & (conv.decays == 0) & ~self.state.health.failed.cpu()
        return torch.nonzero(ok).reshape(-1)

    def resume_from(self, models: torch.Tensor, plateau: bool = False) -> Resume:
        """:class:`Resume` of ``models`` (from :meth:`capped_models`) at this step count:
        copies of their parameters, moments and bookkeeping, in this trainer's layout
        (``plateau``: at the window end of their first plateau, before its decay)."""
        idx = torch.as_tensor(models, dtype=torch.int64)
        st = self.state
        take = [t.index_select(1, idx.to(st.params.device)).detach().cpu().clone()
                for t in (st.params, st.opt.exp_avg, st.opt.exp_avg_sq)]  # fmt: skip
        entries = self.convergence.entries(idx, plateau=plateau)
        return Resume(int(self.state.count), idx, *take, entries)

    def _keep_first_plateaus(self, st: StopState, ev: StopEvents) -> None:
        """At a window end of a run with a shadow rule: the state of the models whose first
        plateau this is (before its learning-rate decay), where the shadow rule has not
        plateaued here -- up to here a run under the shadow rule is the same run (its
        quiet windows are these', and its count is below patience), so it continues from
        this state (``plateau_states``, :class:`Resume`)."""
        first = (ev.decayed & (st.decays == 1)) | (ev.newly & ~st.retired & (st.decays == 0))
        first &= st.below_shadow < st.shadow.patience
        first &= ~self.state.health.failed.cpu()
        if bool(first.any()):
            self.plateau_states.append(self.resume_from(torch.nonzero(first).reshape(-1), True))

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
        return Posterior(
            self.layout,
            self.hyper,
            self.state.params if params is None else params,
            self.seeds,
            noise_sd=None if self.noise_sd is None else self.noise_sd.clone(),
        )

    def release_stopped(self) -> None:
        """Train again every model the stopping rule stopped (:attr:`frozen`), from where it
        stopped; failed models stay held (``state.health``)."""
        self.frozen.zero_()

    @property
    def lr_scale(self) -> torch.Tensor | None:
        """The models' learning-rate multipliers ``[E, 3]`` (the optimiser's state's,
        ``OptState.lr_scale``), or None."""
        return self.state.opt.lr_scale

    def _enable_lr_scale(self) -> None:
        """Give every model a learning-rate multiplier per parameter row (``OptState.
        lr_scale [E, 3]``, ones at first), which the optimiser makes the step size with; a
        no-op where it exists."""
        opt = with_lr_scale(self.state.opt, self.layout.E, self.dtype, self.device)
        self.state = self.state._replace(opt=opt)

    def hold_locations(self) -> None:
        """Train only the slab scales and inclusion probabilities from here on: the
        locations' learning rate is 0 (the constructive arm whose posterior is fitted
        around a fixed network, ``simulate.sweep.train.groups``).  Their moments still accumulate;
        nothing else changes."""
        self._enable_lr_scale()
        rows = torch.tensor([0.0, 1.0, 1.0], device=self.device, dtype=self.dtype)
        self.state = self.state._replace(opt=scale_rows(self.state.opt, rows))

    # ----------------------------------------------------------------- sampling
    def draw(self, params, offset, hard_only=False):
        """``theta [E, P]``: one network per model for noise offset ``offset``."""
        sm = self.sampler
        model = ModelSpec(self.hyper, self.layout, self.mask, node_index=self.node_index)
        return draw_network(params, model, sm.eps_stream, sm.gumbel_stream, offset, hard_only)

    def minibatch(self, t: int | None = None):
        """Step ``t``'s minibatch of every model (default: the next step's)."""
        return self.sampler.minibatch(self.state.count if t is None else t)

    # ----------------------------------------------------------------- losses
    def loss_terms(self, params, xb, yb, step: int) -> ELBOTerms:
        """Per-model (L1, L2, L3), each ``[E]``, for one minibatch and step ``step``'s noise,
        in plain autograd: :func:`simulate.core.objective.reference_terms`, the reference
        every step path is tested against."""
        sm, K = self.sampler, self.hyper.mc_samples
        offsets = [step * K + k for k in range(K)]
        noise = torch.stack([sm.family.noise(self.hyper, sm.eps_stream.uniform(o, params.dtype))
                             for o in offsets])  # fmt: skip
        gumbel = None
        if sm.family.indicators:
            gumbel = torch.stack([sm.gumbel_stream.uniform(o, params.dtype) for o in offsets])
        model = ModelSpec(self.hyper, self.layout, self.mask, self.H, self.node_index)
        return reference_terms(params, model, xb, yb, noise, gumbel, self.n, self.noise_sd)

    # ----------------------------------------------------------------- step
    def step(self) -> ELBOTerms:
        """One optimiser step for all models not held: the sampler's inputs for the next
        step, then the step function.  A model whose loss is not finite is marked failed at
        this step and held from then on (its terms stay visible as the non-finite numbers
        they are; ``state.health`` records it); a model the stopping rule stopped
        (``frozen``) is held too.  Returns the per-model terms (detached)."""
        return self.advance().terms

    def advance(self) -> Info:
        """:meth:`step`, returning the step's whole :class:`~simulate.core.training_step.Info`."""
        held = self.state.health.failed | self.frozen
        inputs = self.sampler.draw(self.state.count, held)
        self.state, info = self.step_fn(self.state, inputs)
        if self._learning_noise():  # a warm-up's steps do not count towards the first update
            self._collect_rss(info.terms.L1)
        return info

    def advance_steps(self, S: int, skip_held: bool = False) -> Info:
        """``S`` steps in one call, for a step that runs several (``step_fn.multi``: the
        whole step in C): the same numbers as ``S`` calls of :meth:`advance` bit for bit
        (tested), the models held as :meth:`advance` holds them at the first (a model that
        fails is held from its next step on); the :class:`Info`'s tensors are ``[S, E]``.
        Nothing may need the state between the S steps (a noise update, a stop).
        ``skip_held``: the held models' terms are not computed (NaN; their state is the
        same: ``NativeStep.many``), for a caller that reads none of them."""
        if not self.step_fn.multi:
            raise ValueError(
                "this trainer's step runs one step per call (mlp='native-step' runs several)"
            )
        held = self.state.health.failed | self.frozen
        inputs = self.sampler.draw_steps(self.state.count, S, held)
        self.state, info = self.step_fn.many(self.state, inputs, S, skip_held)
        if self._learning_noise():
            self._collect_rss(info.terms.L1)
        return info

    def steps_per_call(self) -> int:
        """The most steps one call of a step that runs several takes (1 for the others):
        :data:`STEPS_PER_CALL`, so that progress is reported and Ctrl-C is heard at least
        that often, and for permutation sampling (whose minibatches ``[S, E, m, p + 1]`` the
        sampler gathers for the whole call) no more than keep them within
        :data:`MINIBATCH_BYTES`."""
        if not self.step_fn.multi:
            return 1
        if self.hyper.sampling == "iid":  # drawn and gathered in C, step by step
            return STEPS_PER_CALL
        per_step = self.layout.E * self.hyper.batch_size * (self.layout.p + 2) * 4
        return max(1, min(STEPS_PER_CALL, MINIBATCH_BYTES // per_step))

    def _run(self, i: int, steps: int, record_every: int) -> int:
        """How many of :meth:`fit`'s steps to run in one call from its step ``i`` of
        ``steps``: 1, or for a step that runs several, up to the next noise update or
        recorded step (and at most :meth:`steps_per_call`)."""
        S = min(steps - i, self.steps_per_call())
        if not self.step_fn.multi:
            return 1
        if self._learning_noise():
            S = min(S, self.noise_every - i % self.noise_every)
        if record_every:
            record = min(-(-i // record_every) * record_every, steps - 1)
            S = min(S, record - i + 1)
        return S

    def fit(self, steps: int, progress=None, record_every: int = 0):
        """Run ``steps`` steps; ``progress`` a callable(i, steps) or None; every
        ``record_every`` steps the per-model terms go to :attr:`history` (with each model's
        ``noise_sd`` where it is learned, updated every ``noise_every`` steps).  A step that
        runs several per call (``step_fn.multi``) runs the steps between those events in
        one call (:meth:`advance_steps`: the same numbers), ``progress`` called after
        each."""
        i = 0
        while i < steps:
            S = self._run(i, steps, record_every)
            if not self.step_fn.multi:
                terms = self.step()
            else:
                terms = ELBOTerms(*(t[-1] for t in self.advance_steps(S).terms))
            i += S
            if self._learning_noise() and i % self.noise_every == 0:
                self.update_noise()
            if record_every and ((i - 1) % record_every == 0 or i == steps):
                per_term = {k: v.tolist() for k, v in terms.as_dict().items()}
                if self.noise_sd is not None:
                    per_term["noise_sd"] = self.noise_sd.tolist()
                self.history.append({"step": self.state.count, **per_term})
            if progress is not None:
                progress(i, steps)
        return self.state

    def fit_until(self, rule, progress=None, risk=None, race=None, shadow=None,
                  resume: Resume | None = None):  # fmt: skip
        """Train each model until ``rule`` (:class:`simulate.core.stopping.StopRule`) stops it:
        converged models are frozen (:attr:`frozen`) while the others go on; the run ends
        when every model has converged or failed, or at ``rule.max_steps``.  Training
        continues from the current state.  Returns the per-model summary of
        :class:`simulate.core.stopping.StopState` (``steps``, ``converged``, ``rel_change``,
        ``kl_change``, ``risk_change``).  ``risk``: with a rule that watches the held-out
        risk, a function of the current variational parameters returning each model's risk
        ``[E]`` (called at window ends only).
        A model stopped inside the batch ends exactly where it would trained alone (models
        are independent and each decision uses only its own objective; tested).

        Each call of the step runs up to the next point where the loop reads the state
        (:func:`simulate.core.until.call_size`); at a window end the rule decides.

        With learned noise, each window end first updates every running model's noise sd
        (:meth:`update_noise`), so the rule judges the joint convergence of q and sigma.

        With ``rule.lr_decays`` (``StopRule``), a model's plateau first multiplies its
        learning rate by ``rule.lr_factor`` (:attr:`lr_scale`, kept across calls) and
        only a plateau after its last decay stops it.

        ``race`` (default None): a callable ``race(objective, running) -> bool [E]`` asked
        at every window end with each model's last window mean of the objective
        (``StopState.window_means``, float64 ``[E]``, NaN before its first window and for
        a failed model) and the models still training; the models it returns stop there
        (``stopping.retire``: neither converged nor capped; ``retired`` in the summary).
        The estimators' race of widths (``simulate.estimators.Halving``) reads the objective.

        ``shadow`` (a stricter :class:`~simulate.core.stopping.StopRule`, optional): kept
        beside ``rule`` by the run's bookkeeping (``StopState``'s ``shadow``), which
        stays on as :attr:`convergence` after the run, so that models that reach the cap
        with no plateau can be continued under the shadow rule (:class:`Resume`), and the
        others from their first plateau (:attr:`plateau_states`, kept during the run).
        ``resume`` (:class:`Resume`, or several, optional): models held until the run's step
        count reaches ``resume.at`` and then continued from the state they had there in a run
        under a rule whose shadow is ``rule`` -- their trajectories are then those of this
        run from the start (``simulate.sweep.train.budget``; tested).  When every other model has
        stopped before that step, the count jumps to it (the stopped models' moments then
        skip the decay they would have had meanwhile; nothing reads them)."""
        if rule.lr_decays:
            self._enable_lr_scale()
        joins = sorted(as_list(resume), key=lambda r: r.at)  # each held until its step
        count0 = int(self.state.count)
        if joins:
            learned, warmup = self.noise_sd is not None, self.hyper.kl_warmup
            self.frozen = held_until_joined(joins, self.state, self.frozen, rule, learned, warmup)
        held = self.state.health.failed | self.frozen
        warm = max(0, int(self.hyper.kl_warmup) - count0)
        # the bookkeeping, a value (simulate.core.stopping): each change replaces it here
        self.convergence = StopState.start(rule, self.layout.E, self.state.params.device, held,
                                           not_before=warm, shadow=shadow)  # fmt: skip
        self.plateau_states = []  # with a shadow rule: Resumes at the models' first plateaus
        window_risk = None if risk is None else (lambda: risk(self.state.params))
        cap, i = self.steps_per_call(), 0
        while i < rule.max_steps:
            if joins:
                i = self._join_due(joins, count0 + i) - count0
            S = call_size(self.convergence, rule, i, cap, joins[0].at - count0 if joins else None)
            ev = self._window_call(S, i + S >= rule.max_steps, window_risk)
            i += S
            if ev is not None and self._window_end(ev, race, shadow, joins):
                break
            if progress is not None:
                progress(i, rule.max_steps)
        return self.convergence.summary()

    def _join_due(self, joins: list, step: int) -> int:
        """The models whose ``Resume.at`` is ``step`` join (the count jumping to it where
        nothing runs until then); returns the step."""
        if bool(self.convergence.done.all()):  # nothing runs until the next join: jump there
            delta = joins[0].at - step
            self.state = self.state._replace(count=self.state.count + delta)
            self.convergence = skip(self.convergence, delta)
            step += delta
        while joins and step == joins[0].at:
            self.frozen, self.convergence = joins.pop(0).join(self.state, self.frozen,
                                                              self.convergence)  # fmt: skip
        return step

    def _window_call(self, S: int, last: bool, window_risk) -> StopEvents | None:
        """``S`` steps (one call; ``last``: the run's last), the noise update at a window
        end and the bookkeeping's update: what a window end decided (else None)."""
        # nothing reads the held models' terms here, so a step that can skips them (NaN) --
        # but for a last call short of a window end with learned noise (its sums outlive it)
        if self.step_fn.multi:
            last_short = last and not self.convergence.at_window_end(S)
            info = self.advance_steps(S, skip_held=not (self._learning_noise() and last_short))
        else:
            info = self.advance()
        if self._learning_noise() and self.convergence.at_window_end(S):
            self.update_noise()
        self.convergence, ev = update(self.convergence, info, window_risk)
        return ev

    def _window_end(self, ev: StopEvents, race, shadow, joins) -> bool:
        """At a window end that decided ``ev``: the race, the first plateaus (shadow), the
        decays and the stops; whether the run is over."""
        if race is not None:
            self.convergence, ev = race_stops(race, self.convergence, ev)
        if shadow is not None:
            self._keep_first_plateaus(self.convergence, ev)
        if bool(ev.decayed.any()):  # the learning rates of the models that plateaued
            opt = lower_lr(self.state.opt, ev.decayed, self.convergence.rule.lr_factor)
            self.state = self.state._replace(opt=opt)
        if bool(ev.newly.any()):
            self.frozen = self.frozen | ev.newly.to(self.frozen.device)
        return bool(self.convergence.done.all()) and not joins
