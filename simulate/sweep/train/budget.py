"""The budget-doubling control continued from the sweep's runs.

The control (``verify.reading.controls.control_config``) re-trains cells with twice the step cap
and a stricter stopping rule (half the tolerances).  A window that is quiet under the
stricter rule is quiet under the sweep's, so until a model's first plateau under the
sweep's rule it has had none under the control's either: up to there the two runs are
the same run -- up to the sweep's cap for a model with no plateau, up to the window end of
its first plateau (before its learning-rate decay) for the others, unless the control's
rule plateaus at that same window.  The control need not repeat it.  With a
:class:`BudgetLink`, the sweep's jobs keep each model's state at that step (parameters,
optimiser moments and stopping bookkeeping, with the control rule's quiet count kept
beside the sweep's: ``simulate.core.stopping.StopState``'s ``shadow``;
``Trainer.capped_models`` and ``Trainer.plateau_states``), one file per model; the
control's jobs then hold each model until their program reaches its step and continue it
from there (``simulate.core.until.Resume``, one per join step).  Every number of the
control's records is the same bit for bit as training them from the start (tested); only
the training seconds fall.  The files are a cache: a model without a usable one (a sweep
run before, another machine, a file gone or unreadable, a program of other models) is
trained from the start, as before.  A state is used only in a program of the same models
in the same places as the sweep's (its width groups and replicate block): a model's
rounding on the batched paths can depend on its place in the program.

The control's jobs also take the sweep's class-matched references (the linear spline and
the oracle of ``simulate.sweep.train.cells.reference``) of the cells they share instead of
fitting them again: the same data, test points and seeds give the same numbers, kept as
JSON (``BudgetLink.save_references`` / ``references``; a missing or unreadable file is
computed again).

Measured on the full tier (BENCHMARKS.md): about half of the control's model-steps are
the sweep's (the cap alone: a third to a half of the teacher truths', ~5% of the Hoelder
truths', whose candidates mostly plateau first).

Where it applies (:func:`linkable`): the two configurations differ only in the budget
(``BUDGET_FIELDS``: sample sizes and replicates, the cap, the tolerances) with the same
largest n (the same data), the control's rule stricter at every n and its cap larger, the
sweep's cap a whole number of windows; random starts, one per candidate, no width
continuation, no held-out risk stop, no KL warm-up."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import warnings
from dataclasses import dataclass

import torch

from simulate.core.stopping import stricter
from simulate.core.until import Resume
from simulate.sweep.setup.config import SweepConfig
from simulate.sweep.store.fingerprint import fingerprint_fields
from simulate.sweep.store.records import code_digest

__all__ = ["BUDGET_FIELDS", "BudgetLink", "linkable"]

# what the control changes of the sweep's configuration (verify.reading.controls.control_config)
BUDGET_FIELDS = ("ns", "replicates", "max_steps", "max_epochs", "stop_tol", "stop_kl_abs",
                 "stop_risk_tol")  # fmt: skip


def linkable(sweep: SweepConfig, control: SweepConfig) -> str | None:
    """None where the control can continue the sweep's capped models at every n they
    share, else why not (module docstring)."""
    a, b = sweep.to_dict(), control.to_dict()
    other = sorted(k for k in a if k not in BUDGET_FIELDS and a[k] != b.get(k))
    if other:
        return f"the configurations differ in {', '.join(other)}"
    if max(sweep.ns) != max(control.ns):
        return "another largest n (other data)"
    if sweep.start != "random" or sweep.restarts != 1 or sweep.continuation:
        return "only random starts, one per candidate, without width continuation"
    if sweep.stop_risk_tol is not None or control.stop_risk_tol is not None:
        return "a held-out risk stop"
    if sweep.kl_warmup:
        return "a KL warm-up"
    for n in set(sweep.ns) & set(control.ns):
        rule, ctl = sweep.stop_rule_at(n), control.stop_rule_at(n)
        if not stricter(ctl, rule) or ctl.max_steps <= rule.max_steps:
            return f"at n = {n} the control's rule is not stricter with a larger cap"
        if rule.max_steps % rule.window:
            return f"at n = {n} the sweep's cap is not a whole number of windows"
    return None


@dataclass(frozen=True)
class BudgetLink:
    """How a job shares its capped models' states with the budget-doubling control
    (module docstring): ``role`` ``"save"`` for the sweep's jobs (``other``: the control's
    configuration, whose rule at n is the shadow rule) or ``"load"`` for the control's
    (``other``: the sweep's, whose cap at n is where the states are); ``folder``: where
    the files are (one subfolder per sweep configuration and code)."""

    folder: str
    role: str
    other: SweepConfig

    def __post_init__(self):
        if self.role not in ("save", "load"):
            raise ValueError(f"role must be 'save' or 'load', got {self.role!r}")

    def pair(self, cfg: SweepConfig) -> tuple[SweepConfig, SweepConfig]:
        """(sweep, control) configurations of a job of ``cfg``."""
        return (cfg, self.other) if self.role == "save" else (self.other, cfg)

    def applies(self, cfg: SweepConfig, n: int) -> bool:
        sweep, control = self.pair(cfg)
        return n in sweep.ns and n in control.ns and linkable(sweep, control) is None

    def shadow(self, cfg: SweepConfig, n: int):
        """The control's rule at n (the sweep's jobs keep its quiet count), or None."""
        if self.role != "save" or not self.applies(cfg, n):
            return None
        return self.other.stop_rule_at(n)

    def _dir(self, cfg: SweepConfig) -> str:
        """The subfolder of this sweep, control rule and code (the kept quiet counts are the
        control rule's)."""
        sweep, control = self.pair(cfg)
        rule = {k: v for k, v in control.to_dict().items() if k.startswith(("stop_", "max_"))}
        key = json.dumps([fingerprint_fields(sweep), rule, code_digest()], sort_keys=True,
                         default=str)  # fmt: skip
        return os.path.join(self.folder, hashlib.sha256(key.encode()).hexdigest()[:20])

    def kept(self, cfg: SweepConfig) -> int:
        """How many states the sweep of ``cfg`` (either role's) has kept."""
        folder = self._dir(cfg)
        if not os.path.isdir(folder):
            return 0
        return sum(f.endswith(".pt") for f in os.listdir(folder))

    def clear(self, cfg: SweepConfig) -> None:
        """Remove this sweep's states (and the folder, when nothing else is in it)."""
        shutil.rmtree(self._dir(cfg), ignore_errors=True)
        try:
            os.rmdir(self.folder)
        except OSError:
            pass  # absent, or holding other sweeps' states

    def save(self, cfg: SweepConfig, trainer, seeds) -> int:
        """Keep the states of the trainer's capped models (``Trainer.capped_models``) and
        of the others at their first plateau (``Trainer.plateau_states``), one file per
        model named by its seed (``seeds``: the trainer's models'); returns how many."""
        capped = trainer.capped_models()
        kept = [trainer.resume_from(capped)] if capped.numel() else []
        kept += trainer.plateau_states
        if not kept:
            return 0
        folder = self._dir(cfg)
        widths = [int(w) for w in trainer.layout.widths]
        try:
            os.makedirs(folder, exist_ok=True)
            for res, j, e in ((r, j, e) for r in kept for j, e in enumerate(r.models.tolist())):
                item = {
                    "at": res.at,
                    "P": trainer.layout.P,
                    "widths": widths,  # the program's models, in order, and its place
                    "position": e,
                    **{
                        k: getattr(res, k)[:, j].clone()
                        for k in ("params", "exp_avg", "exp_avg_sq")
                    },  # fmt: skip
                    "entries": {k: v[j].clone() for k, v in res.entries.items()},
                }
                path = os.path.join(folder, f"{int(seeds[e])}.pt")
                tmp = f"{path}.{os.getpid()}.tmp"
                torch.save(item, tmp)
                os.replace(tmp, path)  # whole or absent
        except (OSError, RuntimeError) as exc:  # a cache: the control then trains them again
            warnings.warn(f"capped models' states not kept ({exc})", stacklevel=2)
            return 0
        return sum(int(r.models.numel()) for r in kept)

    def _reference_path(self, cfg: SweepConfig, job, replicate: int) -> str:
        key = hashlib.sha256(job.truth.key.encode()).hexdigest()[:16]
        return os.path.join(self._dir(cfg), f"reference-{key}-{job.n}-{int(replicate)}.json")

    def save_references(self, cfg: SweepConfig, job, refs) -> int:
        """Keep the sweep's class-matched references of ``job`` (``refs``, one per
        replicate, None where it has none) for the control's job at the same n: computed
        from the same data, test points and seeds (the configurations differ in the
        budget alone, :func:`linkable`), they are the control's too.  One JSON file per
        replicate (Python's float repr: read back, the same float64s); returns how many."""
        if self.role != "save" or not self.applies(cfg, job.n):
            return 0
        done, tmp = 0, None
        try:
            os.makedirs(self._dir(cfg), exist_ok=True)
            for r, ref in zip(job.replicates, refs, strict=True):
                if ref is None:
                    continue
                path = self._reference_path(cfg, job, r)
                tmp = f"{path}.{os.getpid()}.tmp"
                with open(tmp, "w") as fh:
                    json.dump(ref, fh)
                os.replace(tmp, path)  # whole or absent
                tmp, done = None, done + 1
        except (OSError, TypeError, ValueError) as exc:  # a cache: the control computes them
            warnings.warn(f"references not kept ({exc})", stacklevel=2)
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.remove(tmp)
        return done

    def references(self, cfg: SweepConfig, job) -> list:
        """The sweep's references of the control's ``job``, one per replicate: the kept
        dict, or None where there is none (not kept, unreadable: the control computes
        it)."""
        out = [None] * len(job.replicates)
        if self.role != "load" or not self.applies(cfg, job.n):
            return out
        for i, r in enumerate(job.replicates):
            path = self._reference_path(cfg, job, r)
            if not os.path.isfile(path):
                continue
            try:
                with open(path) as fh:
                    ref = json.load(fh)
            except (OSError, ValueError) as exc:  # a cache: any unreadable file is a miss
                warnings.warn(f"{path}: not read ({exc}); computed again", stacklevel=2)
                continue
            if isinstance(ref, dict):
                out[i] = ref
        return out

    def resume(self, cfg: SweepConfig, n: int, layout, seeds) -> list[Resume] | None:
        """The :class:`Resume` of the models (``seeds``, in ``layout``) whose states the
        sweep kept at n, one per step they join at, or None where there are none."""
        if self.role != "load" or not self.applies(cfg, n):
            return None
        sweep, _ = self.pair(cfg)
        rule = sweep.stop_rule_at(n)
        folder, found = self._dir(cfg), []
        widths = [int(w) for w in layout.widths]
        for e, s in enumerate(seeds):
            path = os.path.join(folder, f"{int(s)}.pt")
            if not os.path.isfile(path):
                continue
            try:
                item = torch.load(path, weights_only=True)
                same = (item["at"], item["P"], item["widths"], item["position"])
            except Exception as exc:  # noqa: BLE001  (a cache: any unreadable file is a miss)
                warnings.warn(f"{path}: not read ({exc}); trained from the start", stacklevel=2)
                continue
            at = int(item["at"])
            step_ok = 0 < at <= rule.max_steps and at % rule.window == 0
            if step_ok and same[1:] == (layout.P, widths, e):
                found.append((e, item))
        if not found:
            return None
        out = []
        for at in sorted({int(it["at"]) for _, it in found}):
            group = [(e, it) for e, it in found if int(it["at"]) == at]
            rows = {k: torch.stack([it[k] for _, it in group], 1)
                    for k in ("params", "exp_avg", "exp_avg_sq")}  # fmt: skip
            entries = {k: torch.stack([it["entries"][k] for _, it in group])
                       for k in group[0][1]["entries"]}  # fmt: skip
            models = torch.tensor([e for e, _ in group], dtype=torch.int64)
            out.append(Resume(at, models, rows["params"], rows["exp_avg"], rows["exp_avg_sq"],
                              entries))  # fmt: skip
        return out
