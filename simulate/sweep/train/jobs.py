"""The jobs a growing-n sweep splits into (:class:`Job`: one truth, one n, a block of
replicates, every width, trained together) and their fixed order (:func:`jobs_for`); the
configuration they carry is ``simulate.sweep.setup.config.SweepConfig``."""

from __future__ import annotations

from dataclasses import dataclass

from simulate.sweep.setup.config import SweepConfig
from simulate.sweep.setup.truth_spec import TruthSpec

__all__ = ["Job", "jobs_for"]


@dataclass(frozen=True)
class Job:
    """Cells trained together: one truth, one n, a block of replicates, every width."""

    truth: TruthSpec
    n: int
    replicates: tuple
    config: SweepConfig  # the sweep's own (frozen, validated once; pickled to workers)
    # None, or how the job shares its capped models' states with the budget-doubling
    # control (simulate.sweep.train.budget.BudgetLink): a cache, changing no number
    budget: object = None

    def cells(self):
        return [(self.truth.key, self.n, r) for r in self.replicates]

    def cost(self) -> float:
        """A rough relative cost of training the job, for the order jobs are handed out in
        only (:func:`simulate.sweep.run.runner.run_sweep`: the costliest first, so the last
        job to finish is a short one): the step cap at n times the replicates' models'
        parameter counts (one layout per candidate width; the network pass and the draws
        both grow with it), times 1.5 where the constructive arms train three more
        programs; for the Gaussian-process estimator, n^3 (its solve: the two scales are
        not comparable, which is fine since a sweep has one estimator).  Changes no record:
        each job's numbers do not depend on when it runs."""
        return self.config.kind.cost(self)  # simulate.sweep.setup.kinds


def jobs_for(cfg: SweepConfig) -> list[Job]:
    """Every job of the sweep, in a fixed order (truth, n ascending, replicate block)."""
    out = []
    for t in cfg.truths:
        for n in cfg.ns:
            for b in range(0, cfg.replicates, cfg.replicate_block):
                reps = tuple(range(b, min(b + cfg.replicate_block, cfg.replicates)))
                out.append(Job(t, int(n), reps, cfg))
    return out
