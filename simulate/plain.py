"""The no-VB control: plain ReLU networks trained by Adam on squared error, early-stopped
on validation data (arm P of the constructive-start comparison, ``simulate.constructive``),
and ``python -m simulate.plain``, the same training from a random or a constructive start on
one Hoelder truth, beside the linear-spline reference.

:func:`train_plain` trains E networks at once (stacked parameters ``theta [E, P]`` of a
:class:`simulate.layout.Layout`, autograd, ``torch.optim.Adam``: elementwise, so each model
trains as it would alone).  Each model's dataset is split once: the last
``VAL_FRACTION`` of a seeded permutation is validation data, the rest training data;
minibatches of the training part are drawn with replacement from the model's own counter-
based stream (``rng.STREAM_PLAIN``).  Every ``eval_every`` steps (at least one pass over the
training part, at least 50 steps) the validation mean squared error is measured; a model
keeps the parameters of its best evaluation and stops after :data:`PATIENCE` evaluations
without improvement (or at the step cap).  Choices: the split, the patience and the
evaluation period are fixed here, not tuned; the budget is the ASVI cell's step cap at the
same batch size (the same number of steps, so 1/(1 - VAL_FRACTION) times the epochs over
the smaller training part).
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch

from . import rng
from .layout import Layout
from .objective import iid_index

__all__ = ["PATIENCE", "VAL_FRACTION", "train_plain", "validation_split"]

VAL_FRACTION = 0.2
PATIENCE = 20


def validation_split(n: int, seed: int) -> np.ndarray:
    """Boolean ``[n]``: the validation points of a dataset of n points (seeded)."""
    n_val = max(1, int(round(VAL_FRACTION * n)))
    return np.random.default_rng(seed).permutation(n) >= n - n_val


def train_plain(
    layout: Layout,
    theta0: torch.Tensor,
    X: torch.Tensor,
    y: torch.Tensor,
    data_index,
    seeds,
    val_masks: np.ndarray,
    *,
    lr: float,
    batch_size: int,
    max_steps: int,
    patience: int = PATIENCE,
    progress=None,
) -> dict:
    """Train ``theta0 [E, P_net]`` (model e on dataset ``data_index[e]`` of ``X [D, n, p]``,
    ``y [D, n]``; ``val_masks [D, n]`` its validation points) by Adam on the training
    points' mean squared error; returns ``theta`` (each model's best-validation
    parameters), ``val_mse``, ``steps`` (the step of the best evaluation), ``stopped``
    (patience ran out before the cap) per model."""
    E = layout.E
    di = torch.as_tensor(data_index, dtype=torch.int64).reshape(-1)
    if theta0.shape != (E, layout.P_net) or di.numel() != E:
        raise ValueError(f"need theta0 [{E}, {layout.P_net}] and one dataset per model")
    X = torch.as_tensor(X, dtype=torch.float32)
    y = torch.as_tensor(y, dtype=torch.float32)
    vm = torch.as_tensor(np.asarray(val_masks, dtype=bool))
    n_tr = int((~vm[0]).sum())
    tr_rows = torch.stack([torch.nonzero(~vm[d])[:, 0] for d in range(vm.shape[0])])
    va_rows = torch.stack([torch.nonzero(vm[d])[:, 0] for d in range(vm.shape[0])])
    Xv, yv = X[di[:, None], va_rows[di]], y[di[:, None], va_rows[di]]  # [E, n_val, p]
    m = min(batch_size, n_tr)
    stream = rng.Stream(
        rng.seed_key(torch.as_tensor(seeds, dtype=torch.int64).reshape(-1), rng.STREAM_PLAIN)[
            :, None
        ],
        torch.arange(m)[None],
    )
    mask = layout.mask(dtype=torch.float32)[:, : layout.P_net]
    theta = (theta0.detach().to(torch.float32) * mask).clone().requires_grad_(True)
    opt = torch.optim.Adam([theta], lr=lr)
    eval_every = max(50, -(-n_tr // m))

    def val_mse():
        with torch.no_grad():
            return ((layout.forward(theta, Xv)[:, 0, :] - yv) ** 2).mean(-1)

    best = val_mse()
    best_theta = theta.detach().clone()
    best_step = torch.zeros(E, dtype=torch.int64)
    since = torch.zeros(E, dtype=torch.int64)
    done = torch.zeros(E, dtype=torch.bool)
    step = 0
    while step < max_steps and not bool(done.all()):
        idx = iid_index(stream.uniform(step, torch.float64), n_tr)  # [E, m]
        rows = tr_rows[di[:, None], idx]
        xb, yb = X[di[:, None], rows], y[di[:, None], rows]
        opt.zero_grad(set_to_none=False)
        loss = ((layout.forward(theta, xb)[:, 0, :] - yb) ** 2).mean(-1)
        loss.sum().backward()
        theta.grad.mul_(mask)
        opt.step()
        step += 1
        if step % eval_every == 0 or step == max_steps:
            v = val_mse()
            better = (v < best) & ~done & torch.isfinite(v)
            best = torch.where(better, v, best)
            best_theta[better] = theta.detach()[better]
            best_step[better] = step
            since = torch.where(better, torch.zeros_like(since), since + 1)
            done |= since >= patience
        if progress is not None:
            progress(step, max_steps)
    return {
        "theta": best_theta,
        "val_mse": best.numpy().astype(float),
        "steps": best_step.numpy(),
        "stopped": done.numpy(),
        "steps_run": step,
    }


# --------------------------------------------------------------------------- the driver
def run(
    alpha: float,
    n: int,
    widths,
    *,
    depth: int = 2,
    start: str = "random",
    epochs: float = 160.0,
    min_steps: int = 20_000,
    batch_size: int = 128,
    lr: float = 5e-3,
    seed: int = 0,
    n_test: int = 20_000,
    progress=None,
) -> dict:
    """Plain ReLU networks of the given widths on the sweeps' Hoelder truth (p = 1,
    smoothness ``alpha``, truth seed ``seed``, its replicate 0) with n points drawn from
    ``seed`` (``simulate.truths.make_regression_data``, noise sd 1) and test inputs from
    their own stream, trained by
    :func:`train_plain` for the ASVI cap in steps, ``max(min_steps, epochs n / batch)`` (the
    full tier's: 160 epochs, 20,000 steps at least), from a ``random`` start (the core's
    initial locations, ``U(-0.6, 0.6)``) or the ``constructive`` one (the validation-chosen
    linear spline, ``simulate.constructive``); and the class-matched reference (the linear
    spline, mesh by 5-fold CV) on the same data.  Returns per width the squared L2 error
    to f0, the validation error and the step of the best evaluation."""
    from .classical import spline_reference
    from .constructive import net_theta, spline_starts
    from .hyper import Hyper
    from .spec import TruthSpec
    from .state import init_state
    from .truths import make_regression_data

    if start not in ("random", "constructive"):
        raise ValueError(f"start must be 'random' or 'constructive', got {start!r}")
    widths = [int(w) for w in widths]
    if not widths or min(widths) < 1 or n < 10 or depth < 1:
        raise ValueError("need widths >= 1, n >= 10 and depth >= 1")
    spec = TruthSpec("holder", p=1, alpha=float(alpha), seed=int(seed))
    f0 = spec.build(0)
    X, y = make_regression_data(f0, n, 1, 1.0, seed)
    Xt = np.random.default_rng([seed, 1]).uniform(-1, 1, size=(n_test, 1))  # test inputs
    f0t = f0(Xt)
    layout = Layout(1, depth, widths)
    if start == "random":
        theta0 = init_state(layout, Hyper(), list(range(len(widths)))).var[0]
    else:
        theta0 = net_theta(layout, spline_starts(X, y, widths, depth, seed=seed))
    steps = max(int(min_steps), math.ceil(float(epochs) * n / batch_size))
    val = validation_split(n, seed)[None]
    t0 = time.perf_counter()
    res = train_plain(
        layout, theta0[:, : layout.P_net], torch.tensor(X[None]), torch.tensor(y[None]),
        [0] * len(widths), list(range(len(widths))), val, lr=lr,
        batch_size=min(batch_size, n), max_steps=steps, progress=progress,
    )  # fmt: skip
    fit_s = time.perf_counter() - t0
    with torch.no_grad():
        xt = torch.tensor(Xt, dtype=torch.float32).expand(len(widths), -1, -1)
        pred = layout.forward(res["theta"], xt)[:, 0, :].double().numpy()
    ref = spline_reference(X, y, Xt, f0t, 1.0, seed=seed)
    return {
        "alpha": float(alpha), "n": int(n), "depth": int(depth), "widths": widths,
        "start": start, "steps_cap": steps, "fit_s": fit_s,
        "l2sq": ((pred - f0t) ** 2).mean(-1).tolist(),
        "val_mse": res["val_mse"].tolist(), "best_step": res["steps"].tolist(),
        "stopped": res["stopped"].tolist(),
        "reference_l2sq": ref["l2sq"], "reference_k": ref["k"],
    }  # fmt: skip


def main(argv=None) -> int:
    """``python -m simulate.plain``: plain ReLU networks against the linear spline."""
    import argparse
    import json
    import sys

    from theory._paths import check_output_file

    from .progress import Progress

    ap = argparse.ArgumentParser(
        prog="python -m simulate.plain",
        description="Plain ReLU networks (Adam on squared error, early-stopped on validation"
        " data) on a p = 1 Hoelder truth, from a random or a constructive start, beside the"
        " linear-spline reference.",
    )
    ap.add_argument("--alpha", type=float, default=0.5)
    ap.add_argument("--n", type=int, default=32_000)
    ap.add_argument("--widths", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--depth", type=int, default=2)
    ap.add_argument("--start", choices=("random", "constructive"), default="random")
    ap.add_argument("--epochs", type=float, default=160.0, help="cap: max(20000 steps, E epochs)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args(argv)
    try:
        if not (math.isfinite(args.alpha) and 0 < args.alpha <= 10):
            raise ValueError(f"--alpha must be in (0, 10], got {args.alpha}")
        if not (math.isfinite(args.epochs) and args.epochs > 0):
            raise ValueError(f"--epochs must be a finite number > 0, got {args.epochs}")
        if not 10 <= args.n <= 10**7 or min(args.widths) < 1 or max(args.widths) > 4096:
            raise ValueError("need 10 <= n <= 10^7 and widths in [1, 4096]")
        if not 1 <= args.depth <= 32 or args.seed < 0:
            raise ValueError("need 1 <= depth <= 32 and seed >= 0")
        if args.json:
            check_output_file(args.json, "--json")
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    bar = Progress("plain")
    r = run(
        args.alpha, args.n, args.widths, depth=args.depth, start=args.start,
        epochs=args.epochs, seed=args.seed, progress=bar,
    )  # fmt: skip
    print(
        f"\nalpha {r['alpha']}, n {r['n']}, depth {r['depth']}, {r['start']} start, cap "
        f"{r['steps_cap']} steps, {r['fit_s']:.0f} s; linear spline (CV, k = "
        f"{r['reference_k']}): squared L2 {r['reference_l2sq']:.4g}"
    )
    print(f"{'width':>6s} {'sq. L2':>10s} {'x spline':>9s} {'val MSE':>9s} {'best step':>10s}")
    for w, l2, v, s in zip(r["widths"], r["l2sq"], r["val_mse"], r["best_step"], strict=True):
        print(f"{w:6d} {l2:10.4g} {l2 / r['reference_l2sq']:9.2f} {v:9.4f} {s:10d}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(r, fh, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
