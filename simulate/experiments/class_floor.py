"""``python -m simulate.experiments.class_floor --alpha A [--p 1] [--depth 2] [--widths W ...]
[--replicate R] [--truth-seed S] [--out FILE] [--reference RECORDS]``: the floor of a
candidate class -- the smallest error a ReLU network of one depth and width reaches on a
truth when data are not the limit.

Why: ASVI's risk at a cell is at least what the best network of its selected class can do
for f0.  Where that floor (a property of f0 and the class, not of n or a replicate's
noise) exceeds the class-matched reference's risk at some n, no training of that class can
keep pace with the reference beyond it: a flattening there is the class's, not the
objective's or the optimiser's.

**What is fitted**: f0 itself (no noise) on a large design, ``n_design`` points uniform on
[-1, 1]^p (seeded, its own stream), by least squares: full-batch Adam on the design's mean
squared error with the step size decayed to 0 on a cosine over ``steps`` steps, the
parameters of the lowest training error kept (evaluated every 50 steps).  From several
starts: the constructive one (p = 1: the least-squares linear spline with ``width`` equal
segments on the same design, encoded exactly in the network,
``simulate.references.constructive.spline_network``: what a width-w candidate holds by
construction) and ``random_starts`` random ones (the core's initial locations,
``simulate.core.state.init_state``).  The floor is the smallest over starts; every start's
result is recorded.  Nothing of this reaches ASVI: it reads f0, which is its purpose, and is
never an input to a sweep's training, stopping or selection.

**What is measured**: on ``n_test`` fresh uniform points (their own stream), the squared L2
error to f0 and d^2 at the cell's noise sd (``sigma``: a posterior with all its mass on the
fitted network, ``simulate.references.classical.metrics_of``).

**Records** (``--out``, JSON lines, schema :data:`SCHEMA`): one row per (truth, replicate,
depth, width, start, settings); a run skips the rows its file already holds, so a long curve
resumes and a curve is computed once per truth (the cache the risk split reads).

**Where it binds** (``--reference RECORDS``: a sweep's records of the same truth): the
reference's mean d^2 per n (over the records' replicates) fitted by a log-log line, and per
width the n at which that line falls below the width's floor -- beyond it the class cannot
match the reference.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import sys
import time
from dataclasses import dataclass

import numpy as np
import torch

from simulate.core.hyper import DEPTH, Hyper
from simulate.core.layout import Layout
from simulate.core.state import init_state
from simulate.references.classical import fit_linear_spline, metrics_of
from simulate.references.constructive import net_theta, spline_network
from simulate.sweep.setup.truth_spec import TruthSpec, stable_seed
from simulate.sweep.store.schema import read_records
from theory.plumbing.cli import Parser, print_error, run_main
from theory.plumbing.jsonl import append_jsonl, read_jsonl
from theory.plumbing.paths import check_output_file, path_arg

__all__ = ["SCHEMA", "FloorSettings", "binding_n", "floor_rows", "floors", "main"]

SCHEMA = "asvi-rates/class-floor/1"
# what every row holds (read_rows checks them)
FIELDS = ("truth", "replicate", "depth", "width", "start", "settings", "settings_digest",
          "l2sq", "d2", "train_mse", "seconds")  # fmt: skip


@dataclass(frozen=True)
class FloorSettings:
    """How a floor is fitted (module docstring): the noiseless design's and the test set's
    sizes, the Adam steps and initial step size (cosine-decayed to 0), the random starts
    beside the constructive one, and the noise sd d^2 is taken at."""

    n_design: int = 4096
    n_test: int = 16384
    steps: int = 4000
    lr: float = 3e-3
    random_starts: int = 2
    sigma: float = 1.0

    def digest(self) -> str:
        text = json.dumps(dataclasses.asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]


def _design(spec: TruthSpec, replicate: int, settings: FloorSettings):
    """``(f0, X, f0(X), Xt, f0(Xt))``: the design and the test points, each its own stream."""
    f0 = spec.build(replicate)
    base = stable_seed(spec.key, replicate, "class-floor")
    X = np.random.default_rng([base, 0]).uniform(-1, 1, size=(settings.n_design, spec.p))
    Xt = np.random.default_rng([base, 1]).uniform(-1, 1, size=(settings.n_test, spec.p))
    return f0, X, f0(X), Xt, f0(Xt)


def _starts(spec, X, y, width: int, depth: int, settings: FloorSettings):
    """``(names, theta0 [E, P_net])``: the constructive start (p = 1) and the random ones."""
    layout = Layout(spec.p, depth, [width])
    names, thetas = [], []
    if spec.p == 1:
        grid = -1 + 2 * np.arange(width + 1) / width
        values = fit_linear_spline(X, y, width)(grid[:, None])
        names.append("constructive")
        thetas.append(net_theta(layout, [spline_network(values, width, depth)])[0])
    for k in range(settings.random_starts):
        seed = stable_seed(spec.key, width, depth, "floor-start", k) % 2**62
        names.append(f"random-{k}")
        thetas.append(init_state(layout, Hyper(), [seed]).params[0][0].double())
    theta = torch.stack(thetas)[:, : layout.P_net]
    return names, Layout(spec.p, depth, [width] * len(names)), theta


def _fit(layout: Layout, theta0, X, y, settings: FloorSettings):
    """Full-batch Adam on each model's mean squared error, the step size on a cosine to 0;
    returns each model's parameters of lowest training error and that error."""
    x = torch.tensor(X, dtype=torch.float32).expand(layout.E, -1, -1)
    t = torch.tensor(y, dtype=torch.float32)[None]
    mask = layout.mask(dtype=torch.float32)[:, : layout.P_net]
    theta = (theta0.to(torch.float32) * mask).clone().requires_grad_(True)
    opt = torch.optim.Adam([theta], lr=settings.lr)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: 0.5 * (1 + math.cos(math.pi * min(s, settings.steps) / settings.steps))
    )
    best = torch.full((layout.E,), math.inf)
    kept = theta.detach().clone()
    for step in range(settings.steps + 1):
        opt.zero_grad(set_to_none=False)
        loss = ((layout.forward(theta, x)[:, 0, :] - t) ** 2).mean(-1)
        if step % 50 == 0 or step == settings.steps:
            with torch.no_grad():
                better = torch.isfinite(loss) & (loss < best)
                best = torch.where(better, loss.detach(), best)
                kept[better] = theta.detach()[better]
        if step == settings.steps:
            break
        loss.sum().backward()
        theta.grad.mul_(mask)
        opt.step()
        sched.step()
    return kept, best.numpy().astype(float)


def floor_rows(spec: TruthSpec, replicate: int, depth: int, width: int,
               settings: FloorSettings = FloorSettings()) -> list[dict]:  # fmt: skip
    """One row per start of one class (depth, width) on replicate ``replicate``'s truth
    (module docstring)."""
    _, X, y, Xt, yt = _design(spec, replicate, settings)
    names, layout, theta0 = _starts(spec, X, y, width, depth, settings)
    t0 = time.perf_counter()
    theta, train_mse = _fit(layout, theta0, X, y, settings)
    seconds = time.perf_counter() - t0
    with torch.no_grad():
        xt = torch.tensor(Xt, dtype=torch.float32).expand(layout.E, -1, -1)
        pred = layout.forward(theta, xt)[:, 0, :].double().numpy()
    rows = []
    for e, name in enumerate(names):
        m = metrics_of(pred[e], yt, settings.sigma)
        rows.append({
            "schema": SCHEMA, "truth": spec.key, "replicate": int(replicate),
            "depth": int(depth), "width": int(width), "start": name,
            "settings": dataclasses.asdict(settings), "settings_digest": settings.digest(),
            "l2sq": m["l2sq"], "d2": m["d2"], "train_mse": float(train_mse[e]),
            "seconds": seconds / len(names),
        })  # fmt: skip
    return rows


def _key(row: dict) -> tuple:
    return (row["truth"], row["replicate"], row["depth"], row["width"], row["start"],
            row["settings_digest"])  # fmt: skip


def read_rows(path: str) -> list[dict]:
    """A floor records file's rows (none where there is no file; a ``.gz`` copy reads too),
    each parsed within bounds and checked for :data:`SCHEMA` and its fields
    (``theory.plumbing.jsonl.read_jsonl``: ``RecordsError``, a ValueError, naming the line)."""
    return read_jsonl(path, SCHEMA, required=FIELDS)


def floors(rows: list[dict]) -> dict[tuple, dict]:
    """``{(truth, replicate, depth, width): the row of the smallest d^2 over its starts}``."""
    out: dict[tuple, dict] = {}
    for r in rows:
        k = (r["truth"], r["replicate"], r["depth"], r["width"])
        if k not in out or r["d2"] < out[k]["d2"]:
            out[k] = r
    return out


def binding_n(reference: dict[int, float], floor_d2: float) -> float | None:
    """The n at which the reference's d^2 (``{n: mean d^2}``, a log-log line through them)
    falls to ``floor_d2``: beyond it the class cannot match the reference (None: the line
    does not fall, or fewer than 2 n)."""
    ns = np.array(sorted(reference), dtype=float)
    if ns.size < 2:
        return None
    b, a = np.polyfit(np.log(ns), np.log([reference[int(n)] for n in ns]), 1)
    if b >= 0:
        return None
    return float(np.exp((math.log(floor_d2) - a) / b))


def reference_curve(path: str, truth: str) -> dict[int, float]:
    """The class-matched reference's mean d^2 per n over a sweep records file's replicates
    of ``truth`` (``simulate.sweep.store.schema.read_records``)."""
    by_n: dict[int, list[float]] = {}
    for r in read_records(path):
        if r["cell"]["truth"] == truth and r.get("reference"):
            by_n.setdefault(int(r["cell"]["n"]), []).append(float(r["reference"]["d2"]))
    if not by_n:
        raise ValueError(f"{path}: no reference cells of truth {truth}")
    return {n: float(np.mean(v)) for n, v in sorted(by_n.items())}


def classes_of(path: str) -> list[tuple]:
    """Every ``(TruthSpec, replicate, depth, width)`` a sweep's records select: each ASVI
    cell's (random start's) selected width at its depth, for the Hoelder truths (the floors
    the risk split reads, ``verify.split``), sorted."""
    out = set()
    for r in read_records(path):
        t, cfg = r["truth"], r.get("config", {})
        if r.get("failed") or t.get("kind") != "holder" or r.get("selected_width") is None:
            continue
        spec = TruthSpec("holder", p=int(t["p"]), alpha=t["alpha"], seed=int(t["seed"]))
        out.add((spec, int(r["cell"]["replicate"]), int(cfg["depth"]), int(r["selected_width"])))
    return sorted(out, key=lambda c: (c[0].key, c[1], c[2], c[3]))


def _parser() -> Parser:
    ap = Parser(
        prog="python -m simulate.experiments.class_floor", description=__doc__.split("\n\n")[1]
    )
    ap.add_argument("--alpha", type=float, default=None, help="the truth (or --records)")
    ap.add_argument("--p", type=int, default=1)
    ap.add_argument("--truth-seed", type=int, default=0)
    ap.add_argument("--replicate", type=int, default=0)
    ap.add_argument("--depth", type=int, default=DEPTH)
    ap.add_argument("--widths", type=int, nargs="+", default=[8, 16, 32, 64, 128, 256, 512])
    ap.add_argument("--records", type=path_arg, metavar="SWEEP", default=None,
                    help="a sweep's records: the floor of every replicate's selected class in"
                    " them (each Hoelder truth, replicate, depth and selected width), in place"
                    " of --alpha/--replicate/--depth/--widths")  # fmt: skip
    ap.add_argument("--shard", default="1/1", metavar="I/M",
                    help="with --records: the I-th of M equal shares of the classes (to run"
                    " M processes, each with its own --out)")  # fmt: skip
    ap.add_argument("--steps", type=int, default=FloorSettings.steps)
    ap.add_argument("--n-design", type=int, default=FloorSettings.n_design)
    ap.add_argument("--sigma", type=float, default=FloorSettings.sigma)
    ap.add_argument("--out", type=path_arg, metavar="FILE", default=None,
                    help="records file (default results/class-floor-TRUTH.jsonl)")  # fmt: skip
    ap.add_argument("--reference", type=path_arg, metavar="RECORDS", default=None,
                    help="a sweep's records file of the same truth")  # fmt: skip
    return ap


def _work(args) -> list[tuple]:
    """The classes to compute: ``(spec, replicate, depth, width)``."""
    if args.records is not None:
        if not os.path.isfile(args.records):
            raise ValueError(f"no records file {args.records}")
        i, _, m = args.shard.partition("/")
        if not (i.isdigit() and m.isdigit() and 1 <= int(i) <= int(m)):
            raise ValueError(f"--shard must be I/M with 1 <= I <= M, got {args.shard!r}")
        work = classes_of(args.records)
        return work[int(i) - 1 :: int(m)]
    if args.alpha is None:
        raise ValueError("give --alpha (the truth) or --records (a sweep's selected classes)")
    spec = TruthSpec("holder", p=args.p, alpha=args.alpha, seed=args.truth_seed)
    if min(args.widths) < 1 or args.depth < 1:
        raise ValueError("widths and depth must be >= 1")
    return [(spec, args.replicate, args.depth, w) for w in args.widths]


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    try:
        work = _work(args)
        settings = FloorSettings(n_design=args.n_design, steps=args.steps, sigma=args.sigma)
        if args.steps < 1:
            raise ValueError("steps must be >= 1")
        stem = work[0][0].key if work and args.records is None else "records"
        out = args.out or os.path.join("results", f"class-floor-{stem}.jsonl")
        check_output_file(out, "--out")
        if args.reference and not os.path.isfile(args.reference):
            raise ValueError(f"no records file {args.reference}")
        rows = read_rows(out)
        ref = None
        if args.reference and args.records is None:
            ref = reference_curve(args.reference, work[0][0].key)
    except ValueError as exc:
        print_error(exc)
        return 2
    have = {_key(r) for r in rows}
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    for spec, rep, depth, w in work:
        probe = {"truth": spec.key, "replicate": rep, "depth": depth, "width": w,
                 "settings_digest": settings.digest()}  # fmt: skip
        if any(_key({**probe, "start": s}) in have for s in ("constructive", "random-0")):
            continue  # this class's rows are recorded: resumed
        new = floor_rows(spec, rep, depth, w, settings)
        append_jsonl(out, new)  # whole lines, fsynced: a run stopped here resumes
        rows += new
        print(f"{spec.key} replicate {rep} depth {depth} width {w}: "
              + ", ".join(f"{r['start']} l2sq {r['l2sq']:.3g}" for r in new)
              + f" ({sum(r['seconds'] for r in new):.0f} s)", flush=True)  # fmt: skip
    if args.records is not None:
        print(f"class floors of {len(work)} selected classes in {out}")
        return 0
    spec, rep, depth = work[0][0], args.replicate, args.depth
    print(f"class floor of {spec.key}, replicate {rep}, depth {depth}"
          f" (sigma {settings.sigma:g}; {out}):")  # fmt: skip
    for (truth, r_, d_, w), r in sorted(floors(rows).items()):
        if (truth, r_, d_) != (spec.key, rep, depth):
            continue
        line = f"  width {w:4d}: d2 {r['d2']:.4g}, l2sq {r['l2sq']:.4g} ({r['start']})"
        if ref is not None:
            n = binding_n(ref, r["d2"])
            line += "; binds beyond n = " + ("never (the reference does not fall)" if n is None
                                           else f"{n:,.0f}")  # fmt: skip
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
