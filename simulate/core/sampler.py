"""What one training step reads besides its state (:class:`Inputs`), and the
:class:`Sampler` that draws it from the models' counter-based streams.

Step ``t`` (0-based, ``State.count`` before the step) of model e reads:

* its minibatch: m row indices into its own dataset ``data_index[e]``, from the stream
  ``STREAM_PERM`` -- iid with replacement at counter ``t`` (``sampling="iid"``, the
  default), or the ``t mod (n // m)``-th slice of epoch ``t // (n // m)``'s permutation
  (``sampling="permutation"``; the permutation of an epoch is cached while it lasts);
* K noise draws ``[K, E, P]`` at offsets ``t K + k``: the family's standardised noise from
  ``STREAM_EPS`` (normals, or uniforms on (-1, 1) for the uniform slab;
  ``family.noise``) and Gumbel-sigmoid uniforms from ``STREAM_GUMBEL``.

Every number is a function of (seed, stream, counter) alone, so a model draws the same
inputs trained alone or in any batch, and a resumed run draws what an uninterrupted one
would.  With ``compiled=True`` the hashing and the minibatch gather run as one
``torch.compile`` graph (:func:`draw_step_inputs`, bit-identical to the
eager draws, tested); the normal transform stays eager (:func:`simulate.core.rng.
uniform_to_normal`).
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import torch

from simulate.core import rng
from simulate.core.layout import Layout
from simulate.core.likelihoods import likelihood_of
from simulate.core.objective import family_of
from simulate.core.state import Batch

__all__ = ["DrawSource", "Inputs", "Sampler", "StepWords", "draw_step_inputs", "iid_index"]


class Inputs(NamedTuple):
    """One step's inputs: every model's minibatch (``xb [E, m, p + 1]`` with a last column
    of ones, ``yb [E, m]``), its K draws' noise and Gumbel-sigmoid uniforms (``noise``,
    ``gumbel``, each ``[K, E, P]``; ``gumbel`` None for the families without indicators,
    which have no use for it), and ``held [E]``: the models the step must leave alone
    (failed, or stopped by the stopping rule).  For the whole step in C, which draws for
    itself (``Sampler(noise_in_step=True)``, :meth:`Sampler.draw_steps`): ``noise`` and
    ``gumbel`` None, ``source`` the program's :class:`DrawSource` (None otherwise), and
    the minibatches of its S steps ``xb [S, E, m, p + 1]``, ``yb [S, E, m]``, or None for
    iid sampling (the step draws and gathers them)."""

    xb: torch.Tensor | None
    yb: torch.Tensor | None
    noise: torch.Tensor | None
    gumbel: torch.Tensor | None
    held: torch.Tensor
    source: DrawSource | None = None

    def part(self, s: slice) -> Inputs:
        """The inputs of models ``s`` (a chunk of the batch; the whole step in C, which reads
        ``source``, is never chunked)."""
        gumbel = None if self.gumbel is None else self.gumbel[:, s]
        return Inputs(self.xb[s], self.yb[s], self.noise[:, s], gumbel, self.held[s])


def iid_index(u: torch.Tensor, n: int) -> torch.Tensor:
    """Minibatch indices in [0, n) from float64 uniforms (``sampling="iid"``)."""
    return (u * n).to(torch.int64).clamp_max(n - 1)


def data_rows(data_index: torch.Tensor, idx: torch.Tensor, n: int) -> torch.Tensor:
    """Flat row numbers into the stacked datasets ``[D*n, ...]`` of per-model indices
    ``idx [E, m]`` (or ``[S, E, m]``: S steps') into model e's own dataset
    ``data_index[e]``."""
    return (data_index[:, None] * n + idx).reshape(-1)


class DrawSource(NamedTuple):
    """What :func:`draw_step_inputs` reads that stays the same from step to step (a
    program's constants, built by ``Sampler.source``): the streams' keyed bases -- the slab
    noise's ``eps_base``, the Gumbel-sigmoid uniforms' ``gumbel_base`` (None for the
    families without indicators) and the iid minibatch's ``iid_base`` -- and the data:
    the stacked rows ``X_aug [D*n, p + 1]`` (a last column of ones), ``y_flat [D*n]`` and
    each model's dataset ``data_index [E]``.  A NamedTuple of tensors, which
    ``torch.compile`` takes as it takes its fields."""

    eps_base: torch.Tensor
    gumbel_base: torch.Tensor | None
    iid_base: torch.Tensor
    X_aug: torch.Tensor
    y_flat: torch.Tensor
    data_index: torch.Tensor


class StepWords(NamedTuple):
    """What :func:`draw_step_inputs` reads that changes every step (``Sampler.draw_words``):
    the K draws' words ``words [K, 2]`` (int32, offsets ``t K + k``), the iid minibatch's
    ``iid_words [2]`` (offset ``t``), and ``idx [E, m]``, the permutation sampling's
    minibatch indices (None: drawn iid from ``iid_words``)."""

    words: torch.Tensor
    iid_words: torch.Tensor
    idx: torch.Tensor | None


def draw_step_inputs(source: DrawSource, step: StepWords, n: int, dtype=torch.float32):
    """One step's random inputs at once, the form :class:`Trainer` compiles: the K draws'
    slab uniforms and Gumbel-sigmoid uniforms ``[K, E, P]``, and every model's minibatch
    ``xb [E, m, p + 1]``, ``yb [E, m]``, from the program's constants ``source`` and the
    step's words ``step``.  Bit-identical to the streams' own draws and
    :meth:`Trainer.minibatch` (tested): the same hash rounds (:func:`simulate.core.rng.draw_bits`)
    with the draw words passed as int32 tensors, so one compiled graph serves every step
    (``n``, the rows per dataset, and ``dtype`` are the graph's constants).  Compiled, it
    runs ~3.5x faster than the eager hashing plus ``index_select`` (the integer rounds fuse
    into one loop); the normal transform stays outside
    (:func:`simulate.core.rng.uniform_to_normal`)."""
    words, idx = step.words, step.idx
    a, b = words[:, 0, None, None], words[:, 1, None, None]
    u_slab = rng.bits_uniform(rng.draw_bits(source.eps_base, a, b), dtype)
    u_gumbel = (
        None
        if source.gumbel_base is None
        else rng.bits_uniform(rng.draw_bits(source.gumbel_base, a, b), dtype)
    )
    if idx is None:
        iid = step.iid_words
        u = rng.bits_uniform(rng.draw_bits(source.iid_base, iid[0], iid[1]), torch.float64)
        idx = iid_index(u, n)
    rows = data_rows(source.data_index, idx, n)
    E, m = idx.shape
    return u_slab, u_gumbel, source.X_aug[rows].view(E, m, -1), source.y_flat[rows].view(E, m)


class Sampler:
    """Draws :class:`Inputs` for E models from their seeds' streams (module docstring).

    ``batch`` holds the data (``simulate.core.state.Batch``: D datasets of n rows, model e on
    dataset ``data_index[e]``), validated here against ``layout``.  ``noise_in_step``: the
    step draws its own noise from the streams (the whole step in C, ``mlp="native-step"``),
    so :meth:`draw` gives the minibatch and the draws' words only."""

    def __init__(
        self, layout: Layout, hyper, seeds, batch: Batch, device=None, dtype=torch.float32,
        compiled: bool = False, noise_in_step: bool = False,
    ):  # fmt: skip
        if batch.X.ndim != 3 or batch.X.shape[2] != layout.p:
            raise ValueError(f"X must be [D, n, {layout.p}], got {tuple(batch.X.shape)}")
        if batch.y.shape[:2] != batch.X.shape[:2]:
            raise ValueError(f"y must be [D, n] matching X, got {tuple(batch.y.shape)}")
        n = batch.X.shape[1]
        if n < hyper.batch_size:
            raise ValueError(f"batch_size ({hyper.batch_size}) must be <= n ({n})")
        di = torch.as_tensor(batch.data_index, dtype=torch.int64, device=device).reshape(-1)
        if di.numel() != layout.E or (di < 0).any() or (di >= batch.X.shape[0]).any():
            raise ValueError("data_index must give one dataset index in [0, D) per model")
        self.layout, self.hyper, self.n, self.dtype = layout, hyper, n, dtype
        self.family = family_of(hyper)
        # [D*n, p + 1] rows with a last column of ones (the bias input): one index_select
        # gathers every model's minibatch
        X = batch.X.to(device=device, dtype=dtype).reshape(-1, layout.p)
        self.X_aug = torch.cat([X, torch.ones_like(X[:, :1])], dim=1).contiguous()
        ydt = likelihood_of(hyper).target_dtype(dtype)
        self.y_flat = batch.y.to(device=device, dtype=ydt).reshape(-1)
        self.data_index = di
        seeds = torch.as_tensor(seeds, dtype=torch.int64, device=device).reshape(-1)
        counter = layout.counters(device)
        self.eps_stream = rng.Stream(rng.seed_key(seeds, rng.STREAM_EPS)[:, None], counter)
        self.gumbel_stream = rng.Stream(rng.seed_key(seeds, rng.STREAM_GUMBEL)[:, None], counter)
        key_perm = rng.seed_key(seeds, rng.STREAM_PERM)[:, None]
        self.iid_stream = rng.Stream(key_perm, torch.arange(hyper.batch_size, device=device)[None])
        self.perm_stream = rng.Stream(key_perm, torch.arange(n, device=device)[None] + (1 << 40))
        self.steps_per_epoch = n // hyper.batch_size
        self._epoch, self._perm = -1, None  # the current epoch's permutations [E, n]
        self._buffers: dict = {}
        self.compiled, self.noise_in_step = bool(compiled), bool(noise_in_step)
        if compiled:
            self._draw = torch.compile(partial(draw_step_inputs, n=n, dtype=dtype), dynamic=False)

    # ----------------------------------------------------------------- minibatches
    def minibatch_index(self, t: int) -> torch.Tensor:
        """Step ``t``'s minibatch indices ``[E, m]``, each model's into its own dataset.

        ``sampling="iid"`` (default): m indices drawn uniformly with replacement, the
        reading of Algorithm 1's "sample a minibatch of size m" that costs one hash per
        index; an epoch is then n/m steps.  ``sampling="permutation"``: each epoch a fresh
        permutation per model (an argsort of n hashed keys), ``floor(n/m)`` full minibatches
        taken in order, the remainder skipped; the sort costs a fifth of a step at
        E = 100, n = 10^4 (BENCHMARKS.md)."""
        h = self.hyper
        if h.sampling == "iid":
            return iid_index(self.iid_stream.uniform(t, torch.float64), self.n)
        epoch, b = divmod(t, self.steps_per_epoch)
        if self._perm is None or epoch != self._epoch:
            keys = self.perm_stream.uniform(epoch, torch.float64)
            self._epoch, self._perm = epoch, torch.argsort(keys, dim=1)
        return self._perm[:, b * h.batch_size : (b + 1) * h.batch_size]

    def gather(self, idx: torch.Tensor):
        """Inputs ``[E, m, p + 1]`` (last column ones) and targets ``[E, m]`` for per-model
        indices ``idx [E, m]`` into each model's own dataset."""
        flat = data_rows(self.data_index, idx, self.n)
        E, mb = idx.shape
        key = ("gather", E, mb)
        if key not in self._buffers:  # reused every step (see simulate.alloc)
            self._buffers[key] = (
                self.X_aug.new_empty(E * mb, self.X_aug.shape[1]),
                self.y_flat.new_empty(E * mb),
            )
        xb, yb = self._buffers[key]
        torch.index_select(self.X_aug, 0, flat, out=xb)
        torch.index_select(self.y_flat, 0, flat, out=yb)
        return xb.view(E, mb, -1), yb.view(E, mb)

    def minibatch(self, t: int):
        """Step ``t``'s minibatch of every model: ``(xb, yb)``."""
        return self.gather(self.minibatch_index(t))

    # ----------------------------------------------------------------- noise
    def noise(self, offset: int) -> torch.Tensor:
        """The family's standardised noise ``[E, P]`` of draw ``offset``."""
        return self.family.noise(self.hyper, self.eps_stream.uniform(offset, self.dtype))

    def draw_words(self, t: int) -> StepWords:
        """Step ``t``'s :class:`StepWords` for :func:`draw_step_inputs`: ``[K, 2]`` words
        for the K draws, ``[2]`` for the iid minibatch, and the permutation indices (None
        for iid minibatches)."""
        K, dev = self.hyper.mc_samples, self.X_aug.device
        words = [rng.offset_words(t * K + k) for k in range(K)]
        return StepWords(
            torch.tensor(words, dtype=torch.int32, device=dev),
            torch.tensor(rng.offset_words(t), dtype=torch.int32, device=dev),
            None if self.hyper.sampling == "iid" else self.minibatch_index(t),
        )

    def source(self) -> DrawSource:
        """The :class:`DrawSource` of these models: their streams' bases and the data (what
        :func:`draw_step_inputs` reads every step)."""
        gumbel_base = self.gumbel_stream.base if self.family.indicators else None
        return DrawSource(
            self.eps_stream.base, gumbel_base, self.iid_stream.base, self.X_aug, self.y_flat,
            self.data_index,
        )  # fmt: skip

    def draw(self, t: int, held: torch.Tensor) -> Inputs:
        """Step ``t``'s :class:`Inputs` for every model (``held`` passed through); for the
        whole step in C (``noise_in_step``) :meth:`draw_steps` of one step."""
        if self.noise_in_step:
            return self.draw_steps(t, 1, held)
        if self.compiled:
            u_eps, u, xb, yb = self._draw(self.source(), self.draw_words(t))
            return Inputs(xb, yb, self.family.noise(self.hyper, u_eps), u, held)
        K = self.hyper.mc_samples
        offsets = [t * K + k for k in range(K)]
        xb, yb = self.minibatch(t)
        eps = [self.noise(o) for o in offsets]
        eps = eps[0][None] if K == 1 else torch.stack(eps)
        if not self.family.indicators:  # no indicators: no Gumbel-sigmoid uniforms to draw
            return Inputs(xb, yb, eps, None, held)
        u = [self.gumbel_stream.uniform(o, self.dtype) for o in offsets]
        return Inputs(xb, yb, eps, u[0][None] if K == 1 else torch.stack(u), held)

    def draw_steps(self, t: int, S: int, held: torch.Tensor) -> Inputs:
        """For the whole step in C (``noise_in_step``), which draws its noise itself: the
        :class:`Inputs` of steps ``t .. t + S - 1`` -- ``source`` (the program's
        :class:`DrawSource`), ``held``, and the minibatches ``xb [S, E, m, p + 1]``, ``yb
        [S, E, m]`` for permutation sampling (None for iid sampling: the step draws and
        gathers them from ``source``)."""
        if not self.noise_in_step:
            raise ValueError("draw_steps is for a sampler whose step draws (noise_in_step)")
        if self.hyper.sampling == "iid":
            return Inputs(None, None, None, None, held, self.source())
        idx = torch.stack([self.minibatch_index(t + s) for s in range(S)])  # [S, E, m]
        flat = data_rows(self.data_index, idx, self.n)  # [E, 1] broadcasts over the steps
        xb = self.X_aug.index_select(0, flat).view(*idx.shape, -1)
        yb = self.y_flat.index_select(0, flat).view(idx.shape)
        return Inputs(xb, yb, None, None, held, self.source())
