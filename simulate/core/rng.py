"""Counter-based random numbers: each model's noise depends only on its own seed and counters.

A stateful generator shared by a batch would make model e's noise depend on which other
models share its batch.  Here every random number is a hash of (model seed, stream, step,
draw, element index), so model e trained alone and model e trained in a batch of 100 see the
very same noise, and a run is reproducible from its seeds alone, on any device.

The hash is a 32-bit integer mixer (xor-shift / multiply rounds, in the style of
"lowbias32").  :func:`mix32` is the reference, computed in int64 with every product kept
below 2^63 so nothing overflows; the per-draw hot path (:meth:`Stream.bits`) computes the
same bits in int32 (:func:`mix32_i32`: products wrap modulo 2^32 and right shifts are masked
to be logical), which halves the memory traffic and doubles the SIMD width.  The two agree
bit for bit (tested), so the int32 path changed no random number.
Uniforms carry 23 random bits and lie strictly inside (0, 1) in float32 and float64;
normals are obtained by the inverse CDF ``sqrt(2) erfinv(2u - 1)`` (|eps| <= 5.3).
This is not a cryptographic generator; its uniformity and independence are tested.
"""

from __future__ import annotations

import torch

__all__ = [
    "mix32",
    "mix32_i32",
    "uniform",
    "normal",
    "seed_key",
    "bits_to_uniform",
    "bits_uniform",
    "draw_bits",
    "offset_words",
    "uniform_to_normal",
    "Stream",
]

_M32 = 0xFFFFFFFF
_C1 = 0x7FEB352D
_C2 = 0x5BD1E995
_C3 = 0x2C1B3C6D
_TWO23 = float(1 << 23)

STREAM_EPS = 1
STREAM_GUMBEL = 2
STREAM_PERM = 3
STREAM_INIT = 4
STREAM_EVAL_EPS = 5
STREAM_EVAL_GUMBEL = 6
STREAM_PLAIN = 7  # the plain-network control's minibatches (simulate.references.plain)


def mix32(x: torch.Tensor) -> torch.Tensor:
    """A bijective 32-bit mixer on int64 tensors holding values in [0, 2^32)."""
    x = x & _M32
    x = x ^ (x >> 16)
    x = (x * _C1) & _M32
    x = x ^ (x >> 15)
    x = (x * _C2) & _M32
    x = x ^ (x >> 16)
    x = (x * _C3) & _M32
    return x ^ (x >> 15)


def _to_i32(x: torch.Tensor) -> torch.Tensor:
    """int64 values in [0, 2^32) -> the int32 tensor with the same 32 bits."""
    x = x & _M32
    return torch.where(x >= 1 << 31, x - (1 << 32), x).to(torch.int32)


def _i32(v: int) -> int:
    """A Python integer's low 32 bits as a signed int32 value."""
    v &= _M32
    return v - (1 << 32) if v >= 1 << 31 else v


_C1_32, _C2_32, _C3_32 = _i32(_C1), _i32(_C2), _i32(_C3)


def mix32_i32(x: torch.Tensor) -> torch.Tensor:
    """:func:`mix32` on int32 tensors (the bits of values in [0, 2^32)): the same rounds with
    products wrapping modulo 2^32 (two's complement) and ``(x >> k) & (2^(32-k) - 1)`` as
    the logical shift; bit-identical to :func:`mix32` (tested)."""
    x = x ^ ((x >> 16) & 0xFFFF)
    x = x * _C1_32
    x = x ^ ((x >> 15) & 0x1FFFF)
    x = x * _C2_32
    x = x ^ ((x >> 16) & 0xFFFF)
    x = x * _C3_32
    return x ^ ((x >> 15) & 0x1FFFF)


def seed_key(seeds: torch.Tensor, stream: int) -> torch.Tensor:
    """Per-model key (int64, 32 bits) from integer seeds and a stream number."""
    s = seeds.to(torch.int64)
    return mix32(mix32(s & _M32) ^ mix32((s >> 32) + stream * 0x9E3779B9))


def _mix32_int(x: int) -> int:
    """:func:`mix32` on a Python integer (for offsets: no tensor work per call)."""
    x &= _M32
    x ^= x >> 16
    x = (x * _C1) & _M32
    x ^= x >> 15
    x = (x * _C2) & _M32
    x ^= x >> 16
    x = (x * _C3) & _M32
    return x ^ (x >> 15)


class Stream:
    """Random numbers for a fixed (key, counter) grid, one fresh array per ``offset``.

    The part of the hash that depends only on the key and the element identity is computed
    once (``base``); each draw then costs two mixing rounds:
    ``bits = mix32(mix32(base ^ a(offset)) ^ b(offset))`` with ``a, b`` mixes of the offset.
    """

    def __init__(self, key: torch.Tensor, counter: torch.Tensor):
        base = mix32(mix32(counter & _M32) ^ mix32(((counter >> 32) & _M32) ^ key))
        self.base = _to_i32(base)  # int32 bits: the per-draw rounds run in int32

    def bits(self, offset) -> torch.Tensor:
        """32 random bits per element as int32 (add 2^32 to negatives for the unsigned
        value that :func:`mix32` would give)."""
        if torch.is_tensor(offset):
            o = offset.to(torch.int64)
            a = mix32((o & _M32) ^ 0x632BE5AB)
            b = _to_i32(mix32(((o >> 32) & _M32) ^ a))
            a = _to_i32(a)
        else:
            a, b = offset_words(offset)
        return draw_bits(self.base, a, b)

    def uniform(self, offset, dtype=torch.float32) -> torch.Tensor:
        """Uniforms strictly inside (0, 1), shape of ``base``."""
        return bits_uniform(self.bits(offset), dtype)

    def normal(self, offset, dtype=torch.float32) -> torch.Tensor:
        """Standard normals via the inverse CDF of :meth:`uniform`."""
        return uniform_to_normal(self.uniform(offset, dtype))


def offset_words(offset: int) -> tuple[int, int]:
    """The two int32 words ``(a, b)`` that a draw number ``offset`` (a Python integer)
    contributes to :meth:`Stream.bits`; computed on the host, no tensor work."""
    o = int(offset)
    a = _mix32_int((o & _M32) ^ 0x632BE5AB)
    b = _i32(_mix32_int(((o >> 32) & _M32) ^ a))
    return _i32(a), b


def draw_bits(base: torch.Tensor, a, b) -> torch.Tensor:
    """The per-draw rounds of :meth:`Stream.bits`: ``mix32(mix32(base ^ a) ^ b)`` in int32,
    for a stream's ``base`` and the words of :func:`offset_words` (ints, or int32 tensors
    that broadcast against ``base``: several draws at once, or a compiled graph that is
    not specialised per draw)."""
    return mix32_i32(mix32_i32(base ^ a) ^ b)


def bits_uniform(bits: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    """:meth:`Stream.uniform` from :func:`draw_bits`' output (the top 23 of the 32 bits)."""
    return bits_to_uniform((bits >> 9) & 0x7FFFFF, dtype)


def uniform_to_normal(u: torch.Tensor) -> torch.Tensor:
    """Standard normals by the inverse CDF, ``sqrt(2) erfinv(2u - 1)`` (kept out of
    compiled graphs: inductor's CPU erfinv was 15x slower than eager's here and rounds
    differently)."""
    return torch.erfinv(2 * u - 1) * (2.0**0.5)


def uniform(key, counter, offset, dtype=torch.float32) -> torch.Tensor:
    """Uniforms in (0, 1) of ``counter``'s shape, keyed per model by ``key`` (broadcast)."""
    return Stream(key, counter).uniform(offset, dtype)


def bits_to_uniform(h: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    """23 random bits -> ``(h + 1/2) / 2^23``, exactly representable in float32, so the
    result lies strictly inside (0, 1) in every dtype (24 bits would round up to 1.0 in
    float32 and make ``erfinv`` infinite)."""
    return (h.to(dtype) + 0.5) / _TWO23


def normal(key, counter, offset, dtype=torch.float32) -> torch.Tensor:
    """Standard normals via the inverse CDF of :func:`uniform`."""
    return Stream(key, counter).normal(offset, dtype)
