"""What the benchmark counts against: the bench network's shape, the FLOPs of a model's
training step from its layer shapes, and the machine's sustained GEMM rate (the peak a
step's products are measured against).  Shared by ``timing`` (the timing harness),
``sweep_mix`` (a rate tier's programs) and ``cli`` (the command line), so that the first
two need not import each other for it."""

from __future__ import annotations

import statistics
import time

import torch

from simulate.core.hyper import DEPTH, HYPER_DEFAULTS

__all__ = [
    "BATCH",
    "N",
    "P",
    "WIDTH",
    "flops_per_model_step",
    "peak_gflops",
    "peak_rates",
    "sync",
    "workload_flops",
]

# the bench network and data (module docstring), one place for run, compare_paths and the JSON
# (the teacher experiment's n, inputs, student depth and batch; width 20, its widest candidate)
N, P, WIDTH, BATCH = 10_000, 20, 20, HYPER_DEFAULTS["batch_size"]


def flops_per_model_step(
    p: int, hidden: list[int], out: int = 1, batch_size: int = BATCH, mc_samples: int = 1
) -> float:
    """Floating-point operations of one model's training step in the network's matrix
    products, from the layer shapes (the multiply-adds counted as 2): per draw, the forward
    pass ``2 m (in + 1) out`` per layer (bias as a column of ones), the weights' gradient
    the same, and the inputs' gradient ``2 m in out`` for every layer but the first; times
    the K draws.  The elementwise work (sampling, KL terms, the optimiser: O(P) per step,
    not O(m P)) is left out, so the count is what the step must do at the least.  For
    20-20-20-1 at m = 1024: 4.39 MFLOP.  Equal to ``torch.utils.flop_counter``'s count of the
    hand-written step's products, which misses only the width-1 output layer's input
    gradient, done by broadcasting (tested)."""
    dims = [p, *hidden, out]
    fwd = sum(2 * batch_size * (i + 1) * o for i, o in zip(dims[:-1], dims[1:], strict=True))
    igrad = sum(2 * batch_size * i * o for i, o in zip(dims[1:-1], dims[2:], strict=True))
    return float(mc_samples * (2 * fwd + igrad))


def _onednn_mm(size: int, g):
    """A ``size x size`` float32 product through oneDNN (``torch._C._nn.mkldnn_linear`` on
    oneDNN tensors), or None where torch has no oneDNN."""
    if not torch.backends.mkldnn.is_available():
        return None
    try:
        a, b = (torch.randn(size, size, generator=g).to_mkldnn() for _ in "ab")
        torch._C._nn.mkldnn_linear(a, b)
    except (RuntimeError, AttributeError):
        return None
    return lambda: torch._C._nn.mkldnn_linear(a, b)


def peak_rates(device="cpu", size: int = 2048, repeats: int = 5) -> dict:
    """The machine's sustained single-precision GEMM rates in this process, GFLOP/s, by
    library: ``mm``, ``torch.mm`` (the BLAS torch's products use: MKL here), and on the CPU
    ``onednn``, the same product through oneDNN -- the medians of ``repeats`` timings of
    three ``size x size`` products (``2 size^3`` FLOPs each) after a warm-up; the threads
    are the process's.  Both, because one library is no measure of the machine: on this AMD
    CPU MKL's sgemm takes a code path that reaches half of oneDNN's rate (BENCHMARKS.md)."""
    g = torch.Generator().manual_seed(0)
    a, b = (torch.randn(size, size, generator=g).to(device) for _ in "ab")
    c = torch.mm(a, b)
    fns = {"mm": lambda: torch.mm(a, b, out=c)}
    if torch.device(device).type == "cpu":
        dnn = _onednn_mm(size, g)
        if dnn is not None:
            fns["onednn"] = dnn
    out = {}
    for name, f in fns.items():
        f()
        rates = []
        for _ in range(repeats):
            sync(device)
            t0 = time.perf_counter()
            for _ in range(3):
                f()
            sync(device)
            rates.append(3 * 2 * size**3 / (time.perf_counter() - t0) / 1e9)
        out[name] = statistics.median(rates)
    return out


def peak_gflops(device="cpu", size: int = 2048, repeats: int = 5) -> float:
    """The machine's sustained single-precision GEMM rate in this process, GFLOP/s: the
    fastest library's of :func:`peak_rates`."""
    return max(peak_rates(device, size, repeats).values())


def workload_flops(widths: list[int], p: int = P, depth: int = DEPTH, batch_size: int = BATCH):
    """Mean FLOPs per model-step over models of these widths (:func:`flops_per_model_step`
    of each model's own shape: padding is not useful work)."""
    return statistics.fmean(flops_per_model_step(p, [w] * depth, 1, batch_size) for w in widths)


def sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)
