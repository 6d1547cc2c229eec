"""Building, trusting and loading the C library of :mod:`simulate.core.native`
(``fused_mlp.c``): its cache path, the rules for trusting a cached library, the
build, and :func:`load` / :func:`available`.  (The arithmetic the build flags fix:
the package docstring, "Arithmetic".)

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

_SOURCE = Path(__file__).with_name("fused_mlp.c")
# -fno-math-errno: sqrtf needs no call to set errno (values unchanged); -mtune=generic: the
# code follows the instruction set, not the CPU's model (package docstring, "Arithmetic")
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
