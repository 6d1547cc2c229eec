"""``python -m simulate.bench [--json PATH]``: batched core against a per-model loop.

For each E, the same E models (20-20-20-1 networks: p = 20, two hidden layers of width 20,
one output; batch 1024; the same data, n = 10,000) are trained by one batched
:class:`~simulate.core.Trainer` and by a Python loop over E single-model trainers, in the
same process and interleaved (batched, loop, batched, loop, ...), and the median rate of
each is reported as model-steps per second with their ratio.  The loop runs the core itself
one model at a time (with ``--compile``, compiled too), so every speed-up of the core speeds
it as well: its ratio measures what batching adds.  On the CPU a second loop over E
:class:`~simulate.reference.ReferenceASVI` models (textbook per-model PyTorch: autograd,
``torch.optim.Adam``, eager) gives ``textbook_ratio``: the core against the style of code it
replaces.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np
import torch

from ._alloc import tune_malloc
from .core import Batch, Hyper, Trainer
from .paths import AutogradStep, CompiledHandWrittenStep, HandWrittenStep
from .recipe import build_trainer
from .records import check_output_file
from .reference import ReferenceASVI

__all__ = ["run", "main"]

# the bench network and data (module docstring), one place for run, compare_paths and the JSON
N, P, WIDTH, DEPTH, BATCH = 10_000, 20, 20, 2, 1024


def network_name(p: int = P, width: int = WIDTH, depth: int = DEPTH) -> str:
    """``"20-20-20-1"``: input, hidden widths, output."""
    return "-".join(str(d) for d in [p] + [width] * depth + [1])


def _data(n: int, p: int, seed: int = 0) -> Batch:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(1, n, p))
    y = np.sin(3 * X[..., 0]) + X[..., 1] + 0.5 * rng.standard_normal((1, n))
    return Batch(
        torch.tensor(X, dtype=torch.float32),
        torch.tensor(y, dtype=torch.float32),
        torch.zeros(1, dtype=torch.int64),
    )


def _batched(
    data: Batch, E: int, p, depth, width, batch_size, device, compile, chunk=None
) -> Trainer:
    """One batched trainer of the E bench models (seeds 0..E-1, all on ``data``)."""
    return _trainer(data, [width] * E, list(range(E)), depth, batch_size, device, compile, chunk)


def _trainer(data: Batch, widths, seeds, depth, batch_size, device, compile, chunk=None):
    return build_trainer(
        Hyper(batch_size=batch_size), widths, seeds, data.X, data.y, [0] * len(widths),
        depth=depth, compile=compile, chunk=chunk, device=device,
    )  # fmt: skip


def _sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def _rate(step_fns, steps: int, models: int, device="cpu") -> float:
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(steps):
        for f in step_fns:
            f()
    _sync(device)
    return models * steps / (time.perf_counter() - t0)


def run(
    Es=(1, 10, 100),
    steps: int = 20,
    repeats: int = 3,
    n: int = N,
    p: int = P,
    width: int = WIDTH,
    depth: int = DEPTH,
    batch_size: int = BATCH,
    compile: bool = False,
    device="cpu",
    loop_max: int | None = None,
    log=print,
) -> dict:
    """Measure and return ``{E: {batched_model_steps_per_s, loop_model_steps_per_s, ratio,
    textbook_loop_model_steps_per_s, textbook_ratio}}`` (ratios: batched over loop).

    ``device="cuda"`` times the core's variants on the GPU (synchronising around each timed
    block); the data then lives on the GPU too, and the textbook loop (CPU only) is not
    timed.  For ``E > loop_max`` only the batched core is timed (the loops' rates and the
    ratios are then None): a loop over thousands of models takes minutes and its per-model
    rate does not depend on E."""
    data = _data(n, p)
    hyper = Hyper(batch_size=batch_size)
    out = {}
    for E in Es:
        batched = _batched(data, E, p, depth, width, batch_size, device, compile)
        timed_loop = loop_max is None or E <= loop_max
        loop = [
            _trainer(data, [width], [e], depth, batch_size, device, compile)
            for e in range(E if timed_loop else 0)
        ]
        textbook = [
            ReferenceASVI(p, depth, width, hyper, data.X[0], data.y[0], seed=e)
            for e in range(E if timed_loop and torch.device(device).type == "cpu" else 0)
        ]
        for _ in range(3):  # warm-up (and compilation, if asked for)
            batched.step()
            for tr in loop + textbook:
                tr.step()
        rates = {"batched": [], "loop": [], "textbook": []}
        for _ in range(repeats):
            rates["batched"].append(_rate([batched.step], steps, E, device))
            if loop:
                rates["loop"].append(_rate([tr.step for tr in loop], steps, E, device))
            if textbook:
                rates["textbook"].append(_rate([tr.step for tr in textbook], steps, E))
        b, lo, tb = (statistics.median(v) if v else None for v in rates.values())
        out[E] = {
            "batched_model_steps_per_s": b,
            "loop_model_steps_per_s": lo,
            "ratio": b / lo if lo else None,
            "textbook_loop_model_steps_per_s": tb,
            "textbook_ratio": b / tb if tb else None,
        }
        tail = f"loop {lo:7.0f}   ratio {b / lo:6.1f}" if lo else "loop (not timed)"
        if tb:
            tail += f"   textbook loop {tb:6.0f}   ratio {b / tb:6.1f}"
        log(f"E = {E:5d}: batched {b:9.0f} model-steps/s   {tail}")
    return out


def compare_paths(
    E: int = 100,
    steps: int = 20,
    repeats: int = 7,
    n: int = N,
    p: int = P,
    width: int = WIDTH,
    depth: int = DEPTH,
    batch_size: int = BATCH,
    compile: bool = False,
    device="cpu",
    log=print,
) -> dict:
    """Time the step paths (``simulate.paths``) on the same E models in one process,
    interleaved: autograd through the sampler (``AutogradStep``, the baselines' path), the
    hand-written step (``HandWrittenStep``, the default family's), and with ``compile`` the
    hand-written step compiled, both as one call for all E models (``fused_compiled``, the
    default) and in calls of 25 models (``fused_compiled_chunks_of_25``; see ``Trainer``'s
    ``chunk``).
    Returns ``{path: median model-steps/s}`` plus each path's ratio to the autograd one
    (``"<path>/autograd"``)."""
    data = _data(n, p)

    def run(path_cls, **kw):  # each path on its own trainer of the same models
        tr = _batched(data, E, p, depth, width, batch_size, device, False)
        path = path_cls(tr, **kw)
        return lambda: path(tr)

    paths = {"autograd": run(AutogradStep), "fused": run(HandWrittenStep)}
    if compile:
        paths["fused_compiled"] = run(CompiledHandWrittenStep)
        paths["fused_compiled_chunks_of_25"] = run(CompiledHandWrittenStep, chunk=25)
    for f in paths.values():
        for _ in range(3):
            f()
    rates = {k: [] for k in paths}
    for _ in range(repeats):
        for k, f in paths.items():
            rates[k].append(_rate([f], steps, E, device))
    out = {k: statistics.median(v) for k, v in rates.items()}
    for k in paths:
        out[f"{k}/autograd"] = out[k] / out["autograd"]
        log(f"E = {E}: {k:23s} {out[k]:9.0f} model-steps/s   x{out[k] / out['autograd']:.2f}")
    return out


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m simulate.bench", description=__doc__)
    ap.add_argument("--json", metavar="PATH", help="write the results as JSON")
    ap.add_argument("--E", type=int, nargs="+", default=[1, 10, 100])
    ap.add_argument("--steps", type=int, default=20, help="steps per timed repeat")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    ap.add_argument(
        "--compile", action="store_true", help="torch.compile the step (sampler, network, Adam)"
    )
    ap.add_argument(
        "--loop-max", type=int, default=None, help="time the per-model loop only for E <= this"
    )
    ap.add_argument("--no-tune-malloc", action="store_true")
    ap.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    ap.add_argument(
        "--compare-paths",
        action="store_true",
        help="instead: time the step's autograd, hand-written (and with --compile, compiled) "
        "paths at the largest E, interleaved",
    )
    return ap


def _check(args) -> None:
    """ValueError on bad flags, before anything runs."""
    if any(e < 1 for e in args.E) or args.steps < 1 or args.repeats < 1:
        raise ValueError("E, steps and repeats must be >= 1")
    if args.threads is not None and args.threads < 1:
        raise ValueError(f"--threads must be >= 1, got {args.threads}")
    if args.loop_max is not None and args.loop_max < 0:
        raise ValueError(f"--loop-max must be >= 0, got {args.loop_max}")
    try:
        kind = torch.device(args.device).type
    except RuntimeError:
        raise ValueError(f"--device must be cpu or cuda[:i], got {args.device!r}") from None
    if kind not in ("cpu", "cuda"):
        raise ValueError(f"--device must be cpu or cuda[:i], got {args.device!r}")
    if kind == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda asked for but torch.cuda.is_available() is False")
    if args.json:
        check_output_file(args.json, "--json")


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    try:
        _check(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    tuned = False if args.no_tune_malloc else tune_malloc()
    if args.threads:
        torch.set_num_threads(args.threads)
    where = platform.processor() or platform.machine()
    if torch.device(args.device).type == "cuda":
        where = torch.cuda.get_device_name(args.device)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"malloc tuned: {tuned}, {where}"
    )
    if args.compare_paths:
        res = compare_paths(
            max(args.E), args.steps, args.repeats, compile=args.compile, device=args.device
        )
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"E": max(args.E), "device": args.device, "where": where, **res}, fh)
        return 0
    res = run(
        args.E,
        args.steps,
        args.repeats,
        compile=args.compile,
        device=args.device,
        loop_max=args.loop_max,
    )
    if args.json:
        meta = {
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "malloc_tuned": tuned,
            "device": args.device,
            "hardware": where,
            "network": network_name(),
            "batch_size": BATCH,
            "n": N,
            "steps": args.steps,
            "repeats": args.repeats,
        }
        with open(args.json, "w") as fh:
            json.dump({"meta": meta, **{str(k): v for k, v in res.items()}}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
