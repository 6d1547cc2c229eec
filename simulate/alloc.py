"""glibc allocator settings for the training loop (opt-in, process-wide).

glibc serves every block above its mmap threshold (up to 32 MB, adapting) with a fresh
mmap, so a large activation tensor re-faults its pages at every step (BENCHMARKS.md).
``tune_malloc()`` sets ``M_MMAP_MAX = 0`` (never mmap) and a 1 GB trim threshold through
``mallopt``, so freed blocks stay in the heap and are reused.  Command-line entry points
call it; library code does not, since it changes the whole process.  It is a no-op where
glibc is absent.
"""

from __future__ import annotations

import ctypes
import ctypes.util

_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
_done = False


def tune_malloc() -> bool:
    """Apply the settings once; True when glibc accepted them."""
    global _done
    if _done:
        return True
    name = ctypes.util.find_library("c")
    if not name:
        return False
    try:
        libc = ctypes.CDLL(name)
        ok = libc.mallopt(_M_MMAP_MAX, 0) == 1 and libc.mallopt(_M_TRIM_THRESHOLD, 1 << 30) == 1
    except (OSError, AttributeError):
        return False
    _done = ok
    return ok


def tuned() -> bool:
    """Whether :func:`tune_malloc` has set the allocator in this process."""
    return _done
