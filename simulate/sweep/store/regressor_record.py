"""A named regressor's sweep record checked as data (``estimator = "regressor"``,
``simulate.sweep.train.foreign``; ``simulate.sweep.store.validate`` calls
:func:`check_regressor_record`
on every such record it reads): it selects no width; ``per_estimator`` holds exactly the
class's name (``CLASS`` of ``config.regressor``, ``MODULE:CLASS``) with d2, d and l2sq by
their rules (``simulate.sweep.store.rules``); ``metrics`` are that entry's; ``failed`` exactly when
one of them is not finite (a failed cell's undefined metrics are NaN; its ``failure``, where
written, a line saying why, and only a failed cell has one); ``regressor_values`` (each
cell's parameter values) an object.
Nothing is imported of the regressor: a records reader checks without it."""

from __future__ import annotations

import math

from simulate.sweep.store.rules import METRIC_RULES, fail, need, need_dict, same, undefined

__all__ = ["check_regressor_record"]


def check_regressor_record(rec: dict) -> None:
    """Raise ``simulate.sweep.store.rules.BadRecord`` naming the first field that breaks a rule
    of the module docstring."""
    cfg = rec["config"]
    spec = cfg.get("regressor")
    need(isinstance(spec, str) and spec.count(":") == 1, "config.regressor", spec,
         "MODULE:CLASS of the regressor")  # fmt: skip
    need(rec["selected_width"] is None, "selected_width", rec["selected_width"],
         "a named regressor selects no width")  # fmt: skip
    need_dict("regressor_values", rec.get("regressor_values", {}))
    name = spec.split(":")[1]
    per = need_dict("per_estimator", rec.get("per_estimator"))
    need(sorted(per) == [name], "per_estimator", sorted(per), f"the regressor's name {name!r}")
    ms = need_dict(f"per_estimator.{name}", per[name])
    finite = True
    for m, rule in METRIC_RULES.items():
        x = ms.get(m)
        if not (rec["failed"] and undefined(x)):  # checked before it is used
            rule.check(f"per_estimator.{name}.{m}", x)
        finite = finite and not undefined(x) and math.isfinite(x)
        if not same(rec["metrics"].get(m), x):
            fail(f"metrics.{m}", rec["metrics"].get(m), f"the regressor's is {x!r}")
    need(rec["failed"] == (not finite), "failed", rec["failed"],
         "a regressor's cell is failed exactly when one of its metrics is not finite")  # fmt: skip
    if "failure" in rec:
        need(rec["failed"] and isinstance(rec["failure"], str) and len(rec["failure"]) <= 500,
             "failure", rec["failure"], "a failed cell's reason, one line of text")  # fmt: skip
