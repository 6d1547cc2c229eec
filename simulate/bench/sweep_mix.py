"""The sweep's own job mix as a benchmark workload (``python -m simulate.bench --workload
sweep [--tier full] [--records PATH]``).

A rate tier's training is a list of *programs*: per job (truth, n, replicate block), the
candidate widths split into width groups (``simulate.sweep.setup.widths.group_widths``), each group
one batched trainer of ``block x group`` models, padded to the group's widest, on the
truth's p, the cell's batch (``min(batch_size, n)``), depth and compilation, run until its
last model stops (at most the cell's step cap).  :func:`sweep_programs` lists them as the
sweep runs them; :func:`sweep_workload` times each distinct program shape for ``steps``
steps (after a warm-up that includes compilation) on data of the cell's shape, and
projects the tier's training time:

* each program runs ``run_steps`` steps: with ``records`` (the tier's sweep records), the
  most steps any of its models took (the group runs as long as its slowest member); else
  the step cap (an upper bound);
* its time is ``run_steps / program_steps_per_s``; the tier's training time is their sum
  divided by the tier's workers (single-threaded worker processes sharing the machine:
  time the programs with ``--threads 1`` for that case); evaluation, selection, the
  reference and the budget control are not included;
* with records, the *useful fraction*: the steps of models not yet stopped over the steps
  run (model-steps of every model of the group for the group's whole run).

The entry reports ``model_steps_per_s`` (every program's model-steps over their time),
``gflops``, ``peak_gflops``, ``peak_fraction`` (useful FLOPs, ``simulate.bench.timing``),
``projected_full_tier_min`` (the training time above, in minutes; for the tier given),
``steps_from`` ("records" or "cap"), ``useful_fraction`` (None without records) and the
programs themselves.
"""

from __future__ import annotations

import statistics
import time

import numpy as np
import torch

from simulate.bench.flops import workload_flops
from simulate.core import Hyper, StepOptions
from simulate.core.steppath import path_of
from simulate.core.training import build_trainer
from simulate.sweep.setup import tiers
from simulate.sweep.setup.config import SweepConfig
from simulate.sweep.setup.widths import group_widths
from simulate.sweep.store.schema import read_records
from simulate.sweep.train.jobs import jobs_for

__all__ = ["sweep_programs", "sweep_workload"]


def sweep_programs(tier: str = "full") -> list[dict]:
    """Every training program of the rate tier ``tier``, in the sweep's order: ``truth``,
    ``n``, ``replicates``, ``p``, ``widths`` (the group), ``E`` (models), ``batch_size``,
    ``depth``, ``cap`` (the step cap), ``compile``, ``mlp``."""
    spec = tiers.RATES[tier]
    cfg = SweepConfig(truths=spec["truths"], **spec["sweep"])
    out = []
    for job in jobs_for(cfg):
        for g in group_widths(cfg.widths_at(job.n)):
            out.append(
                {
                    "truth": job.truth.key,
                    "n": job.n,
                    "replicates": list(job.replicates),
                    "p": job.truth.p,
                    "widths": list(g),
                    "E": len(g) * len(job.replicates),
                    "batch_size": min(cfg.batch_size, job.n),
                    "depth": cfg.depth,
                    "cap": cfg.steps_cap(job.n),
                    "compile": cfg.compile,
                    "mlp": cfg.mlp,
                }
            )
    return out


def _recorded_steps(records: list[dict]) -> dict:
    """``{(truth, n, replicate, width): steps}`` from sweep records' per-candidate steps."""
    out = {}
    for r in records:
        c = r["cell"]
        for w, s in zip(r["config"]["widths"], r["per_width"]["steps"], strict=True):
            out[(c["truth"], c["n"], c["replicate"], w)] = int(s)
    return out


def _program_rate(prog: dict, steps: int, repeats: int, options: StepOptions) -> float:
    """Steps per second of one program (all its models), its step run as ``options`` say,
    median of ``repeats``.

    Compiled, each program starts from a fresh dynamo cache, as each sweep job does
    (``simulate.sweep.train.asvi_job.run_asvi_job``), and a recompile past dynamo's limit is an
    error: the
    tier's 44 programs compiled in one process otherwise pass the limit and the later ones
    run eagerly, which timed the full tier's p = 200 programs up to 3x too slow."""
    if options.compile:
        torch._dynamo.reset()
        with torch._dynamo.config.patch(fail_on_recompile_limit_hit=True):
            return _timed_program(prog, steps, repeats, options)
    return _timed_program(prog, steps, repeats, options)


def _timed_program(prog: dict, steps: int, repeats: int, options: StepOptions) -> float:
    rng = np.random.default_rng(0)
    D, n, p = len(prog["replicates"]), prog["n"], prog["p"]
    X = torch.tensor(rng.uniform(-1, 1, (D, n, p)), dtype=torch.float32)
    y = torch.tensor(rng.normal(0, 1, (D, n)), dtype=torch.float32)
    widths = prog["widths"] * D
    data_index = [d for d in range(D) for _ in prog["widths"]]
    tr = build_trainer(
        Hyper(batch_size=prog["batch_size"]), widths, list(range(len(widths))), X, y,
        data_index, depth=prog["depth"], options=options,
    )  # fmt: skip
    tr.fit(3)  # warm-up (compilation included)
    rates = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        tr.fit(steps)
        rates.append(steps / (time.perf_counter() - t0))
    return statistics.median(rates)


def sweep_workload(
    tier: str = "full",
    steps: int = 20,
    repeats: int = 3,
    compile: bool | None = None,
    records: str | None = None,
    peak: float | None = None,
    log=print,
    mlp: str | None = None,
) -> dict:
    """Time the tier's programs and project its training time (module docstring).
    ``compile``: as the tier (None) or forced; ``peak``: the GEMM rate to compare with
    (``simulate.bench.flops.peak_gflops``, measured by the caller); ``mlp``: the network's
    pass, as the tier (None) or forced (``simulate.core.native``; ``"native-step"``, the
    whole step in C, is never compiled, whatever ``compile`` says)."""
    programs = sweep_programs(tier)
    recorded = _recorded_steps(read_records(records)) if records else None
    workers = tiers.RATES[tier].get("workers") or 1
    rates: dict = {}
    total_s = total_model_steps = useful = flops = 0.0
    for prog in programs:
        # the program's step as the tier runs it, or as forced (built here, passed whole)
        kind = prog["mlp"] if mlp is None else mlp
        compiled = prog["compile"] if compile is None else bool(compile)
        options = StepOptions(compile=compiled and path_of(kind).compilable, mlp=kind)
        key = (prog["p"], prog["n"], tuple(prog["widths"]), prog["E"], options)
        if key not in rates:
            rates[key] = _program_rate(prog, steps, repeats, options)
            log(
                f"  p={prog['p']:3d} n={prog['n']:6d} widths {prog['widths']}: "
                f"{rates[key] * prog['E']:8.0f} model-steps/s"
            )
        if recorded is not None:
            per = [
                recorded[(prog["truth"], prog["n"], r, w)]
                for r in prog["replicates"]
                for w in prog["widths"]
            ]
            run_steps, useful = max(per), useful + sum(per)
        else:
            run_steps = prog["cap"]
        prog["steps_per_s"], prog["run_steps"] = rates[key], run_steps
        total_s += run_steps / rates[key]
        total_model_steps += prog["E"] * run_steps
        per_model = workload_flops(prog["widths"], prog["p"], prog["depth"], prog["batch_size"])
        flops += run_steps * prog["E"] * per_model
    gflops = flops / total_s / 1e9
    return {
        "tier": tier,
        "mlp": mlp or programs[0]["mlp"],
        "programs": programs,
        "distinct_programs": len(rates),
        "workers": workers,
        "model_steps_per_s": total_model_steps / total_s,
        "gflops": gflops,
        "peak_gflops": peak,
        "peak_fraction": None if peak is None else gflops / peak,
        "projected_full_tier_min": total_s / workers / 60,
        "steps_from": "records" if recorded is not None else "cap",
        "useful_fraction": None if recorded is None else useful / total_model_steps,
    }
