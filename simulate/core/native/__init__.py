"""The network's pass fused per model in C (``fused_mlp.c``): ``mlp="native"`` of the step.

:func:`simulate.core.layout.mlp_nll_and_grad` runs every layer as one batched product over
all models, so at E = 100 each activation (8 MB at batch 1024) leaves the cache between the
product that writes it, the ReLU and the product that reads it; measured inside the compiled
step, the products ran at about half their speed in isolation and the elementwise passes
between them were bound by memory (BENCHMARKS.md, "The fused network pass").
:func:`fused_nll_and_grad` computes the same thing one model at a time -- the forward pass,
the Gaussian negative log-likelihood, its gradient and the backward pass, with the ReLU and
its backward folded into the products -- so that a model's activations (a few hundred KB)
stay in its core's cache; the models are shared among the threads (OpenMP, torch's thread
count at the call).

Arithmetic: float32 throughout, the sums over the minibatch kept in 16 independent lanes
and added up in a fixed order, the products' multiply-adds fused where the compiler targets
FMA (``-march=native``), the summed negative log-likelihood accumulated in double.  So it
equals the batched-product path to float rounding (tested: relative 1e-5 on gradients),
not bit for bit, and its results do not depend on the number of threads (tested).

Scope: the Gaussian likelihood with one output (regression), float32 tensors on the CPU,
any depth, widths and batch size.  Everything else is the batched-product path's; asking for
``mlp="native"`` there is an error (:func:`check_supported`).

Build: on first use the C file is compiled with the system's C compiler (``$CC``, else
``cc``; ``-O3 -march=native -fopenmp``) into ``$ASVI_RATES_CACHE`` (default
``~/.cache/asvi-rates``)``/native/<digest>.so``, the digest covering the source, the flags,
the compiler's version and this CPU's model and flags, so a cache shared between machines
never loads code built for another CPU.  The library links against the OpenMP runtime torch
has already loaded (same soname), so the process keeps one thread pool.  No compiler: a
:class:`NativeUnavailable` error naming the command that failed.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

import torch

__all__ = [
    "NativeUnavailable",
    "available",
    "check_supported",
    "fused_nll_and_grad",
    "library_path",
    "load",
]

_SOURCE = Path(__file__).with_name("fused_mlp.c")
_FLAGS = ["-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-std=gnu11"]
_lib = None


class NativeUnavailable(RuntimeError):
    """The fused kernel could not be built or loaded here (the message says why)."""


def _compiler() -> str:
    return os.environ.get("CC") or "cc"


def _cpu_identity() -> str:
    """This CPU's model and feature flags (``/proc/cpuinfo``), else the platform's name."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine()
    keep = [ln for ln in text.splitlines() if ln.startswith(("model name", "flags"))]
    return "\n".join(sorted(set(keep)))


def library_path() -> Path:
    """Where the compiled library for this source, compiler and CPU lives (built or not)."""
    cc = _compiler()
    try:
        version = subprocess.run(
            [cc, "--version"], capture_output=True, text=True, timeout=60
        ).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise NativeUnavailable(f"no C compiler: `{cc} --version` failed ({e})") from e
    digest = hashlib.sha256(
        "\0".join([_SOURCE.read_text(), " ".join(_FLAGS), version, _cpu_identity()]).encode()
    ).hexdigest()[:16]
    root = Path(os.environ.get("ASVI_RATES_CACHE") or Path.home() / ".cache" / "asvi-rates")
    return root / "native" / f"fused_mlp-{digest}.so"


def _build(target: Path) -> None:
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise NativeUnavailable(
            f"cannot write the build folder {target.parent} ({e}); set $ASVI_RATES_CACHE"
        ) from e
    cc = _compiler()
    if shutil.which(cc) is None:
        raise NativeUnavailable(f"no C compiler: `{cc}` is not on PATH (set $CC)")
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=target.parent)
    os.close(fd)
    cmd = [cc, *_FLAGS, "-o", tmp, str(_SOURCE), "-lm"]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if res.returncode != 0:
            raise NativeUnavailable(
                f"building the fused kernel failed: {' '.join(cmd)}\n{res.stderr.strip()}"
            )
        os.replace(tmp, target)  # atomic: a concurrent build loads one whole file or the other
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def load():
    """The loaded library (built on first use; see the module docstring)."""
    global _lib
    if _lib is None:
        path = library_path()
        if not path.exists():
            _build(path)
        try:
            lib = ctypes.CDLL(str(path))
        except OSError as e:
            raise NativeUnavailable(
                f"could not load the fused kernel {path} ({e}); delete it to rebuild"
            ) from e
        f = lib.asvi_fused_mlp_gaussian
        i64, ptr = ctypes.c_int64, ctypes.c_void_p
        f.argtypes = [i64, i64, ctypes.c_int, ptr, ptr, ptr, i64, ptr, i64, ptr, ptr, ptr, ptr]
        f.argtypes += [ptr, ptr, ctypes.c_int]
        f.restype = ctypes.c_int
        _lib = lib
    return _lib


def available() -> bool:
    """Whether the fused kernel can be built and loaded here."""
    try:
        load()
    except (NativeUnavailable, OSError):
        return False
    return True


def check_supported(layout, hyper, device, dtype) -> None:
    """Raise ``ValueError`` naming what is outside the fused kernel's scope (module
    docstring), and :class:`NativeUnavailable` if it cannot be built here."""
    problems = []
    if hyper.likelihood != "gaussian" or layout.out_dim != 1:
        problems.append(f"likelihood {hyper.likelihood!r} with {layout.out_dim} outputs")
    if torch.device(device).type != "cpu":
        problems.append(f"device {device}")
    if dtype != torch.float32:
        problems.append(f"dtype {dtype}")
    if problems:
        raise ValueError(
            "mlp='native' covers the Gaussian likelihood with one output, float32 on the "
            f"CPU; not {', '.join(problems)} (use mlp='batched')"
        )
    load()


_ARRAYS: dict = {}  # (dims, offs) -> their ctypes arrays, made once per network shape


def _check_inputs(theta, x, y, scale, sd, dims, offs) -> None:
    """``ValueError`` unless the tensors are what the C function reads: float32 on the CPU,
    ``x [E, m, p + 1]``, ``theta [E, >= P_net]``, ``y [E, m]``, ``scale`` and ``sd [E]``."""
    E, P_net = x.shape[0] if x.dim() == 3 else -1, offs[-1]
    for name, t in (("theta", theta), ("x", x), ("y", y), ("scale", scale), ("sd", sd)):
        if t.dtype != torch.float32 or t.device.type != "cpu":
            raise ValueError(f"the fused pass takes float32 CPU tensors; {name} is {t.dtype} "
                             f"on {t.device}")  # fmt: skip
    if (x.dim() != 3 or x.shape[2] != dims[0] + 1 or tuple(y.shape) != tuple(x.shape[:2])
            or theta.dim() != 2 or theta.shape[0] != E or theta.shape[1] < P_net
            or tuple(scale.shape) != (E,) or tuple(sd.shape) != (E,)):  # fmt: skip
        raise ValueError(
            f"the fused pass needs x [E, m, {dims[0] + 1}], y [E, m], theta [E, >= {P_net}], "
            f"scale and sd [E]; got x {tuple(x.shape)}, y {tuple(y.shape)}, theta "
            f"{tuple(theta.shape)}, scale {tuple(scale.shape)}, sd {tuple(sd.shape)}"
        )


def _call(theta, x, y, scale, sd, dims: list[int], offs: list[int], widths):
    scale, sd = scale.to(torch.float32), sd.to(torch.float32)
    _check_inputs(theta, x, y, scale, sd, dims, offs)
    E, m = x.shape[0], x.shape[1]
    P_net = offs[-1]
    theta, x, y = theta.contiguous(), x.contiguous(), y.contiguous()
    scale, sd = scale.contiguous(), sd.contiguous()
    nll = torch.empty(E, dtype=torch.float32)
    grad = torch.empty(E, P_net, dtype=torch.float32)
    widths = widths.to(torch.int64).contiguous()
    if (
        tuple(widths.shape) != (E,)
        or E
        and not (1 <= int(widths.min()) and int(widths.max()) <= dims[1])
    ):
        raise ValueError(f"widths must be [{E}] numbers in 1..{dims[1]}, got {widths.tolist()}")
    key = (tuple(dims), tuple(offs))
    arrays = _ARRAYS.get(key)
    if arrays is None:
        arrays = _ARRAYS[key] = (
            (ctypes.c_int64 * len(dims))(*dims),
            (ctypes.c_int64 * len(offs))(*offs),
        )
    rc = load().asvi_fused_mlp_gaussian(
        E, m, len(dims) - 2, *arrays, widths.data_ptr(), P_net, theta.data_ptr(),
        theta.stride(0), x.data_ptr(), y.data_ptr(), scale.data_ptr(), sd.data_ptr(),
        nll.data_ptr(), grad.data_ptr(), torch.get_num_threads(),
    )  # fmt: skip
    if rc == 2:
        raise ValueError(f"the fused pass takes at most 63 hidden layers, got {len(dims) - 2}")
    if rc != 0:
        raise MemoryError("the fused kernel could not allocate its per-thread scratch")
    return nll, grad


@torch.library.custom_op("asvi_rates::fused_mlp_gaussian", mutates_args=())
def _fused_op(
    theta: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    scale: torch.Tensor,
    sd: torch.Tensor,
    dims: list[int],
    offs: list[int],
    widths: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    return _call(theta, x, y, scale, sd, dims, offs, widths)


@_fused_op.register_fake
def _(theta, x, y, scale, sd, dims, offs, widths):
    E = x.shape[0]
    return x.new_empty(E), x.new_empty(E, offs[-1])


def fused_nll_and_grad(layout, theta, x_aug, y, hyper, scale, sd=None, widths=None):
    """:func:`simulate.core.layout.mlp_nll_and_grad` fused per model (module docstring):
    per-network summed negative log-likelihood ``[B]`` and its gradient ``[B, P_net]`` in
    ``theta [B, P]`` (padding slots 0), for inputs ``x_aug [B, m, p + 1]`` (last column
    ones), targets ``y [B, m]``, ``scale`` ([B] or scalar), ``sd [B]`` (None:
    ``hyper.sigma``) and each network's hidden width ``widths [B]`` (None: ``layout``'s,
    B = its E; the step passes ``Consts.widths`` of the models it runs).  A network's
    padding -- units past its width -- is skipped, not computed: it would add exact zeros.
    A ``torch.library`` custom op, so ``torch.compile`` calls it as one opaque node."""
    B = theta.shape[0]
    if sd is None:
        sd = torch.full((B,), float(hyper.sigma), dtype=torch.float32, device=theta.device)
    if not torch.is_tensor(scale):
        scale = torch.full((B,), float(scale), dtype=torch.float32, device=theta.device)
    if widths is None:
        widths = torch.tensor(layout.widths, dtype=torch.int64, device=theta.device)
    offs = [off for off, _, _ in layout.blocks] + [layout.P_net]
    return _fused_op(
        theta, x_aug, y, scale.reshape(B), sd.reshape(B), list(layout.dims), offs, widths
    )
