"""``python -m simulate.experiments.plain_control``: plain ReLU networks
(:func:`simulate.references.plain.train_plain`) from a random or a constructive start on
one Hoelder truth, beside the linear-spline reference (the no-VB control of the
constructive-start comparison, run alone)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch

from simulate.core.hyper import DEPTH, HYPER_DEFAULTS, Hyper
from simulate.core.layout import Layout
from simulate.core.state import init_state
from simulate.progress import Progress
from simulate.references.classical import spline_reference
from simulate.references.constructive import net_theta, spline_starts
from simulate.references.plain import PlainFit, train_plain, validation_split
from simulate.sweep.setup.config import SweepConfig
from simulate.sweep.setup.truth_spec import TruthSpec
from simulate.truths.functions import make_regression_data
from theory.plumbing.cli import Parser, print_error, run_main
from theory.plumbing.paths import check_output_file, path_arg, write_json


@dataclass(frozen=True)
class ControlSettings:
    """The control's fixed settings: the step cap ``max(min_steps, epochs n / batch_size)``
    (the full tier's: 160 epochs, 20,000 steps at least), the sweeps' batch (SweepConfig's
    default) and learning rate (``HYPER_DEFAULTS``), and ``n_test`` test inputs."""

    epochs: float = 160.0
    min_steps: int = 20_000
    batch_size: int = SweepConfig.batch_size  # the sweeps' batch (SweepConfig's default)
    lr: float = HYPER_DEFAULTS["lr"]
    n_test: int = 20_000


def run(
    alpha: float,
    n: int,
    widths,
    *,
    depth: int = DEPTH,
    start: str = "random",
    seed: int = 0,
    settings: ControlSettings = ControlSettings(),
    progress=None,
) -> dict:
    """Plain ReLU networks of the given widths on the sweeps' Hoelder truth (p = 1,
    smoothness ``alpha``, truth seed ``seed``, its replicate 0) with n points drawn from
    ``seed`` (``simulate.truths.functions.make_regression_data``, noise sd 1) and test inputs from
    their own stream, trained by
    :func:`train_plain` for the ASVI cap in steps (``settings``: :class:`ControlSettings`),
    from a ``random`` start (the core's
    initial locations, ``U(-0.6, 0.6)``) or the ``constructive`` one (the validation-chosen
    linear spline, ``simulate.references.constructive``); and the class-matched reference (the
    linear
    spline, mesh by 5-fold CV) on the same data.  Returns per width the squared L2 error
    to f0, the validation error and the step of the best evaluation."""
    epochs, min_steps, batch_size = settings.epochs, settings.min_steps, settings.batch_size
    lr, n_test = settings.lr, settings.n_test
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
        theta0 = init_state(layout, Hyper(), list(range(len(widths)))).params[0]
    else:
        theta0 = net_theta(layout, spline_starts(X, y, widths, depth, seed=seed))
    steps = max(int(min_steps), math.ceil(float(epochs) * n / batch_size))
    val = validation_split(n, seed)[None]
    t0 = time.perf_counter()
    res = train_plain(
        layout, theta0[:, : layout.P_net], torch.tensor(X[None]), torch.tensor(y[None]),
        [0] * len(widths), list(range(len(widths))), val,
        PlainFit(lr=lr, batch_size=min(batch_size, n), max_steps=steps, progress=progress),
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
    """``python -m simulate.references.plain``: plain ReLU networks against the linear spline."""

    ap = Parser(
        prog="python -m simulate.experiments.plain_control",
        description="Plain ReLU networks (Adam on squared error, early-stopped on validation"
        " data) on a p = 1 Hoelder truth, from a random or a constructive start, beside the"
        " linear-spline reference.",
    )
    ap.add_argument("--alpha", type=float, default=0.5)
    ap.add_argument("--n", type=int, default=32_000)
    ap.add_argument("--widths", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--depth", type=int, default=DEPTH)
    ap.add_argument("--start", choices=("random", "constructive"), default="random")
    ap.add_argument("--epochs", type=float, default=160.0, help="cap: max(20000 steps, E epochs)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=path_arg, metavar="PATH")
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
        print_error(exc)
        return 2
    bar = Progress("plain")
    r = run(
        args.alpha, args.n, args.widths, depth=args.depth, start=args.start, seed=args.seed,
        settings=ControlSettings(epochs=args.epochs), progress=bar,
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
        write_json(args.json, r)
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main))
