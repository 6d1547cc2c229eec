"""The per-field rules of a sweep record (``simulate.sweep.store.validate`` applies them): each
quantity's type and range, said once, and :class:`BadRecord`, the one line that names the
field a record breaks.

The ranges are the mathematics': a squared Hellinger distance ``d2`` and the Hellinger
distance ``d`` lie in [0, 1], a squared L2 error ``l2sq`` is >= 0, step counts, widths,
counts and sample sizes are integers (>= 1, or >= 0 where nothing may have run), seeds are
integers in [0, 2^63), timings are >= 0.  A number is a JSON number (true and false are
not numbers); a value a record leaves undefined is null, or NaN where it was written as a
non-finite float, and only where the rule says so (a failed candidate's columns, a failed
cell's metrics)."""

from __future__ import annotations

import functools
import hashlib
import json
import math
import sys
from dataclasses import dataclass

__all__ = [
    "SCHEMA",
    "ARMS",
    "BadRecord",
    "Rule",
    "METRIC_RULES",
    "COLUMN_RULES",
    "SEED",
    "COUNT",
    "TIME",
    "fail",
    "need",
    "need_dict",
    "need_list",
    "undefined",
    "same",
    "gp_name",
    "knn_k",
    "knn_name",
    "ASVI",
    "CELL_DERIVED",
    "fingerprint",
    "fields_differing",
]


# the schema every sweep record names (its "schema" field): one leaf, read by the records'
# reader (simulate.sweep.store.schema), their writers and the provenance check alike
SCHEMA = "asvi-rates/sweep-record/4"

# the constructive start's arms (R is the record's own ASVI run): W0 the start untrained,
# W0s the same with its slab sds fitted (simulate.references.constructive.gauss_newton_scales), W
# trained from W0, P plain Adam from it; a record's "arms" are named from these
# (simulate.sweep.train.groups trains them)
ARMS = ("W0", "W0s", "W0f", "W", "P")


# a record's estimator is its config's "estimator", ASVI's where absent (the network's
# records predate the field)
ASVI = "asvi"
# the fields of an ASVI record's config that its cell derives at its n from the
# configuration's settings (``simulate.sweep.setup.config.SweepConfig.cell_config``: the
# candidate widths, the training points, the stopping rule, the batch, the ramp's n, the
# prior's lambda_s); every other field of a record's config is a setting as given, the
# value its fingerprint fields hold under the same name (``simulate.sweep.store.provenance``)
CELL_DERIVED = ("widths", "n_train", "stop_rule", "batch_size", "lr_inclusion_n", "lambda_s")


def fingerprint(fields: dict) -> str:
    """16 hex digits of the SHA-256 of the canonical JSON of a configuration's fields (a
    record's ``fingerprint`` is this of its ``fingerprint_fields``)."""
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


def _flat(d: dict, prefix="") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def fields_differing(a: dict, b: dict) -> str:
    """``"lr 0.005 -> 0.01, seed 0 -> 7"``: the fields of two fingerprints that differ."""
    fa, fb = _flat(a), _flat(b)
    keys = sorted(set(fa) | set(fb))
    parts = [
        f"{k} {fa.get(k, '(absent)')} -> {fb.get(k, '(absent)')}"
        for k in keys
        if fa.get(k) != fb.get(k)
    ]
    return ", ".join(parts) or "no field (same fields, different hash)"


class BadRecord(Exception):
    """What is wrong with a record, one line naming the field (its path in the record)."""


def _show(x) -> str:
    text = repr(x)
    return text if len(text) <= 60 else text[:57] + "..."


def fail(field: str, value, rule: str):
    """Raise :class:`BadRecord`: ``'FIELD' is VALUE: RULE``."""
    raise BadRecord(f"{field!r} is {_show(value)}: {rule}")


def need(ok: bool, field: str, value, rule: str) -> None:
    """:func:`fail` unless ``ok``."""
    if not ok:
        fail(field, value, rule)


def need_dict(field: str, value) -> dict:
    need(isinstance(value, dict), field, value, "must be an object")
    return value


def need_list(field: str, value, length: int | None = None, what: str = "") -> list:
    need(isinstance(value, list), field, value, "must be a list")
    if length is not None and len(value) != length:
        fail(field, value, f"has {len(value)} values for {length} {what}")
    return value


def undefined(x) -> bool:
    """Whether ``x`` is a value left undefined: null, or NaN (a non-finite float)."""
    return x is None or (isinstance(x, float) and math.isnan(x))


def same(a, b) -> bool:
    """Equality with undefined values (null, NaN) equal to each other."""
    return (undefined(a) and undefined(b)) or (not undefined(a) and a == b)


@dataclass(frozen=True)
class Rule:
    """A number's rule: ``what`` it is, its range ``[low, high]``, whether an integer,
    whether +-infinity is allowed (``finite``) and whether null is (``none``: a value not
    computed).  NaN never meets a rule (a value left undefined is allowed only where the
    caller says so: a failed candidate's)."""

    what: str
    low: float = -math.inf
    high: float = math.inf
    integer: bool = False
    finite: bool = True
    none: bool = False

    def text(self) -> str:
        kind = "an integer" if self.integer else "a number"
        if self.low > -math.inf and self.high < math.inf:
            span = f" in [{self.low:g}, {self.high:g}]"
        elif self.low > -math.inf:
            span = f" >= {self.low:g}"
        else:
            span = " (finite)" if self.finite else ""
        return f"{self.what} is {kind}{span}" + (" or null" if self.none else "")

    @functools.cached_property
    def _span(self) -> tuple:
        """``(types, lo, hi)``: a value meets the rule when its type is one of ``types``
        and ``lo <= x <= hi`` (a finite rule's open end is the largest float, so that
        +-infinity and NaN fail the comparison)."""
        big = sys.float_info.max if self.finite else math.inf
        types = (int,) if self.integer else (int, float)
        return types, max(self.low, -big), min(self.high, big)

    def accepts(self, x) -> bool:
        """Whether ``x`` meets the rule (a JSON value: true and false are not numbers)."""
        types, lo, hi = self._span
        return (type(x) in types and lo <= x <= hi) or (x is None and self.none)

    def accepts_all(self, values) -> bool:
        """Whether every one of ``values`` meets the rule (one pass, no field named: the
        fast path of a column; :meth:`check` names the first that does not)."""
        types, lo, hi = self._span
        none = self.none
        return all((type(x) in types and lo <= x <= hi) or (x is None and none) for x in values)

    def check(self, field: str, x) -> None:
        """:class:`BadRecord` naming ``field`` unless ``x`` meets the rule."""
        if not self.accepts(x):
            fail(field, x, self.text())


# the evaluation's quantities (the selected candidate's, each candidate's, the reference's)
METRIC_RULES = {
    "d2": Rule("a squared Hellinger distance", 0, 1),
    "d": Rule("a Hellinger distance", 0, 1),
    "l2sq": Rule("a squared L2 error", 0),
}
SEED = Rule("a seed", 0, 2**63 - 1, integer=True)
COUNT = Rule("a count", 1, integer=True)
TIME = Rule("a time in seconds", 0)

# each per-width column's values (one per candidate width); a failed candidate's may be
# undefined (null or NaN) whatever the rule; a column not named here is checked for its
# length only
_ANY = Rule("an ELBO term", finite=False, none=True)
COLUMN_RULES = {
    **METRIC_RULES,
    # a candidate's posterior mean may overflow: its error is then +infinity (never selected
    # by a finite rule of the analysis, but recorded as it was)
    "l2sq": Rule("a squared L2 error", 0, finite=False),
    "elbo": _ANY,
    "L1": _ANY,
    "L2": _ANY,
    "L3": _ANY,
    "penalized_elbo": _ANY,
    "edges_sum_nu": Rule("an expected edge count", 0),
    "steps": Rule("a step count", 1, integer=True),
    "failed_step": Rule("a step", 0, integer=True, none=True),
    "rel_change": Rule("a relative change", none=True),
    "kl_change": Rule("a KL change", none=True),
    "risk_change": Rule("a risk change", none=True),
    "lr_decays": Rule("a count of decays", 0, integer=True),
    "restart": Rule("a restart's index", 0, integer=True),
    "start_k": Rule("a start's mesh", 1, integer=True, none=True),
    "val_mse": Rule("a validation error", 0),
}
# an arm's candidate may not have taken a step: the constructive start itself (W0, W0s),
# the plain arm stopped early at its best epoch
ARM_STEPS = Rule("a step count", 0, integer=True)
BOOL_COLUMNS = ("failed", "converged", "start_exact")


def gp_name(nu: float) -> str:
    """The estimator name of a Matern prior in records and reports: ``gp-matern-NU`` (here,
    not in ``simulate.sweep.train.gp``: a records reader checks the names without importing
    scikit-learn)."""
    return f"gp-matern-{float(nu):g}"


# the k-NN control's matched neighbour count, k = ceil(n^(2 alpha/(2 alpha + p)))
KNN_MATCHED = "matched"


def knn_name(k) -> str:
    """The estimator name of a k-nearest-neighbour control member in records and reports:
    ``knn-matched`` (k growing as :func:`knn_k` says) or ``knn-kK`` (k fixed at K)."""
    return "knn-matched" if k == KNN_MATCHED else f"knn-k{int(k)}"


def knn_k(k, n: int, p: int, alpha: float) -> int:
    """The neighbour count of a k-NN control member at sample size n: ``K`` for a fixed
    member, ``min(n, ceil(n^(2 alpha / (2 alpha + p))))`` for the matched one (the
    minimax order of k on alpha-Hoelder truths, alpha <= 1; constant 1)."""
    if k != KNN_MATCHED:
        return min(int(k), int(n))
    return min(int(n), math.ceil(float(n) ** (2 * alpha / (2 * alpha + p))))
