"""The paper's teacher-network experiment (the driver; ``figures.teacher_figures`` draws Table 1 and
Figure 1(b) from its records).

Setting (Section 8.1 and the appendix): one teacher 20-10-10-1 (weights U(0.5, 1.5), half
set to zero), training sets of n = 10,000 points with noise sigma = 1 (one per replicate,
test sets of fresh points), students of depth 2 and widths 2, 4, ..., 20; batch 1024, K = 1,
Adam lr 5e-3, lambda_s = 3, lambda = 10, sigma_0 = 0.8.  Per replicate and width:
SVI (spike-and-slab), HS-BNN and Dense-BNN (``simulate.core.families``); the ASVI row selects,
per replicate, the SVI width with the largest penalised ELBO (eq. (13)), so it reuses the
SVI fits: ASVI trains all candidate widths and keeps one.

Records: one JSON line per (method, replicate) with every width's test RMSE, edge count and
ELBO, in ``results/figures/teacher-TIER.jsonl``; existing records are reused (``--recompute``
discards them).  Figure 1(b)'s re-selection for other lambda needs no training: the
penalty ``log pi(N)`` is added to the recorded ELBOs.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch._dynamo.utils import counters

from simulate.core import Hyper, StepOptions
from simulate.core.hyper import DEPTH, HYPER_DEFAULTS
from simulate.core.options import DEFAULT_OPTIONS
from simulate.core.posterior import ELBO_DRAWS, PREDICT_DRAWS
from simulate.core.training import train_models
from simulate.sweep.run.parallel import map_unordered
from simulate.sweep.setup import tiers
from simulate.sweep.store.records import RecordStore, tier_store
from simulate.truths.functions import TeacherNetwork, teacher_data

__all__ = [
    "METHODS", "SCHEMA", "RUN_PLAN", "TeacherVariant", "block_plan", "run_teacher", "teacher_store",
    "train_block", "width_groups", "tier_steps",
]  # fmt: skip

SCHEMA = "asvi-rates/teacher-record/2"
METHODS = {"SVI": "spike_slab", "HS-BNN": "horseshoe", "Dense-BNN": "dense"}


# How each method's blocks are trained (measured, BENCHMARKS.md "Table 1 workload"): every
# method runs a compiled hand-written step (SVI 2.3x over eager at two threads; Dense-BNN
# 1.85x and HS-BNN 2.5x over their former eager autograd steps at one thread) and,
# compiled, three programs of similar widths beat one program padded to width 20 (1.7x at
# two threads for SVI; at one thread 1.1x SVI, 1.4x Dense-BNN, 1.25x HS-BNN).
# Compiling costs ~15 s per program shape, the eager time of about
# 1500 steps of a 50-model block, so a tier compiles only from COMPILE_FROM_STEPS steps
# (the medium, long and paper tiers; not tiny and quick).  Splitting and compiling change the
# numbers only by rounding: each model's noise depends on its seed alone (simulate.core.rng),
# not on its program's padding.
RUN_PLAN = {
    "SVI": {"compile": True, "groups": 3},
    "HS-BNN": {"compile": True, "groups": 3},
    "Dense-BNN": {"compile": True, "groups": 3},
}
COMPILE_FROM_STEPS = 5000


def block_plan(method: str, steps: int, plan=None, mlp: str = DEFAULT_OPTIONS.mlp) -> dict:
    """How a block of ``method`` runs at ``steps`` steps: ``plan`` (default ``RUN_PLAN``)'s
    entry, compiled and split only from ``COMPILE_FROM_STEPS`` steps.  ``mlp="native"``
    (the network's pass fused per model, ``simulate.core.native``): one program per block
    -- the fused pass skips each model's padding, so one program padded to width 20 beats
    three width groups (BENCHMARKS.md, "A Table 1 block as the driver runs it": SVI
    10,966 -> 28,066 model-steps/s at one thread, compiled)."""
    p = dict((plan or RUN_PLAN)[method])
    if steps < COMPILE_FROM_STEPS and plan is None:
        p = {"compile": False, "groups": 1}
    if mlp != DEFAULT_OPTIONS.mlp:
        p.update(groups=1)
    return p


def _batch(cfg: dict) -> int:
    """The teacher experiment's batch, Hyper's default (1024; or n, if smaller)."""
    return min(HYPER_DEFAULTS["batch_size"], cfg["n"])


def tier_steps(cfg: dict) -> int:
    """Steps per model: the tier's epochs at batch 1024 (or n, if smaller)."""
    return math.ceil(cfg["epochs"] * cfg["n"] / _batch(cfg))


def width_groups(widths, groups: int) -> list[list[int]]:
    """``widths`` sorted and cut into ``groups`` consecutive runs of near-equal length (each
    run one batched program, padded to its widest)."""
    ws = sorted(widths)
    k, extra = divmod(len(ws), groups)
    out, i = [], 0
    for g in range(min(groups, len(ws))):
        j = i + k + (1 if g < extra else 0)
        out.append(ws[i:j])
        i = j
    return out


def _block_data(reps, cfg: dict, teacher):
    X, y, Xt, yt = [], [], [], []
    for r in reps:
        a, b, c, d = teacher_data(teacher, cfg["n"], cfg["n_test"], r)
        X.append(a), y.append(b), Xt.append(c), yt.append(d)
    Xs = torch.tensor(np.stack(X), dtype=torch.float32)
    ys = torch.tensor(np.stack(y), dtype=torch.float32)
    return Xs, ys, Xt, yt


def _train_group(method, reps, widths, group, cfg, data, options: StepOptions) -> dict:
    """Train the widths ``group`` (a subset of ``widths``) of every replicate in ``reps`` as
    one batched program, its step run as ``options`` say; per (replicate, width): test
    RMSE, edges, ELBO, failed."""
    Xs, ys, Xt, yt = data
    hyper = Hyper(family=METHODS[method], batch_size=_batch(cfg))
    m = list(METHODS).index(method)
    # a model's seed names its (method, replicate, width), whatever program it runs in
    seeds = [1_000_000 * (1 + m) + 100 * r + widths.index(w) for r in reps for w in group]
    data_index = [i for i in range(len(reps)) for _ in group]
    trained = train_models(
        hyper, group * len(reps), seeds, Xs, ys, data_index, depth=DEPTH, steps=tier_steps(cfg),
        options=options,
    )  # fmt: skip
    tr, post = trained.trainer, trained.posterior
    el = post.elbo(Xs, ys, data_index, draws=ELBO_DRAWS)["elbo"]
    edges = post.edges()["sum_nu"]
    out = {}
    for i, r in enumerate(reps):
        sl = slice(i * len(group), (i + 1) * len(group))
        pred = post.predict_mean(Xt[i], PREDICT_DRAWS)[sl].cpu().numpy()
        rmse = np.sqrt(((pred - yt[i][None, :]) ** 2).mean(1))
        for j, w in enumerate(group):
            k = i * len(group) + j
            failed = bool(tr.state.health.failed[k])
            out[r, w] = (float(rmse[j]), float(edges[k]), float(el[k]), failed)
    return out


def train_block(task) -> list[dict]:
    """Train every width of one method for a block of replicates: ``task`` is ``(method,
    reps, cfg, bias, groups, options)`` (picklable, for worker processes; ``groups`` the
    block's width groups, :func:`block_plan`'s, and ``options`` how its step runs,
    ``StepOptions``, compiled as the plan says).  A compiled block counts the graphs
    it compiled (a shape compiles once per process and is reused by later blocks and
    replicates) and fails rather than silently running eagerly past dynamo's recompile
    limit."""
    method, reps, cfg, bias, groups, options = task
    t0 = time.perf_counter()
    widths = list(cfg["widths"])
    data = _block_data(reps, cfg, TeacherNetwork(seed=0, bias=bias))
    graphs0 = counters["stats"]["unique_graphs"]
    cells = {}
    with torch._dynamo.config.patch(fail_on_recompile_limit_hit=True):
        for group in width_groups(widths, groups):
            cells.update(_train_group(method, reps, widths, group, cfg, data, options))
    graphs = counters["stats"]["unique_graphs"] - graphs0
    out = []
    for r in reps:
        rmse, edges, elbo, failed = zip(*(cells[r, w] for w in widths), strict=True)
        out.append(
            {
                "schema": SCHEMA,
                "method": method,
                "replicate": r,
                "widths": widths,
                "epochs": cfg["epochs"],
                "steps": tier_steps(cfg),
                "n": cfg["n"],
                "rmse": list(rmse),
                "edges": list(edges),
                "elbo": list(elbo),
                "failed": list(failed),
                "train_s": time.perf_counter() - t0,
                "programs": groups,
                "compiled": options.compile,
                "mlp": options.mlp,
                "graphs_compiled": graphs,
            }
        )
    return out


def teacher_store(
    tier: str,
    out_dir: str,
    recompute: bool = False,
    bias: str = "subtract",
    mlp: str = DEFAULT_OPTIONS.mlp,
) -> RecordStore:
    """The tier's records file (``teacher-subtract-TIER.jsonl`` for the default teacher,
    eq. (eqmod2)'s subtracted biases; ``teacher-TIER.jsonl`` for ``relu(h W + b)``, the
    name and key its records had when it was the default), keyed by (method, replicate),
    of one configuration: the tier's settings (less the replicate count, which only says
    how many there are), the teacher's bias convention (for ``subtract``), the schema and
    the versions.  ``mlp="native"``: a file of its own (``teacher-...-native-TIER.jsonl``,
    ``mlp`` in its configuration), since its numbers differ from the batched pass's by
    float rounding."""
    settings = {k: v for k, v in tiers.TEACHER[tier].items() if k != "replicates"}
    stem = "teacher"
    if bias != "add":  # "add" files keep the key they were written with
        settings["teacher_bias"] = bias
        stem = f"teacher-{bias}"
    if mlp != DEFAULT_OPTIONS.mlp:
        settings["mlp"] = mlp
        stem = f"{stem}-{mlp}"
    key = lambda r: (r["method"], r["replicate"])  # noqa: E731
    required = ("method", "replicate", "rmse", "elbo")
    return tier_store(out_dir, stem, tier, settings, SCHEMA, key, required, recompute)


@dataclass(frozen=True)
class TeacherVariant:
    """Which teacher records a run trains and reads: the teacher's ``bias`` convention
    (``simulate.truths.functions.TeacherNetwork``: ``"subtract"`` or ``"add"``) and the
    network's pass ``mlp`` (:func:`block_plan`); each variant but the default is in a file of
    its own (:func:`teacher_store`).  Checked by :func:`run_teacher` before any file."""

    bias: str = "subtract"
    mlp: str = DEFAULT_OPTIONS.mlp


def run_teacher(
    tier: str,
    out_dir: str,
    recompute: bool = False,
    log=print,
    variant: TeacherVariant = TeacherVariant(),
    workers: int | None = None,
    methods=None,
    plan=None,
) -> list[dict]:
    """Train what the tier needs and is not yet recorded; return all its records.
    ``variant``: the teacher's bias convention and the network's pass
    (:class:`TeacherVariant`); ``workers``: train the blocks on that many single-threaded
    worker processes (``simulate.sweep.run.parallel``; this process alone writes the records,
    each block's as it finishes, so a run stopped anywhere loses at most the blocks in
    flight); ``methods``: a subset of ``METHODS`` to train (default all; Figure 1(b) and the
    ASVI row need SVI alone); ``plan``: a ``RUN_PLAN``-shaped override of how blocks run,
    taken at any number of steps (tests).  Returns the records of every method recorded so
    far."""
    bias, mlp = variant.bias, variant.mlp
    cfg = tiers.TEACHER[tier]
    methods = list(METHODS) if methods is None else list(methods)
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown method(s) {unknown}; choose from {list(METHODS)}")
    TeacherNetwork(seed=0, bias=bias)  # a bad convention fails before any file
    # how every block steps, made (and a bad pass refused, ValueError) before any file; each
    # block compiles as its plan says (block_plan)
    options = StepOptions(mlp=mlp)
    options.path.require("--teacher-mlp")  # no compiler: a clear error before any file
    store = teacher_store(tier, out_dir, recompute, bias, options.mlp)
    t0 = time.perf_counter()
    with store.writing() as st:
        steps = tier_steps(cfg)
        plans = {m: block_plan(m, steps, plan, options.mlp) for m in methods}
        todo = [
            (method, reps, cfg, bias, plans[method]["groups"],
             replace(options, compile=plans[method]["compile"]))
            for method in methods
            for reps in _blocks(cfg)
            if not all((method, r) in st.done for r in reps)
        ]  # fmt: skip
        for recs in map_unordered(train_block, todo, workers):
            st.append(recs)
            reps = [r["replicate"] for r in recs]
            log(
                f"  teacher {tier}: {recs[0]['method']} replicates {reps[0]}-{reps[-1]} "
                f"({time.perf_counter() - t0:.0f} s; {recs[0]['graphs_compiled']} graphs "
                "compiled)"
            )
    return [r for r in store.read() if r["replicate"] < cfg["replicates"]]


def _blocks(cfg: dict) -> list[list[int]]:
    step, total = cfg["replicate_block"], cfg["replicates"]
    return [list(range(b, min(b + step, total))) for b in range(0, total, step)]
