"""When a candidate network has finished training: the stopping rule.

The ELBO of eq. (pelbo) is a *maximum* over the variational family; comparing candidate
widths by the ELBO of snapshots taken after a fixed budget compares optimisation states,
not the maxima (a wide network that is still pruning carries thousands of nats of KL that
it would shed).  So each candidate trains until its own objective stops improving.

Rule (:class:`StopRule`), per model: the training objective ``L1 + L2 + L3`` (eq. (el), the
minibatch estimate of the negative ELBO) and its KL part ``L2 + L3`` are averaged over
consecutive windows of ``window`` steps.  At the end of each window the objective's
*relative improvement* ``(mean_previous - mean_current) / |mean_current|`` and the KL's
*change* ``|KL_previous - KL_current|`` are computed; a window is *quiet* when the first is
below ``tol`` and the second below ``max(tol |KL_current|, kl_abs)`` nats.  After
``patience`` consecutive quiet windows the model is *converged* and frozen (its parameters
no longer move, ``simulate.core.Trainer``).

Why the KL test: the objective is dominated by L1, which grows like n, so a relative
tolerance on the objective alone loosens with n.  Measured at n = 32,000 (alpha = 0.5,
p = 1): width 32 "converged" on the objective alone after 4,500 steps with 531 of its
edges still switched on, shedding about 40 nats of KL per window (below 5e-3 of an
objective of ~47,000 nats, far above anything its fit could gain); trained on to 40,000
steps it kept pruning to 67 edges and its d^2 fell from 0.019 to 0.013, and the selection
(which compares penalised ELBOs, KL included) had been made against an unpruned network.
The KL part carries no minibatch noise (it is a function of the variational parameters),
so its change is a sharp signal of pruning at every n.  A model that reaches
``max_steps`` first is *capped*.

**Held-out risk** (``risk_tol``; off when None): the objective and its KL can settle while
the fitted function still moves by more than the rate's own scale -- at 5e-3 of an
objective of ~1.42 n nats a window's quiet allows the squared L2 error to change by about
0.014 at every n, 16% of ASVI's at alpha = 0.5, n = 32,000, and more than the whole risk at
alpha = 1.5.  With ``risk_tol`` set, the caller passes ``risk``, a function returning each
model's held-out criterion, computed from the training data alone and never from the
truth (which no user has): the sweep holds each replicate's last points out of training
and measures the posterior mean's squared error on their y (``simulate.sweep.train.asvi_job``,
``SweepConfig.stop_val_fraction``); the estimators do the same on their
``validation_fraction`` (``simulate.estimators``).  It is evaluated once per window end
only; a window is quiet only when also ``|risk_previous - risk_current| / risk_current <
risk_tol``.  The evaluation uses the same posterior draws every time (counter-based
noise), so its change between windows is the parameters' change, not Monte Carlo noise.
An error on y carries the noise variance (``sigma^2`` plus the excess risk), so a given
``risk_tol`` is a looser test of the fit than the same tolerance on the excess risk.

A model whose loss turned non-finite is frozen by the trainer and reported as failed,
neither converged nor capped.

**Learning rate lowered on a plateau** (``lr_decays``; 0, the default, is off): a model that
meets the rule above is not stopped at once but has its learning rate multiplied by
``lr_factor`` (the optimiser state's per-model ``lr_scale``:
``simulate.core.optim.lower_lr``) and its quiet count reset, up to ``lr_decays`` times; it
stops at the first plateau after its last decay.  The decision reads only the model's own
objective (the ELBO, never the truth), at window ends, like the stop itself.  Why: a constant
Adam step keeps every coordinate moving by about ``lr`` per step around an optimum, which at
large n is the scale of the posterior's own sds, so the iterate rattles around the optimum
instead of settling in it (the optimiser benchmark, ``python -m verify.optimiser``, measures
what lowering it buys).

Why these defaults (measured on the 2-core machine, Hoelder truth alpha = 0.5, p = 1,
n = 1000, batch 128, widths 4..64, two replicates, 12,000 steps):

* The minibatch objective is noisy: the relative change between two 500-step window means
  has a standard deviation of about 5e-3 once training has levelled off, and that noise
  does not depend on n (L1 and its noise both scale with n).  ``window = 500``,
  ``tol = 5e-3`` and ``patience = 2`` stop a model whose improvement has fallen to the
  noise level, while a model still improving at twice ``tol`` stops by chance only with
  probability of order 1% (two consecutive one-sided excursions of about 1.4 SD each).
* Width 4 reaches that level after about 3,000 steps, width 64 (still pruning: thousands of
  nats of KL shed over ~10,000 steps) after about 10,000; ``max_steps = 20,000`` leaves
  room for that, and the budget-doubling control of ``verify.rates`` measures what a cap
  twice as large and a tolerance half as large would change.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from numbers import Integral, Real
from typing import NamedTuple

import torch

from simulate.core.constraints import INT_POSITIVE, POSITIVE, Interval, validate_params

__all__ = [
    "STOP_DEFAULTS",
    "StopEvents",
    "StopRule",
    "StopState",
    "retire",
    "seed",
    "skip",
    "stricter",
    "sum_in_order",
    "update",
]


@dataclass(frozen=True)
class StopRule:
    """Stop a model when its windowed objective improves by less than ``tol`` (relative)
    for ``patience`` consecutive windows of ``window`` steps, or at ``max_steps``."""

    max_steps: int = 20_000
    window: int = 500
    tol: float = 5e-3
    patience: int = 2
    kl_abs: float = 2.0  # nats per window: a third of one edge's typical KL (~6 nats)
    risk_tol: float | None = None  # relative change of the held-out risk per window
    lr_decays: int = 0  # plateaus that lower the learning rate before one stops the model
    lr_factor: float = 0.1  # the learning rate's multiplier at each such plateau

    def __post_init__(self):
        self.validate()

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first field outside its constraints (run at
        construction: a rule that exists is a valid one)."""
        validate_params(self, _STOP_CONSTRAINTS)

    def doubled(self) -> StopRule:
        """The budget-doubling control: twice the cap, half the tolerance."""
        return StopRule(
            2 * self.max_steps,
            self.window,
            self.tol / 2,
            self.patience,
            self.kl_abs / 2,
            None if self.risk_tol is None else self.risk_tol / 2,
            self.lr_decays,
            self.lr_factor,
        )

    def to_dict(self) -> dict:
        """The rule's fields; the plateau schedule's only where it is on (a rule without
        it writes what rules wrote before it existed)."""
        d = asdict(self)
        if not self.lr_decays:
            d.pop("lr_decays")
            d.pop("lr_factor")
        return d


# the stopping rule's defaults by field, said once (SweepConfig's stop_* settings derive theirs)
STOP_DEFAULTS = {f.name: f.default for f in fields(StopRule)}

_STOP_CONSTRAINTS = {
    **dict.fromkeys(("max_steps", "window", "patience"), [INT_POSITIVE]),
    **dict.fromkeys(("tol", "kl_abs"), [POSITIVE]),
    "risk_tol": [POSITIVE, None],
    "lr_decays": [Interval(Integral, 0, None, "left")],
    "lr_factor": [Interval(Real, 0, 1, "neither")],
}


def _quiet(rule: StopRule, rel: torch.Tensor, dkl: torch.Tensor, cur_kl: torch.Tensor):
    """Which windows are quiet under ``rule`` by the objective and KL tests
    (:class:`StopState`): relative improvement below ``tol``, KL change below
    ``max(tol |KL|, kl_abs)``."""
    kl_bound = torch.clamp(rule.tol * cur_kl.abs(), min=rule.kl_abs)
    return torch.isfinite(rel) & (rel < rule.tol) & torch.isfinite(dkl) & (dkl < kl_bound)


def stricter(shadow: StopRule, rule: StopRule) -> bool:
    """Whether every window quiet under ``shadow`` is quiet under ``rule`` and their
    plateaus count alike (:class:`StopState`'s ``shadow``): the same window, patience
    and plateau schedule, no risk test in either, ``tol`` and ``kl_abs`` no larger (the
    budget-doubling control's rule, :meth:`StopRule.doubled`, against the sweep's)."""
    same = ("window", "patience", "lr_decays", "lr_factor")
    return (
        all(getattr(shadow, k) == getattr(rule, k) for k in same)
        and shadow.risk_tol is None
        and rule.risk_tol is None
        and shadow.tol <= rule.tol
        and shadow.kl_abs <= rule.kl_abs
    )


def sum_in_order(acc: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``acc + rows[0] + rows[1] + ...``, added in that order (``rows [S, ...]``), as S
    steps' ``acc += row`` would add them: the same float64 sums bit for bit (a cumulative
    sum runs in order along its dimension; tested), so a loop that takes several steps per
    call decides on the same numbers."""
    return torch.cat([acc[None], rows.to(acc.dtype)]).cumsum(0)[-1]


_PER_MODEL = ("prev", "prev_kl", "rel_change", "kl_change", "below", "steps")


class StopEvents(NamedTuple):
    """What a window end decided (:func:`update`), each bool ``[E]``: ``newly`` the models
    that converged there, ``decayed`` those whose plateau lowered their learning rate
    instead (``StopRule.lr_decays``)."""

    newly: torch.Tensor
    decayed: torch.Tensor


class StopState(NamedTuple):
    """The per-model bookkeeping of :class:`StopRule` over a run, a value: :func:`update`
    (and :func:`retire`, :func:`skip`, :func:`seed`) return a new one and change no tensor
    of the one given, as ``simulate.core.step``'s ``step(state, inputs)`` does.

    Made by :meth:`start`.  ``rule``; ``shadow`` (a :class:`StopRule` or None, below);
    ``not_before``: no window ending within the run's first ``not_before`` steps is quiet
    (the trainer's KL warm-up, ``Hyper.kl_warmup``, during which the step does not yet
    follow the ELBO); ``t`` the run's steps so far and ``count`` those of the current
    window; ``acc``, ``acc_kl`` (float64 ``[E]``) the window's sums of the objective and
    its KL part and ``failed`` (bool ``[E]``) the models that ever failed, on the run's
    device; on the CPU, each ``[E]``: ``prev``, ``prev_kl`` (the last window means),
    ``rel_change`` (the objective's last relative improvement), ``kl_change`` (the KL's last
    change, nats), ``prev_risk``, ``risk_change`` (the risk's last relative change; these
    four NaN before two windows), ``below`` and ``below_shadow`` (the quiet windows in a
    row under the rule and the shadow rule), ``converged``, ``steps`` (steps each model
    trained), ``done`` (converged, failed, retired or held: frozen), ``decays`` (plateaus
    that lowered the learning rate) and ``retired`` (stopped by :func:`retire`: a race
    lost); ``raced``: whether :func:`retire` has run.

    ``shadow``: a stricter rule whose quiet-window count (``below_shadow``) is kept beside
    the rule's own, by the same test with its thresholds -- what a run under it would
    count, for as long as the run under ``rule`` has had no plateau.  A model that reaches
    the cap with no plateau has the same trajectory under both rules (a window quiet under
    the stricter thresholds is quiet under these, so the stricter rule has had no plateau
    either); its state with :meth:`entries` is the state of a run under ``shadow`` at that
    step, which :func:`seed` continues (the budget-doubling control's continuation,
    ``simulate.sweep.train.budget``).  Stricter means: the same window, patience and
    plateau schedule, no risk test, ``tol`` and ``kl_abs`` no larger (:func:`stricter`).
    """

    rule: StopRule
    shadow: StopRule | None
    not_before: int
    t: int
    count: int
    acc: torch.Tensor
    acc_kl: torch.Tensor
    failed: torch.Tensor
    prev: torch.Tensor
    prev_kl: torch.Tensor
    rel_change: torch.Tensor
    kl_change: torch.Tensor
    prev_risk: torch.Tensor
    risk_change: torch.Tensor
    below: torch.Tensor
    below_shadow: torch.Tensor
    converged: torch.Tensor
    steps: torch.Tensor
    done: torch.Tensor
    decays: torch.Tensor
    retired: torch.Tensor
    raced: bool

    @classmethod
    def start(cls, rule: StopRule, E: int, device=None, held=None, not_before: int = 0,
              shadow: StopRule | None = None) -> StopState:  # fmt: skip
        """A run's bookkeeping before its first step: ``held`` (bool ``[E]``, optional) the
        models already stopped or failed before the run, never updated."""
        if shadow is not None and not stricter(shadow, rule):
            raise ValueError(f"shadow rule {shadow} is not stricter than {rule}")
        done = torch.zeros(E, dtype=torch.bool)
        if held is not None:
            done = done | torch.as_tensor(held).cpu()
        nan = torch.full((E,), math.nan, dtype=torch.float64)
        zero = torch.zeros(E, dtype=torch.int64)
        on_device = torch.zeros(E, dtype=torch.float64, device=device)
        return cls(
            rule, shadow, int(not_before), 0, 0, on_device, on_device.clone(),
            torch.zeros(E, dtype=torch.bool, device=device),
            nan, nan.clone(), nan.clone(), nan.clone(), nan.clone(), nan.clone(),
            zero, zero.clone(), torch.zeros(E, dtype=torch.bool), zero.clone(), done,
            zero.clone(), torch.zeros(E, dtype=torch.bool), False,
        )  # fmt: skip

    def window_means(self) -> torch.Tensor:
        """Each model's last window mean of the objective (float64 ``[E]``, on the CPU): NaN
        before its first window and for a model that failed (whose last finite mean is not
        its objective any more)."""
        return torch.where(self.failed.cpu(), torch.nan, self.prev)

    def at_window_end(self, S: int = 1) -> bool:
        """Whether the next :func:`update` (of ``S`` steps) ends a window."""
        return self.count + S >= self.rule.window

    def steps_to_window_end(self) -> int:
        """Steps until the current window ends (the most one :func:`update` may take)."""
        return self.rule.window - self.count

    def entries(self, models: torch.Tensor, plateau: bool = False) -> dict:
        """The bookkeeping of ``models`` (int64 ``[k]``) that :func:`seed` continues under
        the shadow rule: each a ``[k]`` tensor.  Only at a window's end (nothing summed
        yet), with a shadow rule, and for running models with no plateau (so no decay)
        -- or, with ``plateau``, at the window end of their first plateau (one decay, or
        stopped there with no decay), where the shadow rule has not plateaued."""
        if self.shadow is None:
            raise ValueError("entries are for a continuation under the shadow rule: none given")
        if self.count != 0:
            raise ValueError("entries are taken at a window's end")
        models = torch.as_tensor(models, dtype=torch.int64)
        if plateau:
            bad = (self.decays[models] > 1) | (self.below_shadow[models] >= self.shadow.patience)
        else:
            bad = self.done[models] | (self.decays[models] > 0)
        if bool(bad.any()):
            raise ValueError("entries are of models that ran to here with no plateau")
        keys = ("prev", "prev_kl", "rel_change", "kl_change", "steps")
        out = {k: getattr(self, k)[models].clone() for k in keys}
        out["below"] = self.below_shadow[models].clone()
        return out

    def summary(self) -> dict:
        """Per-model lists: ``steps``, ``converged``, ``rel_change``, ``kl_change`` and
        ``risk_change`` (and ``lr_decays``, the plateaus that lowered each model's learning
        rate, where the rule has them; ``retired``, the models :func:`retire` stopped, once
        it has stopped any)."""
        return {
            "steps": self.steps.tolist(),
            "converged": self.converged.tolist(),
            **({"lr_decays": self.decays.tolist()} if self.rule.lr_decays else {}),
            **({"retired": self.retired.tolist()} if self.raced else {}),
            **{
                k: [None if math.isnan(x) else x for x in getattr(self, k).tolist()]
                for k in ("rel_change", "kl_change", "risk_change")
            },
        }


def update(st: StopState, info, risk=None) -> tuple[StopState, StopEvents | None]:
    """``st`` after one step's :class:`~simulate.core.training_step.Info` (the per-model
    objective ``info.terms.total``, its KL part ``info.terms.kl`` and the models that
    failed at this step, ``info.failed``; each ``[E]``), or ``S`` steps' (``[S, E]``: at
    most ``st.steps_to_window_end()`` of them; their sums added in order,
    :func:`sum_in_order`, so the decisions are those of S one-step updates), and at a
    window's end what it decided (:class:`StopEvents`; else None).  ``risk``: a function
    of nothing returning the per-model held-out risk ``[E]``, called at window ends only;
    required when the rule has ``risk_tol``."""
    rule = st.rule
    total, kl, failed = info.terms.total.detach(), info.terms.kl.detach(), info.failed
    if total.dim() == 1:
        S = 1
        acc = st.acc + total.to(torch.float64)
        acc_kl = st.acc_kl + kl.to(torch.float64)
        ever_failed = st.failed | failed
    else:
        S = total.shape[0]
        left = st.steps_to_window_end()
        if S > left:
            raise ValueError(f"{S} steps cross a window's end ({left} left)")
        acc = sum_in_order(st.acc, total)
        acc_kl = sum_in_order(st.acc_kl, kl)
        ever_failed = st.failed | failed.any(0)
    count, t = st.count + S, st.t + S
    active = ~st.done
    steps = st.steps + S * active.to(torch.int64)
    if count < rule.window:
        st = st._replace(t=t, count=count, acc=acc, acc_kl=acc_kl, failed=ever_failed)
        return st._replace(steps=steps), None
    cur = (acc / count).cpu()
    cur_kl = (acc_kl / count).cpu()
    failed = ever_failed.cpu()
    rel = (st.prev - cur) / cur.abs()
    dkl = (st.prev_kl - cur_kl).abs()
    upd = active & ~failed
    rel_change = torch.where(upd & torch.isfinite(rel), rel, st.rel_change)
    kl_change = torch.where(upd & torch.isfinite(dkl), dkl, st.kl_change)
    quiet = _quiet(rule, rel, dkl, cur_kl)
    if t <= st.not_before:  # e.g. a KL warm-up: the objective is still changing
        quiet = torch.zeros_like(quiet)
    below_shadow = st.below_shadow
    if st.shadow is not None:  # (no risk test in a shadow rule: ``stricter``)
        quiet_s = _quiet(st.shadow, rel, dkl, cur_kl) & quiet
        below_shadow = torch.where(upd, torch.where(quiet_s, below_shadow + 1, 0), below_shadow)
    prev_risk, risk_change = st.prev_risk, st.risk_change
    if rule.risk_tol is not None:
        if risk is None:
            raise ValueError("the rule has risk_tol: give update() the risk function")
        cur_risk = torch.as_tensor(risk(), dtype=torch.float64).cpu()
        drisk = (prev_risk - cur_risk).abs() / cur_risk.abs()
        risk_change = torch.where(upd & torch.isfinite(drisk), drisk, risk_change)
        quiet &= torch.isfinite(drisk) & (drisk < rule.risk_tol)
        prev_risk = torch.where(upd, cur_risk, prev_risk)
    below = torch.where(upd, torch.where(quiet, st.below + 1, 0), st.below)
    plateau = upd & (below >= rule.patience)
    decayed = plateau & (st.decays < rule.lr_decays)
    below = torch.where(decayed, 0, below)
    newly = plateau & ~decayed
    st = st._replace(
        t=t, count=0, acc=torch.zeros_like(acc), acc_kl=torch.zeros_like(acc_kl),
        failed=ever_failed, prev=torch.where(upd, cur, st.prev),
        prev_kl=torch.where(upd, cur_kl, st.prev_kl), rel_change=rel_change,
        kl_change=kl_change, prev_risk=prev_risk, risk_change=risk_change, below=below,
        below_shadow=below_shadow, converged=st.converged | newly, steps=steps,
        done=st.done | (newly | failed), decays=st.decays + decayed.to(torch.int64),
    )  # fmt: skip
    return st, StopEvents(newly, decayed)


def retire(st: StopState, models: torch.Tensor) -> StopState:
    """``st`` with ``models`` (bool ``[E]``) stopped now, neither converged nor capped: a
    candidate that lost a race (``Trainer.fit_until``'s ``race``); ``summary`` then lists
    ``retired``."""
    models = torch.as_tensor(models, dtype=torch.bool).cpu() & ~st.done
    return st._replace(raced=True, retired=st.retired | models, done=st.done | models)


def skip(st: StopState, steps: int) -> StopState:
    """``st`` after ``steps`` in which no model ran (every one done), from a window's end:
    the run's clock moves on (``Trainer.fit_until``'s jump to a :class:`Resume`)."""
    if st.count != 0 or not bool(st.done.all()):
        raise ValueError("a skip is of steps in which nothing runs, from a window's end")
    if steps % st.rule.window:
        raise ValueError("a skip is of whole windows")
    return st._replace(t=st.t + int(steps))


def seed(st: StopState, models: torch.Tensor, entries: dict) -> StopState:
    """``st`` with ``models`` (int64 ``[k]``, held until now) continued from
    :meth:`StopState.entries` taken in a run under a rule whose shadow is this rule, at a
    window's end of this run: their window history, quiet count and steps are those, and
    they run from here."""
    if st.count != 0:
        raise ValueError("models are seeded at a window's end")
    models = torch.as_tensor(models, dtype=torch.int64)
    new = {}
    for k in _PER_MODEL:
        new[k] = getattr(st, k).clone()
        new[k][models] = torch.as_tensor(entries[k]).to(new[k])
    for k in ("converged", "done", "retired", "decays"):
        new[k] = getattr(st, k).clone()
        new[k][models] = 0
    return st._replace(**new)
