"""The network's pass fused per model in C (``mlp="native"``): :func:`fused_nll_and_grad`,
the ``torch.library`` custom op it calls, the checks of what the C function reads
(:func:`_check_layout`, also the whole step's) and the pass's scope (:func:`scope_problems`,
:func:`check_supported`).  Why and how it is fused, its arithmetic and its scope: the
package docstring (:mod:`simulate.core.native`)."""

from __future__ import annotations

import ctypes

import torch

from simulate.core.native.library import load

# The most hidden layers the C code takes (``fused_mlp.c``: both functions keep a model's
# depth + 1 activation buffers in an array of 64 pointers on the stack, ``float *act[64]``,
# and return 2 beyond it).  Declared once here: :func:`_check_layout` refuses a deeper
# network before the C function is called, and the step paths that run C
# (``simulate.core.steppath.StepPath.max_depth``) refuse it where a configuration is made
# -- a sweep's, an estimator's -- before anything is built.
MAX_HIDDEN_LAYERS = 63


def scope_problems(likelihood: str, out_dim: int, device, dtype) -> list[str]:
    """What is outside the fused kernel's scope (package docstring, "Scope") for a network
    with this likelihood and output count, on this device in this dtype: one phrase each, []
    where the kernel serves it (:func:`check_supported`; the estimators' ``mlp="auto"``)."""
    problems = []
    if likelihood != "gaussian" or out_dim != 1:
        problems.append(f"likelihood {likelihood!r} with {out_dim} outputs")
    if torch.device(device).type != "cpu":
        problems.append(f"device {device}")
    if dtype != torch.float32:
        problems.append(f"dtype {dtype}")
    return problems


def check_supported(layout, hyper, device, dtype) -> None:
    """Raise ``ValueError`` naming what is outside the fused kernel's scope
    (:func:`scope_problems`), and :class:`simulate.core.native.NativeUnavailable` if it
    cannot be built here."""
    problems = scope_problems(hyper.likelihood, layout.out_dim, device, dtype)
    if problems:
        raise ValueError(
            "mlp='native' covers the Gaussian likelihood with one output, float32 on the "
            f"CPU; not {', '.join(problems)} (use mlp='batched')"
        )
    load()


_ARRAYS: dict = {}  # (dims, offs) -> their ctypes arrays, made once per network shape


def _check_layout(dims, offs) -> None:
    """``ValueError`` unless ``dims`` and ``offs`` are a network the C function can walk
    within its buffers: ``dims = [p, hidden..., 1]`` (layer l maps ``dims[l] ->
    dims[l + 1]``; at least one and at most :data:`MAX_HIDDEN_LAYERS` hidden layers, every
    size >= 1, one output) and ``offs`` the offsets of the layers' blocks
    ``[dims[l + 1], dims[l] + 1]`` laid end to end from 0, then ``P_net``
    (:class:`simulate.core.layout.Layout`'s).  The C function reads ``offs[depth + 1]`` as
    the gradient row's length and sizes its scratch by ``dims``, so nothing less than this
    exact agreement keeps its reads and writes inside ``theta``, ``grad`` and its scratch;
    the op is public (``torch.ops.asvi_rates``), so the check is here and not left to its
    callers."""
    dims, offs = list(dims), list(offs)
    if len(dims) < 3 or len(offs) != len(dims):
        raise ValueError(
            f"the fused pass needs dims [p, hidden..., 1] and one offset per layer plus P_net "
            f"(as many as dims); got {len(dims)} dims and {len(offs)} offs"
        )
    if len(dims) - 2 > MAX_HIDDEN_LAYERS:
        _too_deep(dims)
    if min(dims) < 1 or dims[-1] != 1:
        raise ValueError(f"the fused pass needs sizes >= 1 and one output; got dims {dims}")
    expect = [0]
    for l in range(len(dims) - 1):
        expect.append(expect[-1] + dims[l + 1] * (dims[l] + 1))
    if offs != expect:
        raise ValueError(f"offs must be the blocks' offsets for dims {dims}, {expect}; got {offs}")


def _check_inputs(theta, x, y, scale, sd, dims, offs, widths) -> None:
    """``ValueError`` unless ``dims`` and ``offs`` describe a network the C function can
    walk (:func:`_check_layout`) and the tensors are what it reads: float32 on the CPU,
    ``x [E, m, p + 1]``, ``theta [E, >= P_net]``, ``y [E, m]``, ``scale`` and ``sd [E]``,
    and ``widths [E]`` (integers on the CPU) within every hidden layer's size."""
    _check_layout(dims, offs)
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
    wmax = min(dims[1:-1])  # a model's units in every hidden layer: within each one's size
    if (
        widths.device.type != "cpu"
        or widths.is_floating_point()
        or widths.is_complex()
        or tuple(widths.shape) != (E,)
        or E
        and not (1 <= int(widths.min()) and int(widths.max()) <= wmax)
    ):
        raise ValueError(
            f"widths must be [{E}] integers in 1..{wmax} on the CPU, got {widths.tolist()}"
            f" ({widths.dtype} on {widths.device})"
        )


def _too_deep(dims) -> None:
    raise ValueError(
        f"the C code takes at most {MAX_HIDDEN_LAYERS} hidden layers, got {len(dims) - 2}"
        " (mlp='batched' trains deeper networks)"
    )


def _check_rc(rc: int, dims) -> None:
    """The C functions' return codes: 0 done, 2 too deep a network, else no scratch."""
    if rc == 2:
        _too_deep(dims)
    if rc != 0:
        raise MemoryError("the fused kernel could not allocate its per-thread scratch")


def _call(theta, x, y, scale, sd, dims: list[int], offs: list[int], widths):
    scale, sd = scale.to(torch.float32), sd.to(torch.float32)
    _check_inputs(theta, x, y, scale, sd, dims, offs, widths)
    E, m = x.shape[0], x.shape[1]
    P_net = offs[-1]
    theta, x, y = theta.contiguous(), x.contiguous(), y.contiguous()
    scale, sd = scale.contiguous(), sd.contiguous()
    nll = torch.empty(E, dtype=torch.float32)
    grad = torch.empty(E, P_net, dtype=torch.float32)
    widths = widths.to(torch.int64).contiguous()
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
    _check_rc(rc, dims)
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
    """:func:`simulate.core.layout.mlp_nll_and_grad` fused per model (package docstring):
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
