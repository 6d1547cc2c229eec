"""One sweep to run as a value (:class:`SweepSpec`): what every entry point that trains
sweep records builds -- ``python -m simulate.sweep`` (``simulate.sweep.cli.read_command``),
the main job's plan (``verify.cli.plan``: each sweep, its budget control and the
known-answer control), the figures' rate sweep (``python -m figures``) -- and then checks,
resolves and runs the same way."""

from __future__ import annotations

import dataclasses

from simulate.sweep.run.runner import (
    SweepRunOptions,
    check_compile,
    check_kind_run,
    check_memory,
    check_native,
    records_path_for,
    run_sweep,
)
from simulate.sweep.setup.config import SweepConfig

__all__ = ["SweepSpec"]


@dataclasses.dataclass(frozen=True)
class SweepSpec:
    """A sweep's configuration (validated as it is made), its records file ``out``, where
    and how its jobs run (``options``), and what a records file of another configuration
    at ``out`` does: stop the run (the default), or with ``new_file`` leave it and write
    ``OUT-FINGERPRINT.jsonl`` beside it; ``discard``: the file's records are cut once its
    lock is held (``--recompute``).  :meth:`checked` and a constructor are pure (nothing
    opened or written); :meth:`resolved` opens the records file; :meth:`run` trains."""

    config: SweepConfig
    out: str
    options: SweepRunOptions = SweepRunOptions()
    new_file: bool = False
    discard: bool = False

    def __post_init__(self):
        if not isinstance(self.config, SweepConfig):
            raise TypeError(f"config must be a SweepConfig, got {type(self.config).__name__}")
        if not isinstance(self.options, SweepRunOptions):
            raise TypeError(f"options must be SweepRunOptions, got {type(self.options).__name__}")

    def checked(self, at_once: int | None = None) -> SweepSpec:
        """``self`` once the run can start here (``ValueError``, one line, if not): a named
        regressor's class imports and takes its parameters, the jobs held at once
        (``at_once``; by default one per local worker, one on a cluster) fit in memory,
        the step's C library or compiler is there."""
        opt = self.options
        if at_once is None:
            at_once = 1 if opt.scheduler else (opt.workers or 1)
        check_kind_run(self.config)
        check_memory(self.config, at_once)
        check_native(self.config)
        check_compile(self.config, opt.scheduler)
        return self

    def resolved(self) -> SweepSpec:
        """``self`` with ``out`` the records file it writes
        (``simulate.sweep.run.runner.records_path_for``): the one step that opens it; a
        corrupt or foreign file, or without ``new_file`` another configuration's, is a
        ``RecordsError`` naming it."""
        accept = self.options.accept_code_change
        out = records_path_for(self.config, self.out, self.new_file, accept)
        return self if out == self.out else dataclasses.replace(self, out=out)

    def run(self, log=print, progress: bool = True, budget=None) -> list[dict]:
        """Train every unfinished job (``simulate.sweep.run.runner.run_sweep``) into
        ``out``; returns the sweep's records.  ``budget``: a
        ``simulate.sweep.train.budget.BudgetLink`` for this run (a cache)."""
        opt = self.options if budget is None else dataclasses.replace(self.options, budget=budget)
        return run_sweep(self.config, self.out, opt, progress, log, discard=self.discard)
