"""The benchmark (``python -m simulate.bench``): its documented keys, the FLOP count of a
step (against torch's counter of the actual step), the ratios, GFLOP/s and projections on
stubbed timings of known value, the Table 1 workload and block timings, the step paths,
CUDA refusal, and the rate tiers' programs."""

import json
import types

import numpy as np
import pytest
import torch

from simulate.bench import timing as bench
from simulate.bench.flops import flops_per_model_step
from simulate.core import Hyper, Layout, StepOptions
from tests.factories import run_main, run_process


def run_bench(*args):
    """``python -m simulate.bench ARGS`` in a subprocess: a run sets the process's threads and
    its allocator (``tune_malloc``), which the test process keeps as they are."""
    return run_process("simulate.bench", *args)


def refused(*args):
    """``python -m simulate.bench ARGS``, refused before it runs: in this process."""
    r = run_main("simulate.bench", *args)
    assert r.returncode == 2 and r.stderr.startswith("error:"), (args, r.returncode, r.stderr)
    return r


def _quiet_run(**kw):
    """``bench.run`` at the tests' smallest settings (2 steps, one repeat of E = 10 on
    n = 2048, no log), ``kw`` overriding them."""
    return bench.run(
        **{"Es": (10,), "steps": 2, "repeats": 1, "setup": bench.BenchSetup(n=2048), **kw},
        log=lambda *_: None,
    )


def test_bench_reports_the_documented_keys(tmp_path):
    res = _quiet_run(Es=(1, 3, 5), loop_max=3)
    keys = {
        "batched_model_steps_per_s",
        "loop_model_steps_per_s",
        "ratio",
        "textbook_loop_model_steps_per_s",
        "textbook_ratio",
        "vmap_model_steps_per_s",
        "vmap_ratio",
        "flops_per_model_step",
        "gflops",
        "peak_gflops",
        "peak_fraction",
        "native_model_steps_per_s",
        "native_ratio",
        "native_vmap_ratio",
        "native_gflops",
        "native_peak_fraction",
    }
    measured = {"batched_model_steps_per_s", "flops_per_model_step", "gflops", "peak_gflops",
                "peak_fraction", "vmap_model_steps_per_s", "vmap_ratio"}  # fmt: skip
    if bench.native_available():  # the fused pass, where a C compiler builds it
        measured |= {k for k in keys if k.startswith("native_")}
    for r in res.values():  # each library's GEMM rate, the peak the fastest
        assert set(r.pop("peak_rates")) >= {"mm"}
        assert r["peak_gflops"] >= 0
    assert set(res[5]) == keys
    assert all(res[5][k] is None for k in keys - measured)  # vmap: timed past loop_max
    assert res[5]["batched_model_steps_per_s"] > 0
    for r in res.values():  # 20-20-20-1 at m = 1024, counted by hand (and by torch below)
        assert r["flops_per_model_step"] == NET20_FLOPS
    timed = keys if bench.native_available() else {k for k in keys if "native" not in k}
    for E in (1, 3):  # every rate measured (timings, so no value is asserted)
        assert set(res[E]) == keys
        assert all(np.isfinite(res[E][k]) and res[E][k] > 0 for k in timed)
    out = tmp_path / "b.json"
    r = run_bench("--E", "2", "--steps", "1", "--repeats", "1", "--json", str(out))
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text())
    assert set(data["2"]) == keys | {"peak_rates"}
    refused("--E", "0")


@pytest.mark.parametrize(("p", "hidden", "out"), [(4, [5, 5], 3), (20, [20, 20], 1), (7, [3], 2)])
def test_flops_per_model_step_counts_the_step_s_products(p, hidden, out):
    """The bench's FLOP count against torch's own counter of the hand-written step's
    products (an independent oracle): equal, but for a width-1 output layer, whose input
    gradient is a broadcast product (2 m in FLOPs) the counter does not see."""
    from torch.utils.flop_counter import FlopCounterMode

    from simulate.core import mlp_nll_and_grad

    lay, E, m = Layout(p, len(hidden), [hidden[0]], out), 3, 50
    h = Hyper(likelihood="categorical" if out > 1 else "gaussian")
    g = torch.Generator().manual_seed(0)
    theta = torch.randn(E, lay.P, generator=g) * lay.mask()
    x = torch.cat([torch.randn(E, m, p, generator=g), torch.ones(E, m, 1)], -1)
    y = torch.randint(0, out, (E, m), generator=g) if out > 1 else torch.randn(E, m, generator=g)
    with FlopCounterMode(display=False) as fc:
        mlp_nll_and_grad(lay, theta, x, y, h, 1.0, functional=True)
    broadcast = 2 * m * hidden[-1] if out == 1 else 0
    assert fc.get_total_flops() / E + broadcast == flops_per_model_step(p, hidden, out, m)


# the bench network 20-20-20-1 at m = 1024, by hand: the forward pass 2 m (21 x 20 + 21 x 20
# + 21 x 1) = 1,763,328, the weights' gradient the same, the inputs' gradient of the two
# layers after the first 2 m (20 x 20 + 20 x 1) = 860,160
NET20_FLOPS = 2 * 1_763_328 + 860_160  # 4,386,816: "4.39 MFLOP" (flops_per_model_step)


@pytest.mark.parametrize("K", [1, 2])
@pytest.mark.parametrize("autograd", [False, True])
def test_the_bench_networks_count_is_the_flops_of_its_training_step(K, autograd):
    """The count the bench reports for its network against torch's own counter of a whole
    training step of three such models (``Trainer.step``: sampler, network, KL terms,
    optimiser; the hand-written and the autograd paths), K = 1 and 2 draws: the counter
    sees every product but the width-1 output layer's input gradient (a broadcast,
    2 m x 20 FLOPs per draw)."""
    from torch.utils.flop_counter import FlopCounterMode

    from simulate.core.options import StepOptions
    from simulate.core.training import build_trainer

    g = torch.Generator().manual_seed(0)
    X, y = torch.rand(1, 2048, 20, generator=g), torch.randn(1, 2048, generator=g)
    tr = build_trainer(Hyper(batch_size=1024, mc_samples=K), [20] * 3, [0, 1, 2], X, y,
                       [0] * 3, depth=2, options=StepOptions(autograd=autograd))  # fmt: skip
    tr.step()
    with FlopCounterMode(display=False) as fc:
        tr.step()
    assert fc.get_total_flops() / 3 + K * 2 * 1024 * 20 == K * NET20_FLOPS
    assert flops_per_model_step(20, [20, 20], mc_samples=K) == K * NET20_FLOPS


class _Timed:
    """A timed variant's step function that does nothing: the stubs below give its rate."""

    def __init__(self, name: str):
        self.name = name

    def __call__(self):
        pass


def _stub_rates(monkeypatch, rates: dict):
    """``timing._rate`` answers each variant's repeats from ``rates[name]`` in turn (the
    median of three the middle value), and the GEMM rates are 50 (``mm``) and 100 GFLOP/s."""
    left = {k: list(v) for k, v in rates.items()}
    monkeypatch.setattr(bench, "_rate", lambda group, *a: left[group[0].name].pop(0))
    monkeypatch.setattr(bench, "peak_rates", lambda device="cpu": {"mm": 50.0, "onednn": 100.0})


def test_the_ratios_and_gflops_from_known_rates(monkeypatch):
    """``run``'s arithmetic on stubbed timings whose values are known: each variant's median
    of three repeats, the batched core's ratio to each baseline, GFLOP/s (rate x the hand
    count) and the fraction of the faster library's GEMM rate; ``table1`` adds the width
    groups' ratio to one program."""
    names = ("batched", "native", "loop", "textbook", "vmap", "batched_groups")

    def variants(data, widths, depth, batch_size, device, options, timed_loop, workload):
        out = {k: [_Timed(k)] for k in names[:-1]}
        if workload == "table1":
            out["batched_groups"] = [_Timed("batched_groups")]
        return out

    monkeypatch.setattr(bench, "_variants", variants)
    rates = {"batched": [9e3, 2e3, 1e3], "native": [3e3, 1e3, 9e3], "loop": [5e2, 1e2, 9e2],
             "textbook": [2.5e2] * 3, "vmap": [1e3] * 3, "batched_groups": [1.5e3] * 3}  # fmt: skip
    _stub_rates(monkeypatch, rates)
    r = _quiet_run(repeats=3)[10]
    assert r["batched_model_steps_per_s"] == 2000.0 and r["native_model_steps_per_s"] == 3000.0
    assert (r["ratio"], r["textbook_ratio"], r["vmap_ratio"]) == (4.0, 8.0, 2.0)
    assert (r["native_ratio"], r["native_vmap_ratio"]) == (1.5, 3.0)
    assert r["peak_gflops"] == 100.0 and r["peak_rates"] == {"mm": 50.0, "onednn": 100.0}
    assert r["gflops"] == pytest.approx(8.773632)  # 2000 x 4,386,816 / 1e9
    assert r["peak_fraction"] == pytest.approx(0.08773632)
    assert r["native_gflops"] == pytest.approx(13.160448)
    assert r["native_peak_fraction"] == pytest.approx(0.13160448)
    assert "groups_ratio" not in r
    _stub_rates(monkeypatch, rates)
    t1 = _quiet_run(repeats=3, workload="table1")
    assert t1[10]["groups_ratio"] == 0.75  # 1500 / 2000


def test_a_rate_is_the_model_steps_over_the_time_they_took(monkeypatch):
    """``_rate`` on a clock that each step function advances by 4 ms: two functions (each
    of 8 models) called for 5 steps take 40 ms, so 8 x 5 / 0.04 = 1000 model-steps/s."""
    clock = [0.0]

    def step():
        clock[0] += 0.004

    monkeypatch.setattr(bench.time, "perf_counter", lambda: clock[0])
    assert bench._rate([step, step], steps=5, models=8) == pytest.approx(1000.0)


def test_bench_table1_workload_times_every_variant_and_the_width_groups(tmp_path):
    assert bench.workload_widths("table1", 12)[:11] == [*range(2, 21, 2), 2]
    res = _quiet_run(workload="table1")
    r = res[10]  # the arithmetic on known rates: test_the_ratios_and_gflops_from_known_rates
    assert r["groups_ratio"] > 0 and r["batched_groups_model_steps_per_s"] > 0
    assert set(r.pop("peak_rates")) >= {"mm"}
    assert all(v > 0 for v in r.values() if v is not None)
    assert (r["native_model_steps_per_s"] is not None) == bench.native_available()
    out = tmp_path / "t.json"
    cli = run_bench("--workload", "table1", "--E", "10", "--steps", "1", "--repeats", "1",
                    "--loop-max", "0", "--json", str(out))  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    data = json.loads(out.read_text())
    assert data["meta"]["workload"] == "table1" and data["10"]["vmap_ratio"] > 0
    assert data["10"]["textbook_ratio"] is None  # a per-model loop: not timed past loop_max
    with pytest.raises(ValueError, match="workload"):
        bench.workload_widths("table2", 10)


def test_bench_times_a_table1_block(tmp_path):
    """``--table1-block``: one block's rate for a method, grouped, on either step path; bad
    flags refused."""
    res = bench.table1_block_rate("HS-BNN", groups=2, steps=2, repeats=1, replicates=1,
                                  log=lambda *_: None)  # fmt: skip
    assert res["model_steps_per_s"] > 0 and res["groups"] == 2 and not res["autograd"]
    out = tmp_path / "b.json"
    cli = run_bench("--table1-block", "Dense-BNN", "--autograd", "--steps", "1",
                    "--repeats", "1", "--json", str(out))  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    data = json.loads(out.read_text())
    assert data["method"] == "Dense-BNN" and data["autograd"] and data["model_steps_per_s"] > 0
    refused("--table1-block", "SVI", "--groups", "11")
    refused("--table1-block", "SVI", "--autograd", "--mlp", "native")
    if bench.native_available():  # the block with the fused network pass
        nat = bench.table1_block_rate("SVI", StepOptions(mlp="native"), groups=1, steps=2,
                                      repeats=1, replicates=1, log=lambda *_: None)  # fmt: skip
        assert nat["mlp"] == "native" and nat["model_steps_per_s"] > 0
    with pytest.raises(ValueError, match="method"):
        bench.table1_block_rate("ASVI")


def test_bench_compares_the_step_paths(monkeypatch):
    """The step paths timed for real (every rate positive), then on stubbed trainers whose
    rates are known: each path's ratio to the autograd one."""
    res = bench.compare_paths(
        E=3, steps=2, repeats=1, setup=bench.BenchSetup(n=2048), log=lambda *_: None
    )
    assert set(res) == {"autograd", "hand_written", "autograd/autograd", "hand_written/autograd"}
    assert all(v > 0 for v in res.values())
    path = {(False, None, True): "autograd", (False, None, False): "hand_written",
            (True, None, False): "hand_written_compiled",
            (True, 25, False): "hand_written_compiled_chunks_of_25"}  # fmt: skip

    def batched(data, E, p, depth, width, batch_size, device, options):
        return types.SimpleNamespace(step=_Timed(path[options.compile, options.chunk,
                                                      options.autograd]))  # fmt: skip

    monkeypatch.setattr(bench, "_batched", batched)
    _stub_rates(monkeypatch, {"autograd": [400.0] * 3, "hand_written": [1000.0] * 3,
                              "hand_written_compiled": [3000.0] * 3,
                              "hand_written_compiled_chunks_of_25": [200.0] * 3})  # fmt: skip
    res = bench.compare_paths(E=3, repeats=3, options=StepOptions(compile=True),
                              log=lambda *_: None)  # fmt: skip
    assert res["autograd/autograd"] == 1.0 and res["hand_written/autograd"] == 2.5
    assert res["hand_written_compiled/autograd"] == 7.5
    assert res["hand_written_compiled_chunks_of_25/autograd"] == 0.5


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal without CUDA")
def test_bench_refuses_cuda_when_absent():
    r = refused("--E", "1", "--device", "cuda")
    assert "cuda" in r.stderr


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_bench_runs_on_cuda():
    res = _quiet_run(Es=(1, 4), setup=bench.BenchSetup(n=2048, device="cuda"))
    assert all(res[E]["batched_model_steps_per_s"] > 0 for E in (1, 4))


def test_bench_sweep_workload_is_the_tier_s_programs_and_projects_from_its_records(tmp_path):
    """The sweep workload lists the tiny tier's programs as the sweep runs them (one job per
    n, one width group of 2 replicates x 2 widths), projects from the step cap without
    records and from the recorded steps with them: the projection is the programs' run
    steps over their timed rates, and the useful fraction the recorded model-steps over
    the steps run (computed here from the records by hand)."""
    from simulate.bench.sweep_mix import sweep_programs, sweep_workload
    from simulate.sweep.run.runner import run_sweep
    from simulate.sweep.setup.config import SweepConfig
    from simulate.sweep.setup.tiers import RATES

    progs = sweep_programs("tiny")
    assert [(p["n"], p["widths"], p["E"], p["p"], p["cap"]) for p in progs] == [
        (128, [4, 2], 4, 1, 200),
        (256, [4, 2], 4, 1, 200),
        (512, [4, 2], 4, 1, 200),
    ]
    capped = sweep_workload("tiny", steps=2, repeats=1, log=lambda *_: None)
    assert capped["steps_from"] == "cap" and capped["useful_fraction"] is None
    assert [p["run_steps"] for p in capped["programs"]] == [200] * 3
    assert capped["projected_full_tier_min"] > 0
    path = tmp_path / "tiny.jsonl"
    run_sweep(SweepConfig(truths=RATES["tiny"]["truths"], **RATES["tiny"]["sweep"]), str(path))
    res = sweep_workload("tiny", steps=2, repeats=1, records=str(path), log=lambda *_: None)
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    steps = {(r["cell"]["n"], r["cell"]["replicate"]): r["per_width"]["steps"] for r in recs}
    run = {n: max(max(steps[(n, q)]) for q in (0, 1)) for n in (128, 256, 512)}
    assert [p["run_steps"] for p in res["programs"]] == [run[128], run[256], run[512]]
    assert 0 < res["useful_fraction"] <= 1 and res["steps_from"] == "records"


def test_the_sweep_projection_from_known_rates_and_steps(monkeypatch):
    """The tiny tier's three programs (4 models each, cap 200 steps) at a stubbed 100 steps
    per second: 3 x 200 / 100 = 6 s, 0.1 min, on its one worker, 3 x 4 x 200 / 6 = 400
    model-steps/s; with recorded steps of 200, 100, 50 and 50 for each program's four
    models, each runs 200 steps (its slowest model) of which 400 of 800 model-steps are
    useful: a fraction of 0.5."""
    from simulate.bench import sweep_mix

    monkeypatch.setattr(sweep_mix, "_program_rate", lambda *a: 100.0)
    capped = sweep_mix.sweep_workload("tiny", steps=2, repeats=1, log=lambda *_: None)
    assert capped["projected_full_tier_min"] == pytest.approx(0.1)
    assert capped["model_steps_per_s"] == pytest.approx(400.0)
    recorded = {}
    for prog in capped["programs"]:
        models = [(r, w) for r in prog["replicates"] for w in prog["widths"]]
        for (r, w), s in zip(models, (200, 100, 50, 50), strict=True):
            recorded[(prog["truth"], prog["n"], r, w)] = s
    monkeypatch.setattr(sweep_mix, "read_records", lambda path: [])
    monkeypatch.setattr(sweep_mix, "_recorded_steps", lambda recs: recorded)
    res = sweep_mix.sweep_workload("tiny", steps=2, repeats=1, records="r", log=lambda *_: None)
    assert [p["run_steps"] for p in res["programs"]] == [200] * 3
    assert res["useful_fraction"] == pytest.approx(0.5)
    assert res["projected_full_tier_min"] == pytest.approx(0.1)
