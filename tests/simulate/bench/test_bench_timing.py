"""The benchmark (``python -m simulate.bench``): its documented keys, the FLOP count of a
step, the Table 1 workload and block timings, the step paths, CUDA refusal, and the rate
tiers' programs."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from simulate.bench import timing as bench
from simulate.bench.flops import flops_per_model_step
from simulate.core import Hyper, Layout


def run_bench(*args):
    """``python -m simulate.bench ARGS`` in a subprocess."""
    cmd = [sys.executable, "-m", "simulate.bench", *args]
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


def test_bench_reports_the_documented_keys(tmp_path):
    res = bench.run(Es=(1, 3, 5), steps=2, repeats=1, n=2048, loop_max=3, log=lambda *_: None)
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
    assert all(res[5][k] is None for k in keys - measured)
    assert res[5]["batched_model_steps_per_s"] > 0
    assert res[5]["vmap_ratio"] == pytest.approx(  # batched like the core: timed past loop_max
        res[5]["batched_model_steps_per_s"] / res[5]["vmap_model_steps_per_s"]
    )
    for r in res.values():  # the fraction of peak is the useful FLOPs over the GEMM rate
        assert r["flops_per_model_step"] == flops_per_model_step(20, [20, 20])
        assert r["gflops"] == pytest.approx(
            r["batched_model_steps_per_s"] * r["flops_per_model_step"] / 1e9
        )
        assert r["peak_fraction"] == pytest.approx(r["gflops"] / r["peak_gflops"])
    timed = keys if bench.native_available() else {k for k in keys if "native" not in k}
    for E in (1, 3):  # every rate measured (timings, so no value is asserted)
        assert set(res[E]) == keys
        assert all(np.isfinite(res[E][k]) and res[E][k] > 0 for k in timed)
    out = tmp_path / "b.json"
    r = run_bench("--E", "2", "--steps", "1", "--repeats", "1", "--json", str(out))
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text())
    assert set(data["2"]) == keys | {"peak_rates"}
    bad = run_bench("--E", "0")
    assert bad.returncode == 2


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
    assert flops_per_model_step(p, hidden, out, m, mc_samples=2) == 2 * (
        flops_per_model_step(p, hidden, out, m)
    )


def test_bench_table1_workload_times_every_variant_and_the_width_groups(tmp_path):
    assert bench.workload_widths("table1", 12)[:11] == [*range(2, 21, 2), 2]
    res = bench.run(Es=(10,), steps=2, repeats=1, n=2048, workload="table1", log=lambda *_: None)
    r = res[10]
    assert r["groups_ratio"] == pytest.approx(
        r["batched_groups_model_steps_per_s"] / r["batched_model_steps_per_s"]
    )
    assert r["vmap_ratio"] == pytest.approx(
        r["batched_model_steps_per_s"] / r["vmap_model_steps_per_s"]
    )
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
    assert run_bench("--table1-block", "SVI", "--groups", "11").returncode == 2
    assert run_bench("--table1-block", "SVI", "--autograd", "--mlp", "native").returncode == 2
    if bench.native_available():  # the block with the fused network pass
        nat = bench.table1_block_rate("SVI", groups=1, steps=2, repeats=1, replicates=1,
                                      log=lambda *_: None, mlp="native")  # fmt: skip
        assert nat["mlp"] == "native" and nat["model_steps_per_s"] > 0
    with pytest.raises(ValueError, match="method"):
        bench.table1_block_rate("ASVI")


def test_bench_compares_the_step_paths():
    res = bench.compare_paths(E=3, steps=2, repeats=1, n=2048, log=lambda *_: None)
    assert set(res) == {"autograd", "hand_written", "autograd/autograd", "hand_written/autograd"}
    assert res["hand_written/autograd"] == pytest.approx(res["hand_written"] / res["autograd"])


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal without CUDA")
def test_bench_refuses_cuda_when_absent():
    r = run_bench("--E", "1", "--device", "cuda")
    assert r.returncode == 2 and "cuda" in r.stderr


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_bench_runs_on_cuda():
    res = bench.run(Es=(1, 4), steps=2, repeats=1, n=2048, device="cuda", log=lambda *_: None)
    assert all(res[E]["batched_model_steps_per_s"] > 0 for E in (1, 4))


def test_bench_sweep_workload_is_the_tier_s_programs_and_projects_from_its_records(tmp_path):
    """The sweep workload lists the tiny tier's programs as the sweep runs them (one job per
    n, one width group of 2 replicates x 2 widths), projects from the step cap without
    records and from the recorded steps with them: the projection is the programs' run
    steps over their timed rates, and the useful fraction the recorded model-steps over
    the steps run (computed here from the records by hand)."""
    from simulate.bench.sweep_mix import sweep_programs, sweep_workload
    from simulate.sweep.runner import run_sweep
    from simulate.sweep.spec import SweepConfig
    from simulate.sweep.tiers import RATES

    progs = sweep_programs("tiny")
    assert [(p["n"], p["widths"], p["E"], p["p"], p["cap"]) for p in progs] == [
        (128, [4, 2], 4, 1, 200),
        (256, [4, 2], 4, 1, 200),
        (512, [4, 2], 4, 1, 200),
    ]
    capped = sweep_workload("tiny", steps=2, repeats=1, log=lambda *_: None)
    assert capped["steps_from"] == "cap" and capped["useful_fraction"] is None
    want = sum(p["cap"] / p["steps_per_s"] for p in capped["programs"]) / 60
    assert capped["projected_full_tier_min"] == pytest.approx(want)
    path = tmp_path / "tiny.jsonl"
    run_sweep(SweepConfig(truths=RATES["tiny"]["truths"], **RATES["tiny"]["sweep"]), str(path))
    res = sweep_workload("tiny", steps=2, repeats=1, records=str(path), log=lambda *_: None)
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    steps = {(r["cell"]["n"], r["cell"]["replicate"]): r["per_width"]["steps"] for r in recs}
    run = {n: max(max(steps[(n, q)]) for q in (0, 1)) for n in (128, 256, 512)}
    assert [p["run_steps"] for p in res["programs"]] == [run[128], run[256], run[512]]
    used = sum(sum(v) for v in steps.values())
    assert res["useful_fraction"] == pytest.approx(used / sum(4 * s for s in run.values()))
    assert 0 < res["useful_fraction"] <= 1 and res["steps_from"] == "records"
