"""What a growing-n sweep is, apart from running it: the configuration
(:class:`SweepConfig`, validated when made), what it sets at each sample size (the
cell's Hyper, stopping rule, batch, candidate widths, held-out points) and its memory per
job.  The jobs it splits into: ``simulate.sweep.train.jobs`` (``Job``, ``jobs_for``); its
fingerprint (the fields that change a cell's record): ``simulate.sweep.store.fingerprint``.
``simulate.sweep`` trains and writes; ``verify`` and ``figures`` read through these
types."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from numbers import Integral

from simulate.core import sizes
from simulate.core.constraints import INT_POSITIVE, Interval, check, validate_params
from simulate.core.hyper import HYPER_DEFAULTS, Hyper, inclusion_rate, lambda_s_at
from simulate.core.options import StepOptions
from simulate.core.stopping import StopRule
from simulate.sweep.setup.kinds import KINDS, EstimatorKind, gp_job_bytes
from simulate.sweep.setup.parts import (
    Design,
    Estimator,
    PerN,
    Provenance,
    Step,
    Stopping,
    Training,
)
from simulate.sweep.setup.settings import constraints_of, declared, part_of
from simulate.sweep.setup.truth_spec import TruthSpec
from simulate.sweep.setup.widths import candidate_widths, group_widths

__all__ = [
    "SweepConfig",
    "cell_lambda_s",
    "gp_job_bytes",
]


# The training hyperparameters a sweep holds under Hyper's own names, copied into each
# cell's Hyper as they are (SweepConfig.hyper_at): the Training part's fields that Hyper
# has, less the ones the sweep sets per n (lambda_s: the rule at each n, cell_lambda_s; the
# batch, batch_at; the logits' rate, lr_inclusion_at).
_PER_CELL = ("lambda_s", "batch_size", "lr_inclusion")
SWEEP_HYPER = tuple(
    f.name for f in fields(Training) if f.name in HYPER_DEFAULTS and f.name not in _PER_CELL
)


@dataclass(frozen=True)
class SweepConfig(Provenance, Estimator, Step, PerN, Training, Stopping, Design):
    """What a sweep is: its truths, sample sizes, replicates, candidate widths, stopping
    rule, training hyperparameters and evaluation, composed of its parts
    (``simulate.sweep.setup.parts``: :class:`Design`, :class:`Stopping`, :class:`Training`,
    :class:`PerN`, :class:`Step`, :class:`Estimator`, :class:`Provenance`), each setting
    declared once there with its default, bounds and help (``simulate.sweep.setup.settings``).
    Frozen, and validated once, when it is made (:meth:`validate`): a config that exists is
    a valid one.  ``cfg.part(Stopping)`` is one part as a value of its own."""

    def __post_init__(self):
        self.validate()

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first bad field (run at construction)."""
        if not self.truths:
            raise ValueError("no truth given")
        if self.protocol is not None and not (
            isinstance(self.protocol, str) and "@" in self.protocol and len(self.protocol) <= 200
        ):
            raise ValueError(f"protocol must be 'NAME@DIGEST' or None, got {self.protocol!r}")
        for t in self.truths:
            if not isinstance(t, TruthSpec):
                raise ValueError(f"truths must be TruthSpec, got {t!r}")
        if not isinstance(self.ns, (list, tuple)) or not self.ns:
            # a slope needs three (verify.rates checks); a control may use fewer
            raise ValueError(f"ns must be a non-empty list of sample sizes, got {self.ns!r}")
        for n in self.ns:  # integers as given: "345" or 1e3 is not silently converted
            check("every n (ns)", n, Interval(Integral, 2, None, "left"))
        ns = [int(n) for n in self.ns]
        if sorted(set(ns)) != ns:
            raise ValueError(f"sample sizes must be distinct and increasing, got {ns}")
        validate_params(self, SWEEP_CONSTRAINTS)
        if self.widths is not None:
            if not isinstance(self.widths, (list, tuple)) or not self.widths:
                raise ValueError(
                    f"widths must be a non-empty list of integers >= 1: {self.widths!r}"
                )
            for w in self.widths:  # 2.7 is not trained as 2
                check("every width (widths)", w, INT_POSITIVE)
        if self.width_min < 1 or self.width_max < self.width_min:
            raise ValueError("need 1 <= width_min <= width_max")
        if not self.plain_arm and self.start == "random":
            raise ValueError(
                "plain_arm=False is for a constructive start (start both or constructive)"
            )
        if self.width_edge_max is not None and self.continuation:
            raise ValueError("width_edge_max and width continuation are not combined")
        for n in ns:
            if self.n_train_at(n) < 2:
                raise ValueError(
                    f"n = {n} leaves {self.n_train_at(n)} training point(s) beside the"
                    f" {self.n_val_at(n)} held out for the risk stop (stop_risk_tol); need 2"
                )
        # the stopping rule's settings and the training hyperparameters (lr, sigma, sigma_0,
        # lambda_s, lam, init_sigma, init_nu, l3) are checked where they are defined, as
        # StopRule and Hyper are made
        self.stop_rule_at(None)
        self.hyper_at(ns[0])
        self.step_options()  # how the step runs (compile, mlp): checked as StepOptions is made
        if self.continuation and self.restarts != 1:
            raise ValueError("width continuation and restarts are not combined: choose one")
        if self.start != "random":
            if not self.kind.trains_network:
                raise ValueError("a constructive start is for the ASVI estimator")
            for t in self.truths:
                if t.kind == "holder" and t.p != 1:
                    raise ValueError(
                        f"no constructive start for {t.key}: Hoelder truths are encoded for"
                        " p = 1 only (simulate.references.constructive)"
                    )
                if t.kind == "teacher" and self.depth < 2:
                    raise ValueError("the teacher (two hidden layers) needs depth >= 2")
        # the settings one kind alone sets (simulate.sweep.setup.kinds), then the kind's own check
        for kind in KINDS.values():
            for setting, line in kind.own.items():
                if (kind is self.kind) != (getattr(self, setting) is not None):
                    raise ValueError(line)
        if self.regressor_params is not None and self.regressor is None:
            raise ValueError("regressor_params are the parameters of a named regressor")
        self.kind.check(self)  # a named regressor as data: a reader imports nothing it names

    @property
    def kind(self) -> EstimatorKind:
        """The estimator kind (``simulate.sweep.setup.kinds``) of ``estimator``."""
        return KINDS[self.estimator]

    @property
    def stop_rule(self) -> StopRule:
        """The stopping rule with the cap ``max_steps`` (the cap at every n unless
        ``max_epochs`` is set: :meth:`stop_rule_at`)."""
        return self.stop_rule_at(None)

    def steps_cap(self, n: int | None) -> int:
        """The step cap of a cell at sample size n: ``max_steps``, or with ``max_epochs``
        set, ``max(max_steps, ceil(max_epochs * n / batch_size))``.

        Why a cap that grows with n: a fixed cap is fewer passes over the data as n grows
        (20,000 steps of 128 are 640 epochs at n = 4,000 but 80 at n = 32,000), and the
        budget-doubling control found the full tier's n = 32,000 cells optimisation-limited
        at 20,000 steps (d^2 0.0144 -> 0.0114 for alpha = 0.5 at twice the cap) while no cell
        at n <= 4,000 was.  ``max_steps`` stays the floor, so small n keep the room that
        wide candidates need to prune (about 10,000 steps at n = 1,000)."""
        cap = int(self.max_steps)
        if self.max_epochs is not None and n is not None:
            cap = max(cap, math.ceil(float(self.max_epochs) * int(n) / self.batch_at(n)))
        return cap

    def batch_at(self, n: int | None) -> int:
        """The minibatch of the cells at sample size n: ``batch_size``, or with
        ``batch_fraction`` set ``max(batch_size, ceil(batch_fraction n))``; at most n.

        Why a batch that grows with n (an optimiser recipe, ``python -m verify.optimiser``):
        the minibatch estimate of L1 is scaled by ``n / m``, so at a fixed m its noise
        grows with n while the posterior it must resolve narrows."""
        if n is None:
            return int(self.batch_size)
        b = int(self.batch_size)
        if self.batch_fraction is not None:
            b = max(b, math.ceil(float(self.batch_fraction) * int(n)))
        return min(b, int(n))

    def lr_inclusion_at(self, n: int | None) -> float | None:
        """The inclusion logits' learning rate of the cells at sample size n
        (``simulate.core.hyper.inclusion_rate``: ``lr_inclusion``, or growing with n up to it
        from ``lr`` at ``lr_inclusion_ramp``; None: ``lr``)."""
        return inclusion_rate(self.lr, self.lr_inclusion, self.lr_inclusion_ramp, n)

    def stop_rule_at(self, n: int | None) -> StopRule:
        """The stopping rule of the cells at sample size n (:meth:`steps_cap`)."""
        return StopRule(
            self.steps_cap(n),
            int(self.stop_window),
            float(self.stop_tol),
            int(self.stop_patience),
            float(self.stop_kl_abs),
            None if self.stop_risk_tol is None else float(self.stop_risk_tol),
            int(self.stop_lr_decays),
            float(self.stop_lr_factor),
        )

    def n_val_at(self, n: int) -> int:
        """How many of a cell's n points are held out of ASVI's training for the risk stop
        (``stop_risk_tol``): ``max(2, ceil(stop_val_fraction n))``, each replicate's last
        ones (``simulate.sweep.train.asvi_job``); 0 with the risk stop off."""
        if self.stop_risk_tol is None:
            return 0
        return max(2, math.ceil(float(self.stop_val_fraction) * int(n)))

    def n_train_at(self, n: int) -> int:
        """The points ASVI trains on in a cell of n points: ``n - n_val_at(n)``."""
        return int(n) - self.n_val_at(n)

    def widths_at(self, n: int) -> list[int]:
        """The candidate widths of the cells at sample size n."""
        if self.widths is not None:
            return sorted({int(w) for w in self.widths})
        return candidate_widths(n, self.width_min, self.width_scale, self.width_max)

    def job_bytes(self) -> int:
        """One job's memory at the largest n, in bytes: :meth:`job_parts` added up."""
        return sum(b for b, _, _ in self.job_parts())

    def job_parts(self) -> list[tuple[int, str, str]]:
        """One job's memory at the largest n, in parts ``(bytes, what, fix)``
        (``simulate.core.sizes.Need``): each replicate's float64 data drawn for it
        (``[n_max, p]`` inputs, targets) and its float32 copy, the test inputs; the truth's
        evaluation at the n points or the test points (``eval_bytes`` of
        ``simulate.truths.functions``: the Hoelder truth's ``[m, K + 1, p]`` arrays, which
        at n = 10**8 asked for 10.4 GiB in a worker the check had let through); and the
        estimator's own.  For ASVI a lower bound: the widest width group's training
        (``simulate.core.sizes.train_bytes``: ~6 copies of ``[3, E, P]`` float32 and ~6 of
        the activations ``[E, batch, width]``) and its evaluation (``draws`` outputs at the
        ``n_test`` points and ``elbo_draws`` draws of the ELBO, ``sizes.outputs_bytes``,
        ``sizes.elbo_bytes``).  For the known-answer control (``estimator = "gp"``) the
        measured peak of one replicate's exact posteriors (:func:`gp_job_bytes`), dominated
        by the ``n_test x n_test`` float64 covariances.  For a named regressor
        (``estimator = "regressor"``) the data and the test points' predictions alone: its
        own memory is not known before it runs.  The GP's check once counted only the
        test inputs, and a GP sweep at the default 20,000 test points held 10 GB in one
        process unannounced.  The sweep refuses a configuration whose jobs cannot fit in
        the machine (``simulate.sweep.run.runner``) before it locks or writes anything."""
        n, p = max(int(x) for x in self.ns), max(t.p for t in self.truths)
        block = min(self.replicate_block, self.replicates)
        smaller_n = "use smaller --n or --n-test"
        data = block * n * (p + 1) * (8 + 4) + self.n_test * p * 8
        m = max(n, self.n_test)
        truth = max(t.build(None).eval_bytes(m) for t in self.truths)
        parts = [
            (data, f"data of {block} replicates at n = {n}", smaller_n),
            (truth, f"the truth's values at {m} points", smaller_n),
        ]
        own = self.kind.job_parts(self, n)  # a point estimator's, a GP's: its own memory
        if own is not None:
            return [*parts, *own]
        train = evaluate = 0
        for g in group_widths(self.widths_at(n)):
            w, E = max(g), len(g) * block * int(self.restarts)
            P = sizes.network_params(p, self.depth, w)
            train = max(train, sizes.train_bytes(E, P, self.batch_at(n), w))
            evaluate = max(evaluate, sizes.outputs_bytes(self.draws, E, 1, self.n_test)
                           + sizes.elbo_bytes(E, P, n, w, self.elbo_draws))  # fmt: skip
        top = max(self.widths_at(n))
        return [
            *parts,
            (train, f"training widths up to {top} at depth {self.depth}",
             "use smaller n or widths"),
            (evaluate, f"evaluating {self.draws} draws at {self.n_test} test points",
             "use a smaller --n-test (or fewer draws)"),
        ]  # fmt: skip

    def step_options(self) -> StepOptions:
        """How the sweep's steps run (``compile``, ``mlp``), made once here and handed whole
        to every trainer of its jobs (``simulate.sweep.train.groups``)."""
        return StepOptions(compile=self.compile, mlp=self.mlp)

    def hyper_at(self, n: int) -> Hyper:
        """The training hyperparameters of the cells at sample size n: the config's, with
        ``lambda_s`` from the theory's rule at n (``cell_lambda_s``) and the batch at most
        n."""
        return Hyper(
            **{k: getattr(self, k) for k in SWEEP_HYPER},
            lambda_s=cell_lambda_s(self, n),
            batch_size=self.batch_at(n),
            lr_inclusion=self.lr_inclusion_at(n),
        )

    def cell_config(self, n: int, widths) -> dict:
        """A record's ``config``: the settings its cell at sample size n was trained with
        (for the known-answer control, ``estimator = "gp"``, and a named regressor, its own
        settings).  With the
        risk stop on (``stop_risk_tol``) also ``n_train``, the points ASVI trained on
        (:meth:`n_train_at`); its hyperparameters and step cap are those of ``n_train``
        points, the sample its posterior conditions on."""
        own = self.kind.cell_config(self, n)  # a control's or a regressor's own settings
        if own is not None:
            return own
        n_train = self.n_train_at(n)
        hyper = self.hyper_at(n_train)
        derived = {
            "widths": widths,
            **({"n_train": n_train} if self.stop_risk_tol is not None else {}),
            "stop_rule": self.stop_rule_at(n_train).to_dict(),
            "batch_size": hyper.batch_size,
            **({"lr_inclusion_n": hyper.lr_inclusion} if self.lr_inclusion_ramp is not None
               else {}),
            "lambda_s": hyper.lambda_s,
        }  # fmt: skip
        given = {k: getattr(self, k) for k, (default, how) in _RECORDED.items()
                 if how == "always" or getattr(self, k) != default}  # fmt: skip
        return {**derived, **given}

    def part(self, part):
        """One of the config's parts (``simulate.sweep.setup.parts``) as a value of its own."""
        return part_of(self, part)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["truths"] = [asdict(t) for t in self.truths]
        return d


# every declared bound of the parts (simulate.sweep.setup.parts), checked as a config is made
SWEEP_CONSTRAINTS = constraints_of(SweepConfig)
# the settings each cell's record holds as given (the rest it derives: widths, n_train,
# stop_rule, batch_size, lambda_s, lr_inclusion_n): "always", or "unless-default"
_RECORDED = {k: (d, s.record) for k, (d, s) in declared(SweepConfig).items() if s.record}


def cell_lambda_s(cfg: SweepConfig, n: int) -> float:
    """The sparsity price of the cells at sample size n: ``lambda_s`` as given, or the
    paper's rule at n with the sweep's a (``simulate.core.hyper.lambda_s_at``)."""
    if cfg.lambda_s is not None:
        return float(cfg.lambda_s)
    return lambda_s_at(n, cfg.depth, cfg.lambda_s_a)
