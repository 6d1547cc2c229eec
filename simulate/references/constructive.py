"""Constructive starts: variational parameters that put a known good network in the student.

The theorems speak of the variational posterior that *maximises* the ELBO; a sweep measures
what Adam finds from a random start.  A constructive start is a posterior built by hand
around a network that already attains the rate (a least-squares linear spline for the
Hoelder truths, the teacher itself for the teacher truths), so that training from it (arm
W), not training it (arm W0) and training from a random start (arm R) can be compared on
the same objective.  ``init_from=`` of :class:`simulate.core.trainer.Trainer` takes what
:func:`encode` returns.

**Spline encoding (p = 1, exact).**  The least-squares continuous linear spline with ``k``
equal segments on [-1, 1] (``simulate.references.classical.fit_linear_spline``, node values
``v_i`` at
``t_i = -1 + 2 i / k``) equals on [-1, 1]

    ``f(x) = v_0 + sum_{j < k} c_j relu(x - t_j)``,  ``c_0 = s_0``, ``c_j = s_j - s_{j-1}``,

with ``s_j`` the slope of segment j (``relu(x - t_0) = x + 1`` there: the linear part is
unit 0).  Hidden unit j of the first layer computes ``a_j relu(x - t_j)`` (weight ``a_j``,
bias ``-a_j t_j``); every further hidden layer passes unit j on through a diagonal weight
``g_j`` and bias 0 (its input is >= 0, so ``relu(g h) = g h``: positive homogeneity); the
output weight of unit j is ``sign(c_j) g_j`` and the output bias ``v_0``.  Layer scales are
balanced: ``g_j = (|c_j| sqrt(1 + t_j^2))^(1/(D+1))`` and ``a_j = g_j / sqrt(1 + t_j^2)``
for D hidden layers, so every weight layer of unit j's path carries the same norm (the
first layer's weight and bias together) and the product is ``c_j``.  A width-w student holds
up to k = w segments; the mesh is chosen on a validation split among those it can hold
(:func:`spline_starts`).  Units with ``c_j = 0`` are left out.

**p > 1 (not encoded).**  The sweeps' p = 2 reference (the linear spline on the Kuhn
triangulation) is a sum of hat functions ``relu(1 - max(|x_1|, |x_2|, |x_1 - x_2|))`` (per
node, after scaling), and a max of six affine functions needs about three ReLU layers and
several units per node: (k + 1)^2 nodes times that is far wider than the candidates
(at most 64 units).  A one-layer encoding would need a different reference (sums of ridge
functions over a few fixed directions cannot approximate a general Hoelder function), so
no p > 1 Hoelder truth has a constructive start; asking for one is a ``ValueError``.

**Teacher embedding.**  The teacher's weights and biases (``relu(h W + b)``, the sweeps'
convention) are copied into the student's first units; deeper students pass the teacher's
last hidden layer on with identity weights (its outputs are >= 0).  A student narrower than
the teacher keeps the teacher's first ``w`` units of each layer: not exact, and recorded so
(``exact = False``).

**Variational parameters.**  Locations are the encoded weights (through the slab's own
``init``, so a uniform slab gets the same centres); slab sds the core's initial value
(``init_sigma``); inclusion probability :data:`NU_ON` on the edges the encoding uses (its
non-zero weights and biases) and :data:`NU_OFF` on every other edge and on padding.
``NU_ON = 1 - 1e-6``: with 0.99 (the core's random-start value) a draw of a 100-edge
network drops one edge on average, and with 1 - 1e-4 a 256-edge start still dropped an
edge in 2.5% of its draws (a dropped first-layer weight turns a knot into a constant:
d^2 0.022 against 0.007 without, measured at n = 32,000); the untrained start's risk
would measure the dropping, not the spline.

**Fitted scales** (:func:`gauss_newton_scales`, arm W0s of the sweeps).  Slab sds at the
core's initial value (0.0025) cost ``log(sigma_0 / 0.0025) = 5.8`` nats of KL per kept
edge, so the untrained start's ELBO understates the ELBO of a posterior around the same
network.  The scales that maximise the ELBO with the locations held fixed are, to second
order (Gauss-Newton: ``E_q L1 = L1(mu) + sum_i h_i s_i^2 / 2`` with
``h_i = sum_x (d f(x) / d theta_i)^2 / sigma^2`` over the training points, the
network's curvature without its second-derivative term),
``s_i^2 = 1 / (h_i + 1 / sigma_0^2)`` per kept edge (each edge's ``h_i s^2 / 2 +
KL(N(mu, s^2) || N(0, sigma_0^2))`` minimised).  W0s is that posterior: the same
network, its sds fitted, untrained.  The approximation drops the residuals' curvature:
where the network fits badly (a teacher truncated to a narrower student) the fitted
scales can lower the ELBO instead (measured: -56,181 -> -56,331 nats at width 2).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from simulate.core.hyper import Hyper
from simulate.core.layout import Layout
from simulate.core.objective import family_of
from simulate.core.slabs import slab_of
from simulate.core.state import inclusion_logit
from simulate.references.classical import fit_linear_spline, spline_grid

__all__ = [
    "NU_OFF", "NU_ON", "Net", "encode", "net_outputs", "net_theta", "encode_theta",
    "spline_network", "spline_starts", "teacher_network", "choose_mesh", "gauss_newton_scales",
]  # fmt: skip

NU_ON = 1 - 1e-6
NU_OFF = 1e-6


@dataclass
class Net:
    """A plain ReLU network at its own width: ``weights[l]`` is ``[out, in]`` and
    ``biases[l]`` is ``[out]`` (numpy, float64), ``depth + 1`` layers; ``exact`` says whether
    it reproduces the function it encodes; ``info`` describes it (mesh k, units used)."""

    weights: list
    biases: list
    exact: bool = True
    info: dict | None = None

    @property
    def depth(self) -> int:
        return len(self.weights) - 1

    @property
    def width(self) -> int:
        return self.weights[0].shape[0]


def net_outputs(net: Net, X) -> np.ndarray:
    """The network's output at inputs ``X [m, p]`` (float64)."""
    h = np.asarray(X, dtype=float)
    for l, (W, b) in enumerate(zip(net.weights, net.biases, strict=True)):
        h = h @ W.T + b
        if l < net.depth:
            h = np.maximum(h, 0)
    return h[:, 0]


def _spline_slopes(values: np.ndarray, k: int):
    """Knots ``t [k]``, jump coefficients ``c [k]`` and the value at -1 of the spline with
    node values ``values [k + 1]`` (module docstring)."""
    t = -1 + 2 * np.arange(k) / k
    s = np.diff(values) / (2 / k)  # slope of each segment
    c = np.concatenate([[s[0]], np.diff(s)])
    return t, c, float(values[0])


def spline_network(values, width: int, depth: int) -> Net:
    """The exact ReLU encoding of the p = 1 linear spline with node values ``values``
    (``k + 1`` of them, equally spaced on [-1, 1]) in a ``1-width-...-width-1`` network of
    ``depth`` hidden layers (module docstring); ``width >= k`` is required."""
    values = np.asarray(values, dtype=float)
    k = values.size - 1
    if k < 1 or width < k or depth < 1:
        raise ValueError(
            f"need k >= 1 segments, width >= k and depth >= 1; got {k}, {width}, {depth}"
        )
    t, c, v0 = _spline_slopes(values, k)
    used = np.flatnonzero(c != 0)
    norm = np.sqrt(1 + t**2)
    g = (np.abs(c) * norm) ** (1 / (depth + 1))
    weights = [np.zeros((width, 1))] + [np.zeros((width, width)) for _ in range(depth - 1)]
    biases = [np.zeros(width) for _ in range(depth)]
    weights[0][used, 0] = g[used] / norm[used]
    biases[0][used] = -g[used] / norm[used] * t[used]
    for l in range(1, depth):
        weights[l][used, used] = g[used]
    out = np.zeros((1, width))
    out[0, used] = np.sign(c[used]) * g[used]
    weights.append(out)
    biases.append(np.array([v0]))
    return Net(weights, biases, True, {"k": int(k), "units": int(used.size)})


def choose_mesh(X, y, k_max: int, seed: int = 0, val_fraction: float = 0.2) -> dict:
    """The linear spline's segment count chosen on a validation split: ``{k: val_mse}`` for
    every k of ``simulate.references.classical.spline_grid`` (and ``k_max`` itself) up to ``k_max``,
    fitted on the other ``1 - val_fraction`` of the data."""
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    n = X.shape[0]
    va = np.random.default_rng(seed).permutation(n) < max(1, int(round(val_fraction * n)))
    grid = sorted({k for k in spline_grid(int((~va).sum()), 1) if k <= k_max} | {k_max})
    out = {}
    for k in grid:
        pred = fit_linear_spline(X[~va], y[~va], k)(X[va])
        out[k] = float(np.mean((pred - y[va]) ** 2))
    return out


def spline_starts(X, y, widths, depth: int, seed: int = 0) -> list[Net]:
    """One network per candidate width: the linear spline fitted on all of (X, y) with the
    validation-chosen mesh among those the width can hold (``k <= w``), encoded exactly."""
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or X.shape[1] != 1:
        raise ValueError(
            "a constructive start for a Hoelder truth is encoded for p = 1 only "
            f"(simulate.references.constructive), got inputs of shape {X.shape}"
        )
    scores = choose_mesh(X, y, max(widths), seed)
    nets = []
    for w in widths:
        k = min((k for k in scores if k <= w), key=lambda k: scores[k])
        grid = -1 + 2 * np.arange(k + 1) / k
        values = fit_linear_spline(X, y, k)(grid[:, None])
        net = spline_network(values, w, depth)
        net.info["val_mse"] = scores[k]
        nets.append(net)
    return nets


def teacher_network(teacher, p: int, width: int, depth: int) -> Net:
    """The teacher (``simulate.truths.functions.TeacherNetwork``, ``relu(h W + b)``) embedded in a
    ``p-width-...-width-1`` student of ``depth`` hidden layers (module docstring)."""
    if teacher.bias != "add":
        raise ValueError("the embedding is for teachers with bias='add' (relu(h W + b))")
    tw = [W.T for W in teacher.weights]  # [out, in]
    tb = list(teacher.biases)
    t_depth = len(tw) - 1
    if depth < t_depth:
        raise ValueError(f"a student of depth {depth} cannot hold a teacher of depth {t_depth}")
    exact = width >= max(W.shape[0] for W in tw[:-1])
    weights, biases = [], []
    ins = p
    for l in range(depth):
        W = np.zeros((width, ins))
        b = np.zeros(width)
        if l < t_depth:
            src, sb = tw[l], tb[l]
            o, i = min(width, src.shape[0]), min(ins, src.shape[1])
            W[:o, :i] = src[:o, :i]
            b[:o] = sb[:o]
        else:  # pass the teacher's last hidden layer on (its outputs are >= 0)
            o = min(width, tw[t_depth - 1].shape[0])
            W[np.arange(o), np.arange(o)] = 1.0
        weights.append(W)
        biases.append(b)
        ins = width
    out = np.zeros((1, width))
    o = min(width, tw[-1].shape[1])
    out[0, :o] = tw[-1][0, :o]
    weights.append(out)
    biases.append(np.asarray(tb[-1], dtype=float).reshape(1))
    return Net(weights, biases, bool(exact), {"teacher_width": int(tw[0].shape[0])})


def encode(
    layout: Layout, nets, hyper: Hyper, dtype=torch.float32, nu_on: float = NU_ON
) -> torch.Tensor:
    """Variational parameters ``[3, E, P]`` that put ``nets[e]`` in model e of ``layout``
    (padded; model e's width must be its network's): locations the weights, slab sds
    ``hyper.init_sigma``, inclusion :data:`NU_ON` on the non-zero weights and biases and
    :data:`NU_OFF` elsewhere (module docstring; ``nu_on`` for tests that need the
    inclusion nearer 1).  Spike-and-slab family only."""
    if not family_of(hyper).indicators or layout.node_scales:
        raise ValueError("constructive starts are for the spike-and-slab family")
    return encode_theta(net_theta(layout, nets), hyper, dtype, nu_on)


def encode_theta(
    theta: torch.Tensor, hyper: Hyper, dtype=torch.float32, nu_on: float = NU_ON
) -> torch.Tensor:
    """:func:`encode` from parameters already in the flat axis, ``theta [E, P]``: inclusion
    :data:`NU_ON` where ``theta`` is non-zero."""
    loc = torch.as_tensor(theta, dtype=torch.float64)
    used = loc != 0
    rows0, rows1 = slab_of(hyper).init(loc.to(dtype), hyper)
    on, off = inclusion_logit(nu_on), inclusion_logit(NU_OFF)
    logit = torch.where(used, torch.full_like(loc, on), torch.full_like(loc, off)).to(dtype)
    return torch.stack([rows0, rows1, logit])


def gauss_newton_scales(
    layout: Layout, params: torch.Tensor, X, data_index, hyper: Hyper, chunk: int = 65536
) -> torch.Tensor:
    """``params`` (an encoded start, Gaussian slab) with every kept edge's slab sd set to
    ``(h_i + 1 / sigma_0^2)^(-1/2)``, ``h_i = sum_x (d f(x) / d theta_i)^2 / sigma^2`` at the
    locations over model e's training inputs ``X[data_index[e]]`` (module docstring);
    other edges keep theirs.  Returns a new ``[3, E, P]`` tensor (``params``'s dtype).
    The sums are :func:`curvature_diagonal`'s, ``chunk`` inputs at a time."""

    if hyper.slab != "gaussian" or not family_of(hyper).indicators:
        raise ValueError("fitted scales are for the spike-and-slab family's Gaussian slab")
    X = torch.as_tensor(X, dtype=torch.float64)
    loc = params[0].to(torch.float64)
    kept = torch.sigmoid(params[2].to(torch.float64)) > 0.5
    h = torch.zeros_like(loc)
    for e, d in enumerate(torch.as_tensor(data_index).tolist()):
        h[e] = curvature_diagonal(layout, loc[e], X[d], chunk)
    h /= hyper.sigma**2
    sd = (h + 1 / hyper.sigma_0**2).rsqrt()
    raw = torch.log(torch.expm1(sd))  # inverse softplus, elementwise
    out = params.clone()
    out[1] = torch.where(kept, raw.to(params.dtype), params[1])
    return out


def curvature_diagonal(layout: Layout, theta: torch.Tensor, X, chunk: int = 65536):
    """``[P]``: ``sum_x (d f(x) / d theta_i)^2`` over the rows x of ``X [m, p]`` for one
    network ``theta [P]`` of ``layout`` (f its first output), in closed form: a weight's
    per-input gradient is the product of its unit's back-propagated signal and its input's
    activation (``d f / d B_l[j, k] = delta_l[j](x) a_{l-1}[k](x)``, the bias's activation
    1), so the sum of its squares is one product, ``(delta_l^2)^T (a_{l-1}^2)``, per layer.
    The ReLU's derivative is ``1[z > 0]`` (as autograd's).  Equal to the per-input
    autograd sum to rounding (tested); it replaced a ``vmap`` of autograd that materialised
    every input's full gradient (at width 512 about 1 h and 7 GB per model at n =
    512,000, against seconds here).  Padding and entries outside the blocks get 0."""
    with torch.no_grad():
        theta = torch.as_tensor(theta, dtype=torch.float64)
        X = torch.as_tensor(X, dtype=torch.float64)
        blocks = [layout.block(theta[None], l)[0] for l in range(layout.depth + 1)]
        h = torch.zeros_like(theta)
        for a in range(0, X.shape[0], chunk):
            x = X[a : a + chunk]
            ones = torch.ones(x.shape[0], 1, dtype=x.dtype)
            acts, live = [torch.cat([x, ones], dim=1)], []
            for l in range(layout.depth):
                z = acts[-1] @ blocks[l].T  # [m, o]
                live.append(z > 0)
                acts.append(torch.cat([torch.relu(z), ones], dim=1))
            delta = torch.zeros(x.shape[0], blocks[-1].shape[0], dtype=x.dtype)
            delta[:, 0] = 1  # f is the first output
            for l in range(layout.depth, -1, -1):
                off, i, o = layout.blocks[l]
                h[off : off + o * (i + 1)] += ((delta**2).T @ acts[l] ** 2).reshape(-1)
                if l:
                    delta = (delta @ blocks[l][:, :-1]) * live[l - 1]
    return h


def net_theta(layout: Layout, nets) -> torch.Tensor:
    """The networks' weights and biases in ``layout``'s flat parameter axis, ``[E, P]``
    float64 (padding zero); ``nets[e]`` must have model e's depth, width and input size."""
    if len(nets) != layout.E:
        raise ValueError(f"need one network per model ({layout.E}), got {len(nets)}")
    loc = torch.zeros(layout.E, layout.P, dtype=torch.float64)
    for e, net in enumerate(nets):
        if net.depth != layout.depth or net.width != layout.widths[e]:
            raise ValueError(
                f"model {e}: network of depth {net.depth}, width {net.width} does not fit "
                f"depth {layout.depth}, width {layout.widths[e]}"
            )
        if net.weights[0].shape[1] != layout.p:
            raise ValueError(f"model {e}: network input dimension is not {layout.p}")
        for l, (off, i, o) in enumerate(layout.blocks):
            W, b = net.weights[l], net.biases[l]
            blk = torch.zeros(o, i + 1, dtype=torch.float64)
            blk[: W.shape[0], : W.shape[1]] = torch.as_tensor(W)
            blk[: W.shape[0], i] = torch.as_tensor(b)
            loc[e, off : off + o * (i + 1)] = blk.reshape(-1)
    return loc
