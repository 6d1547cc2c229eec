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

Arithmetic: float32 throughout, the sums over the minibatch kept in VL independent lanes
(16 where the CPU has AVX-512, 8 elsewhere: a 16-float vector on AVX2 takes two registers
and the kernel's register tiles spill, 2.2x slower measured) and added up in a fixed order,
the products' multiply-adds fused where the compiler targets FMA (``-march=native``), the
summed negative log-likelihood accumulated in double.  So it equals the batched-product path
to float rounding (tested: relative 1e-5 on gradients), not bit for bit, and its results do
not depend on the number of threads (tested).  They do depend on VL, and on the code the
compiler emits, which ``-march=native`` alone would also tune for the CPU's model: GCC's
tuning for AMD Zen 2 and 3 keeps 256-bit multiply-adds unfused where they form chains
(``--param avoid-fma-max-bits=256``; 0 for its generic and Intel tunings in GCC 12), which
rounds differently.  So the build says ``-mtune=generic`` (an explicit ``-mtune`` replaces
the tuning ``-march=native`` detects): the code then follows the instruction set and the
compiler's version, not the CPU's model, and builds by one compiler version on machines of
one vector length train bit for bit the same.  Measured (2026-11-29, the quick rate tier, 64
cells, GCC 12.2, on an Intel AVX-512 machine whose virtual CPU hides its model, so that
``-march=native`` there already tuned generically and the flag changed nothing): built
``-mno-avx512f`` (VL 8) it reproduced an AMD EPYC's training bit for bit only with
``-mtune=znver3`` (or ``znver2``) added, and ``-march=znver3 -mtune=generic`` gave its own
VL-8 records -- so on a Zen machine the flag changes the kernel's numbers, by float
rounding, to what other machines of its vector length compute (emulated here, not run on
one; records made on a Zen machine before the flag are not reproduced after it).  A newer
compiler may tune generic builds otherwise (GCC's later tables add their own FMA-chain
choices), so "the same" holds per compiler version.  Outside this kernel the float64
evaluation and the classical references go through torch's and numpy's BLAS and vector
maths, whose code follows the CPU: some recorded risks can still differ between machines
in their last digits.

Scope: the Gaussian likelihood with one output (regression), float32 tensors on the CPU,
one to ``network.MAX_HIDDEN_LAYERS`` (63) hidden layers, any widths and batch size.
Everything else is the batched-product path's; asking for ``mlp="native"`` there is an
error (:func:`check_supported`).

Build and trust: the C file is compiled on first use into a cache the user must own, and a
cached library is loaded only after its owner, mode and recorded digest are checked
(:mod:`simulate.core.native.library`, whose docstring gives the rules).

The package's modules: :mod:`~simulate.core.native.library` (building, trusting and loading
the C library), :mod:`~simulate.core.native.network` (the fused network pass,
``mlp="native"``) and :mod:`~simulate.core.native.steps` (the whole step, ``mlp="native-step"``);
their public names are the package's (``from simulate.core import native; native.load()``).
"""

from simulate.core.native.library import (
    NativeUnavailable,
    NativeUntrusted,
    available,
    library_path,
    load,
)
from simulate.core.native.network import check_supported, fused_nll_and_grad, scope_problems
from simulate.core.native.steps import check_step_supported, fused_steps, step_scope_problems

__all__ = [
    "NativeUnavailable",
    "NativeUntrusted",
    "available",
    "check_supported",
    "check_step_supported",
    "fused_steps",
    "step_scope_problems",
    "scope_problems",
    "fused_nll_and_grad",
    "library_path",
    "load",
]
