"""A sweep record checked as data, not trusted: every reader of sweep records (``verify``,
``figures``, the sweeps' resume) reads through :data:`RECORD_CHECK`
(``simulate.sweep.store.schema``), and any break is one line naming the file, the line and the
field (``theory.plumbing.jsonl.read_jsonl`` adds the file and line).

A record is checked

* against the schema's types and the quantities' ranges (``simulate.sweep.store.rules``): d^2 and
  d in [0, 1], l2sq >= 0, steps, widths and counts positive integers, seeds in [0, 2^63);
* against itself: the candidate widths (``config.widths``) distinct and increasing, every
  per-width column as long as they are, the selected width one of them, ``metrics`` the
  per-width values at the selected width, ``selected_at_top`` and ``failed`` what the
  selection says, and the selection the one eq. (13) makes from the recorded ELBOs under
  ``config.lam`` (the plain arm's: the smallest validation error); the known-answer
  control's ``metrics`` its first member's and its members those of ``config.gp_nus`` (the
  k-NN control's: ``config.knn_ks``, each member's neighbour count in ``knn_k``); the
  truth's fields those its id encodes (``cell.truth``: ``holder-aA-pP-sS`` or
  ``teacher-pP-sS``) and its function the one the id and the replicate draw; the seeds
  those derived from ``config.seed``; its ``fingerprint_fields`` (every sweep writes them)
  those the fingerprint hashes, and ``config``'s settings as given theirs
  (``simulate.sweep.store.provenance``: as data; re-deriving the configuration they
  describe is the opt-in audit, ``python -m simulate.sweep.audit``);
* across the file (:class:`RecordCheck`, in file order): one truth's records agree on its
  parameters, and one replicate's on its function.

What a record need not carry is not invented (a record without a reference, arms, seeds
or timing is checked for what it has); what it carries must be right.
"""

from __future__ import annotations

import functools
import math
import re
from numbers import Integral

from simulate.core.constraints import INT_POSITIVE, Interval
from simulate.sweep.setup.truth_spec import TruthSpec, f0_describe, stable_seed
from simulate.sweep.setup.widths import cell_selection, plain_selection
from simulate.sweep.store.control_record import MEMBERS, check_control_record
from simulate.sweep.store.provenance import check_provenance
from simulate.sweep.store.regressor_record import check_regressor_record
from simulate.sweep.store.rules import (
    ARM_STEPS,
    ARMS,
    ASVI,
    BOOL_COLUMNS,
    COLUMN_RULES,
    COUNT,
    METRIC_RULES,
    SEED,
    TIME,
    BadRecord,
    Rule,
    fail,
    need,
    need_dict,
    need_list,
    same,
    undefined,
)
from theory.plumbing.jsonl import FileCheck

__all__ = ["RecordCheck", "RECORD_CHECK", "OWN_CHECKS", "check_record"]

# the record check of each estimator kind whose records are not ASVI's candidates (keyed by
# the record's ``config.estimator``; simulate.sweep.setup.kinds names the same kinds, a test
# holds the two together): the known-answer controls' members, a named regressor's
# predictions; ``(record, truth) -> None``, raising BadRecord
OWN_CHECKS = {
    **dict.fromkeys(MEMBERS, check_control_record),
    "regressor": lambda rec, spec: check_regressor_record(rec),
}

# what a damaged or edited record's line ends with: how to get a whole one back
FIX = "; the record is damaged or was edited: restore the file, or run its sweep into a new file"
# what a truth's id encodes (simulate.sweep.setup.truth_spec.TruthSpec.key)
_TRUTH_ID = re.compile(
    r"(?P<kind>holder)-a(?P<alpha>[^-]+)-p(?P<p>\d+)-s(?P<seed>\d+)|(?P<tkind>teacher)-p(?P<tp>\d+)-s(?P<tseed>\d+)"
)
# a replicate's own function's fields (each replicate draws its own): the rest is the truth's
_PER_REPLICATE = ("seed", "holder_norm", "n_edges")
# a Hoelder truth's norm bound is a float sum: numpy builds may round it differently
_NORM_RTOL = 1e-9
_METRICS = tuple(METRIC_RULES)


def check_record(rec: dict) -> None:
    """Raise :class:`BadRecord` naming the first field of ``rec`` (one sweep record, its
    schema and keys already checked) that breaks a rule of this module's docstring."""
    problem = shape_problem(rec)
    if problem:
        raise BadRecord(problem)
    spec = _truth(rec)
    cfg = rec["config"]
    own = OWN_CHECKS.get(cfg.get("estimator", ASVI))
    if own is not None:
        own(rec, spec)
    else:
        widths = _widths(cfg)
        lam = cfg.get("lam")
        if lam is not None:
            Rule("the width prior's lam", 0, finite=True).check("config.lam", lam)
        _candidates(rec, "", widths, lam, own=True)
        arms = need_dict("arms", rec.get("arms") or {})
        for name, arm in arms.items():
            need(name in ARMS, f"arms.{name}", name, f"an arm is one of {ARMS}")
            need_dict(f"arms.{name}", arm)
            _candidates(arm, f"arms.{name}.", widths, lam, own=False)
    _reference(rec.get("reference"))
    check_provenance(rec)  # an edited config named before the seeds it derives
    _seeds_and_timing(rec)


def shape_problem(rec: dict) -> str | None:
    """What is wrong with a sweep record's shape (the types of the fields every check and
    the analysis index), or None."""
    if not isinstance(rec["fingerprint"], str):
        return f"'fingerprint' must be a string, got {rec['fingerprint']!r}"
    if not isinstance(rec.get("fingerprint_fields"), dict):
        return (
            f"'fingerprint_fields' must be an object (every sweep writes the fields its"
            f" fingerprint hashes), got {rec.get('fingerprint_fields')!r}"
        )
    cell = rec["cell"]
    if not isinstance(cell, dict):
        return f"'cell' must be an object, got {cell!r}"
    if not isinstance(cell.get("truth"), str):
        return f"'cell.truth' must be a string, got {cell.get('truth')!r}"
    for key, low in (("n", 1), ("replicate", 0)):
        if not Interval(Integral, low, None, "left").accepts(cell.get(key)):
            return f"'cell.{key}' must be an integer >= {low}, got {cell.get(key)!r}"
    for key in ("metrics", "truth", "config"):
        if not isinstance(rec.get(key), dict):
            return f"{key!r} must be an object, got {rec.get(key)!r}"
    if not isinstance(rec["failed"], bool):
        return f"'failed' must be true or false, got {rec['failed']!r}"
    no_widths = rec["config"].get("estimator", ASVI) in OWN_CHECKS
    if not no_widths and not isinstance(rec.get("per_width"), dict):
        return f"'per_width' must be an object, got {rec.get('per_width')!r}"
    sw = rec["selected_width"]
    if sw is not None and not INT_POSITIVE.accepts(sw):
        return f"'selected_width' must be an integer >= 1 or null, got {sw!r}"
    return None


# --------------------------------------------------------------------------- the truth
def _truth(rec: dict) -> TruthSpec:
    """The record's truth, its fields checked against its id and its function against the
    one the id and the replicate draw (``TruthSpec.build``)."""
    t, key = rec["truth"], rec["cell"]["truth"]
    m = _TRUTH_ID.fullmatch(key)
    if m is None:
        fail("cell.truth", key, "a truth's id is holder-aA-pP-sS or teacher-pP-sS")
    kind = m["kind"] or m["tkind"]
    encoded = {"kind": kind, "p": m["p"] or m["tp"], "seed": m["seed"] or m["tseed"]}
    need(
        t.get("kind") == kind, "truth.kind", t.get("kind"), f"the truth's id {key!r} says {kind!r}"
    )
    COUNT.check("truth.p", t.get("p"))
    SEED.check("truth.seed", t.get("seed"))
    if kind == "holder":
        Rule("a Hoelder truth's alpha", 0).check("truth.alpha", t.get("alpha"))
        need(t["alpha"] > 0, "truth.alpha", t["alpha"], "a Hoelder truth's alpha is > 0")
        encoded["alpha"] = m["alpha"]
        shown = {"alpha": f"{t['alpha']:g}"}
    else:
        need(t.get("alpha") is None, "truth.alpha", t.get("alpha"), "a teacher has no alpha")
        shown = {}
    shown.update(kind=t["kind"], p=str(t["p"]), seed=str(t["seed"]))
    for field in ("alpha", "p", "seed"):
        if field in encoded and shown[field] != encoded[field]:
            fail(f"truth.{field}", t[field], f"the truth's id {key!r} encodes {encoded[field]}")
    spec = TruthSpec(kind=kind, p=t["p"], alpha=t.get("alpha"), seed=t["seed"])
    # required: with the seeds, the one link from a record to the truth it was drawn from (a
    # whole truth relabelled under another id, its function dropped, was otherwise accepted)
    fn = need_dict("truth.function", t.get("function"))
    _function(fn, spec, rec["cell"]["replicate"])
    return spec


@functools.lru_cache(maxsize=256)
def _drawn(spec: TruthSpec, replicate: int) -> dict:
    return f0_describe(spec.build(replicate))


def _function(fn: dict, spec: TruthSpec, replicate: int) -> None:
    """The record's truth function is the one its truth draws for its replicate."""
    want = _drawn(spec, replicate)
    if fn == want:  # the common case, one comparison; else the first field that differs
        return
    for k in sorted(set(fn) | set(want)):
        got, exp = fn.get(k), want.get(k)
        if k == "holder_norm" and isinstance(got, float) and isinstance(exp, float):
            ok = math.isclose(got, exp, rel_tol=_NORM_RTOL)
        else:
            ok = type(got) is type(exp) and got == exp
        if not ok:
            fail(
                f"truth.function.{k}",
                got,
                f"the truth {spec.key} draws {exp!r} for replicate {replicate}",
            )


# --------------------------------------------------------------------------- candidates
def _widths(cfg: dict) -> list[int]:
    widths = need_list("config.widths", cfg.get("widths"))
    need(bool(widths), "config.widths", widths, "a cell has at least one candidate width")
    for k, w in enumerate(widths):
        COUNT.check(f"config.widths[{k}]", w)
    need(widths == sorted(set(widths)), "config.widths", widths, "distinct and increasing")
    return widths


def _candidates(part: dict, at: str, widths: list[int], lam, own: bool) -> None:
    """A record's (or an arm's, ``at`` its prefix) candidates: each per-width column as
    long as the candidate widths, each value by its rule; the selection among them."""
    pw = need_dict(f"{at}per_width", part.get("per_width"))
    for m in _METRICS:
        need(m in pw, f"{at}per_width", sorted(pw), f"lacks the column {m!r}")
    n = len(widths)
    failed = [False] * n
    if "failed" in pw:
        failed = need_list(f"{at}per_width.failed", pw["failed"], n, "candidate widths")
    for col, values in pw.items():
        if type(values) is not list or len(values) != n:  # (the fast path builds no name)
            need_list(f"{at}per_width.{col}", values, n, "candidate widths (config.widths)")
        rule = ARM_STEPS if col == "steps" and not own else COLUMN_RULES.get(col)
        if _column_ok(col, values, rule):
            continue
        for k, x in enumerate(values):  # the field that breaks its rule, named
            field = f"{at}per_width.{col}[{k}]"
            if col in BOOL_COLUMNS:
                need(isinstance(x, bool), field, x, "must be true or false")
            elif col == "failed_term":
                need(x is None or isinstance(x, str), field, x, "a failed term's name or null")
            elif rule is not None and not (failed[k] is True and undefined(x)):
                rule.check(field, x)
    _selection(part, at, widths, lam, pw)


def _column_ok(col: str, values: list, rule) -> bool:
    """Whether every value of a per-width column meets its rule (the one-pass fast path;
    a failed candidate's undefined values and the field that breaks a rule are
    :func:`_candidates`' slow path)."""
    if col in BOOL_COLUMNS:
        return all(type(x) is bool for x in values)
    if col == "failed_term":
        return all(x is None or type(x) is str for x in values)
    return rule is None or rule.accepts_all(values)


def _selection(part: dict, at: str, widths, lam, pw: dict) -> None:
    """The selected width, its metrics and flags against the candidates (and the
    selection recomputed where the record holds what it was made from)."""
    sw, metrics = part.get("selected_width"), need_dict(f"{at}metrics", part.get("metrics"))
    cell_failed = part.get("failed")
    need(isinstance(cell_failed, bool), f"{at}failed", cell_failed, "must be true or false")
    if sw is None:
        need(cell_failed, f"{at}selected_width", sw, "null only for a failed cell")
        for m in _METRICS:
            need(
                undefined(metrics.get(m)),
                f"{at}metrics.{m}",
                metrics.get(m),
                "a failed cell (no width selected) has no metrics",
            )
        return
    need(sw in widths, f"{at}selected_width", sw, f"not one of the candidate widths {widths}")
    need(not cell_failed, f"{at}failed", cell_failed, f"a width ({sw}) was selected")
    k = widths.index(sw)
    for m, rule in METRIC_RULES.items():
        rule.check(f"{at}metrics.{m}", metrics.get(m))
        if not same(metrics[m], pw[m][k]):
            fail(
                f"{at}metrics.{m}",
                metrics[m],
                f"per_width.{m} at the selected width {sw} is {pw[m][k]!r}",
            )
    top = k == len(widths) - 1 and len(widths) > 1
    if part.get("selected_at_top") != top:
        fail(
            f"{at}selected_at_top",
            part.get("selected_at_top"),
            f"the selected width {sw} is {'' if top else 'not '}the widest of {len(widths)}",
        )
    if "val_mse" in pw:
        sel, how = plain_selection(pw, widths), "the smallest per_width.val_mse"
    elif "elbo" in pw and "failed" in pw and lam is not None:
        sel, how = cell_selection(pw, widths, lam), f"eq. (13) under config.lam = {lam:g}"
    else:
        return
    if sel["selected_width"] != sw:
        fail(
            f"{at}selected_width",
            sw,
            f"{how} selects {sel['selected_width']} from the recorded candidates",
        )


# --------------------------------------------------------------------------- the rest
def _reference(ref) -> None:
    """The class-matched reference's metrics, mesh and oracle (null: none fitted)."""
    if ref is None:
        return
    need_dict("reference", ref)
    for m, rule in METRIC_RULES.items():
        rule.check(f"reference.{m}", ref.get(m))
    Rule("a mesh", 1, integer=True, none=True).check("reference.k", ref.get("k"))
    oracle = ref.get("oracle")
    if oracle is None:
        return
    need_dict("reference.oracle", oracle)
    for m, rule in METRIC_RULES.items():
        rule.check(f"reference.oracle.{m}", oracle.get(m))
    Rule("a degree", 0, integer=True, none=True).check(
        "reference.oracle.degree", oracle.get("degree")
    )
    for m, b in need_dict("reference.oracle.bins", oracle.get("bins") or {}).items():
        COUNT.check(f"reference.oracle.bins.{m}", b)


def _seeds_and_timing(rec: dict) -> None:
    """Seeds in range and those derived from ``config.seed`` (data, test, each candidate's
    model); timings >= 0."""
    seeds = need_dict("seeds", rec.get("seeds"))
    for k in ("data", "test"):  # every sweep writes them: what ties a record to its draw
        need(k in seeds, f"seeds.{k}", None, "a record carries the seeds its cell drew")
    cell, cfg = rec["cell"], rec["config"]
    for k, v in seeds.items():
        for i, s in enumerate(v if k == "models" and isinstance(v, list) else [v]):
            SEED.check(f"seeds.{k}" + (f"[{i}]" if k == "models" else ""), s)
    if "seed" in cfg:
        SEED.check("config.seed", cfg["seed"])
        key, n, q, s = cell["truth"], cell["n"], cell["replicate"], cfg["seed"]
        want = {"test": stable_seed(s, key, "test"), "data": stable_seed(s, key, "data", q)}
        if isinstance(cfg.get("widths"), list):
            want["models"] = [stable_seed(s, key, n, q, "model", w) for w in cfg["widths"]]
        for k, v in want.items():
            if k in seeds and seeds[k] != v:
                fail(f"seeds.{k}", seeds[k], f"config.seed {s} derives {v}")
    for k, v in need_dict("timing", rec.get("timing") or {}).items():
        (COUNT if k == "job_models" else TIME).check(f"timing.{k}", v)


# --------------------------------------------------------------------------- the file
class RecordCheck(FileCheck):
    """The sweep records' check: called on one record, :func:`check_record`'s rules
    (returning the broken one's line, or None); as ``read_jsonl``'s check, a fresh one per
    read also compares each record with those before it in the file: one truth's records
    agree on its parameters (its fields, its function's but the replicate's own), one
    replicate's on its function."""

    def __init__(self):
        self._truths: dict = {}  # truth id -> (line, its parameters)
        self._functions: dict = {}  # (truth id, replicate) -> (line, its function)

    def __call__(self, rec: dict, line: int | None = None) -> str | None:
        try:
            check_record(rec)
            if line is not None:
                self._against_earlier(rec, line)
        except BadRecord as exc:
            return f"{exc}{FIX}"
        return None

    def _against_earlier(self, rec: dict, line: int) -> None:
        key, q = rec["cell"]["truth"], rec["cell"]["replicate"]
        t = rec["truth"]
        fn = t.get("function") or {}
        params = {
            **{f"truth.{k}": v for k, v in t.items() if k != "function"},
            **{f"truth.function.{k}": v for k, v in fn.items() if k not in _PER_REPLICATE},
        }
        own = {f"truth.function.{k}": v for k, v in fn.items()}
        for seen, k, mine, what in (
            (self._truths, key, params, f"the same truth ({key})"),
            (self._functions, (key, q), own, f"the same truth's replicate {q}"),
        ):
            first, theirs = seen.setdefault(k, (line, mine))
            if mine == theirs:
                continue
            for field in sorted(set(mine) | set(theirs)):
                if not same(mine.get(field), theirs.get(field)):
                    fail(
                        field,
                        mine.get(field),
                        f"the record on line {first} of {what} has {theirs.get(field)!r}",
                    )


# every reader's check (simulate.sweep.store.schema.record_problem)
RECORD_CHECK = RecordCheck()
