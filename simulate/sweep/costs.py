"""Measured per-cell costs, and a sweep's estimated cost before anything trains.

Every record carries its job's seconds (``timing``: ``job_train_s`` and ``job_eval_s`` for
ASVI, ``job_s`` for the Gaussian-process control) and the job's replicates; one cell's cost
is its job's seconds over the replicates the job trained together.  :data:`TABLE`
(``costs.json`` beside this module) holds such measured costs -- per truth, estimator, step,
n and candidate widths, each row naming the records it was read from -- and
:func:`estimate` prices a sweep from it: per cell the row of the same truth and step (else
the same kind and p, else the same estimator) at the same n, else interpolated in log n
between the two nearest measured n, else extrapolated from the nearest one (at most
linearly in n for ASVI, as n^3 for the GP's solve); a truth with no rows of its own is
priced from one other truth's rows (same kind and p, else kind), and a step with no rows
from another step's, each said in the label.  Which rows priced each cell is part of the
answer, and a cell nothing prices is named, never guessed.  The width set is recorded but
not modelled: a design with other candidate widths is priced by n alone.  A GP record's
``job_s`` is the time up to its replicate within the job, so the rows are right for jobs
of one replicate (every shipped GP run) and over-count larger blocks.

``python -m simulate.sweep.costs RECORDS... [--write]`` reads records into rows (and with
``--write`` merges them into :data:`TABLE`'s file, replacing rows of the same truth,
estimator, step and n).  The machine is the project's 2-core one unless a row says
otherwise; costs are wall seconds of one single-threaded worker.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections import defaultdict
from dataclasses import dataclass

from simulate.sweep.setup.kinds import KINDS
from simulate.sweep.store.schema import read_records
from theory.plumbing.cli import Parser, print_error
from theory.plumbing.paths import path_arg

__all__ = ["Estimate", "TABLE", "TABLE_NAME", "estimate", "load_table", "rows_from_records"]

TABLE_NAME = "simulate/sweep/costs.json"
TABLE = os.path.join(os.path.dirname(__file__), "costs.json")


def _stem(truth: dict) -> str:
    if truth["kind"] == "teacher":
        return f"teacher-p{truth['p']}"
    return f"{truth['kind']}-a{float(truth['alpha']):g}-p{truth['p']}"


def _step(cfg) -> str:
    """How a sweep's step ran, as a row names it (``cfg``: a record's config or a
    ``SweepConfig``'s fields): ``exact`` for the GP and k-NN controls, else ``mlp``
    (+``compile``)."""
    get = cfg.get if isinstance(cfg, dict) else lambda k, d=None: getattr(cfg, k, d)
    if KINDS[get("estimator", "asvi")].known_answer:
        return "exact"
    return get("mlp", "batched") + ("+compile" if get("compile") else "")


def rows_from_records(records: list[dict], source: str) -> list[dict]:
    """Per (truth, estimator, step, n) of ``records`` the mean seconds of one cell (its
    job's seconds over the job's replicates: ``config.replicate_block``) and their
    training and evaluation parts, with the candidate widths and ``source``."""
    cells: dict[tuple, list] = defaultdict(list)
    # a job's records share its timing: how many do is how many replicates it trained
    block_of = defaultdict(int)
    for r in records:
        job = (r["cell"]["truth"], r["cell"]["n"], json.dumps(r.get("timing"), sort_keys=True))
        block_of[job] += 1
    for r in records:
        if r.get("failed") or not r.get("timing"):
            continue
        cfg, t = r["config"], r["timing"]
        est = cfg.get("estimator", "asvi")
        block = block_of[(r["cell"]["truth"], r["cell"]["n"], json.dumps(t, sort_keys=True))]
        step = _step(cfg)
        key = (_stem(r["truth"]), est, step, int(r["cell"]["n"]))
        if KINDS[est].known_answer:  # the job's seconds alone: no training of its own
            own = KINDS[est].members_setting
            nus = len(cfg.get(own, [])) if own else None
            cells[key].append((t["job_s"] / block, 0.0, t["job_s"] / block, nus, None))
        else:
            train, ev = t["job_train_s"] / block, t["job_eval_s"] / block
            cells[key].append((train + ev, train, ev, None, cfg.get("widths")))
    rows = []
    for (stem, est, step, n), xs in sorted(cells.items()):
        k = len(xs)
        row = {
            "truth": stem, "estimator": est, "step": step, "n": n, "cells": k,
            "cell_s": round(sum(x[0] for x in xs) / k, 3),
            "train_s": round(sum(x[1] for x in xs) / k, 3),
            "eval_s": round(sum(x[2] for x in xs) / k, 3),
            "source": source,
        }  # fmt: skip
        if xs[0][3] is not None:
            row["gp_nus"] = xs[0][3]
        if xs[0][4] is not None:
            row["widths"] = list(xs[0][4])
        rows.append(row)
    return rows


def load_table(path: str = TABLE) -> list[dict]:
    """The measured rows (:data:`TABLE`)."""
    with open(path) as f:
        return json.load(f)["rows"]


@dataclass(frozen=True)
class Estimate:
    """A sweep's estimated cost: ``total_s`` wall seconds on ``workers`` workers (the
    cells' sum over the workers), ``per_truth`` seconds of one worker, ``priced`` per cell
    (truth, n) the seconds and how (the row's truth and n, or "interpolated"/"extrapolated"
    between which), and ``unpriced`` the cells no row prices."""

    total_s: float
    per_truth: dict
    priced: tuple
    unpriced: tuple
    workers: int


def _candidates(rows, stem: str, est: str, step: str) -> list[dict]:
    """The rows of the one measured truth that prices a cell of ``stem``: the same truth,
    else one of the same kind and p, else of the same kind, else any (of the same
    estimator); among them the cell's own step's rows where there are any (else another
    step's: the label says so); of several truths, the one with the most rows."""
    kind, p = stem.split("-")[0], stem.split("-")[-1]
    tiers = (
        lambda r: r["truth"] == stem,
        lambda r: r["truth"].split("-")[0] == kind and r["truth"].split("-")[-1] == p,
        lambda r: r["truth"].split("-")[0] == kind,
        lambda r: True,
    )
    for ok in tiers:
        got = [r for r in rows if r["estimator"] == est and ok(r) and r["cell_s"] > 0]
        if got:
            pool = [r for r in got if r["step"] == step] or got
            best = max(sorted({r["truth"] for r in pool}),
                       key=lambda t: sum(r["truth"] == t for r in pool))  # fmt: skip
            return [r for r in pool if r["truth"] == best]
    return []


def _price(rows, n: int, est: str, step: str) -> tuple[float, str] | None:
    """One cell's seconds at ``n`` from one truth's rows (:func:`_candidates`), and how:
    at a measured n (several rows there: their mean weighted by cells), else a power law
    in n between the two nearest measured n, else from the nearest measured n with the
    slope of the two nearest (clamped to [0, 1] for ASVI, [0, 3] for the GP's solve; n^1 or
    n^3 from a single n)."""
    if not rows:
        return None
    by_n: dict[int, list] = {}
    for r in rows:
        by_n.setdefault(int(r["n"]), []).append(r)

    def cost(m):
        rs = by_n[m]
        w = [max(int(r.get("cells", 1)), 1) for r in rs]
        return sum(r["cell_s"] * x for r, x in zip(rs, w, strict=True)) / sum(w)

    tag = rows[0]["truth"] + (
        f", measured on {rows[0]['step']}" if rows[0]["step"] != step else ""
    )  # fmt: skip
    if n in by_n:
        return cost(n), f"{tag} at n = {n}"
    ns = sorted(by_n)
    lo, hi = [m for m in ns if m < n], [m for m in ns if m > n]
    top = KINDS[est].cost_power_cap
    if lo and hi:
        a, b = lo[-1], hi[0]
        k = math.log(cost(b) / cost(a)) / math.log(b / a)
        return cost(a) * (n / a) ** k, f"{tag}, interpolated between n = {a} and {b}"
    if len(ns) >= 2:
        a, b = (ns[-2], ns[-1]) if not hi else (ns[0], ns[1])
        near = ns[-1] if not hi else ns[0]
        k = min(max(math.log(cost(b) / cost(a)) / math.log(b / a), 0.0), top)
    else:
        near, k = ns[0], top
    return cost(near) * (n / near) ** k, f"{tag}, extrapolated from n = {near} (n^{k:.2f})"


def estimate(cfg, workers: int = 1, rows: list[dict] | None = None) -> Estimate:
    """The estimated cost of the sweep ``cfg`` (a ``SweepConfig``) from measured rows
    (default :data:`TABLE`), module docstring."""
    rows = load_table() if rows is None else rows
    per_truth: dict[str, float] = defaultdict(float)
    priced, unpriced = [], []
    c = cfg
    est, step = c.estimator, _step(c)
    for t in c.truths:
        stem = _stem({"kind": t.kind, "p": t.p, "alpha": t.alpha})
        cands = _candidates(rows, stem, est, step)
        for n in c.ns:
            got = _price(cands, int(n), est, step)
            if got is None:
                unpriced.append((t.key, int(n)))
                continue
            s = got[0] * c.replicates
            own = c.kind.members_setting
            if own:  # a row's cost is of its own number of priors (the reference's share
                nus = cands[0].get(own)  # scales too: an upper bound)
                s *= len(getattr(c, own)) / nus if nus else 1.0
            per_truth[t.key] += s
            priced.append((t.key, int(n), s, got[1]))
    w = max(int(workers), 1)
    return Estimate(sum(per_truth.values()) / w, dict(per_truth), tuple(priced),
                    tuple(unpriced), w)  # fmt: skip


def main(argv=None) -> int:
    ap = Parser(prog="python -m simulate.sweep.costs", description=__doc__)
    ap.add_argument("records", nargs="+", type=path_arg)
    ap.add_argument("--write", action="store_true", help=f"merge the rows into {TABLE}")
    args = ap.parse_args(argv)
    rows = []
    for path in args.records:
        if not os.path.isfile(path):
            print_error(f"no records file {path}")
            return 2
        rows += rows_from_records(read_records(path), os.path.basename(path))
    if args.write:
        old = load_table() if os.path.isfile(TABLE) else []
        keys = {(r["truth"], r["estimator"], r["step"], r["n"]) for r in rows}
        keep = [r for r in old if (r["truth"], r["estimator"], r["step"], r["n"]) not in keys]
        order = sorted(keep + rows, key=lambda r: (r["estimator"], r["truth"], r["n"]))
        doc = {"note": "measured per-cell costs: python -m simulate.sweep.costs RECORDS --write",
               "rows": order}  # fmt: skip
        with open(TABLE, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
    for r in rows:
        print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
