"""The paper's teacher-network experiment (the driver; ``figures.teacher`` draws Table 1 and
Figure 1(b) from its records).

Setting (Section 8.1 and the appendix): one teacher 20-10-10-1 (weights U(0.5, 1.5), half
set to zero), training sets of n = 10,000 points with noise sigma = 1 (one per replicate,
test sets of fresh points), students of depth 2 and widths 2, 4, ..., 20; batch 1024, K = 1,
Adam lr 5e-3, lambda_s = 3, lambda = 10, sigma_0 = 0.8.  Per replicate and width:
SVI (spike-and-slab), HS-BNN and Dense-BNN (``simulate.families``); the ASVI row selects,
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

import numpy as np
import torch

from .. import tiers
from ..core import Hyper
from ..recipe import train_models
from ..records import RecordStore, tier_store
from ..truths import TeacherNetwork, make_regression_data

__all__ = ["TIERS", "METHODS", "SCHEMA", "run_teacher", "teacher_store"]

SCHEMA = "asvi-rates/teacher-record/2"
METHODS = {"SVI": "spike_slab", "HS-BNN": "horseshoe", "Dense-BNN": "dense"}
PAPER_WIDTHS = tiers.PAPER_WIDTHS

TIERS = tiers.TEACHER


def _train_block(method: str, reps, cfg: dict, teacher) -> list[dict]:
    """Train every width of ``method`` for a block of replicates in one batched program."""
    t0 = time.perf_counter()
    widths = list(cfg["widths"])
    family = METHODS[method]
    X, y, Xt, yt = [], [], [], []
    for r in reps:
        a, b = make_regression_data(teacher, cfg["n"], 20, 1.0, seed=10_000 + r)
        c, d = make_regression_data(teacher, cfg["n_test"], 20, 1.0, seed=20_000 + r)
        X.append(a), y.append(b), Xt.append(c), yt.append(d)
    R, W = len(reps), len(widths)
    hyper = Hyper(family=family, batch_size=min(1024, cfg["n"]))
    seeds = [
        1_000_000 * (1 + list(METHODS).index(method)) + 100 * r + k for r in reps for k in range(W)
    ]
    data_index = torch.tensor([i for i in range(R) for _ in widths])
    Xs = torch.tensor(np.stack(X), dtype=torch.float32)
    ys = torch.tensor(np.stack(y), dtype=torch.float32)
    steps = math.ceil(cfg["epochs"] * cfg["n"] / hyper.batch_size)
    trained = train_models(hyper, widths * R, seeds, Xs, ys, data_index, depth=2, steps=steps)
    tr, post = trained.trainer, trained.posterior
    el = post.elbo(Xs, ys, data_index, draws=10)
    edges = post.edges()["sum_nu"]
    out = []
    for i, r in enumerate(reps):
        sl = slice(i * W, (i + 1) * W)
        pred = post.predict_mean(Xt[i], 30)[sl].cpu().numpy()
        rmse = np.sqrt(((pred - yt[i][None, :]) ** 2).mean(1))
        out.append(
            {
                "schema": SCHEMA,
                "method": method,
                "replicate": r,
                "widths": widths,
                "epochs": cfg["epochs"],
                "steps": steps,
                "n": cfg["n"],
                "rmse": rmse.tolist(),
                "edges": edges[sl].tolist(),
                "elbo": el["elbo"][sl].tolist(),
                "failed": tr.state.failed[sl].tolist(),
                "train_s": time.perf_counter() - t0,
            }
        )
    return out


def teacher_store(
    tier: str, out_dir: str, recompute: bool = False, bias: str = "add"
) -> RecordStore:
    """The tier's records file (``teacher-TIER.jsonl``; ``teacher-subtract-TIER.jsonl`` for
    the teacher with eq. (eqmod2)'s subtracted biases), keyed by (method, replicate), of
    one configuration: the tier's settings (less the replicate count, which only says how
    many there are), the teacher's bias convention when not the default, the schema and
    the versions."""
    settings = {k: v for k, v in TIERS[tier].items() if k != "replicates"}
    stem = "teacher"
    if bias != "add":  # the default adds nothing, so files written before keep their key
        settings["teacher_bias"] = bias
        stem = f"teacher-{bias}"
    key = lambda r: (r["method"], r["replicate"])  # noqa: E731
    required = ("method", "replicate", "rmse", "elbo")
    return tier_store(out_dir, stem, tier, settings, SCHEMA, key, required, recompute)


def run_teacher(
    tier: str, out_dir: str, recompute: bool = False, log=print, bias: str = "add"
) -> list[dict]:
    """Train what the tier needs and is not yet recorded; return all its records.
    ``bias``: the teacher's bias convention (``simulate.truths.TeacherNetwork``)."""
    cfg = TIERS[tier]
    teacher = TeacherNetwork(seed=0, bias=bias)  # a bad convention fails before any file
    store = teacher_store(tier, out_dir, recompute, bias)
    t0 = time.perf_counter()
    with store.writing() as st:
        for method in METHODS:
            for b in range(0, cfg["replicates"], cfg["replicate_block"]):
                reps = list(range(b, min(b + cfg["replicate_block"], cfg["replicates"])))
                if all((method, r) in st.done for r in reps):
                    continue
                st.append(_train_block(method, reps, cfg, teacher))
                log(
                    f"  teacher {tier}: {method} replicates {reps[0]}-{reps[-1]} "
                    f"({time.perf_counter() - t0:.0f} s)"
                )
    return [r for r in store.read() if r["replicate"] < cfg["replicates"]]
