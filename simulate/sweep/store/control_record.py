"""A known-answer control's sweep record checked as data (``estimator = "gp"``,
``simulate.sweep.train.gp``, or ``"knn"``, ``simulate.sweep.train.knn``;
``simulate.sweep.store.validate``
calls :func:`check_control_record` on every such record it reads): it selects no width;
``per_estimator`` holds exactly the members its config names (the priors of
``config.gp_nus``, ``gp-matern-NU``; the members of ``config.knn_ks``, ``knn-matched`` or
``knn-kK``, each one's neighbour count in ``knn_k``) with d2, d and l2sq by their rules
(``simulate.sweep.store.rules``); ``metrics`` are the first member's; ``failed`` exactly when one
of the metrics is not finite.  Nothing of scikit-learn is imported: a records reader
checks without it."""

from __future__ import annotations

import math

from simulate.sweep.store.rules import (
    KNN_MATCHED,
    METRIC_RULES,
    Rule,
    fail,
    gp_name,
    knn_k,
    knn_name,
    need,
    need_dict,
    need_list,
    same,
    undefined,
)

__all__ = ["MEMBERS", "check_control_record"]

_METRICS = tuple(METRIC_RULES)


def _gp_members(rec: dict, spec) -> list[str]:
    """The Gaussian process's members: its priors (``config.gp_nus``)."""
    nus = need_list("config.gp_nus", rec["config"].get("gp_nus"))
    need(bool(nus), "config.gp_nus", nus, "at least one prior")
    for k, nu in enumerate(nus):
        Rule("a Matern prior's nu", 0).check(f"config.gp_nus[{k}]", nu)
    return [gp_name(nu) for nu in nus]


def _knn_members(rec: dict, spec) -> list[str]:
    """The k-NN control's members (``config.knn_ks``), each one's neighbour count in
    ``knn_k`` the one ``simulate.sweep.store.rules.knn_k`` gives at the cell's n and the truth
    ``spec``'s p and alpha."""
    ks = need_list("config.knn_ks", rec["config"].get("knn_ks"))
    need(bool(ks), "config.knn_ks", ks, "at least one member")
    for j, k in enumerate(ks):
        if k != KNN_MATCHED:
            Rule("a fixed neighbour count", 1, integer=True).check(f"config.knn_ks[{j}]", k)
    counts = need_dict("knn_k", rec.get("knn_k"))
    need(spec.alpha is not None, "truth.alpha", spec.alpha, "a k-NN control's truth has one")
    want = {knn_name(k): knn_k(k, rec["cell"]["n"], spec.p, spec.alpha) for k in ks}
    need(sorted(counts) == sorted(want), "knn_k", sorted(counts), f"the members {sorted(want)}")
    for name, k in want.items():
        Rule("a neighbour count", 1, integer=True).check(f"knn_k.{name}", counts[name])
        need(counts[name] == k, f"knn_k.{name}", counts[name], f"the member's k at this n, {k}")
    return list(want)


# a known-answer control's members read from its record, by its config's estimator
MEMBERS = {"gp": _gp_members, "knn": _knn_members}


def check_control_record(rec: dict, spec) -> None:
    """A known-answer control's record (the Gaussian process's priors or the k-NN
    control's members) and their metrics; ``spec``: the record's truth (a
    ``simulate.sweep.setup.truth_spec.TruthSpec``)."""
    need(
        rec["selected_width"] is None,
        "selected_width",
        rec["selected_width"],
        "the known-answer control selects no width",
    )
    members = MEMBERS[rec["config"]["estimator"]](rec, spec)
    per = need_dict("per_estimator", rec.get("per_estimator"))
    names = sorted(members)
    need(sorted(per) == names, "per_estimator", sorted(per), f"the members of its config: {names}")
    finite = True
    for name, ms in per.items():
        need_dict(f"per_estimator.{name}", ms)
        for m, rule in METRIC_RULES.items():
            x = ms.get(m)
            if not (rec["failed"] and undefined(x)):  # checked before it is used
                rule.check(f"per_estimator.{name}.{m}", x)
            finite = finite and not undefined(x) and math.isfinite(x)
    need(
        rec["failed"] == (not finite),
        "failed",
        rec["failed"],
        "a known-answer cell is failed exactly when some member's metric is not finite",
    )
    first = per[members[0]]
    for m in _METRICS:
        if not same(rec["metrics"].get(m), first.get(m)):
            fail(
                f"metrics.{m}",
                rec["metrics"].get(m),
                f"the first member's ({members[0]}) is {first.get(m)!r}",
            )
