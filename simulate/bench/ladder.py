"""``python -m simulate.bench.ladder``: what one cell of a sweep costs with a wide candidate
ladder against a narrow one, in one process, as a ratio, and where the wide one's time goes.

For each ladder (default 2..64 and 2..256) the cell's candidates are split into their
padded groups as the sweep splits them (``simulate.sweep.setup.widths.group_widths``), on
``--replicates`` replicates' data of n points (p = 1, depth 2, the C step, batch 128, one
thread).  Each group is

* stepped: ms per step at the cell's batch and at a batch of one (what a step costs
  whatever its minibatch: the per-slot work -- sampling, the KL, the optimiser -- against
  the network's products), times its steps: the most any of its widths took in ``--records``
  at this n (the shipped records of a 2..256 cell), else ``--steps``;
* trained at ``--posterior-n`` points of confirm-v4's alpha = 0.5 truth under that
  protocol's training settings (:data:`DESIGN`) until the ELBO's rule stops it (training
  at n itself would cost the cell; the trained widths keep 60-150 edges at every n in the
  shipped 2..256 records), then evaluated at n as a cell is: the
  full-data ELBO (``--elbo-draws``) and the test metrics (20,000 points, 30 draws), on the
  dense pass and on the live units (``simulate.core.compact``).

A cell's projected seconds are its groups' step time times their steps plus their
evaluation (the reference's fit, the same for both ladders, is left out: it is said).
No number here enters a record; the benchmark is not fingerprinted."""

from __future__ import annotations

import gzip
import json
import sys
import time
from dataclasses import replace

import numpy as np
import torch

from simulate.core import compact
from simulate.core.training import build_trainer, train_models
from simulate.sweep.setup.config import SweepConfig
from simulate.sweep.setup.truth_spec import TruthSpec
from simulate.sweep.setup.widths import group_widths
from theory.plumbing.cli import Parser, print_error, run_main
from theory.plumbing.paths import path_arg

__all__ = ["group_costs", "recorded_steps"]

LADDERS = {"narrow": [2, 4, 8, 16, 32, 64], "wide": [2, 4, 8, 16, 32, 64, 128, 256]}


def recorded_steps(path: str, n: int) -> dict:
    """The most steps each width took at n in a sweep's records (``per_width.steps``)."""
    opener = gzip.open if str(path).endswith(".gz") else open
    out: dict = {}
    with opener(path, "rt") as fh:
        for line in fh:
            r = json.loads(line)
            if r["cell"]["n"] != n:
                continue
            for w, s in zip(r["config"]["widths"], r["per_width"]["steps"], strict=True):
                out[int(w)] = max(out.get(int(w), 0), int(s))
    return out


def _ms_per_step(tr, steps: int) -> float:
    tr.fit(10)  # warm-up
    t0 = time.perf_counter()
    tr.fit(steps)
    return 1e3 * (time.perf_counter() - t0) / steps


def _eval_s(post, X, y, di, elbo_draws: int, pays: float) -> float:
    """Seconds of a cell's evaluation of ``post`` with ``compact.PAYS_BELOW = pays`` (set
    back after): the full-data ELBO and the test metrics."""
    keep, compact.PAYS_BELOW = compact.PAYS_BELOW, pays
    try:
        rng = np.random.default_rng(1)
        Xt = rng.uniform(-1, 1, (20_000, 1))
        t0 = time.perf_counter()
        post.elbo(X, y, di, draws=elbo_draws)
        post.test_metrics(np.zeros(20_000), Xt, 30)
        return time.perf_counter() - t0
    finally:
        compact.PAYS_BELOW = keep


# confirm-v4's [design.common] (its training settings, the default recipe, the C step):
# the posteriors evaluated here are trained as that protocol's cells were
DESIGN = dict(
    batch_size=128, max_steps=20_000, max_epochs=160, stop_window=500, stop_tol=0.005,
    stop_patience=2, stop_kl_abs=2.0, lr_inclusion=0.1, lr_inclusion_ramp=1000,
    stop_lr_decays=2, stop_lr_factor=0.1, mlp="native-step", compile=False,
)  # fmt: skip


def _data(spec, n: int, R: int, seed: int):
    """``R`` replicates' ``(X [R, n, 1], y [R, n])`` of replicate 0's truth, sigma 1."""
    f0 = spec.build(0)
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (R, n, 1))
    y = f0(X.reshape(-1, 1)).reshape(R, n) + rng.normal(0, 1, (R, n))
    return torch.tensor(X, dtype=torch.float32), torch.tensor(y, dtype=torch.float32)


def group_costs(group, n: int, R: int, n_post: int, timed: int, elbo_draws: int) -> dict:
    """One group's step times (batch 128 and 1, ms) at n; its posterior trained at
    ``n_post`` points under :data:`DESIGN` until the ELBO's rule stops it (confirm-v4's
    alpha = 0.5 truth), its edges, and its evaluation at n (seconds, dense and compact)."""
    spec = TruthSpec("holder", p=1, alpha=0.5, seed=20261203)
    cfg = SweepConfig(truths=[spec], ns=[n_post], **DESIGN)
    widths = [w for w in group for _ in range(R)]
    di = [d for _ in group for d in range(R)]
    seeds = list(range(len(widths)))
    X, y = _data(spec, n, R, 0)
    out = {}
    for bs in (128, 1):
        tr = build_trainer(replace(cfg.hyper_at(n), batch_size=bs), widths, seeds, X, y, di,
                           depth=2, options=cfg.step_options())  # fmt: skip
        out[f"step_ms_b{bs}"] = _ms_per_step(tr, timed)
    Xp, yp = _data(spec, n_post, R, 1)
    trained = train_models(cfg.hyper_at(n_post), widths, seeds, Xp, yp, di, depth=2,
                           rule=cfg.stop_rule_at(n_post), options=cfg.step_options())  # fmt: skip
    post = trained.posterior
    out["edges"] = [round(float(v)) for v in post.edges()["sum_nu"]]
    out["post_steps"] = [int(s) for s in trained.convergence["steps"]]
    X64, y64 = X.to(torch.float64), y.to(torch.float64)
    out["eval_dense_s"] = _eval_s(post, X64, y64, di, elbo_draws, -1.0)
    out["eval_compact_s"] = _eval_s(post, X64, y64, di, elbo_draws, compact.PAYS_BELOW)
    return out


def main(argv=None) -> int:
    ap = Parser(prog="python -m simulate.bench.ladder", description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=512_000)
    ap.add_argument("--replicates", type=int, default=1)
    ap.add_argument(
        "--records", type=path_arg, default=None,
        help="a sweep's records with the wide ladder (each width's steps at n)",
    )  # fmt: skip
    ap.add_argument("--steps", type=int, default=40_000, help="steps where no record says")
    ap.add_argument("--posterior-n", type=int, default=32_000,
                    help="the n the evaluated posteriors are trained at")  # fmt: skip
    ap.add_argument("--timed-steps", type=int, default=300)
    ap.add_argument("--elbo-draws", type=int, default=10)
    args = ap.parse_args(argv)
    if min(args.n, args.replicates, args.posterior_n, args.timed_steps, args.elbo_draws) < 1:
        print_error("--n, --replicates, --posterior-n, --timed-steps, --elbo-draws: >= 1")
        return 2
    torch.set_num_threads(1)
    steps = recorded_steps(args.records, args.n) if args.records else {}
    cost: dict = {}
    for g in group_widths(LADDERS["wide"]) + group_widths(LADDERS["narrow"]):
        if tuple(g) in cost:
            continue
        c = group_costs(g, args.n, args.replicates, args.posterior_n, args.timed_steps,
                        args.elbo_draws)  # fmt: skip
        c["steps"] = max(steps.get(w, args.steps) for w in g)
        cost[tuple(g)] = c
        print(f"group {g}: step {c['step_ms_b128']:.2f} ms (batch 1: {c['step_ms_b1']:.2f}),"
              f" {c['steps']} steps, edges {c['edges']}, evaluation {c['eval_dense_s']:.1f} s"
              f" dense, {c['eval_compact_s']:.1f} s live units", flush=True)  # fmt: skip
    cells = {}
    for name, ladder in LADDERS.items():
        gs = [cost[tuple(g)] for g in group_widths(ladder)]
        train = sum(c["step_ms_b128"] * c["steps"] / 1e3 for c in gs)
        cells[name] = {k: train + sum(c[f"eval_{k}_s"] for c in gs) for k in ("dense", "compact")}
        cell = cells[name]
        print(f"{name} ladder {ladder}: training {train:.0f} s; cell {cell['dense']:.0f} s dense,"
              f" {cell['compact']:.0f} s on live units (the reference's fit left out)")  # fmt: skip
    for k in ("dense", "compact"):
        print(f"wide / narrow ({k} evaluation): {cells['wide'][k] / cells['narrow'][k]:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
