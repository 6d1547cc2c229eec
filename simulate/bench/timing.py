"""``python -m simulate.bench [--json PATH]``: batched core against the ways PyTorch users
train many small models.

For each E, the same E models (workload ``net20``: 20-20-20-1 networks, p = 20, two hidden
layers of width 20, one output; workload ``table1``: Table 1's students 20-w-w-1 with
w = 2, 4, ..., 20 in turn; batch 1024; the same data, n = 10,000) are trained by one
batched :class:`~simulate.core.Trainer` and by each baseline, in the same process and
interleaved (batched, loop, textbook, vmap, batched, ...), and the median rate of each is
reported as model-steps per second with the batched core's ratio to it:

* ``loop``: a Python loop over E single-model trainers of the core itself (with
  ``--compile``, compiled too), so its ratio measures what batching adds;
* ``textbook``: a loop over E :class:`~simulate.bench.baselines.TextbookASVI` models (per-model
  PyTorch: autograd, ``torch.optim.Adam``, eager; CPU only);
* ``vmap``: :class:`~simulate.bench.baselines.VmapEnsemble`, PyTorch's model-ensembling recipe
  (``stack_module_state`` + ``vmap(functional_call)``, autograd, ``torch.optim.Adam`` on the
  stacked parameters), one ensemble per width (the recipe needs equal shapes; CPU only).

The ``table1`` workload also times the core in three programs of similar widths
(``batched_groups``; ``groups_ratio`` over one program padded to width 20), the split the
Table 1 driver uses for its compiled blocks.

``--table1-block METHOD`` instead times one block of the Table 1 driver as it runs (five
replicates' teacher datasets, the ten widths, batch 1024) for SVI, Dense-BNN or HS-BNN,
with ``--compile``, ``--groups G`` and ``--autograd`` (the autograd step path instead of
the hand-written one): the levers of ``simulate.experiments.table1.RUN_PLAN``
(:func:`table1_block_rate`).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, replace

import numpy as np
import torch

from simulate.bench.baselines import TextbookASVI, VmapEnsemble
from simulate.bench.flops import BATCH, WIDTH, N, P, peak_rates, sync, workload_flops
from simulate.core import Batch, Hyper, StepOptions, Trainer, native
from simulate.core.hyper import DEPTH, PAPER_WIDTHS
from simulate.core.options import DEFAULT_OPTIONS
from simulate.core.training import build_trainer
from simulate.experiments.table1 import METHODS, width_groups
from simulate.truths.functions import TeacherNetwork, make_regression_data

__all__ = [
    "WORKLOADS",
    "BenchSetup",
    "compare_paths",
    "native_available",
    "network_name",
    "run",
    "table1_block_rate",
    "workload_widths",
]


@dataclass(frozen=True)
class BenchSetup:
    """What the bench's models train on and where: ``n`` points of ``p`` inputs (the module
    docstring's data), networks of ``depth`` hidden layers (of ``width`` units where the
    workload does not set the widths: :func:`compare_paths`), minibatches of ``batch_size``,
    on ``device`` (``"cpu"`` or ``"cuda"``)."""

    n: int = N
    p: int = P
    width: int = WIDTH
    depth: int = DEPTH
    batch_size: int = BATCH
    device: str = "cpu"


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
    data: Batch, E: int, p, depth, width, batch_size, device, options: StepOptions
) -> Trainer:
    """One batched trainer of the E bench models (seeds 0..E-1, all on ``data``), its step
    run as ``options`` say."""
    return _trainer(data, [width] * E, list(range(E)), depth, batch_size, device, options)


def _trainer(data: Batch, widths, seeds, depth, batch_size, device, options: StepOptions):
    return build_trainer(
        Hyper(batch_size=batch_size), widths, seeds, data.X, data.y, [0] * len(widths),
        depth=depth, device=device, options=options,
    )  # fmt: skip


def native_available(device="cpu") -> bool:
    """Whether the fused network pass (``mlp="native"``) can run here: the CPU and a C
    compiler (``simulate.core.native``); an untrusted cache raises
    ``simulate.core.native.NativeUntrusted`` (``native.available``)."""
    if torch.device(device).type != "cpu":
        return False

    return native.available()


def _rate(step_fns, steps: int, models: int, device="cpu") -> float:
    sync(device)
    t0 = time.perf_counter()
    for _ in range(steps):
        for f in step_fns:
            f()
    sync(device)
    return models * steps / (time.perf_counter() - t0)


WORKLOADS = ("net20", "table1", "sweep")


def workload_widths(workload: str, E: int) -> list[int]:
    """The E models' widths: ``net20``, every model 20-20-20-1; ``table1``, Table 1's
    students 20-w-w-1 with w = 2, 4, ..., 20 in turn (E a multiple of 10 gives each width
    E / 10 models)."""
    if workload == "net20":
        return [WIDTH] * E
    if workload == "table1":
        return [PAPER_WIDTHS[e % len(PAPER_WIDTHS)] for e in range(E)]
    raise ValueError(f"workload must be one of {WORKLOADS}, got {workload!r}")


def _variants(data, widths, depth, batch_size, device, options, timed_loop, workload):
    """Each timed variant as a list of step functions over the same E models (seeds 0..E-1),
    each core variant's step run as ``options`` say: the batched core (one program), the
    same with the fused network pass (``native``, where it can run:
    :func:`native_available`), for ``table1`` also the core in three width-group programs
    (``simulate.experiments.table1.width_groups``), the per-model core loop, the textbook
    loop and the vmap ensembles (one per width; CPU)."""
    E, p = len(widths), data.X.shape[2]
    cpu = torch.device(device).type == "cpu"
    seeds = list(range(E))
    tr = _trainer(data, widths, seeds, depth, batch_size, device, options)
    out = {"batched": [tr.step]}
    if native_available(device):  # the same program with the network's pass fused per model
        native_options = replace(options, mlp="native")
        nat = _trainer(data, widths, seeds, depth, batch_size, device, native_options)
        out["native"] = [nat.step]
    if workload == "table1":
        out["batched_groups"] = []
        for group in width_groups(sorted(set(widths)), 3):
            idx = [e for e in seeds if widths[e] in group]
            g = _trainer(data, [widths[e] for e in idx], idx, depth, batch_size, device, options)
            out["batched_groups"].append(g.step)
    h, X, y = Hyper(batch_size=batch_size), data.X[0], data.y[0]
    if cpu:  # batched like the core: timed at every E
        out["vmap"] = [
            VmapEnsemble(p, depth, w, h, X, y, [e for e in seeds if widths[e] == w]).step
            for w in sorted(set(widths))
        ]
    if not timed_loop:
        return out
    out["loop"] = [
        _trainer(data, [widths[e]], [e], depth, batch_size, device, options).step for e in seeds
    ]
    if cpu:
        out["textbook"] = [TextbookASVI(p, depth, widths[e], h, X, y, seed=e).step for e in seeds]
    return out


def run(
    Es=(1, 10, 100),
    steps: int = 20,
    repeats: int = 3,
    setup: BenchSetup = BenchSetup(),
    options: StepOptions = DEFAULT_OPTIONS,
    loop_max: int | None = None,
    log=print,
    workload: str = "net20",
) -> dict:
    """Measure and return ``{E: {batched_model_steps_per_s, loop_model_steps_per_s, ratio,
    textbook_loop_model_steps_per_s, textbook_ratio, vmap_model_steps_per_s, vmap_ratio}}``
    (ratios: batched over the other), plus for ``workload="table1"``
    ``batched_groups_model_steps_per_s`` and ``groups_ratio`` (grouped over one program).
    ``setup``: the data, networks and device (:class:`BenchSetup`; its ``width`` unused: the
    workload sets the widths); ``options``: how the core's variants step (``StepOptions``;
    the ``native`` variant the same with ``mlp="native"``).

    ``setup.device="cuda"`` times the core's variants on the GPU (synchronising around each
    timed block); the data then lives on the GPU too, and the textbook and vmap baselines
    (CPU only) are not timed.  For ``E > loop_max`` the per-model loops (the core's and the
    textbook's) are not timed (their rates and ratios are then None): a loop over thousands
    of models takes minutes and its per-model rate does not depend on E.  The vmap ensemble
    is batched like the core and is timed at every E.

    Each E's entry also has ``gflops`` (the batched core's model-steps per second times
    :func:`workload_flops`), ``peak_gflops`` (:func:`peak_gflops`, measured once in this
    process before the timings; ``peak_rates``: each library's) and ``peak_fraction`` (their
    ratio); and for the core with the fused network pass (``mlp="native"``, timed where it
    can run, :func:`native_available`; else these are None)
    ``native_model_steps_per_s``, ``native_ratio`` (over the batched core),
    ``native_vmap_ratio``, ``native_gflops`` and ``native_peak_fraction``."""
    p, depth, batch_size, device = setup.p, setup.depth, setup.batch_size, setup.device
    data = _data(setup.n, p)
    rates_by_library = peak_rates(device)
    peak = max(rates_by_library.values())
    log(
        "sustained float32 GEMM rate (2048^3): "
        + ", ".join(f"{k} {v:.1f}" for k, v in rates_by_library.items())
        + f" GFLOP/s; peak {peak:.1f}"
    )
    out = {}
    for E in Es:
        widths = workload_widths(workload, E)
        timed_loop = loop_max is None or E <= loop_max
        fns = _variants(data, widths, depth, batch_size, device, options, timed_loop, workload)
        for _ in range(3):  # warm-up (and compilation, if asked for)
            for group in fns.values():
                for f in group:
                    f()
        rates = {k: [] for k in fns}
        for _ in range(repeats):  # interleaved: each variant once per repeat
            for k, group in fns.items():
                rates[k].append(_rate(group, steps, E, device))
        med = {k: statistics.median(v) for k, v in rates.items()}
        flops = workload_flops(widths, p, depth, batch_size)
        out[E] = res = _entry(med, flops, peak, rates_by_library)
        log(f"E = {E:5d}: batched {med['batched']:9.0f} model-steps/s   " + _tail(res))
    return out


def _entry(med: dict, flops, peak: float, rates_by_library: dict) -> dict:
    """One E's entry of :func:`run` from each variant's median rate ``med``: the rates, the
    batched core's ratios over the others, its GFLOP/s at ``flops`` a model-step and their
    fraction of ``peak``, and the fused pass's the same (None where it was not timed)."""
    b = med["batched"]
    res = {"batched_model_steps_per_s": b}
    for key, name in (("loop", "loop"), ("textbook", "textbook_loop"), ("vmap", "vmap")):
        r = med.get(key)
        res[f"{name}_model_steps_per_s"] = r
        res["ratio" if key == "loop" else f"{key}_ratio"] = b / r if r else None
    if "batched_groups" in med:
        res["batched_groups_model_steps_per_s"] = med["batched_groups"]
        res["groups_ratio"] = med["batched_groups"] / b
    res.update(
        flops_per_model_step=flops,
        gflops=b * flops / 1e9,
        peak_gflops=peak,
        peak_fraction=b * flops / 1e9 / peak,
        peak_rates=rates_by_library,
    )
    nat = med.get("native")
    res["native_model_steps_per_s"] = nat
    res["native_ratio"] = nat / b if nat else None
    res["native_vmap_ratio"] = nat / med["vmap"] if nat and med.get("vmap") else None
    res["native_gflops"] = nat * flops / 1e9 if nat else None
    res["native_peak_fraction"] = nat * flops / 1e9 / peak if nat else None
    return res


def _tail(res: dict) -> str:
    parts = [f"{res['gflops']:.2f} GFLOP/s ({100 * res['peak_fraction']:.1f}% of peak)"]
    for name, ratio in (("loop", "ratio"), ("textbook_loop", "textbook_ratio"),
                        ("vmap", "vmap_ratio")):  # fmt: skip
        r = res[f"{name}_model_steps_per_s"]
        if r:
            parts.append(f"{name} {r:7.0f} (x{res[ratio]:.1f})")
    if res.get("native_model_steps_per_s"):
        parts.append(
            f"native {res['native_model_steps_per_s']:7.0f} "
            f"({res['native_gflops']:.1f} GFLOP/s, {100 * res['native_peak_fraction']:.1f}%; "
            f"x{res['native_ratio']:.2f} of batched"
            + (f", x{res['native_vmap_ratio']:.1f} of vmap)" if res["native_vmap_ratio"] else ")")
        )
    if "groups_ratio" in res:
        parts.append(
            f"width groups {res['batched_groups_model_steps_per_s']:7.0f} "
            f"(x{res['groups_ratio']:.2f} of one program)"
        )
    return "   ".join(parts)


def compare_paths(
    E: int = 100,
    steps: int = 20,
    repeats: int = 7,
    setup: BenchSetup = BenchSetup(),
    options: StepOptions = DEFAULT_OPTIONS,
    log=print,
) -> dict:
    """Time the step paths (``simulate.core.training_step``) on the same E models in one process,
    interleaved: autograd through the sampler (``autograd``, the autograd path), the
    hand-written step (``hand_written``, the default family's), and with
    ``options.compile`` the hand-written step compiled, both as one call for all E models
    (``hand_written_compiled``, the default) and in calls of 25 models
    (``hand_written_compiled_chunks_of_25``; see ``Trainer``'s ``chunk``): each path's
    options are ``options`` with the path's own compile, chunk and autograd.  ``setup``:
    the data, the networks (``setup.width`` units a layer) and the device
    (:class:`BenchSetup`).  Returns ``{path: median model-steps/s}`` plus each path's ratio
    to the autograd one (``"<path>/autograd"``)."""
    n, p, width, depth = setup.n, setup.p, setup.width, setup.depth
    batch_size, device = setup.batch_size, setup.device
    data = _data(n, p)
    eager = replace(options, compile=False, chunk=None, autograd=False)

    def run(path_options):  # each on its own trainer
        return _batched(data, E, p, depth, width, batch_size, device, path_options).step

    paths = {"autograd": run(replace(eager, autograd=True)), "hand_written": run(eager)}
    if options.compile:
        paths["hand_written_compiled"] = run(replace(eager, compile=True))
        paths["hand_written_compiled_chunks_of_25"] = run(replace(eager, compile=True, chunk=25))
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


def table1_block_rate(
    method: str,
    options: StepOptions = DEFAULT_OPTIONS,
    groups: int = 1,
    steps: int = 200,
    repeats: int = 3,
    replicates: int = 5,
    log=print,
) -> dict:
    """Model-steps per second of one Table 1 block: ``replicates`` teacher datasets
    (n = 10,000, the driver's seeds) x the ten widths of ``method`` (``"SVI"``,
    ``"Dense-BNN"``, ``"HS-BNN"``), in ``groups`` programs of similar widths, each step run
    as ``options`` say (``StepOptions``: compiled or not, on the hand-written step or
    (``autograd``) the autograd path, with the network's pass ``mlp``, ``"batched"`` or
    ``"native"``: ``simulate.core.native``).  After 5 warm-up steps per program
    (compilation included), ``repeats`` timings of ``steps`` steps of every program;
    returns the median and the repeats."""

    if method not in METHODS:
        raise ValueError(f"method must be one of {tuple(METHODS)}, got {method!r}")
    teacher = TeacherNetwork(seed=0)
    X, y = zip(
        *(make_regression_data(teacher, N, P, 1.0, seed=10_000 + r) for r in range(replicates)),
        strict=True,
    )
    Xs = torch.tensor(np.stack(X), dtype=torch.float32)
    ys = torch.tensor(np.stack(y), dtype=torch.float32)
    hyper = Hyper(family=METHODS[method], batch_size=BATCH)
    trainers = []
    for ws in width_groups(PAPER_WIDTHS, groups):
        data_index = [r for r in range(replicates) for _ in ws]
        seeds = list(range(len(data_index)))
        tr = build_trainer(
            hyper, ws * replicates, seeds, Xs, ys, data_index, depth=DEPTH, options=options,
        )  # fmt: skip
        tr.fit(5)
        trainers.append(tr)
    models = replicates * len(PAPER_WIDTHS)
    rates = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for tr in trainers:
            tr.fit(steps)
        rates.append(models * steps / (time.perf_counter() - t0))
    out = {"method": method, "compile": options.compile, "groups": int(groups),
           "autograd": options.autograd, "mlp": options.mlp, "threads": torch.get_num_threads(),
           "model_steps_per_s": statistics.median(rates), "repeats": rates}  # fmt: skip
    log(
        f"Table 1 block, {method}, {'compiled' if options.compile else 'eager'}, "
        f"{groups} program(s), {'autograd' if options.autograd else 'hand-written'} step, "
        f"{options.mlp} network pass, "
        f"{out['threads']} thread(s): "
        f"{out['model_steps_per_s']:.0f} model-steps/s {[round(r) for r in rates]}"
    )
    return out
