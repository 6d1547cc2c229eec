"""How big a run may be: the memory this process may hold and lower bounds of what training,
evaluation and prediction need, so that a size too large for the machine is refused where
it enters, with the estimate printed, before anything is allocated.

Every bound on a size here is one rule: the estimate's lower bound (each function below
says what it counts) must fit in :func:`available_bytes`, the smaller of the machine's
physical memory and the process's own limits (``ulimit -v``, ``RLIMIT_AS``; ``RLIMIT_DATA``).
A lower bound, so nothing that would fit is refused; without it a width of 10**5, a depth of
10**6 or 10**9 draws ran for tens of seconds and gigabytes before torch's allocator or
Python's ``MemoryError`` spoke (issue 61), and a width of 12,000 on 60 points grew past
6.5 GB.  The refusal is one line (a ``ValueError``): what needs how much, made of what, what
the process may hold, and which parameter to lower.

Time is bounded elsewhere, by counts with a stated reason (``simulate.estimators.inputs.
MAX_EPOCHS``), and by the sweeps' measured cost estimate (``simulate.sweep.costs``, which
``verify.rates --dry-run`` prints); a size that fits here may still take long (an
estimator's ``elbo_draws`` or ``predict_draws`` of 10**6 fit in memory and are not refused,
though each draw is one pass over the data)."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

__all__ = [
    "ELBO_CHUNK",
    "RECORD_BYTES",
    "TENSOR_BYTES",
    "WORKER_BYTES",
    "Need",
    "available_bytes",
    "check_workers",
    "elbo_bytes",
    "gib",
    "network_params",
    "outputs_bytes",
    "refuse",
    "train_bytes",
    "train_parts",
]

# A small tensor's own cost beyond its data, as a lower bound: torch's tensor object and
# storage, and the Python object around them (measured here: about 540 bytes a tensor of
# five float64s, torch 2.x on CPU).  The loops over draws keep one or two per draw.
TENSOR_BYTES = 400
# The data's chunk of ``simulate.core.posterior.Posterior.elbo`` (its ``chunk`` default).
ELBO_CHUNK = 8192
# A sweep record's size in memory, as a lower bound: every sweep record shipped in
# figures/reference/ has at least 4,589 bytes of JSON (the known-answer control's; ASVI's
# 5,500 to 17,000), and a record read back into Python dicts and floats takes more than its
# text.  Every record of a sweep is held at once: by the sweep (its store and its result)
# and by ``verify.rates`` and ``figures``, which analyse them together.
RECORD_BYTES = 4096
# A worker process's own memory, as a lower bound: a spawned interpreter that has imported
# torch and the toolkit holds 256 MiB of private memory before its first job (measured
# here, /proc/self/smaps_rollup's Private_Dirty, torch 2.x on CPU); every local worker of a
# sweep, of Table 1 or of UCI is one.
WORKER_BYTES = 200 << 20


def _known() -> tuple[int | None, int | None]:
    """``(physical, limit)``: the machine's physical memory and the smallest of the
    process's address-space and data limits, each None where not known or not set."""
    physical = limit = None
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        pass
    try:
        import resource

        for name in ("RLIMIT_AS", "RLIMIT_DATA"):
            which = getattr(resource, name, None)
            soft = None if which is None else resource.getrlimit(which)[0]
            if soft is not None and soft != resource.RLIM_INFINITY and soft > 0:
                limit = int(soft) if limit is None else min(limit, int(soft))
    except (ImportError, ValueError, OSError):
        pass
    return physical, limit


def available_bytes() -> int | None:
    """The memory this process may hold, in bytes: the machine's physical memory, or the
    process's address-space or data limit where one is set and smaller (``ulimit -v``);
    None where nothing says (not POSIX), and then nothing is refused."""
    known = [b for b in _known() if b is not None]
    return min(known) if known else None


def gib(b: float) -> str:
    """``b`` bytes in GiB, three significant digits (``"10.4 GiB"``), whole GiB from 1,000
    (``"3,052 GiB"``, not ``"3.05e+03 GiB"``)."""
    g = b / 2**30
    return f"{g:,.0f} GiB" if g >= 1000 else f"{g:.3g} GiB"


def _limit_note(have: int) -> str:
    physical, limit = _known()
    if limit is not None and have == limit and (physical is None or limit < physical):
        return " for this process (its limit, ulimit -v)"
    return ""


class Need:
    """A lower bound of one run's memory, as named parts: ``add(bytes, what, fix)``; the
    refusal (:meth:`check`) prints the total, each part, and the fix of the largest."""

    def __init__(self, subject: str):
        self.subject = subject
        self.parts: list[tuple[int, str, str]] = []

    def add(self, nbytes: int, what: str, fix: str) -> Need:
        self.parts.append((int(nbytes), what, fix))
        return self

    @property
    def total(self) -> int:
        return sum(b for b, _, _ in self.parts)

    def check(self) -> None:
        """``ValueError`` (one line) when the total exceeds :func:`available_bytes`
        (:func:`refuse`)."""
        refuse(self.total, self.subject, self.parts)


def refuse(
    need: int,
    subject: str,
    parts: Sequence[tuple[int, str, str]] = (),
    verb: str = "needs",
    bound: str = "at least",
) -> None:
    """``ValueError`` when ``need`` bytes exceed :func:`available_bytes`: one line,
    ``"{subject} {verb} {bound} N GiB (its parts); this machine has M GiB: {fix}"``, the
    ``parts`` ``(bytes, what, fix)`` of 1% of the need or more, and the largest part's
    fix (``bound``: "about" for a measured peak rather than a lower bound)."""
    have = available_bytes()
    if have is None or need <= have:
        return
    shown = sorted(parts, key=lambda x: -x[0])
    # the parts that matter: those of 1% of the total or more
    made = "; ".join(f"{what} {gib(b)}" for b, what, _ in shown if b > 0 and 100 * b >= need)
    fix = shown[0][2] if shown else "make it smaller"
    raise ValueError(
        f"{subject} {verb} {bound} {gib(need)}" + (f" ({made})" if made else "")
        + f"; this machine has {gib(have)}{_limit_note(have)}: {fix}"
    )  # fmt: skip


def network_params(p: int, depth: int, width: int, out_dim: int = 1) -> int:
    """A network's parameter slots ``P`` (``simulate.core.layout.Layout.P_net``): inputs
    ``p``, ``depth`` hidden layers of ``width``, ``out_dim`` outputs, biases included; an
    exact Python integer at any size (no tensor is made)."""
    p, L, w, o = int(p), int(depth), int(width), int(out_dim)
    return w * (p + 1) + (L - 1) * w * (w + 1) + o * (w + 1)


def train_parts(
    models: int, params: int, batch: int, width: int, mc_samples: int = 1, itemsize: int = 4
) -> dict[str, int]:
    """A lower bound of a training program's memory, in parts (bytes): ``state``, the
    state of ``models`` models of ``params`` slots (parameters, two moments, gradient and
    the step's temporaries: ~6 copies of ``[3, models, params]``); ``noise``, each further
    Monte Carlo draw's (two ``[models, params]`` per draw past the first); ``activations``
    (~6 copies of ``[models, batch, width]`` per draw), in ``itemsize``-byte floats."""
    E, P, K = int(models), int(params), int(mc_samples)
    return {
        "state": itemsize * 6 * 3 * E * P,
        "noise": itemsize * 2 * (K - 1) * E * P,
        "activations": itemsize * 6 * K * E * int(batch) * int(width),
    }


def train_bytes(
    models: int, params: int, batch: int, width: int, mc_samples: int = 1, itemsize: int = 4
) -> int:
    """:func:`train_parts` added up."""
    return sum(train_parts(models, params, batch, width, mc_samples, itemsize).values())


def elbo_bytes(models: int, params: int, n: int, width: int, draws: int) -> int:
    """A lower bound of ``Posterior.elbo``'s memory on ``n`` points: the posterior in
    float64 (``[3, models, params]``), one chunk's activations (``[models, chunk, width]``)
    and the per-draw, per-chunk sums it keeps to add in order (two small tensors each:
    ``draws * ceil(n / ELBO_CHUNK) * 2 * TENSOR_BYTES``)."""
    E, chunks = int(models), max(1, math.ceil(int(n) / ELBO_CHUNK))
    post = 8 * 3 * E * int(params)
    act = 8 * E * min(int(n), ELBO_CHUNK) * int(width)
    return post + act + int(draws) * chunks * 2 * TENSOR_BYTES


def outputs_bytes(draws: int, models: int, out_dim: int, points: int) -> int:
    """A lower bound of ``Posterior.outputs``' memory: ``draws`` outputs ``[models,
    out_dim, points]`` in float64, each a tensor, listed and then stacked (twice the
    data)."""
    per = 2 * 8 * int(models) * int(out_dim) * int(points) + TENSOR_BYTES
    return int(draws) * per


def check_workers(workers: int, flag: str = "--workers") -> None:
    """``ValueError`` (one line) when ``workers`` local worker processes cannot all start
    here: each holds at least :data:`WORKER_BYTES` before its first job."""
    w = int(workers or 0)
    refuse(
        w * WORKER_BYTES, f"{w} worker processes",
        [(w * WORKER_BYTES, f"at least {WORKER_BYTES >> 20} MiB each (torch and the toolkit)",
          f"use fewer {flag}")],
        verb="need",
    )  # fmt: skip
