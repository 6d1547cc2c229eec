"""The run of :meth:`simulate.core.trainer.Trainer.fit_until`: its loop (:class:`_Run`:
the joins, each call's steps, and at each window end the race, the first plateaus kept under
a shadow rule, the learning-rate decays, the stops and the compaction), the models that
join a run late (:class:`Resume`), when stopped models leave the running program
(:class:`Compaction`) and that program (:class:`_Program`)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from simulate.core.objective import ELBOTerms
from simulate.core.paths import Info
from simulate.core.state import put_models, take_models
from simulate.core.stopping import Convergence

if TYPE_CHECKING:
    from simulate.core.trainer import Trainer

__all__ = ["Compaction", "Resume"]


class _Run:
    """One :meth:`~simulate.core.trainer.Trainer.fit_until` run of ``tr`` under ``rule``
    (its arguments as there; ``joins`` the :class:`Resume` s, sorted by their step): the
    run's bookkeeping (``conv``, also ``tr.convergence``), the program being stepped and the
    step count ``i`` since the run began."""

    def __init__(self, tr: Trainer, rule, risk, compact, race, shadow, joins: list):
        self.tr, self.rule, self.compact, self.race, self.shadow = tr, rule, compact, race, shadow
        E = tr.layout.E
        self.count0 = count0 = int(tr.state.count)
        self.joins = joins
        if joins:
            seen = torch.cat([r.models for r in joins])
            if seen.unique().numel() != seen.numel():
                raise ValueError("a model joins a run once")
            tr.frozen = tr.frozen.clone()
            for r in joins:
                r.check(tr, rule, count0)
                tr.frozen[r.models.to(tr.frozen.device)] = True  # held until it joins
        held = tr.state.health.failed | tr.frozen
        warm = max(0, int(tr.hyper.kl_warmup) - count0)
        conv = Convergence(rule, E, tr.state.params.device, held, not_before=warm,
                           shadow=shadow)  # fmt: skip
        self.conv = tr.convergence = conv
        tr.plateau_states = []  # with a shadow rule: Resumes at the models' first plateaus
        self.program = _Program(tr)

        def window_risk():  # at the program's current parameters
            return risk(self.program.synced(tr).params)

        self.window_risk = None if risk is None else window_risk
        self.t_window = time.perf_counter()
        self.multi = tr.step_fn.multi  # whole windows per call (never compacted: not compiled)
        self.cap = tr.steps_per_call()
        self.i = 0

    def loop(self, progress):
        """Step until every model has stopped or the cap; the run's summary."""
        rule, conv = self.rule, self.conv
        while self.i < rule.max_steps:
            if self.joins:
                self._join_due()
            newly = self._advance(self._call_size())
            if newly is not None and self._window_end(newly):
                break
            if progress is not None:
                progress(self.i, rule.max_steps)
        self.program.synced(self.tr)
        return conv.summary()

    def _join_due(self) -> None:
        """The models whose join step this is join; where nothing runs until the next
        join, the count jumps straight to its step."""
        tr, conv, joins, count0 = self.tr, self.conv, self.joins, self.count0
        if bool(conv.done.all()):  # nothing runs until the next models join:
            delta = joins[0].at - count0 - self.i  # go straight to that step
            tr.state = tr.state._replace(count=tr.state.count + delta)
            conv.skip(delta)
            self.i += delta
        while joins and self.i == joins[0].at - count0:
            joins.pop(0).join(tr, conv)

    def _call_size(self) -> int:
        """The steps of the next call: up to the window's end, the cap, the call's limit
        and the next join."""
        S = min(self.conv.steps_to_window_end(), self.rule.max_steps - self.i, self.cap)
        if self.joins:
            S = min(S, self.joins[0].at - self.count0 - self.i)
        return S

    def _advance(self, S: int):
        """``S`` steps (one call), the noise update at a window end and the bookkeeping's
        update: the models newly stopped at a window end (else None)."""
        tr, conv = self.tr, self.conv
        # the held models' terms are read by nothing here (Convergence reads only the
        # running models'; the noise update at a window end leaves the held models out
        # and clears every sum), so a step that can leaves them out (NaN) -- but for the
        # run's last call short of a window end with learned noise, whose sums outlive
        # the run
        last_short = self.i + S >= self.rule.max_steps and not conv.at_window_end(S)
        skip = self.multi and not (tr._learning_noise() and last_short)
        info = tr.advance_steps(S, skip_held=skip) if self.multi else self.program.advance(tr)
        self.i += S
        if tr._learning_noise() and conv.at_window_end(S):
            tr.update_noise()
        return conv.update(info, self.window_risk)

    def _window_end(self, newly: torch.Tensor) -> bool:
        """At a window end with ``newly`` stopped: the race, the first plateaus (shadow),
        the decays, the stops and the compaction; whether the run is over."""
        tr, conv = self.tr, self.conv
        if self.race is not None:
            newly = self._race(newly)
        if self.shadow is not None:
            tr._keep_first_plateaus(conv, newly)
        if bool(conv.decayed.any()):
            self._decay()
        if bool(newly.any()):
            tr.frozen = tr.frozen | newly.to(tr.frozen.device)
        if bool(conv.done.all()) and not self.joins:
            return True
        self._maybe_compact()
        return False

    def _race(self, newly: torch.Tensor) -> torch.Tensor:
        """The models the race stops here retired; ``newly`` with them."""
        conv = self.conv
        lost = torch.as_tensor(self.race(conv.window_means(), ~conv.done), dtype=torch.bool)
        lost = lost & ~conv.done
        if bool(lost.any()):
            conv.retire(lost)
            newly = newly | lost
        return newly

    def _decay(self) -> None:
        """The learning rates of the models that plateaued and decay, lowered."""
        tr = self.tr
        scale = tr.state.lr_scale
        lower = self.conv.decayed.to(scale.device)[:, None]
        lowered = torch.where(lower, scale * self.rule.lr_factor, scale)
        tr.state = tr.state._replace(lr_scale=lowered)  # a new tensor: the state is replaced

    def _maybe_compact(self) -> None:
        """Drop the stopped models from the running program where :class:`Compaction`
        says it pays (the window's measured time per step)."""
        tr, rule = self.tr, self.rule
        now = time.perf_counter()
        step_s, self.t_window = (now - self.t_window) / rule.window, now
        active = (~self.conv.done).to(tr.frozen.device)
        if self.compact.pays(self.program.E, int(active.sum()), step_s, rule.max_steps - self.i,
                             tr.compiled and tr.hand_written):  # fmt: skip
            self.program.synced(tr)
            self.program = _Program(tr, torch.nonzero(active).reshape(-1))
            self.t_window = time.perf_counter()  # the new program's time, compile included


def _as_list(resume) -> list:
    """``fit_until``'s ``resume``: None, one :class:`Resume` or several."""
    if resume is None:
        return []
    return [resume] if isinstance(resume, Resume) else list(resume)


@dataclass(frozen=True)
class Resume:
    """Models that join a :meth:`Trainer.fit_until` run when its step count reaches ``at``,
    from the state they had at that count in an earlier run under a rule whose shadow is
    this run's rule: ``models`` (int64 ``[k]``, positions in this trainer), their
    ``params`` and the optimiser's ``exp_avg`` / ``exp_avg_sq`` (each ``[3, k, P]``, this
    trainer's layout) and their bookkeeping ``entries`` (``Convergence.entries``).  That
    is all a step reads of a model (the noise streams and the minibatches are functions of
    the step count; the learning-rate scale is 1, no plateau having lowered it), so from
    there they step exactly as in a run from the start."""

    at: int
    models: torch.Tensor
    params: torch.Tensor
    exp_avg: torch.Tensor
    exp_avg_sq: torch.Tensor
    entries: dict

    def check(self, tr: Trainer, rule, count0: int) -> None:
        """Raise ``ValueError`` where the join cannot give those trajectories."""
        k, P = int(self.models.numel()), tr.layout.P
        for name in ("params", "exp_avg", "exp_avg_sq"):
            if tuple(getattr(self, name).shape) != (3, k, P):
                raise ValueError(f"Resume.{name} must be [3, {k}, {P}]")
        if not count0 < self.at < count0 + rule.max_steps:
            raise ValueError(f"Resume.at {self.at} is not inside the run's steps")
        if (self.at - count0) % rule.window:
            raise ValueError("models join at a window's end of the run")
        if tr.noise_sd is not None or tr.hyper.kl_warmup > count0:
            raise ValueError("no join with learned noise or a KL warm-up")
        idx = self.models.to(tr.state.params.device)
        if tr.lr_scale is not None and bool((tr.lr_scale[idx] != 1).any()):
            raise ValueError("a joining model has a lowered learning rate")
        if bool(tr.state.health.failed[idx].any()):
            raise ValueError("a joining model has failed")

    def join(self, tr: Trainer, conv: Convergence) -> None:
        """Put the models' state into ``tr`` and ``conv`` and let them run."""
        idx = self.models.to(tr.state.params.device)
        st = tr.state
        pairs = ((st.params, self.params), (st.opt[0], self.exp_avg), (st.opt[1], self.exp_avg_sq))
        for dst, src in pairs:
            dst[:, idx] = src.to(device=dst.device, dtype=dst.dtype)
        tr.frozen = tr.frozen.clone()
        tr.frozen[idx] = False
        conv.seed(self.models, self.entries)


@dataclass(frozen=True)
class Compaction:
    """When :meth:`Trainer.fit_until` drops stopped models from the running program.

    Compiled hand-written steps only (``compiled`` in :meth:`pays`): at a window end,
    with ``a`` of the program's ``E_run`` models still training, when ``a <= fraction *
    E_run`` and the saving it expects beats compiling the new shape,
    ``(step_s - fixed_s) (1 - a / E_run) * remaining / 2 > compile_s``: ``step_s`` the
    program's measured seconds per step over the last window, ``fixed_s`` the part of a
    step that does not scale with its models, ``remaining`` the steps left to the cap
    (half of them expected, since the models left stop before it as a rule).  The
    defaults are measurements on the 2-core CPU (BENCHMARKS.md, "Scheduling"): a compiled
    step of one p = 1 model takes 0.40 ms, compiling a program's new shape 5.8-9.9 s.  A
    bad guess costs only time: the models' trajectories do not depend on it.

    Eager steps never compact: an eager elementwise kernel computes the last few elements
    of a tensor (the program's last model's last slots) in a scalar tail that can round
    differently from the vectorised body (``softplus`` does: 136 of the elements of short
    float32 tensors differ from the same elements inside a long one), so a model that
    becomes a smaller program's last drifts from its trajectory in the last ulp
    (measured: 5e-7 after 3,000 steps).  The compiled kernels run every model's slots
    through the same vector code (a masked vector tail per model), which the tests check
    bit for bit.  The autograd path (the exact L3) does not compact either: its L3 sums
    the Poisson-binomial pmf by an FFT whose length is the program's largest edge count,
    so a model's rounding depends on which models share its program (measured: 6e-8 to
    1.2e-7 apart after 1,500 steps when the widest left)."""

    enabled: bool = True
    fraction: float = 0.5
    fixed_s: float = 4e-4
    compile_s: float = 10.0

    def pays(self, E_run: int, active: int, step_s: float, remaining: int, compiled: bool):
        """Whether to drop the program's stopped models now (class docstring); ``compiled``:
        whether the step is the compiled hand-written kernel."""
        if not (self.enabled and compiled) or active in (0, E_run):
            return False
        if active > self.fraction * E_run:
            return False
        saving = max(step_s - self.fixed_s, 0.0) * (1 - active / E_run) * remaining / 2
        return saving > self.compile_s


class _Program:
    """The models :meth:`Trainer.fit_until` is stepping: all of the trainer's (``idx``
    None: the trainer's own step), or a subset ``idx`` with its own sampler, step and
    (copied) state, written back by :meth:`synced`.  A subset keeps the trainer's layout
    (the same padding), so each model computes exactly what it computes in the whole
    program."""

    def __init__(self, tr: Trainer, idx: torch.Tensor | None = None):
        self.idx = idx
        self.E = tr.layout.E if idx is None else idx.numel()
        if idx is not None:
            self.sampler, self.step_fn = tr.sampler.subset(idx), tr.step_fn.subset(idx)
            self.state = take_models(tr.state, idx)

    def advance(self, tr: Trainer) -> Info:
        """One step of the program's models; the :class:`Info` over all the trainer's
        models (the others' terms zero: they are stopped or failed, and the stopping rule
        reads nothing of theirs)."""
        if self.idx is None:
            return tr.advance()
        held = self.state.health.failed | tr.frozen.index_select(0, self.idx)
        inputs = self.sampler.draw(self.state.count, held)
        self.state, info = self.step_fn(self.state, inputs)
        E = tr.layout.E
        terms = [torch.zeros(E, dtype=t.dtype, device=t.device).index_copy_(0, self.idx, t)
                 for t in info.terms]  # fmt: skip
        failed = torch.zeros(E, dtype=torch.bool, device=info.failed.device)
        return Info(ELBOTerms(*terms), failed.index_copy_(0, self.idx, info.failed))

    def synced(self, tr: Trainer):
        """The trainer's state with this program's models written back; returns it."""
        if self.idx is not None:
            tr.state = put_models(tr.state, self.idx, self.state)
        return tr.state
