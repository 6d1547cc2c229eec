"""Where every model's weights sit in the flat parameter axis (:class:`Layout`), and the
network's forward pass with its hand-written backward (:func:`mlp_nll_and_grad`)."""

from __future__ import annotations

import torch

from simulate.core.hyper import Hyper
from simulate.core.likelihoods import likelihood_of


class Layout:
    """Where each layer's weights and biases sit in the flat parameter axis, and the masks.

    Model e has ``depth`` hidden layers of width ``widths[e]``; all are padded to
    ``Wmax = max(widths)``.  Layer l maps ``dims[l] -> dims[l+1]`` with
    ``dims = [p, Wmax, ..., Wmax, out_dim]``.  Its parameters form one row-major block
    ``[out, in + 1]``: the weights, then the bias as the last column.  The forward pass
    appends a row of ones to each layer's input (``[B, in + 1, m]``), so one batched matrix
    product computes ``W h + b`` and one computes the gradient of both.

    ``node_scales=True`` (the horseshoe family, ``simulate.core.families``) appends ``U`` slots
    after the ``P_net`` network slots: one per unit of every layer (its scale tau), then one
    per layer (the layer's global scale).  ``P = P_net + U``; networks use ``[:, :P_net]``.
    """

    def __init__(self, p: int, depth: int, widths, out_dim: int = 1, node_scales: bool = False):
        widths = [int(w) for w in widths]
        if not widths:
            raise ValueError("widths must be a non-empty list of positive integers")
        if any(w < 1 for w in widths):
            raise ValueError(f"every width must be >= 1, got {widths}")
        if int(p) < 1 or int(depth) < 1 or int(out_dim) < 1:
            raise ValueError(f"p, depth and out_dim must be >= 1, got {p}, {depth}, {out_dim}")
        self.p, self.depth, self.out_dim = int(p), int(depth), int(out_dim)
        self.widths = widths
        self.E = len(widths)
        self.Wmax = max(widths)
        self.dims = [self.p] + [self.Wmax] * self.depth + [self.out_dim]
        self.blocks = []  # (offset, in, out): block [out, in + 1] at theta[:, offset:]
        off = 0
        for l in range(self.depth + 1):
            i, o = self.dims[l], self.dims[l + 1]
            self.blocks.append((off, i, o))
            off += o * (i + 1)
        self.P_net = off
        self.node_scales = bool(node_scales)
        self.units = sum(self.dims[1:]) if node_scales else 0  # tau slots
        self.P = off + (self.units + self.depth + 1 if node_scales else 0)
        self._buffers: dict = {}

    def mask(self, device=None, dtype=torch.float32) -> torch.Tensor:
        """[E, P]: 1 for a real edge (weight or bias) of model e, 0 for padding."""
        m = torch.zeros(self.E, self.P, dtype=dtype, device=device)
        for e, w in enumerate(self.widths):
            real = [self.p] + [w] * self.depth + [self.out_dim]
            for l, (off, i, o) in enumerate(self.blocks):
                blk = torch.zeros(o, i + 1, dtype=dtype, device=device)
                blk[: real[l + 1], : real[l]] = 1
                blk[: real[l + 1], i] = 1  # biases of real units
                m[e, off : off + o * (i + 1)] = blk.reshape(-1)
            if self.node_scales:
                u = self.P_net
                for l in range(self.depth + 1):
                    m[e, u : u + real[l + 1]] = 1
                    u += self.dims[l + 1]
                m[e, u:] = 1  # the layers' global scales
        return m

    def node_index(self, device=None):
        """For the horseshoe family: ``(slot_unit [P_net], unit_layer [units])``: the unit
        (0..units-1) whose scale multiplies each weight slot, ``units`` for biases (no
        scale); and the layer of each unit."""
        slot_unit = torch.full((self.P_net,), self.units, dtype=torch.int64)
        unit_layer = torch.empty(self.units, dtype=torch.int64)
        u0 = 0
        for l, (off, i, o) in enumerate(self.blocks):
            units = u0 + torch.arange(o)
            blk = units[:, None].expand(o, i + 1).clone()
            blk[:, i] = self.units  # biases
            slot_unit[off : off + o * (i + 1)] = blk.reshape(-1)
            unit_layer[u0 : u0 + o] = l
            u0 += o
        return slot_unit.to(device), unit_layer.to(device)

    def counters(self, device=None) -> torch.Tensor:
        """``[1, P]`` int64 identity of each slot that does not depend on the padding:
        weight (l, out j, in i) -> ``l 2^42 + j 2^21 + i``, bias (l, j) -> ``l 2^42 + 2^41 + j``.
        Random numbers are hashed from it, so a width-8 model padded to 20 draws exactly
        the noise it draws alone (widths below 2^20)."""
        c = torch.zeros(self.P, dtype=torch.int64)
        for l, (off, i, o) in enumerate(self.blocks):
            jj, ii = torch.meshgrid(torch.arange(o), torch.arange(i + 1), indexing="ij")
            ids = (l << 42) + (jj << 21) + ii
            ids[:, i] = (l << 42) + (1 << 41) + torch.arange(o)
            c[off : off + o * (i + 1)] = ids.reshape(-1)
        if self.node_scales:  # unit (l, j) -> 2^40 + l 2^21 + j; layer l -> 2^40 + 2^39 + l
            u = self.P_net
            for l in range(self.depth + 1):
                o = self.dims[l + 1]
                c[u : u + o] = (1 << 40) + (l << 21) + torch.arange(o)
                u += o
            c[u:] = (1 << 40) + (1 << 39) + torch.arange(self.depth + 1)
        return c[None, :].to(device)

    def block(self, theta: torch.Tensor, l: int) -> torch.Tensor:
        """Layer l's ``[B, out, in + 1]`` block (weights, bias last), a view of ``theta``."""
        off, i, o = self.blocks[l]
        return theta[:, off : off + o * (i + 1)].view(-1, o, i + 1)

    def weight(self, theta: torch.Tensor, l: int) -> torch.Tensor:
        """Layer l's weights ``[B, out, in]``."""
        return self.block(theta, l)[:, :, :-1]

    def bias(self, theta: torch.Tensor, l: int) -> torch.Tensor:
        """Layer l's biases ``[B, out]``."""
        return self.block(theta, l)[:, :, -1]

    def hidden_buffer(self, l: int, B: int, m: int, ref: torch.Tensor) -> torch.Tensor:
        """Cached ``[B, Wmax + 1, m]`` buffer for hidden layer l's output, last row ones
        (reused every step: no allocation, no re-faulted pages)."""
        key = (l, B, m, ref.dtype, ref.device)
        buf = self._buffers.get(key)
        if buf is None:
            buf = torch.empty(B, self.dims[l + 1] + 1, m, dtype=ref.dtype, device=ref.device)
            buf[:, -1, :] = 1
            self._buffers[key] = buf
        return buf

    @staticmethod
    def augment(x: torch.Tensor) -> torch.Tensor:
        """Sample-major inputs ``x [B, m, p]`` with a last column of ones, ``[B, m, p + 1]``
        (contiguous): the first layer's operand, bias included."""
        ones = torch.ones(*x.shape[:-1], 1, dtype=x.dtype, device=x.device)
        return torch.cat([x, ones], dim=-1)

    def forward(self, theta: torch.Tensor, x: torch.Tensor, x_aug=None, scratch=None):
        """Outputs ``[B, out_dim, m]`` for parameters ``theta [B, P]`` and sample-major
        inputs ``x [B, m, p]`` (B = models x draws).

        For evaluation loops that run many draws over the same inputs (no autograd):
        ``x_aug``, :meth:`augment` of ``x`` computed once by the caller; ``scratch``, a dict
        the caller keeps across calls, holding each hidden layer's product buffer and its
        augmented ``[B, width + 1, m]`` buffer (last row ones) that the ReLU writes into --
        instead of a fresh product, its ReLU and a concatenation with ones each layer and
        draw (fresh tensors of up to ~130 MB at the rate tiers' test sets, their pages
        faulted in every time).  Each product is the same call on operands of the same
        layout either way, so the numbers are the same bit for bit (tested)."""
        h = (self.augment(x) if x_aug is None else x_aug).transpose(1, 2)
        B, m = h.shape[0], h.shape[2]
        for l in range(self.depth):
            if scratch is None:
                z = torch.bmm(self.block(theta, l), h)
                h = torch.cat([torch.relu(z), torch.ones_like(z[:, :1])], dim=1)
                continue
            # one product buffer per shape, two augmented ones used in turn (a layer reads
            # the one before): three at most, as many as the plain pass has at once
            o = self.dims[l + 1]
            kz, kh = ("z", B, o, m), ("h", l % 2, B, o, m)
            if kz not in scratch:
                scratch[kz] = torch.empty(B, o, m, dtype=h.dtype, device=h.device)
            if kh not in scratch:
                scratch[kh] = torch.empty(B, o + 1, m, dtype=h.dtype, device=h.device)
                scratch[kh][:, -1, :] = 1
            z, buf = scratch[kz], scratch[kh]
            # the product into a contiguous buffer, as a fresh one: a strided ``out`` (the
            # augmented buffer's first rows) takes another BLAS path for some shapes, which
            # rounds differently
            torch.bmm(self.block(theta, l), h, out=z)
            torch.clamp_min(z, 0, out=buf[:, :-1, :])  # what torch.relu computes
            h = buf
        return torch.bmm(self.block(theta, self.depth), h)


def neg_log_lik(out: torch.Tensor, y: torch.Tensor, hyper: Hyper, sd=None) -> torch.Tensor:
    """-log p(y | f) elementwise ``[B, m]`` for outputs ``out [B, out_dim, m]``
    (``simulate.core.likelihoods``; ``sd [B]``: each network's learned noise sd, else
    ``hyper.sigma``)."""
    return likelihood_of(hyper).nll(out, y, hyper, sd)


def nll_grad(out: torch.Tensor, y: torch.Tensor, hyper: Hyper, sd=None) -> torch.Tensor:
    """d(-log p(y | f)) / d out, ``[B, out_dim, m]`` (hand-derived; tested against autograd)."""
    return likelihood_of(hyper).nll_grad(out, y, hyper, sd)


def mlp_nll_and_grad(
    layout: Layout,
    theta: torch.Tensor,
    x_aug: torch.Tensor,
    y: torch.Tensor,
    hyper: Hyper,
    scale,
    functional: bool = False,
    sd=None,
):
    """Per-network summed negative log-likelihood ``[B]`` and its gradient with respect to
    ``theta [B, P]``, by a hand-written backward pass through the batched ReLU network.

    ``x_aug [B, m, p + 1]`` holds the inputs with a last column of ones.  Equivalent to
    autograd (tested) but cheaper on CPU: each layer is one ``bmm`` on the augmented
    ``[out, in + 1]`` block (bias included), the ReLU writes straight into a cached
    augmented buffer, the gradient of weights and bias together is one ``bmm``, the ReLU
    backward is one fused ``threshold_backward``, and a width-1 output layer
    back-propagates by broadcasting instead of an outer-product ``bmm``.  ``scale`` ([B] or
    scalar) multiplies the gradient (the ``n/(mK)`` of eq. (loss1)); ``sd [B]``: each
    network's learned noise sd (Gaussian likelihood), else ``hyper.sigma``.  The returned tensors
    do not alias the cached buffers.  ``functional=True`` allocates instead of reusing
    buffers and writes nothing in place, the form ``torch.compile`` traces.
    """
    B, m = theta.shape[0], x_aug.shape[1]
    ins = [x_aug.transpose(1, 2)]  # layer inputs [B, in + 1, m]
    pre = []  # hidden pre-activations
    for l in range(layout.depth):
        z = torch.bmm(layout.block(theta, l), ins[-1])
        if functional:
            buf = torch.cat([torch.relu(z), torch.ones_like(z[:, :1])], dim=1)
        else:
            buf = layout.hidden_buffer(l, B, m, z)
            torch.clamp_min(z, 0, out=buf[:, :-1, :])
        pre.append(z)
        ins.append(buf)
    out = torch.bmm(layout.block(theta, layout.depth), ins[-1])
    nll = neg_log_lik(out, y, hyper, sd).sum(-1)
    g = nll_grad(out, y, hyper, sd) * (scale.reshape(-1, 1, 1) if torch.is_tensor(scale) else scale)
    parts = []
    for l in range(layout.depth, -1, -1):
        _, i, o = layout.blocks[l]
        # (h g^T)^T: the same product as g h^T, faster here (BENCHMARKS.md)
        parts.append(torch.bmm(ins[l], g.transpose(1, 2)).transpose(1, 2).reshape(B, -1))
        if l == 0:
            break
        Wt = layout.weight(theta, l).transpose(1, 2).contiguous()  # small; contiguous for bmm
        gp = Wt * g if o == 1 else torch.bmm(Wt, g)
        if functional:
            g = torch.where(pre[l - 1] > 0, gp, torch.zeros_like(gp))
        else:
            g = torch.ops.aten.threshold_backward.grad_input(gp, pre[l - 1], 0, grad_input=gp)
    return nll, torch.cat(parts[::-1], dim=1)
