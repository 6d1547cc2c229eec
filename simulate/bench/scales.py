"""``python -m simulate.bench.scales [--widths 64 256] [--n 8192] [--repeats 3]``: the W0s
arm's Gauss-Newton curvature sums, in closed form
(``simulate.references.constructive.curvature_diagonal``) against the per-point autograd
they replaced (:func:`autograd_curvature`: a ``vmap`` of ``grad`` over chunks of 1,024
points, kept here as the baseline), in one process, one thread, as a ratio, with the
largest relative difference of the two sums.

Each width: one random depth-2 network on ``--n`` uniform points of [-1, 1]; each variant
timed ``--repeats`` times, alternating, the median kept.  No number here enters a record;
the benchmark is not fingerprinted."""

from __future__ import annotations

import sys
import time

import numpy as np
import torch
from torch.func import grad, vmap

from simulate.core.layout import Layout
from simulate.references.constructive import curvature_diagonal
from theory.plumbing.cli import Parser, run_main


def autograd_curvature(layout: Layout, theta: torch.Tensor, X, chunk: int = 1024):
    """``[P]``: the sum over the rows of ``X`` of the squared per-point gradient of f, by a
    ``vmap`` of autograd (the code the closed form replaced, 5ab0b66)."""

    def f(t, x):
        return layout.forward(t[None], x[None, None])[0, 0, 0]

    per_point = vmap(grad(f), in_dims=(None, 0))
    h = torch.zeros_like(theta)
    with torch.no_grad():
        for a in range(0, X.shape[0], chunk):
            h += (per_point(theta, X[a : a + chunk]) ** 2).sum(0)
    return h


def bench(width: int, n: int, repeats: int = 3, seed: int = 0) -> dict:
    """Both variants' median seconds on one width-``width`` network at ``n`` points, their
    ratio and the largest relative difference of their sums."""
    g = torch.Generator().manual_seed(seed)
    layout = Layout(1, 2, [width])
    theta = torch.randn(layout.P, generator=g, dtype=torch.float64) * 0.1
    X = torch.rand(n, 1, generator=g, dtype=torch.float64) * 2 - 1
    times: dict[str, list[float]] = {"autograd": [], "closed": []}
    out = {}
    for _ in range(repeats):
        for name, fn in (("autograd", autograd_curvature), ("closed", curvature_diagonal)):
            t0 = time.perf_counter()
            out[name] = fn(layout, theta, X)
            times[name].append(time.perf_counter() - t0)
    a, c = out["autograd"], out["closed"]
    rel = float(((a - c).abs() / a.abs().clamp_min(1e-300)).max())
    med = {k: float(np.median(v)) for k, v in times.items()}
    return {"width": width, "n": n, **med, "ratio": med["autograd"] / med["closed"],
            "max_rel_diff": rel}  # fmt: skip


def main(argv=None) -> int:
    ap = Parser(prog="python -m simulate.bench.scales", description=__doc__.split("\n\n")[0])
    ap.add_argument("--widths", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    for w in args.widths:
        r = bench(w, args.n, args.repeats)
        print(
            f"width {w:4d}, n = {args.n:,}: autograd {r['autograd']:8.3f} s, closed form"
            f" {r['closed']:7.3f} s, ratio {r['ratio']:7.1f}x, largest relative difference"
            f" {r['max_rel_diff']:.1e}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
