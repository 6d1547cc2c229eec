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
any depth, widths and batch size.  Everything else is the batched-product path's; asking for
``mlp="native"`` there is an error (:func:`check_supported`).

Build: on first use the C file is compiled with the system's C compiler (``$CC``, else
``cc``; ``-O3 -march=native -mtune=generic -fopenmp``) into ``$ASVI_RATES_CACHE`` (default
``~/.cache/asvi-rates``)``/native/fused_mlp-<digest>.so``, the digest covering the source,
the flags, the compiler's version, the compiler command's file (its path and contents: a
wrapper script adding flags gets its own library) and this CPU's model and flags (so a
library is never reused across an upgrade of any of them).  The library links against the
OpenMP runtime torch has already loaded (same soname), so the process keeps one thread
pool.  No compiler: a :class:`NativeUnavailable` error naming the command that failed; a
failing compiler: the same, with the compiler's own message.

Trust: loading a library runs its code, and its name is computable from public inputs, so
the cache is used only when it is the user's own, as ssh treats the folders of its keys.
The cache folder (``native/``) and the cache root must belong to the user (``os.getuid()``)
and be writable by no one else (no group or other write bit); the folders above the root
must belong to the user or to root and be writable by others only with the sticky bit (as
``/tmp``): else :class:`NativeUntrusted`, one line naming the path and the fix.  Folders
made here are made with mode 0o700.  The cache is not to be shared with other users or
other machines: set ``$ASVI_RATES_CACHE`` to a folder of your own.  The library itself must
be the user's and writable by no one else (else :class:`NativeUntrusted`), a regular file
(opened with ``O_NOFOLLOW | O_NONBLOCK`` and checked with ``fstat``: a symbolic link, a FIFO
or a device is never followed, read or waited on), and its SHA-256 must equal the one
recorded beside it at build time (``<name>.so.sha256``, ``sha256sum`` format); a library
that fails these -- no recorded digest (as every library built before digests were
recorded), another digest, truncated, a link -- is rebuilt, never loaded.  The digest is
checked on the opened file and the library then loaded by its path: between the two the
file could be swapped by whoever can write the folders on its path -- the user alone, by
the rules above, which is what closes that window.

A build compiles to a temporary file in the cache folder, checks that it is a non-empty
shared object that loads and has the entry point, records its digest and only then renames
it into place (atomically), so a failed, empty or interrupted build leaves nothing under
the library's name.  Where there is no ``os.getuid`` (Windows, whose permission bits are
not POSIX ones) the owner and mode checks are skipped; the digest is still checked.
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import os
import platform
import re
import secrets
import shutil
import stat
import subprocess
from pathlib import Path

import torch

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

_SOURCE = Path(__file__).with_name("fused_mlp.c")
# -fno-math-errno: sqrtf needs no call to set errno (values unchanged); -mtune=generic: the
# code follows the instruction set, not the CPU's model (module docstring, "Arithmetic")
_FLAGS = ["-O3", "-march=native", "-mtune=generic", "-fno-math-errno", "-fopenmp", "-shared",
          "-fPIC", "-std=gnu11"]  # fmt: skip
_SYMBOL = "asvi_fused_mlp_gaussian"
_STEP_SYMBOL = "asvi_fused_steps_spike_slab"  # the whole step (mlp="native-step")
# read-only, never following a final symbolic link, never blocking on a FIFO
_READ = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
_READ |= getattr(os, "O_CLOEXEC", 0)
_WRITE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
_WRITE |= getattr(os, "O_CLOEXEC", 0)
# the first bytes of a shared object: ELF, then Mach-O (32/64-bit, either order, universal)
_MAGICS = (b"\x7fELF", b"\xfe\xed\xfa\xce", b"\xfe\xed\xfa\xcf", b"\xce\xfa\xed\xfe",
           b"\xcf\xfa\xed\xfe", b"\xca\xfe\xba\xbe")  # fmt: skip
_STDERR_LINES = 20  # of the compiler's message kept in a build failure's error
_ERROR = re.compile(r"\berror:", re.IGNORECASE)  # gcc's and clang's "error:", "fatal error:"
_lib = None


class NativeUnavailable(RuntimeError):
    """The fused kernel could not be built or loaded here (the message says why)."""


class NativeUntrusted(NativeUnavailable):
    """The kernel's cache, or the library in it, could be written by someone other than the
    user: loading from it could run their code (module docstring, "Trust").  A subclass of
    :class:`NativeUnavailable` so that every caller refuses the fused pass for it, but one
    that :func:`available` raises instead of answering False: it is a fault to fix, not an
    absent compiler."""


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


def _cache_root() -> Path:
    return Path(os.environ.get("ASVI_RATES_CACHE") or Path.home() / ".cache" / "asvi-rates")


def _compiler_identity(cc: str) -> str:
    """Which compiler command ``cc`` runs: its resolved path and its file's SHA-256 (a
    wrapper script that adds flags prints the compiler's own ``--version``, so the version
    alone would let it share a library with the plain compiler); ``cc`` itself where it is
    not a readable file on the PATH."""
    found = shutil.which(cc)
    if found is None:
        return cc
    path = os.path.realpath(found)
    try:
        with open(path, "rb") as f:
            return f"{path}\0{hashlib.file_digest(f, 'sha256').hexdigest()}"
    except OSError:
        return path


def library_path() -> Path:
    """Where the compiled library for this source, compiler and CPU lives (built or not):
    the digest covers the source, the flags, the compiler's ``--version``, the compiler
    command's own file (:func:`_compiler_identity`) and the CPU."""
    cc = _compiler()
    try:
        version = subprocess.run(
            [cc, "--version"], capture_output=True, text=True, timeout=60
        ).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise NativeUnavailable(f"no C compiler: `{cc} --version` failed ({e})") from e
    parts = [_SOURCE.read_text(), " ".join(_FLAGS), version, _compiler_identity(cc)]
    digest = hashlib.sha256("\0".join([*parts, _cpu_identity()]).encode()).hexdigest()[:16]
    return _cache_root() / "native" / f"fused_mlp-{digest}.so"


# -- trust: whose the folders and the library are --------------------------------------------

_OWN_FOLDER = "set $ASVI_RATES_CACHE to a folder of your own"


def _refuse(why: str) -> NativeUntrusted:
    return NativeUntrusted(f"refusing the fused kernel's cache: {why}")


def _check_own(st: os.stat_result, path) -> None:
    """:class:`NativeUntrusted` unless ``st`` (of a cache folder or the library) belongs to
    the user and no one else can write it: ssh's rule for the files it trusts.  Group
    write is refused too, as ssh does: a group may hold other users."""
    if not hasattr(os, "getuid"):
        return
    uid = os.getuid()
    if st.st_uid != uid:
        raise _refuse(f"{path} belongs to uid {st.st_uid}, not to you (uid {uid}): {_OWN_FOLDER}")
    if st.st_mode & 0o022:
        mode = oct(stat.S_IMODE(st.st_mode))
        raise _refuse(f"{path} is writable by others (mode {mode}): chmod go-w {path}")


def _check_above(path: Path) -> None:
    """:class:`NativeUntrusted` if a folder above the cache root could be changed by
    another user -- renaming the cache away and putting theirs in its place: each must
    belong to the user or to root and be writable by others only with the sticky bit
    (which lets no one rename what is not theirs, as in ``/tmp``).  The real path's
    folders are checked, symbolic links resolved."""
    if not hasattr(os, "getuid"):
        return
    uid = os.getuid()
    for folder in Path(os.path.realpath(path)).parents:
        try:
            st = os.stat(folder)
        except OSError as e:
            raise NativeUnavailable(f"cannot read the folder {folder} ({e.strerror})") from e
        mode = oct(stat.S_IMODE(st.st_mode))
        if st.st_uid not in (uid, 0):
            raise _refuse(f"{folder}, above it, belongs to uid {st.st_uid}: {_OWN_FOLDER}")
        if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
            raise _refuse(f"{folder}, above it, is writable by others (mode {mode}) without "
                          f"the sticky bit: {_OWN_FOLDER}")  # fmt: skip


def _cache_folder(folder: Path) -> None:
    """Make the cache folder (and the folders above it that are missing, mode 0o700) and
    check that it, the cache root and the folders above can be trusted (module docstring)."""
    missing = []
    for p in (folder, *folder.parents):
        if os.path.lexists(p):
            break
        missing.append(p)
    for p in reversed(missing):
        try:
            os.mkdir(p, 0o700)
        except FileExistsError:
            pass  # made meanwhile (another worker); checked below like any folder
        except OSError as e:
            raise NativeUnavailable(
                f"cannot write the build folder {p} ({e.strerror}); set $ASVI_RATES_CACHE to a"
                " folder you can write"
            ) from e
    for p in (folder, folder.parent):  # the cache folder, then the cache root
        try:
            st = os.stat(p)
        except OSError as e:
            raise NativeUnavailable(
                f"cannot write the build folder {p} ({e.strerror}); set $ASVI_RATES_CACHE to a"
                " folder you can write"
            ) from e
        if not stat.S_ISDIR(st.st_mode):
            raise NativeUnavailable(
                f"cannot write the build folder {p} (not a folder); set $ASVI_RATES_CACHE"
            )
        _check_own(st, p)
    _check_above(folder)


def _read_digest(path: Path) -> str | None:
    """The SHA-256 recorded beside the library (``sha256sum``'s format), None if there is
    none or it is no regular file or no digest."""
    try:
        fd = os.open(f"{path}.sha256", _READ)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        words = os.read(fd, 4096).split()
    finally:
        os.close(fd)
    digest = words[0].decode("ascii", "replace").lower() if words else ""
    return digest if len(digest) == 64 and all(c in "0123456789abcdef" for c in digest) else None


def _sha256(fd: int) -> str:
    h = hashlib.sha256()
    while chunk := os.read(fd, 1 << 20):
        h.update(chunk)
    return h.hexdigest()


def _check_library(path: Path) -> str | None:
    """None when the library at ``path`` may be loaded; else why it is to be rebuilt.
    :class:`NativeUntrusted` for a library that is someone else's or writable by others
    (the user is to see that, not have it quietly replaced), :class:`NativeUnavailable`
    for a folder under its name (a build cannot replace it)."""
    try:
        fd = os.open(path, _READ)
    except FileNotFoundError:
        return "not built yet"
    except OSError as e:
        if e.errno == errno.ELOOP:
            return "a symbolic link"
        return f"unreadable ({e.strerror})"
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise NativeUnavailable(f"{path} is a folder, not the fused kernel: remove it")
        if not stat.S_ISREG(st.st_mode):
            return "not a regular file"
        _check_own(st, path)
        recorded = _read_digest(path)
        if recorded is None:
            return "no recorded digest"
        if _sha256(fd) != recorded:
            return "its digest differs from the recorded one"
    finally:
        os.close(fd)
    return None


# -- building and loading ---------------------------------------------------------------------


def _stderr_tail(text: str) -> tuple[str, str]:
    """The compiler's first diagnostic that is an error (``...: error: ...``, as gcc and
    clang write them; else its last line), and its last ``_STDERR_LINES`` lines."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    first = next((ln for ln in lines if _ERROR.search(ln)), lines[-1] if lines else "")
    return (first.strip()[:300] or "no message"), "\n".join(lines[-_STDERR_LINES:])


def _symbol(lib, name, path):
    """``lib``'s function ``name``; NativeUnavailable if it has none."""
    try:
        return getattr(lib, name)
    except AttributeError:
        raise NativeUnavailable(
            f"the fused kernel {path} has no {name}; delete it to rebuild"
        ) from None


def _bind(lib, path):
    """``lib``'s entry points with their argument types; NativeUnavailable if one is
    missing."""
    f = _symbol(lib, _SYMBOL, path)
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    f.argtypes = [i64, i64, ctypes.c_int, ptr, ptr, ptr, i64, ptr, i64, ptr, ptr, ptr, ptr]
    f.argtypes += [ptr, ptr, ctypes.c_int]
    f.restype = ctypes.c_int
    g = _symbol(lib, _STEP_SYMBOL, path)
    dbl, i32 = ctypes.c_double, ctypes.c_int
    g.argtypes = [i64, i64, i64, i64, i32] + [ptr] * 10 + [i64, i64] + [ptr] * 4 + [dbl] * 4
    g.argtypes += [ptr] * 3 + [dbl] * 3 + [i32] + [ptr] * 4 + [i64, i32] + [ptr] * 4 + [i32]
    g.restype = ctypes.c_int
    return lib


def _write_digest(path: Path, digest: str) -> None:
    """``<path>.sha256``, written to a temporary file and renamed into place."""
    tmp = path.with_name(f".{path.name}.sha256-{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, _WRITE, 0o644)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(f"{digest}  {path.name}\n")
        os.replace(tmp, f"{path}.sha256")
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


def _build(target: Path):
    """Compile the kernel to a temporary file beside ``target``, check it (non-empty, a
    shared object, loads, has the entry point), and rename it into place with its digest
    recorded; the loaded library."""
    cc = _compiler()
    if shutil.which(cc) is None:
        raise NativeUnavailable(f"no C compiler: `{cc}` is not on PATH (set $CC)")
    tmp = target.with_name(f".{target.stem}-{secrets.token_hex(8)}.so.tmp")
    try:
        os.close(os.open(tmp, _WRITE, 0o600))  # the name, ours (O_EXCL)
    except OSError as e:
        raise NativeUnavailable(
            f"cannot write the build folder {target.parent} ({e.strerror}); set"
            " $ASVI_RATES_CACHE to a folder you can write"
        ) from e
    cmd = [cc, *_FLAGS, "-o", str(tmp), str(_SOURCE), "-lm"]
    try:
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.SubprocessError) as e:
            raise NativeUnavailable(f"building the fused kernel failed: `{cc}`: {e}") from e
        if res.returncode != 0:
            first, tail = _stderr_tail(res.stderr)
            raise NativeUnavailable(
                f"building the fused kernel failed: `{cc}` exited {res.returncode}: {first}\n"
                f"{' '.join(cmd)}\n{tail}"
            )
        try:  # the compiler may have replaced the file (or removed it): open it anew
            fd = os.open(tmp, _READ)
        except OSError as e:
            raise NativeUnavailable(
                f"building the fused kernel failed: `{cc}` exited 0 but wrote no library"
                f" ({e.strerror}); nothing was cached"
            ) from e
        try:
            st = os.fstat(fd)
            head = os.read(fd, 4)
            if not stat.S_ISREG(st.st_mode) or st.st_size == 0 or head not in _MAGICS:
                what = "no library" if st.st_size == 0 else "no shared object"
                raise NativeUnavailable(
                    f"building the fused kernel failed: `{cc}` exited 0 but wrote {what}"
                    f" ({st.st_size} bytes); nothing was cached"
                )
            if hasattr(os, "fchmod"):  # the linker's mode follows the umask: no group write
                os.fchmod(fd, 0o755)
            os.lseek(fd, 0, os.SEEK_SET)
            digest = _sha256(fd)
        finally:
            os.close(fd)
        try:
            lib = ctypes.CDLL(str(tmp))
        except OSError as e:
            raise NativeUnavailable(
                f"building the fused kernel failed: `{cc}` wrote a library that does not load"
                f" ({e}); nothing was cached"
            ) from e
        for symbol in (_SYMBOL, _STEP_SYMBOL):
            if not hasattr(lib, symbol):
                raise NativeUnavailable(
                    f"building the fused kernel failed: `{cc}` wrote a library without"
                    f" {symbol}; nothing was cached"
                )
        try:  # atomic: a concurrent build loads one whole file or the other
            os.replace(tmp, target)
            _write_digest(target, digest)
        except OSError as e:
            raise NativeUnavailable(
                f"cannot write the build folder {target.parent} ({e.strerror}); set"
                " $ASVI_RATES_CACHE to a folder you can write"
            ) from e
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)
    return lib


def _load(path: Path):
    _cache_folder(path.parent)
    if _check_library(path) is not None:
        return _bind(_build(path), path)
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as e:
        raise NativeUnavailable(
            f"could not load the fused kernel {path} ({e}); delete it to rebuild"
        ) from e
    return _bind(lib, path)


def load():
    """The loaded library (built on first use; checked before it is loaded: see the
    module docstring); :class:`NativeUntrusted` for a cache that is not the user's own,
    :class:`NativeUnavailable` for any other reason it cannot be had."""
    global _lib
    if _lib is None:
        _lib = _load(library_path())
    return _lib


def available() -> bool:
    """Whether the fused kernel can be built and loaded here: False without a compiler or
    when it fails.  An untrusted cache raises :class:`NativeUntrusted` instead: a cache
    someone else can write is the user's to fix, not a reason to drop the fused pass
    without a word."""
    try:
        load()
    except NativeUntrusted:
        raise
    except (NativeUnavailable, OSError):
        return False
    return True


def scope_problems(likelihood: str, out_dim: int, device, dtype) -> list[str]:
    """What is outside the fused kernel's scope (module docstring) for a network with this
    likelihood and output count, on this device in this dtype: one phrase each, [] where
    the kernel serves it (:func:`check_supported`; the estimators' ``mlp="auto"``)."""
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
    (:func:`scope_problems`), and :class:`NativeUnavailable` if it cannot be built here."""
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
    dims[l + 1]``; at least one and at most 63 hidden layers, every size >= 1, one output)
    and ``offs`` the offsets of the layers' blocks ``[dims[l + 1], dims[l] + 1]`` laid end
    to end from 0, then ``P_net`` (:class:`simulate.core.layout.Layout`'s).  The C function
    reads ``offs[depth + 1]`` as the gradient row's length and sizes its scratch by
    ``dims``, so nothing less than this exact agreement keeps its reads and writes inside
    ``theta``, ``grad`` and its scratch; the op is public (``torch.ops.asvi_rates``), so
    the check is here and not left to its callers."""
    dims, offs = list(dims), list(offs)
    if len(dims) < 3 or len(offs) != len(dims):
        raise ValueError(
            f"the fused pass needs dims [p, hidden..., 1] and one offset per layer plus P_net "
            f"(as many as dims); got {len(dims)} dims and {len(offs)} offs"
        )
    if len(dims) - 2 > 63:
        raise ValueError(f"the fused pass takes at most 63 hidden layers, got {len(dims) - 2}")
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


def _check_rc(rc: int, dims) -> None:
    """The C functions' return codes: 0 done, 2 too deep a network, else no scratch."""
    if rc == 2:
        raise ValueError(f"the fused pass takes at most 63 hidden layers, got {len(dims) - 2}")
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


# -- the whole step (mlp="native-step") --------------------------------------------------------


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


def fused_steps(layout, hyper, n: int, params, moments, mask, H, source, t0: int, S: int, xb,
                yb, sd, held, step, corr2, kl_weight, widths, skip_held=False):  # fmt: skip
    """``S`` consecutive training steps (``t0 .. t0 + S - 1``) of
    ``simulate.core.step.spike_slab_step`` per model, in C (``mlp="native-step"``; scope:
    :func:`step_scope_problems`): for each step the K draws from the counter-based streams
    (``source``, the program's ``simulate.core.sampler.DrawSource``: the streams' keyed bases
    ``[E, P]`` int32 and the data; draw k of step t at draw number ``t K + k``, its words
    made in C as ``simulate.core.rng.offset_words`` makes them), the minibatch (``xb [S, E,
    m, p + 1]`` / ``yb [S, E, m]`` as given, or with ``xb`` None drawn iid at draw number t
    and gathered in C from ``source``, as the sampler draws it), the network pass of each
    draw (:func:`fused_nll_and_grad`'s), L1 / L2 / L3 and the hand-written gradients, then
    the optimiser's update of ``params [3, E, P]`` and its ``moments`` (``exp_avg``,
    ``exp_avg_sq``; each ``[3, E, P]``) **in place**.  ``mask [E, P]`` and ``H [E]`` the
    models' constants, ``sd [E]`` the noise sd (fixed over the S steps), ``held [E]`` the
    models not to move (their moments still decay, as in the batched step; a model whose
    objective is not finite at a step is held from the next one on, as the trainer holds a
    failed model), ``step [S, 3, E]`` each step's step size per parameter row and model
    (the learning-rate scale applied), ``corr2 [S]`` Adam's second-moment correction,
    ``kl_weight [S]`` the KL warm-up's weight (1 without), all float32; ``widths [E]`` the
    hidden widths.  ``skip_held``: the models ``held`` are not computed at all but for
    their moments' decay (their parameters and moments are what computing them gives: their
    gradient is zeroed anyway); their terms are then NaN and never non-finite.  Returns
    ``(nonfinite [S, E] bool, (L1, L2, L3))``, each term ``[S, E]``.

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
    ind = source.gumbel_base is not None
    draw = xb is None  # the minibatch drawn in C
    rows = source.X_aug.shape[0]
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
    if ind:
        named["gumbel_base"] = (source.gumbel_base, i32, (E, P))
    if draw:
        named["iid_base"] = (source.iid_base, i32, (E, m))
        named["X_aug"] = (source.X_aug, f32, (rows, dims[0] + 1))
        named["y_flat"] = (source.y_flat, f32, (rows,))
        named["data_index"] = (source.data_index, torch.int64, (E,))
    # the sizes the shapes are checked against are part of the key: the same tensors with
    # another batch size, network or data size are checked anew
    key = ("step", id(params), E, P, K, m, tuple(dims), n, ind, draw)
    if _check_once(key, named):  # new tensors: their values checked too
        di = source.data_index
        if draw and (rows % n or E and not (0 <= int(di.min()) and int(di.max()) < rows // n)):
            _CHECKED.clear()
            raise ValueError(f"data_index must index the {rows // n} datasets of {n} rows")
        wmax = min(dims[1:-1])
        if E and not (1 <= int(widths.min()) and int(widths.max()) <= wmax):
            _CHECKED.clear()
            raise ValueError(f"widths must be in 1..{wmax}, got {widths.tolist()}")
    each = [("held", held, torch.bool, (E,)), ("step", step, f32, (S, 3, E)),
            ("corr2", corr2, f32, (S,)), ("kl_weight", kl_weight, f32, (S,))]  # fmt: skip
    if not draw:
        each += [("xb", xb, f32, (S, E, m, dims[0] + 1)), ("yb", yb, f32, (S, E, m))]
    for name, t, dtype, shape in each:  # the call's own tensors, new every call
        if (not torch.is_tensor(t) or t.dtype != dtype or t.shape != shape
                or not t.is_contiguous() or t.device.type != "cpu"):  # fmt: skip
            _check_tensor(name, t, dtype, shape)
    L1, L2, L3 = torch.empty(3, S, E, dtype=f32)
    nonfinite = torch.empty(S, E, dtype=torch.bool)
    b1, b2 = hyper.betas if hyper.optimizer == "adam" else (0.0, hyper.rmsprop_alpha)
    null = None
    rc = load().asvi_fused_steps_spike_slab(
        E, P, K, m, len(dims) - 2, *arrays, widths.data_ptr(), params.data_ptr(),
        moments[0].data_ptr(), moments[1].data_ptr(), mask.data_ptr(), H.data_ptr(),
        source.eps_base.data_ptr(), source.gumbel_base.data_ptr() if ind else null, S, t0,
        null if draw else xb.data_ptr(), null if draw else yb.data_ptr(), sd.data_ptr(),
        held.data_ptr(), float(n), float(hyper.tau), float(hyper.lambda_s),
        float(hyper.sigma_0), kl_weight.data_ptr(), step.data_ptr(), corr2.data_ptr(),
        float(b1), float(b2), float(hyper.adam_eps), 0 if hyper.optimizer == "adam" else 1,
        source.iid_base.data_ptr() if draw else null, source.X_aug.data_ptr() if draw else null,
        source.y_flat.data_ptr() if draw else null,
        source.data_index.data_ptr() if draw else null, n, int(bool(skip_held)),
        L1.data_ptr(), L2.data_ptr(), L3.data_ptr(), nonfinite.data_ptr(),
        torch.get_num_threads(),
    )  # fmt: skip
    _check_rc(rc, dims)
    return nonfinite, (L1, L2, L3)
