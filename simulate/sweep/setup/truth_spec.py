"""The ground truths a sweep draws its data from (:class:`TruthSpec`: an exact-Hoelder
function or the paper's teacher network, a class whose replicates each draw their own
function), and the stable seeds every part of a sweep derives from (:func:`stable_seed`)."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

from simulate.truths.functions import HolderFunction, TeacherNetwork
from theory import predicted_exponent, teacher_exponent

__all__ = ["HOLDER_N_REF", "TRUTH_HELP", "TruthSpec", "f0_describe", "stable_seed"]

# Hoelder truths are truncated for this n (``simulate.truths.functions.HolderFunction``): three
# octaves past the balancing frequency of n = 2^20, beyond every tier's largest n, so the
# function a replicate draws does not depend on the tier.
HOLDER_N_REF = 2**20
TRUTH_HELP = "Truths: --truth holder --alpha A --p P | --truth teacher --p P (repeatable)."
# the truth groups in a usage line (they are read before argparse: simulate.sweep.cli.parse_truths)
TRUTH_USAGE = "[--truth {holder,teacher} [--alpha A] --p P [--truth-seed S] ...]"


def with_truth_usage(ap):
    """``ap`` (an argparse parser whose argv has had its ``--truth`` groups taken out first)
    with those groups in its usage line, after the program's name: ``--help`` and every
    error's usage show them (argparse, which never sees them, left them out)."""
    usage = ap.format_usage().removeprefix("usage: ").strip()
    ap.usage = usage.replace(ap.prog, f"{ap.prog} {TRUTH_USAGE}", 1)
    return ap


def stable_seed(*parts) -> int:
    """A stable 63-bit seed from any printable parts (not Python's salted hash)."""
    h = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return int.from_bytes(h[:8], "little") >> 1


@dataclass(frozen=True)
class TruthSpec:
    """A ground truth: ``holder`` (exact smoothness alpha in p dimensions) or ``teacher``
    (the paper's 20-10-10-1 network; p > 20 adds irrelevant inputs, p < 20 uses p inputs)."""

    kind: str
    p: int = 1
    alpha: float | None = None
    seed: int = 0

    def __post_init__(self):
        if self.kind not in ("holder", "teacher"):
            raise ValueError(f"unknown truth {self.kind!r}: use 'holder' or 'teacher'")
        if not (isinstance(self.p, int) and self.p >= 1):
            raise ValueError(f"p must be an integer >= 1, got {self.p!r}")
        if not (isinstance(self.seed, int) and 0 <= self.seed < 2**63):
            raise ValueError(f"truth seed must be an integer in [0, 2^63), got {self.seed!r}")
        if self.kind == "holder":
            a = self.alpha
            if not (isinstance(a, (int, float)) and math.isfinite(a) and a > 0):
                raise ValueError(f"a holder truth needs alpha > 0, got {a!r}")
        elif self.alpha is not None:
            raise ValueError(
                f"a teacher truth has no alpha (its rate is Corollary 6.3's), got {self.alpha!r}"
            )

    @property
    def key(self) -> str:
        if self.kind == "holder":
            return f"holder-a{self.alpha:g}-p{self.p}-s{self.seed}"
        return f"teacher-p{self.p}-s{self.seed}"

    def truth_seed(self, replicate: int | None) -> int:
        """The seed of replicate ``replicate``'s own truth, drawn from the class that this
        spec names (``seed`` is the class draw's seed, not the function's): intervals over
        replicates then cover the class, not one function.  ``None``: the spec's ``seed``
        itself (one fixed function, e.g. for the figures and tests).  The derivation leaves
        out alpha, p and the kind, so replicate r of teachers that differ only in p (and of
        Hoelder truths that differ only in alpha) use the same random draw: Corollary 6.3's
        comparison across p stays paired."""
        if replicate is None:
            return self.seed
        return stable_seed(self.seed, "truth", int(replicate))

    def build(self, replicate: int | None = None):
        """The truth of replicate ``replicate`` (:meth:`truth_seed`).  A Hoelder truth is
        truncated for :data:`HOLDER_N_REF` whatever the sweep's n, so every tier draws its
        truths from one class of functions."""
        seed = self.truth_seed(replicate)
        if self.kind == "holder":
            return HolderFunction(self.alpha, self.p, n_max=HOLDER_N_REF, seed=seed)
        # relu(h W + b): the convention the sweeps' records were made with (TeacherNetwork)
        return TeacherNetwork(p=self.p, seed=seed, p_active=min(self.p, 20), bias="add")

    def predicted(self, metric: str) -> float:
        """Predicted exponent of n (theory): Corollary 6.1/6.2 or 6.3/6.4."""
        if self.kind == "holder":
            return float(predicted_exponent(self.alpha, self.p, metric))
        return float(teacher_exponent(metric))


def f0_describe(f0) -> dict:
    """What a record says of its truth: the function's own description, else its edges
    (the sweep's jobs write it, ``simulate.sweep.store.validate`` checks it against the function
    the record's truth draws)."""
    if hasattr(f0, "describe"):
        return f0.describe()
    return {"n_edges": getattr(f0, "n_edges", None)}
