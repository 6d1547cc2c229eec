"""The records of one entry of ``verify.reading.analysis``, each built by the function that
computes it: the theorem test with its prospective power (:func:`theorem_result`), a
known-answer control held to the class band (:func:`class_theorem_result`), both tests'
replication (:func:`replicated`, ``verify.stats.replication``), the curve with its curvature
(:func:`curve_result`), ASVI's own columns (:func:`asvi_summary`) and the attainment test
with its negative control (:func:`attainment_result`).  The rules are in
``verify.stats.theorem`` and ``verify.stats.attainment`` (on the fits of ``verify.stats.slopes``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from verify.reading.design import (
    Prospective,
    TruthDesign,
    band_log_power,
    control_family,
    prospective,
)
from verify.reading.records import (
    TruthCells,
    columns,
)
from verify.results import (
    AsviSummary,
    Attainment,
    AttainmentControl,
    Curve,
    ReferenceCurve,
    TheoremTest,
    TopHalfDiff,
)
from verify.stats.attainment import (
    attainment_flip,
    attainment_margin,
    attainment_test,
    attainment_verdicts,
    log_power_of,
)
from verify.stats.logfactor import LogOrPower, log_or_power
from verify.stats.power import confirm_power, power_check
from verify.stats.readings import Readings, readings
from verify.stats.replication import replicate
from verify.stats.slopes import (
    Curvature,
    SlopeFit,
    boot_slopes,
    diff_intervals,
    fit_slope,
    loglog_slope,
    paired_slope_diff,
    slope_intervals,
)
from verify.stats.theorem import fail_p_value, theorem_margin, theorem_test, theorem_verdicts
from verify.stats.verdict import Verdict

__all__ = [
    "Measured",
    "asvi_summary",
    "attainment_result",
    "class_theorem_result",
    "curve_result",
    "beside",
    "entry_log_or_power",
    "entry_readings",
    "replicated",
    "theorem_result",
]


@dataclass(frozen=True)
class Measured:
    """One entry's measurements, as :func:`replicated` decides them again: the truth's
    cells ``tc``, the ``metric``, the estimator's values ``V`` ``[replicate, n]`` and, for
    ASVI, SVI's at the fixed smallest width ``F`` (None otherwise)."""

    tc: TruthCells
    metric: str
    V: np.ndarray
    F: np.ndarray | None


def _fields(obj, *names: str) -> dict:
    """``{name: obj.name}`` for each of ``names``: a record's fields copied from the
    same-named attributes of what computed them."""
    return {name: getattr(obj, name) for name in names}


def theorem_result(fit: SlopeFit, pro: Prospective, rule: str = "reject-e/2") -> TheoremTest:
    """The slope fit and the one-sided theorem test (``verify.stats.theorem.theorem_test``, under
    the protocol's ``rule``) with the design's prospective power check."""
    th = theorem_test(fit, pro.predicted, pro.theorem_power.separable, rule)
    return TheoremTest(
        **_fields(pro, "predicted", "band_log_power"),
        **_fields(fit, "slope", "ci_low", "ci_high", "corrected_slope", "level"),
        **_fields(th, "band", "verdict", "direction", "control_slow_rejected", "c_flip"),
        **_fields(th, "fail_p", "rule", "c_pass"),
        control_exponents=(th.slow_exponent,),
        power=pro.theorem_power,
    )


def _rows_band(tc: TruthCells, pro: Prospective, metric: str, proto):
    """``band(rows)``: the theorem band's log power on the replicates ``rows`` -- the
    teacher's from its median edge count over them (``verify.reading.design.band_log_power``,
    kept per median), any other truth's, and a stated rate's (``verify.reading.stated_rate``), the
    design's own."""
    if tc.spec.kind != "teacher" or pro.band_log_power == 0.0 or proto.stated_rate:
        return lambda rows: pro.band_log_power
    edges = np.array([row[0].n_edges for row in tc.cells], dtype=float)
    kept: dict[int, float] = {}

    def band(rows):
        s0 = int(round(float(np.median(edges[rows]))))
        if s0 not in kept:
            kept[s0] = band_log_power(tc.spec, tc.ns, [s0], "asvi", metric, proto.delta, tc.key)
        return kept[s0]

    return band


def replicated(
    m: Measured, pro: Prospective, proto, fit: SlopeFit, theorem: TheoremTest,
    attainment: Attainment | None,
) -> tuple[TheoremTest, Attainment | None]:  # fmt: skip
    """The theorem and attainment tests with their replication (``verify.stats.replication``):
    each whole decision recomputed on the protocol's bootstrap resamples of the replicates
    and on each leave-one-out set, by the batched forms of the functions that made it
    (``verify.stats.slopes.slope_intervals``, ``diff_intervals``, ``theorem_verdicts``,
    ``attainment_verdicts``: :func:`verify.stats.theorem.theorem_test` and ``attainment_test``
    decide through the same ones); the band on each resample's own replicates (the
    teacher's from their edge counts); the prospective power as designed.  The margins are
    the realised verdict's (``fit``: the slope fit that decided it); ``m``: the entry's
    measurements."""
    tc, V, F, metric = m.tc, m.V, m.F, m.metric
    ns, level, R = np.asarray(tc.ns, dtype=float), proto.level, V.shape[0]
    rep = proto.replication
    band, ell = _rows_band(tc, pro, metric, proto), loglog_slope(ns)

    def theorem_on(rows):
        _, lo, hi, _ = slope_intervals(ns, V[rows], level)
        tops = pro.predicted + ell * np.array([band(r) for r in rows])
        return theorem_verdicts(lo, hi, pro.predicted, tops, pro.theorem_power.separable,
                                proto.theorem_rule)  # fmt: skip

    margin = theorem_margin(fit, theorem.verdict, theorem.band, theorem.rule)
    theorem = dataclasses.replace(theorem, replication=replicate(
        theorem_on, R, theorem.verdict, margin,
        rep["resamples"], rep["floor"], rep["seed"],
    ))  # fmt: skip
    if attainment is None:
        return theorem, None
    Ref = columns(tc.cells, lambda c: c.reference.metrics[metric])
    power = pro.attainment_power

    def attain_on(rows):
        ref = boot_slopes(ns, Ref[rows])  # the reference's side, shared by both differences
        _, lo, hi, _ = diff_intervals(ns, V[rows], Ref[rows], level, b_boot=ref)
        v = attainment_verdicts(lo, hi, pro.allowance, power.separable, power.gap)
        passed = v == Verdict.PASS
        if F is not None and passed.any():  # the negative control must FAIL, or a PASS is
            k = np.flatnonzero(passed)  # INCONCLUSIVE
            _, clo, chi, _ = diff_intervals(ns, F[rows[k]], Ref[rows[k]], level, b_boot=ref[k])
            cv = attainment_verdicts(clo, chi, pro.allowance, power.separable, power.gap)
            v[k] = np.where(cv != Verdict.FAIL, Verdict.INCONCLUSIVE, v[k])
        return v

    ctrl = None if attainment.control is None else attainment.control.diff
    margin = attainment_margin(attainment.diff, attainment.allowance, attainment.verdict,
                               ctrl, power.gap)  # fmt: skip
    return theorem, dataclasses.replace(attainment, replication=replicate(
        attain_on, R, attainment.verdict, margin, rep["resamples"], rep["floor"], rep["seed"],
    ))  # fmt: skip


def class_theorem_result(
    tc: TruthCells, V: np.ndarray, metric: str, proto, estimator: str
) -> TheoremTest | None:
    """A known-answer control entry held to the truth class's band as well (the exponent
    and log power an ASVI entry on this truth is held to, :func:`verify.reading.design.prospective`
    as for ``"asvi"``; the power at the pilot cv of ``estimator``'s family), so that its
    theorem test has a known answer in both directions (:func:`expected_class_theorem`).
    Under the confirming rule only (None under the earlier protocols: they decide as they
    did)."""
    if proto.theorem_rule != "confirm":
        return None
    design = TruthDesign(tc.spec, tc.key, tc.ns, tc.edges, V.shape[0])
    pro = prospective(design, "asvi", metric, proto, cv_kind=control_family(estimator))
    fit = fit_slope(tc.ns, V, log_power=pro.band_log_power, level=proto.level)
    t = theorem_result(fit, pro, proto.theorem_rule)
    return replicated(Measured(tc, metric, V, None), pro, proto, fit, t, None)[0]


def curve_result(fit: SlopeFit, curv: Curvature, values: np.ndarray | None = None) -> Curve:
    """The fitted curve per n and its curvature (``verify.stats.slopes.curvature``), with
    the per-replicate ``values`` it was fitted on (``[replicate][n]``)."""
    return Curve(
        values=() if values is None else tuple(tuple(map(float, row)) for row in values),
        ns=tuple(int(n) for n in fit.ns),
        mean=tuple(fit.mean.tolist()),
        se=tuple(fit.se.tolist()),
        local_slopes=tuple(fit.local_slopes.tolist()),
        top_half_ns=curv.top_ns,
        **_fields(curv, "top_half_slope", "top_half_ci", "bend", "bend_ci", "bending"),
    )


def asvi_summary(tc: TruthCells, metric: str, V: np.ndarray, F: np.ndarray) -> AsviSummary:
    """ASVI's own columns: oracle-width and fixed-width (``F``) curves, selections, steps,
    lambda_s and the converged fraction."""
    ns, cells = tc.ns, tc.cells
    by_n = list(zip(*cells, strict=True))  # [n][replicate]
    O = columns(cells, lambda c: min(c.per_width[metric]))
    oracle = fit_slope(ns, O)
    ratio = paired_slope_diff(ns, V, O)
    conv = [bool(x) for row in cells for c in row for x in c.per_width["converged"]]
    return AsviSummary(
        oracle_mean=tuple(oracle.mean.tolist()),
        oracle_slope=oracle.slope,
        oracle_ratio=tuple((V.mean(0) / oracle.mean).tolist()),
        oracle_ratio_slope=ratio.diff,
        oracle_ratio_ci=ratio.ci,
        fixed_width=tc.w_fixed,
        fixed_mean=tuple(F.mean(0).tolist()),
        fixed_slope=fit_slope(ns, F).slope,
        selected_widths=tuple(tuple(c.selected_width for c in row) for row in cells),
        selected_at_top=tuple(sum(c.selected_at_top for c in col) for col in by_n),
        candidate_widths=tuple(tc.widths_at(j) for j in range(len(ns))),
        steps_max=tuple(max(max(c.per_width["steps"]) for c in col) for col in by_n),
        lambda_s=tuple(c.lambda_s for c in tc.first),
        converged_fraction=float(np.mean(conv)),
    )


def attainment_result(
    tc: TruthCells, V: np.ndarray, F: np.ndarray | None, metric: str, curv: Curvature,
    pro: Prospective, level: float,
) -> Attainment:  # fmt: skip
    """The attainment test against the class-matched reference (``verify.stats.attainment``) over
    the whole design (the range fixed before the run; the top half's difference is
    reported beside it and never decides), with its prospective power against half the
    reference's rate; its negative control (SVI at the smallest candidate width, ``F``;
    None for the known-answer control, whose over-smooth prior is the control) must FAIL
    the same test or a PASS becomes INCONCLUSIVE.  Also the piecewise-polynomial oracle's
    curve, where the records hold it."""
    cells = tc.cells
    power, log_power = pro.attainment_power, pro.allowance_log_power
    ns = np.asarray(tc.ns, dtype=float)
    Ref = columns(cells, lambda c: c.reference.metrics[metric])
    ref = fit_slope(ns, Ref, level=level)
    d = paired_slope_diff(ns, V, Ref, level=level)
    allowance = pro.allowance
    v = attainment_test(d, allowance, power.separable, power.gap)
    top = np.array(curv.top_index)
    dt = paired_slope_diff(ns[top], V[:, top], Ref[:, top], level=level)
    control = None
    if F is not None:
        dc = paired_slope_diff(ns, F, Ref, level=level)
        ctrl_v = attainment_test(dc, allowance, power.separable, power.gap)
        control = AttainmentControl(dc, ctrl_v, ctrl_v == Verdict.FAIL)
        if ctrl_v != Verdict.FAIL and v == Verdict.PASS:
            v = Verdict.INCONCLUSIVE  # the test could not tell a fixed small network from ASVI
    has_oracle = all(c.reference.oracle is not None for row in cells for c in row)
    O = columns(cells, lambda c: c.reference.oracle[metric]) if has_oracle else None
    K = columns(cells, lambda c: np.nan if c.reference.k is None else c.reference.k)
    return Attainment(
        reference=ReferenceCurve(
            slope=ref.slope,
            mean=tuple(ref.mean.tolist()),
            top_half_slope=fit_slope(ns[top], Ref[:, top], min_points=2).slope,
            k=tuple(np.median(K, axis=0).tolist()),
            oracle_mean=None if O is None else tuple(O.mean(0).tolist()),
            oracle_slope=None if O is None else fit_slope(ns, O).slope,
        ),
        diff=d,
        verdict=v,
        control=control,
        log_power=log_power_of(d, ns),
        allowance=allowance,
        allowance_log_power=log_power,
        top_half=TopHalfDiff(
            ns=tuple(ns[top].tolist()),
            diff=dt.diff,
            ci=dt.ci,
            log_power=dt.diff / loglog_slope(ns[top]),
        ),
        power=power,
        c_flip=attainment_flip(d, ns),
        fail_p=fail_p_value(d.diff, allowance, d.se, V.shape[0]),
    )


def entry_readings(tc: TruthCells, metric: str, fit: SlopeFit, pro: Prospective, proto) -> Readings:
    """The theorem test's readings (``verify.stats.readings``): the sharp reading's, delta_flip /
    delta_pass and the proved bound's, on the entry's ``fit``; whether the design has power
    at a band log power c by the protocol's prospective rule (``verify.stats.power``)."""
    ns, R = list(tc.ns), fit.replicates

    def powered(c: float) -> bool:
        if pro.pilot_cv is None:  # no pilot of its own: unlabelled by power (design.prospective)
            return True
        if proto.theorem_rule == "confirm":
            return confirm_power(ns, pro.predicted, c, pro.slope_se, R, proto.level,
                                 proto.power_floor).separable  # fmt: skip
        return power_check(ns, pro.predicted, c, pro.slope_se, R, proto.level).separable

    return readings(tc, metric, fit, pro.predicted, powered, proto.theorem_rule, proto.delta)


def entry_log_or_power(
    tc: TruthCells, V: np.ndarray, pro: Prospective, theorem: TheoremTest, level: float
) -> LogOrPower | None:
    """Log factor or power (``verify.stats.logfactor``) on the entry's values ``V``: the change
    of the local slope between the design's halves against any single ``n^e log^c n`` with
    c up to the larger of the theorem band's log power and the proved bound's largest over
    the constants the theorem leaves open (``verify.stats.readings``; the band's alone where the
    entry has no readings -- a known-answer control's 0, a stated rate's own -- or the proved
    bound is not available); None with fewer than three n."""
    if len(tc.ns) < 3:
        return None
    r = theorem.readings
    proved = None if r is None or r.proved_range is None else r.proved_range[1]
    c_max = max(0.0, pro.band_log_power, proved if proved is not None else 0.0)
    return log_or_power(tc.ns, V, c_max, level=level, exponent=pro.predicted)


def beside(
    m: Measured, fit: SlopeFit, pro: Prospective, proto, theorem: TheoremTest, readable: bool
) -> tuple[TheoremTest, LogOrPower | None]:
    """What is reported beside an entry's verdicts: its theorem test with its readings
    (where ``readable``: not a known-answer control, a refused truth or a stated rate) and
    the log-factor-or-power test on its measurements ``m``."""
    if readable:
        theorem = dataclasses.replace(
            theorem, readings=entry_readings(m.tc, m.metric, fit, pro, proto)
        )
    return theorem, entry_log_or_power(m.tc, m.V, pro, theorem, proto.level)
