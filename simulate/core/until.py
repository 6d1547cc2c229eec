"""What :meth:`simulate.core.trainer.Trainer.fit_until`'s run needs that is not the
trainer's: the models that join a run late (:class:`Resume`), the race's stops at a window
end (:func:`race_stops`) and the steps of the next call (:func:`call_size`).  Nothing here
reads or writes a trainer: each takes the values it needs and returns what changes (a join
writes its models' parameters and moments into the state's tensors, as a step does), and
the loop that owns the trainer's fields is the trainer's own (``Trainer.fit_until``)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from simulate.core.state import State
from simulate.core.stopping import StopEvents, StopRule, StopState, retire, seed

__all__ = ["Resume", "as_list", "call_size", "held_until_joined", "race_stops"]


def call_size(conv: StopState, rule: StopRule, i: int, cap: int, next_join: int | None) -> int:
    """The steps of a run's next call from its step ``i``: up to the window's end, the
    rule's cap, ``cap`` (the step's most per call, ``Trainer.steps_per_call``) and the
    next join's step ``next_join`` (counted from the run's start; None: no join ahead)."""
    S = min(conv.steps_to_window_end(), rule.max_steps - i, cap)
    if next_join is not None:
        S = min(S, next_join - i)
    return S


def race_stops(race, conv: StopState, ev: StopEvents) -> tuple[StopState, StopEvents]:
    """At a window end that decided ``ev``: the models ``race(objective, running)`` stops
    there retired (``simulate.core.stopping.retire``); returns the bookkeeping with them
    retired and ``ev`` with them among its ``newly``."""
    lost = torch.as_tensor(race(conv.window_means(), ~conv.done), dtype=torch.bool)
    lost = lost & ~conv.done
    if bool(lost.any()):
        conv = retire(conv, lost)
        ev = ev._replace(newly=ev.newly | lost)
    return conv, ev


def held_until_joined(joins: list, state: State, frozen: torch.Tensor, rule: StopRule,
                      learned_noise: bool, kl_warmup: int) -> torch.Tensor:  # fmt: skip
    """The held models ``frozen`` with every model of ``joins`` (:class:`Resume` s, each
    checked: :meth:`Resume.check`) held until it joins (a new tensor)."""
    seen = torch.cat([r.models for r in joins])
    if seen.unique().numel() != seen.numel():
        raise ValueError("a model joins a run once")
    frozen = frozen.clone()
    for r in joins:
        r.check(state, rule, learned_noise, kl_warmup)
        frozen[r.models.to(frozen.device)] = True
    return frozen


def as_list(resume) -> list:
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
    trainer's layout) and their bookkeeping ``entries`` (``StopState.entries``).  That
    is all a step reads of a model (the noise streams and the minibatches are functions of
    the step count; the learning-rate scale is 1, no plateau having lowered it), so from
    there they step exactly as in a run from the start."""

    at: int
    models: torch.Tensor
    params: torch.Tensor
    exp_avg: torch.Tensor
    exp_avg_sq: torch.Tensor
    entries: dict

    def check(self, state: State, rule: StopRule, learned_noise: bool, kl_warmup: int) -> None:
        """Raise ``ValueError`` where a join into a run from ``state`` under ``rule`` cannot
        give those trajectories (``learned_noise``, ``kl_warmup``: the trainer's)."""
        k, P, count0 = int(self.models.numel()), state.params.shape[2], int(state.count)
        for name in ("params", "exp_avg", "exp_avg_sq"):
            if tuple(getattr(self, name).shape) != (3, k, P):
                raise ValueError(f"Resume.{name} must be [3, {k}, {P}]")
        if not count0 < self.at < count0 + rule.max_steps:
            raise ValueError(f"Resume.at {self.at} is not inside the run's steps")
        if (self.at - count0) % rule.window:
            raise ValueError("models join at a window's end of the run")
        if learned_noise or kl_warmup > count0:
            raise ValueError("no join with learned noise or a KL warm-up")
        idx = self.models.to(state.params.device)
        scale = state.opt.lr_scale
        if scale is not None and bool((scale[idx] != 1).any()):
            raise ValueError("a joining model has a lowered learning rate")
        if bool(state.health.failed[idx].any()):
            raise ValueError("a joining model has failed")

    def join(self, state: State, frozen: torch.Tensor,
             conv: StopState) -> tuple[torch.Tensor, StopState]:  # fmt: skip
        """Put the models' parameters and moments into ``state``'s tensors; returns the held
        models ``frozen`` without them (a new tensor) and the bookkeeping ``conv`` with
        theirs (``simulate.core.stopping.seed``)."""
        idx = self.models.to(state.params.device)
        opt = state.opt
        pairs = ((state.params, self.params), (opt.exp_avg, self.exp_avg),
                 (opt.exp_avg_sq, self.exp_avg_sq))  # fmt: skip
        for dst, src in pairs:
            dst[:, idx] = src.to(device=dst.device, dtype=dst.dtype)
        frozen = frozen.clone()
        frozen[idx] = False
        return frozen, seed(conv, self.models, self.entries)
