"""The fused network pass (``mlp="native"``, ``simulate.core.native``) against the batched one.

Tolerance: both float32 passes are compared with the batched pass in float64; float32
sums of up to 1,024 products carry relative errors of a few 1e-7 (measured 1e-7 at
most over these shapes), so 2e-5 of the largest magnitude is a wide margin that a wrong
term -- a dropped bias, a missed ReLU, a wrong scale -- still exceeds by orders of magnitude
(the negative control)."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from simulate.core import Hyper, Layout, StepOptions, mlp_nll_and_grad, native
from simulate.core.native import library
from simulate.core.training import build_trainer

pytestmark = pytest.mark.skipif(
    shutil.which(library._compiler()) is None, reason="no C compiler to build the fused kernel"
)

TOL = 2e-5


def _case(p, depth, widths, m, seed=0, learned=False):
    g = torch.Generator().manual_seed(seed)
    lay = Layout(p, depth, widths)
    E = len(widths)
    theta = (
        torch.randn(E, lay.P, generator=g, dtype=torch.float64)
        * 0.5
        * lay.mask(dtype=torch.float64)
    )
    x = torch.rand(E, m, p, generator=g, dtype=torch.float64) * 2 - 1
    x_aug = torch.cat([x, torch.ones(E, m, 1, dtype=torch.float64)], -1)
    y = torch.randn(E, m, generator=g, dtype=torch.float64)
    scale = torch.rand(E, generator=g, dtype=torch.float64) * 10 + 0.5
    sd = torch.rand(E, generator=g, dtype=torch.float64) + 0.2 if learned else None
    return lay, theta, x_aug, y, scale, sd


def _f32(t):
    return None if t is None else t.to(torch.float32)


def _compare(lay, theta, x_aug, y, scale, sd, h=None):
    h = h or Hyper(sigma=0.7)
    ref = mlp_nll_and_grad(lay, theta, x_aug, y, h, scale, functional=True, sd=sd)
    got = native.fused_nll_and_grad(
        lay, _f32(theta), _f32(x_aug), _f32(y), h, _f32(scale), sd=_f32(sd)
    )
    for r, o in zip(ref, got, strict=True):
        assert o.dtype == torch.float32 and o.shape == r.shape
        err = (o.double() - r).abs().max().item()
        assert err <= TOL * r.abs().max().item(), (err, r.abs().max().item())
    return ref, got


@pytest.mark.parametrize(
    "p, depth, widths, m",
    [
        (20, 2, [20, 20, 20], 1024),  # the bench network, its batch (rows padded off 4 KiB)
        (3, 1, [5, 2, 7], 37),  # a batch that is no multiple of the 16 (or 8) lanes
        (200, 3, [8, 16], 128),  # wide inputs, three hidden layers
        (1, 2, [2, 64, 33], 1),  # one sample; widths off the 4-unit tiles
        (6, 4, [3], 300),
    ],
)
@pytest.mark.parametrize("learned", [False, True])
def test_fused_pass_equals_the_batched_pass(p, depth, widths, m, learned):
    _compare(*_case(p, depth, widths, m, learned=learned))


def test_the_tolerance_sees_a_wrong_term():
    """Negative control: the comparison fails for a pass whose inputs lost their biases'
    column (a dropped bias) and for a wrong scale."""
    lay, theta, x_aug, y, scale, sd = _case(20, 2, [20, 8], 256)
    ref = mlp_nll_and_grad(lay, theta, x_aug, y, Hyper(sigma=0.7), scale, functional=True)
    wrong_theta = theta.clone()
    wrong_theta[:, lay.blocks[1][0] + lay.dims[1]] += 0.3  # the first unit's bias, layer 1
    for args in ((wrong_theta, scale), (theta, scale * 1.001)):
        got = native.fused_nll_and_grad(
            lay, _f32(args[0]), _f32(x_aug), _f32(y), Hyper(sigma=0.7), _f32(args[1])
        )
        err = (got[1].double() - ref[1]).abs().max().item()
        assert err > 10 * TOL * ref[1].abs().max().item()


@settings(max_examples=25, deadline=None)
@given(
    p=st.integers(1, 30),
    depth=st.integers(1, 3),
    widths=st.lists(st.integers(1, 24), min_size=1, max_size=4),
    m=st.integers(1, 80),
    seed=st.integers(0, 2**16),
)
def test_fused_pass_equals_the_batched_pass_on_any_shape(p, depth, widths, m, seed):
    _compare(*_case(p, depth, widths, m, seed=seed, learned=seed % 2 == 1))


def test_the_result_does_not_depend_on_the_threads():
    lay, theta, x_aug, y, scale, sd = (_f32(t) if torch.is_tensor(t) else t for t in
                                       _case(20, 2, [20] * 7, 500))  # fmt: skip
    before = torch.get_num_threads()
    try:
        out = []
        for k in (1, 2):
            torch.set_num_threads(k)
            out.append(native.fused_nll_and_grad(lay, theta, x_aug, y, Hyper(), scale))
    finally:
        torch.set_num_threads(before)
    for a, b in zip(*out, strict=True):
        assert torch.equal(a, b)


def test_a_padded_model_computes_what_it_computes_alone():
    """Padding adds exact zeros: a width-8 model inside a program padded to 20 gets the same
    negative log-likelihood and gradient, bit for bit, as alone."""
    lay, theta, x_aug, y, scale, _ = _case(5, 2, [8, 20], 200)
    alone = Layout(5, 2, [8])
    th_alone = torch.zeros(1, alone.P, dtype=torch.float64)
    for l in range(lay.depth + 1):
        blk = lay.block(theta[:1], l)
        real_out = alone.dims[l + 1]
        real_in = alone.dims[l]
        w = torch.cat([blk[:, :real_out, :real_in], blk[:, :real_out, -1:]], -1)
        alone.block(th_alone, l).copy_(w)
    h = Hyper()
    pad = native.fused_nll_and_grad(lay, _f32(theta), _f32(x_aug), _f32(y), h, _f32(scale))
    one = native.fused_nll_and_grad(
        alone, _f32(th_alone), _f32(x_aug[:1]), _f32(y[:1]), h, _f32(scale[:1])
    )
    assert torch.equal(pad[0][:1], one[0])
    for l in range(lay.depth + 1):
        g_pad = lay.block(pad[1][:1], l)
        real_out, real_in = alone.dims[l + 1], alone.dims[l]
        expect = torch.cat([g_pad[:, :real_out, :real_in], g_pad[:, :real_out, -1:]], -1)
        assert torch.equal(alone.block(one[1], l), expect)


def _data(E, n=600, p=4, seed=1):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(1, n, p, generator=g) * 2 - 1
    y = torch.sin(3 * X[..., 0]) + X[..., 1] + 0.3 * torch.randn(1, n, generator=g)
    return X, y


@pytest.mark.parametrize(
    "kw",
    [
        {"compile": False},
        pytest.param({"compile": True}, marks=pytest.mark.slow),  # a torch.compile: 30 s
        {"compile": False, "learn_noise": True, "noise_every": 5},
        {"compile": False, "hyper": {"mc_samples": 2, "slab": "uniform"}},
        {"compile": False, "hyper": {"family": "dense"}},
        {"compile": False, "hyper": {"family": "horseshoe"}},
    ],
)
def test_training_with_the_fused_pass_follows_the_batched_pass(kw):
    """Twenty steps of the trainer with either pass (the same streams): the parameters stay
    within float32 rounding's drift of one another (1e-4 of their scale: a step moves them
    by ~1e-3 with lr 1e-3, so a wrong gradient anywhere is seen)."""
    kw = dict(kw)
    h = Hyper(batch_size=64, lr=1e-3, **kw.pop("hyper", {}))
    X, y = _data(3)
    out = []
    for mlp in ("batched", "native"):
        options = StepOptions(mlp=mlp, **kw)
        tr = build_trainer(h, [4, 8, 6], [0, 1, 2], X, y, [0, 0, 0], depth=2, options=options)
        start = tr.state.params.clone()
        for _ in range(20):
            tr.step()
        out.append((start, tr.state.params.clone()))
    (s0, p0), (s1, p1) = out
    assert torch.equal(s0, s1)
    moved = (p0 - s0).abs().max().item()
    assert moved > 1e-3
    assert (p1 - p0).abs().max().item() < 1e-4 * max(1.0, p0.abs().max().item())


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"hyper": {"likelihood": "categorical"}, "out_dim": 3}, "Gaussian likelihood"),
        ({"dtype": torch.float64}, "float32"),
        ({"autograd": True}, "autograd path"),
        ({"hyper": {"l3": "exact"}}, "autograd path"),
        ({"mlp": "fused"}, "mlp must be one of"),
    ],
)
def test_the_fused_pass_refuses_what_it_does_not_cover(kw, match):
    kw = dict(kw)
    h = Hyper(batch_size=32, **kw.pop("hyper", {}))
    X, y = _data(2)
    if h.likelihood == "categorical":
        y = (y > 0).long()
    options = {k: kw.pop(k) for k in ("autograd", "mlp") if k in kw}
    with pytest.raises(ValueError, match=match):
        opts = StepOptions(**{"mlp": "native", **options})
        build_trainer(h, [4, 4], [0, 1], X, y, [0, 0], depth=1, options=opts, **kw)


def test_no_compiler_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setattr(library, "_lib", None)
    monkeypatch.setenv("ASVI_RATES_CACHE", str(tmp_path))
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    with pytest.raises(native.NativeUnavailable, match="no C compiler"):
        native.load()
    assert not native.available()
    assert list(tmp_path.rglob("*.so")) == []


def test_the_library_is_built_once_per_source_compiler_and_cpu(monkeypatch, tmp_path):
    monkeypatch.setattr(library, "_lib", None)
    monkeypatch.setenv("ASVI_RATES_CACHE", str(tmp_path))
    native.load()
    built = list(tmp_path.rglob("*.so"))
    assert len(built) == 1 and built[0] == native.library_path()
    stamp = built[0].stat().st_mtime_ns
    monkeypatch.setattr(library, "_lib", None)
    native.load()
    assert [p.stat().st_mtime_ns for p in tmp_path.rglob("*.so")] == [stamp]
    names = sorted(p.name for p in (tmp_path / "native").iterdir())
    assert names == [built[0].name, f"{built[0].name}.sha256"]  # the library and its digest


def test_a_wrapper_of_the_compiler_gets_its_own_library(monkeypatch, tmp_path):
    """A script that runs the compiler with a flag of its own prints the compiler's own
    ``--version``: its library must not be the plain compiler's (the key covers the
    command's file), and an edited script's not the script's before."""
    real = shutil.which(library._compiler())
    monkeypatch.setenv("ASVI_RATES_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CC", real)
    plain = native.library_path()
    wrapper = tmp_path / "cc-wrapper"
    wrapper.write_text(f'#!/bin/sh\nexec {real} "$@" -O2\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("CC", str(wrapper))
    wrapped = native.library_path()
    assert wrapped != plain
    wrapper.write_text(f'#!/bin/sh\nexec {real} "$@" -O1\n')
    assert native.library_path() not in (plain, wrapped)
    monkeypatch.setenv("CC", real)
    assert native.library_path() == plain  # the same command: the same library


def test_the_sweep_runs_the_fused_pass_and_fingerprints_it(monkeypatch, tmp_path):
    """``SweepConfig(mlp="native")``: its records carry it in their fingerprint (the default
    leaves the fingerprint as records before the option had it), and its cells equal the
    batched pass's to float rounding."""
    from simulate.sweep.run.runner import check_native, run_sweep
    from simulate.sweep.store.fingerprint import fingerprint_fields
    from tests.simulate.sweep.test_records_integrity import cfg, quiet

    assert "mlp" not in fingerprint_fields(cfg())
    assert fingerprint_fields(cfg(mlp="native"))["mlp"] == "native"
    recs = {
        mlp: run_sweep(cfg(mlp=mlp), tmp_path / f"{mlp}.jsonl", progress=False, log=quiet)
        for mlp in ("batched", "native")
    }
    assert len(recs["native"]) == len(recs["batched"]) > 0
    for a, b in zip(recs["batched"], recs["native"], strict=True):
        assert a["cell"] == b["cell"] and b["config"]["mlp"] == "native"
        for k in ("d2", "l2sq"):
            assert abs(a["metrics"][k] - b["metrics"][k]) <= 1e-4 * abs(a["metrics"][k])
    monkeypatch.setattr(library, "_lib", None)
    monkeypatch.setenv("ASVI_RATES_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    with pytest.raises(ValueError, match="--mlp native: no C compiler"):
        check_native(cfg(mlp="native"))
    check_native(cfg())  # the batched pass needs no compiler


def test_the_bench_reports_the_fused_pass_beside_the_batched_core():
    from simulate.bench.timing import BenchSetup, run

    res = run(Es=(2,), steps=2, repeats=1, setup=BenchSetup(n=2048), loop_max=0,
              log=lambda *_: None)[2]  # fmt: skip
    assert res["native_model_steps_per_s"] > 0
    assert res["native_ratio"] == pytest.approx(
        res["native_model_steps_per_s"] / res["batched_model_steps_per_s"]
    )
    assert res["native_vmap_ratio"] == pytest.approx(
        res["native_model_steps_per_s"] / res["vmap_model_steps_per_s"]
    )
    assert res["native_gflops"] == pytest.approx(
        res["native_model_steps_per_s"] * res["flops_per_model_step"] / 1e9
    )
    assert res["peak_gflops"] == max(res["peak_rates"].values())


def test_inputs_the_kernel_cannot_read_are_refused_not_misread():
    """The C function reads raw float32 buffers: a float64 target or a mis-shaped input is a
    ValueError naming it, never memory read as the wrong type."""
    lay, theta, x_aug, y, scale, _ = (_f32(t) if torch.is_tensor(t) else t for t in
                                      _case(4, 2, [6, 3], 50))  # fmt: skip
    h = Hyper()
    with pytest.raises(ValueError, match="y is torch.float64"):
        native.fused_nll_and_grad(lay, theta, x_aug, y.double(), h, scale)
    with pytest.raises(ValueError, match=r"x \[E, m, 5\]"):
        native.fused_nll_and_grad(lay, theta, x_aug[..., :4], y, h, scale)
    with pytest.raises(ValueError, match=r"y \[E, m\]"):
        native.fused_nll_and_grad(lay, theta, x_aug, y[:, :10], h, scale)
    with pytest.raises(ValueError, match=r"theta \[E, >= "):
        native.fused_nll_and_grad(lay, theta[:, :10], x_aug, y, h, scale)


def test_an_unwritable_build_folder_is_a_clear_error(monkeypatch, tmp_path):
    (tmp_path / "file").write_text("")
    monkeypatch.setattr(library, "_lib", None)
    monkeypatch.setenv("ASVI_RATES_CACHE", str(tmp_path / "file" / "cache"))
    with pytest.raises(native.NativeUnavailable, match="cannot write the build folder"):
        native.load()


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="Linux's /proc only")
def test_the_library_shares_torch_s_openmp_runtime():
    """One OpenMP runtime in a process that loads torch and the library (the library's
    libgomp.so.1 is the one torch loaded): two would each start a thread pool of their own.
    In a fresh process, since other packages vendor OpenMP runtimes of their own."""
    code = (
        "import torch\n"
        "from simulate.core import native\n"
        "native.load()\n"
        "print(sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libgomp' in l}))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    gomps = ast.literal_eval(r.stdout.strip().splitlines()[-1])
    assert len(gomps) == 1 and "torch" in gomps[0], gomps
