"""The whole training step in C per model (``mlp="native-step"``): :func:`fused_steps`, the
checks of the tensors it hands the C function, and its scope (:func:`step_scope_problems`,
:func:`check_step_supported`).  The network pass inside it is
:func:`simulate.core.native.network.fused_nll_and_grad`'s; the library:
:mod:`simulate.core.native.library`."""

from __future__ import annotations

import ctypes

import torch

from simulate.core.native.library import load
from simulate.core.native.network import _ARRAYS, _check_layout, _check_rc, scope_problems


def step_scope_problems(hyper, out_dim: int, device, dtype) -> list[str]:
    """What is outside the whole step's scope in C (``mlp="native-step"``,
    :func:`fused_steps`): the fused pass's (:func:`scope_problems`) and the families and
    settings its step does not cover -- it is ``simulate.core.step.spike_slab_step`` with the
    Gaussian slab and the paper's L3 (the SVI / ASVI family) or without indicators
    (Dense-BNN); one phrase each, [] where it serves (``out_dim``: the network's outputs)."""
    problems = scope_problems(hyper.likelihood, out_dim, device, dtype)
    if hyper.family not in ("spike_slab", "dense"):
        problems.append(f"family {hyper.family!r}")
    elif hyper.family == "spike_slab":
        if hyper.slab != "gaussian":
            problems.append(f"slab {hyper.slab!r}")
        if hyper.l3 != "paper":
            problems.append(f"l3 {hyper.l3!r}")
    return problems


def check_step_supported(layout, hyper, device, dtype) -> None:
    """Raise ``ValueError`` naming what is outside the whole step's scope
    (:func:`step_scope_problems`), and :class:`NativeUnavailable` if it cannot be built."""
    problems = step_scope_problems(hyper, layout.out_dim, device, dtype)
    if problems:
        raise ValueError(
            "mlp='native-step' covers the spike-and-slab family with the Gaussian slab and "
            "the paper's L3, or Dense-BNN, with the Gaussian likelihood and one output, "
            f"float32 on the CPU; not {', '.join(problems)} (use mlp='native' or 'batched')"
        )
    load()


def _check_tensor(name, t, dtype, shape) -> None:
    if (not torch.is_tensor(t) or t.dtype != dtype or t.device.type != "cpu"
            or tuple(t.shape) != shape or not t.is_contiguous()):  # fmt: skip
        got = type(t).__name__
        if torch.is_tensor(t):
            got = f"{t.dtype} {tuple(t.shape)} on {t.device}"
        raise ValueError(
            f"the whole step in C needs {name} a contiguous {dtype} CPU tensor {shape}; got {got}"
        )


_CHECKED: dict = {}  # id -> (the tensors checked, their data_ptr, shape, stride, dtype)


def _check_once(key, named) -> bool:
    """:func:`_check_tensor` on each of ``named`` (name -> (tensor, dtype, shape)), skipped
    where the same tensors (by identity and by data pointer, shape, stride and dtype) were
    checked under ``key`` at the previous call: the step hands the same program constants
    and state buffers every time, and the checks cost more than a small program's step.
    Whether they were checked now (the caller's value checks go with them)."""
    sig = tuple(
        (id(t), t.data_ptr(), t.shape, t.stride(), t.dtype) if torch.is_tensor(t) else None
        for (t, _, _) in named.values()
    )
    if _CHECKED.get(key) == sig:
        return False
    for name, (t, dtype, shape) in named.items():
        _check_tensor(name, t, dtype, shape)
    _CHECKED[key] = sig
    return True


def _step_arrays(layout, P: int):
    """The network's ``dims`` and their and the offsets' ctypes arrays (made once per
    network shape, the layout checked then: :func:`_check_layout`); ``ValueError`` unless
    ``P`` is the network's ``P_net``."""
    dims = list(layout.dims)
    offs = [off for off, _, _ in layout.blocks] + [layout.P_net]
    key = (tuple(dims), tuple(offs))
    arrays = _ARRAYS.get(key)
    if arrays is None:
        _check_layout(dims, offs)
        arrays = _ARRAYS[key] = (
            (ctypes.c_int64 * len(dims))(*dims),
            (ctypes.c_int64 * len(offs))(*offs),
        )
    if P != offs[-1]:
        raise ValueError(f"the whole step in C needs P = P_net = {offs[-1]}, got {P}")
    return dims, arrays


def _source_tensors(source, ind: bool, draw: bool, E: int, P: int, m: int, p1: int) -> dict:
    """The draw source's tensors the C function reads beyond ``eps_base`` (name -> (tensor,
    dtype, shape), as :func:`_check_once` takes them): the indicators' stream's base where
    there are indicators (``ind``), the minibatch's stream and the data where the minibatch
    is drawn in C (``draw``; ``p1`` the inputs' columns, the ones column included)."""
    named = {}
    if ind:
        named["gumbel_base"] = (source.gumbel_base, torch.int32, (E, P))
    if draw:
        rows = source.X_aug.shape[0]
        named["iid_base"] = (source.iid_base, torch.int32, (E, m))
        named["X_aug"] = (source.X_aug, torch.float32, (rows, p1))
        named["y_flat"] = (source.y_flat, torch.float32, (rows,))
        named["data_index"] = (source.data_index, torch.int64, (E,))
    return named


def _check_values(source, widths, dims, n: int, draw: bool, E: int) -> None:
    """``ValueError`` unless ``source.data_index`` (where the minibatch is drawn in C) indexes
    the datasets of ``n`` rows and ``widths`` are within every hidden layer's size; the
    checked tensors forgotten then, so that the next call checks them anew."""
    rows = source.X_aug.shape[0]
    di = source.data_index
    if draw and (rows % n or E and not (0 <= int(di.min()) and int(di.max()) < rows // n)):
        _CHECKED.clear()
        raise ValueError(f"data_index must index the {rows // n} datasets of {n} rows")
    wmax = min(dims[1:-1])
    if E and not (1 <= int(widths.min()) and int(widths.max()) <= wmax):
        _CHECKED.clear()
        raise ValueError(f"widths must be in 1..{wmax}, got {widths.tolist()}")


def _call_steps(hyper, n: int, S: int, t0: int, dims, arrays, tensors: dict, skip_held):
    """The C entry point ``asvi_fused_steps_spike_slab`` on the checked ``tensors`` (name ->
    tensor; a name absent is a null pointer: ``gumbel_base`` without indicators, the
    source's minibatch stream and data with ``xb`` given, ``xb`` / ``yb`` without);
    :func:`fused_steps`'s return value."""
    params, moments = tensors["params"], (tensors["exp_avg"], tensors["exp_avg_sq"])
    E, P = params.shape[1], params.shape[2]
    K, m = hyper.mc_samples, hyper.batch_size
    f32 = torch.float32
    L1, L2, L3 = torch.empty(3, S, E, dtype=f32)
    nonfinite = torch.empty(S, E, dtype=torch.bool)
    b1, b2 = hyper.betas if hyper.optimizer == "adam" else (0.0, hyper.rmsprop_alpha)

    def ptr(name):
        return tensors[name].data_ptr() if name in tensors else None

    rc = load().asvi_fused_steps_spike_slab(
        E, P, K, m, len(dims) - 2, *arrays, ptr("widths"), params.data_ptr(),
        moments[0].data_ptr(), moments[1].data_ptr(), ptr("mask"), ptr("H"),
        ptr("eps_base"), ptr("gumbel_base"), S, t0, ptr("xb"), ptr("yb"), ptr("sd"),
        ptr("held"), float(n), float(hyper.tau), float(hyper.lambda_s),
        float(hyper.sigma_0), ptr("kl_weight"), ptr("step"), ptr("corr2"),
        float(b1), float(b2), float(hyper.adam_eps), 0 if hyper.optimizer == "adam" else 1,
        ptr("iid_base"), ptr("X_aug"), ptr("y_flat"), ptr("data_index"), n,
        int(bool(skip_held)), L1.data_ptr(), L2.data_ptr(), L3.data_ptr(),
        nonfinite.data_ptr(), torch.get_num_threads(),
    )  # fmt: skip
    _check_rc(rc, dims)
    return nonfinite, (L1, L2, L3)


def fused_steps(layout, hyper, n: int, params, moments, mask, H, source, t0: int, S: int, xb,
                yb, sd, held, step, corr2, kl_weight, widths, skip_held=False):  # fmt: skip
    """``S`` consecutive training steps (``t0 .. t0 + S - 1``) of
    ``simulate.core.step.spike_slab_step`` per model, in C (``mlp="native-step"``; scope:
    :func:`step_scope_problems`).  The signature mirrors the C ABI: the arguments of the C
    entry point ``asvi_fused_steps_spike_slab``, grouped by ``layout``, ``hyper``,
    ``moments`` and ``source``.  For each step the K draws from the counter-based streams
    (``source``, the program's ``simulate.core.sampler.DrawSource``: the streams' keyed
    bases ``[E, P]`` int32 and the data; draw k of step t at draw number ``t K + k``, its
    words made in C as ``simulate.core.rng.offset_words`` makes them), the minibatch (``xb
    [S, E, m, p + 1]`` / ``yb [S, E, m]`` as given, or with ``xb`` None drawn iid at draw
    number t and gathered in C from ``source``, as the sampler draws it), the network pass
    of each draw (:func:`simulate.core.native.network.fused_nll_and_grad`'s), L1 / L2 / L3
    and the hand-written gradients, then the optimiser's update of ``params [3, E, P]`` and
    its ``moments`` (``exp_avg``, ``exp_avg_sq``; each ``[3, E, P]``) **in place**.  ``mask
    [E, P]`` and ``H [E]`` the models' constants, ``sd [E]`` the noise sd (fixed over the S
    steps), ``held [E]`` the models not to move (their moments still decay, as in the
    batched step; a model whose objective is not finite at a step is held from the next one
    on, as the trainer holds a failed model), ``step [S, 3, E]`` each step's step size per
    parameter row and model (the learning-rate scale applied), ``corr2 [S]`` Adam's
    second-moment correction, ``kl_weight [S]`` the KL warm-up's weight (1 without), all
    float32; ``widths [E]`` the hidden widths.  ``skip_held``: the models ``held`` are not
    computed at all but for their moments' decay (their parameters and moments are what
    computing them gives: their gradient is zeroed anyway); their terms are then NaN and
    never non-finite.  Returns ``(nonfinite [S, E] bool, (L1, L2, L3))``, each term ``[S,
    E]``.

    Arithmetic: float32, each model's numbers computed alone in a fixed order (so they do
    not depend on which models share the call, nor on the thread count, nor on how the
    steps are split into calls: S steps in one call are S calls of one step bit for bit),
    VL slots at a time with the kernel's own vector exp / log (Cephes' polynomials) and
    normal transform (Giles' single-precision erfinv); equal to the batched step to float
    rounding, not bit for bit (tested: ``tests/simulate/core/test_native_step.py``).  The
    minibatch's indices are the sampler's bit for bit (the same hash, the same float64
    uniform).  Padding slots (``mask`` 0) are skipped: in the batched step their gradient
    is 0 and their moments stay 0, so they never move."""
    E, P = params.shape[1], params.shape[2]
    K, m, S, t0 = hyper.mc_samples, hyper.batch_size, int(S), int(t0)
    if S < 1 or t0 < 0:
        raise ValueError(f"the whole step in C needs S >= 1 steps from t0 >= 0, got {S}, {t0}")
    dims, arrays = _step_arrays(layout, P)
    ind = source.gumbel_base is not None
    draw = xb is None  # the minibatch drawn in C
    f32, i32 = torch.float32, torch.int32
    named = {
        "params": (params, f32, (3, E, P)),
        "exp_avg": (moments[0], f32, (3, E, P)),
        "exp_avg_sq": (moments[1], f32, (3, E, P)),
        "mask": (mask, f32, (E, P)),
        "H": (H, f32, (E,)),
        "eps_base": (source.eps_base, i32, (E, P)),
        "sd": (sd, f32, (E,)),
        "widths": (widths, torch.int64, (E,)),
    }
    named.update(_source_tensors(source, ind, draw, E, P, m, dims[0] + 1))
    # the sizes the shapes are checked against are part of the key: the same tensors with
    # another batch size, network or data size are checked anew
    key = ("step", id(params), E, P, K, m, tuple(dims), n, ind, draw)
    if _check_once(key, named):  # new tensors: their values checked too
        _check_values(source, widths, dims, n, draw, E)
    each = [("held", held, torch.bool, (E,)), ("step", step, f32, (S, 3, E)),
            ("corr2", corr2, f32, (S,)), ("kl_weight", kl_weight, f32, (S,))]  # fmt: skip
    if not draw:
        each += [("xb", xb, f32, (S, E, m, dims[0] + 1)), ("yb", yb, f32, (S, E, m))]
    for name, t, dtype, shape in each:  # the call's own tensors, new every call
        if (not torch.is_tensor(t) or t.dtype != dtype or t.shape != shape
                or not t.is_contiguous() or t.device.type != "cpu"):  # fmt: skip
            _check_tensor(name, t, dtype, shape)
    tensors = {name: t for name, (t, _, _) in named.items()}
    tensors.update({name: t for name, t, _, _ in each})
    return _call_steps(hyper, n, S, t0, dims, arrays, tensors, skip_held)
