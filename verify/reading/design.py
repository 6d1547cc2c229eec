"""What an entry's verdicts take from the design, before its data: the exponent it is
tested against, the theorem band's log power per truth, the refusals, the pilot cvs and
the prospective power of both tests, a known-answer control's known answer, and the
whole design's power before training (``verify.rates --dry-run``).

Which truths the verdicts apply to:

* **the theorem band's log power per truth** (:func:`band_log_power`): Hoelder truths are
  held to Corollaries 6.1/6.2's ``log^(2 delta) n``; the teacher to Corollary 6.4's own
  expression over the design's n (``theory.teacher_log_power``, its s0 the median of the
  records' teachers' non-zero edges, L0 = 2, widest layer 10); a known-answer control
  (the Gaussian process, k-NN) to its proven rate, which carries no log (the protocols'
  ``band_log_power`` entry ``gp = "0"`` stands for every known-answer family);
* **integer alpha is refused** (:func:`refusal`): ``simulate.truths.functions.
  HolderFunction`` multiplies an integer alpha's coefficients by ``(1 + k)^-2``, so its
  truths are smoother than named (an ideal projection estimator's slope is -0.79 at
  alpha = 1 against e = -0.667): their verdicts are UNDECIDABLE with the reason stated;
* **alpha > 2 is refused for attainment**: the linear-spline reference saturates at
  ``n^(-4/(4+p))``, so beyond alpha = 2 it no longer attains the class's rate.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from simulate.sweep.setup.config import SweepConfig
from simulate.sweep.setup.kinds import kind_of_name
from simulate.sweep.setup.truth_spec import TruthSpec
from theory import log_factor_power, teacher_log_power
from verify import protocol as protocols
from verify.reading import stated_rate
from verify.reading.known_answer import control_family, is_control
from verify.reading.pilot import PilotCv, own_pilot
from verify.stats.attainment import AttainmentPower, attainment_power
from verify.stats.power import Power, confirm_power, pass_probability, power_check
from verify.stats.slopes import expected_slope_se, log_allowance
from verify.stats.verdict import Verdict

__all__ = [
    "PRIMARY_METRIC",
    "REFERENCE_SATURATION_ALPHA",
    "DesignPower",
    "Prospective",
    "TruthDesign",
    "band_log_power",
    "design_power",
    "expected_attainment",
    "expected_class_theorem",
    "control_family",
    "is_control",
    "predicted",
    "prospective",
    "refusal",
]

# The exit status is decided by d^2 alone (the left side of Theorems 4.1 and 5.1); d and
# squared L2 are near-transforms of it, reported beside it and not counted again.
PRIMARY_METRIC = "d2"

# the linear spline's approximation order: the reference attains n^(-2a/(2a+p)) up to a = 2
REFERENCE_SATURATION_ALPHA = 2.0


def predicted(spec: TruthSpec, estimator: str, metric: str) -> float:
    """The exponent an estimator's entry is tested against: a known-answer control's
    proven one (the Gaussian-process prior's, ``theory.gp_matern_exponent``; the k-NN
    member's, ``theory.knn_exponent`` at ``simulate.sweep.setup.kinds.knn_gamma``), or, for every
    other estimator (ASVI, its arms, a named regressor: ``simulate.sweep.train.foreign``), the
    paper's band for the truth's class (the kind's own, ``simulate.sweep.setup.kinds``)."""
    known = kind_of_name(estimator).exponent(spec, estimator, metric)
    return spec.predicted(metric) if known is None else known


def band_log_power(
    spec: TruthSpec, ns, edges: list[int], estimator: str, metric: str, delta: float,
    key: str | None = None,
) -> float:  # fmt: skip
    """The log power c of the theorem band ``[e, e + c ell]`` for one truth (module
    docstring): ``2 delta`` (Hoelder, Corollaries 6.1/6.2 at their sharp reading; delta for
    d; the other readings: ``verify.stats.readings``), Corollary 6.4's own expression over the
    design's n (the teacher; ``edges``: its replicates' teachers' non-zero edge counts), 0
    (the Gaussian-process control)."""
    if is_control(estimator):
        return 0.0
    if spec.kind == "teacher":
        if not edges:
            raise ValueError(
                f"{key or spec.key}: the records do not carry the teacher's edge count"
            )
        s0 = int(round(float(np.median(edges))))
        return float(teacher_log_power(list(ns), s0, spec.p, delta=delta, metric=metric))
    return float(log_factor_power(metric, delta))


def refusal(spec: TruthSpec) -> tuple[str | None, str | None]:
    """``(verdicts, attainment)``: why a truth's verdicts, or its attainment test alone,
    are refused (module docstring); None where they apply."""
    if spec.kind != "holder":
        return None, None
    a = float(spec.alpha)
    if a.is_integer():
        return (
            f"integer alpha = {a:g}: the construction is smoother than named (its"
            " coefficients carry (1 + k)^-2); use a non-integer alpha",
            None,
        )
    if a > REFERENCE_SATURATION_ALPHA:
        return None, (f"alpha = {a:g} > 2: the linear-spline reference saturates at n^(-4/(4+p))")
    return None, None


def expected_attainment(
    spec: TruthSpec, estimator: str, metric: str, allowance: float,
    power: AttainmentPower | None,
) -> Verdict | None:  # fmt: skip
    """The known answer of a control entry's attainment test, derived from the proven
    exponent gap ``g = e_nu - e`` (:func:`predicted`: the prior's or member's, against the class's
    exponent) against the allowance, with ``h`` the design's prospective half-width of the
    paired difference and ``gap = |e| / 2 - allowance`` (``power``:
    :func:`verify.stats.attainment.attainment_power`):

    * FAIL when ``g > allowance + 2 h`` (the design shows the control slower);
    * when ``g <= allowance - 2 h`` (the design shows it within the allowance): PASS where
      ``gap > 0``, UNDECIDABLE where the allowance eats half the rate (a pass is withheld);
    * None otherwise: ``g`` lies within two half-widths of the allowance, so this design
      has no known answer (the entry is reported, not counted).

    None for ASVI (no known answer)."""
    if not is_control(estimator):
        return None
    g = predicted(spec, estimator, metric) - spec.predicted(metric)
    h = power.half_width
    if g > allowance + 2 * h:
        return Verdict.FAIL
    if g <= allowance - 2 * h:
        return Verdict.PASS if power.gap > 0 else Verdict.UNDECIDABLE
    return None


def expected_class_theorem(
    spec: TruthSpec, estimator: str, metric: str, power: Power, band: tuple[float, float]
) -> Verdict | None:
    """The known answer of a control entry's theorem test against the truth class's band
    (``verify.reading.entry_records.class_theorem_result``: the exponent e and log power an ASVI
    entry
    is held to, ``band = (e, top)``), from the control's proven exponent ``e_nu``
    (:func:`predicted`, in ``metric``) and the design's prospective half-width ``h``
    (``power.half_width``, at the control's pilot cv):

    * FAIL when ``e_nu > top + 2h`` (an interval about e_nu lies above the top);
    * PASS when ``e_nu <= top - 2h`` (it lies below the top: the confirming rule passes);
    * None otherwise (no known answer at this design: reported, not counted).

    The matched prior (nu = alpha, e_nu = e) is a known PASS wherever the band's log
    margin ``top - e`` exceeds 2h; a prior rougher than the truth (nu < alpha) whose
    exponent lies above the top by more than 2h a known FAIL."""
    e_nu = predicted(spec, estimator, metric)
    top, h = band[1], power.half_width
    if not math.isfinite(h):
        return None
    if e_nu > top + 2 * h:
        return Verdict.FAIL
    if e_nu <= top - 2 * h:
        return Verdict.PASS
    return None


@dataclass(frozen=True)
class Prospective:
    """Everything an entry's verdicts take from the design before its data: the
    ``predicted`` exponent, the band's log power, the pilot cv and the slope SE it
    implies, the theorem test's power, the attainment allowance (its log power in the
    metric's own scale and in slope units) with its power against half the reference's
    rate, and a control's known answer."""

    predicted: float
    band_log_power: float
    pilot_cv: float | None  # None: an entry with no pilot of its own (power unknown)
    slope_se: float
    theorem_power: Power
    allowance_log_power: float
    allowance: float
    attainment_power: AttainmentPower
    expected_attainment: Verdict | None


def _pilot_cvs(proto, key: str, spec: TruthSpec, estimator: str, metric: str, cv_kind=None):
    """The protocol's pilot cvs (a cell's d^2, and the paired difference with the
    reference) for one entry, in the metric's own scale: d, the square root of d^2, has
    half the relative spread (delta method); squared L2 is taken as d^2's.  ``cv_kind``:
    whose pilot cv (a control family's, ``"gp"`` or ``"knn"``, for a control held to the
    class band), default the estimator's."""
    kind = cv_kind or control_family(estimator) or spec.kind
    scale = log_factor_power(metric, 1) / log_factor_power(PRIMARY_METRIC, 1)
    return (scale * proto.cv_for(key, kind), scale * proto.cv_for(key, kind, diff=True))


@dataclass(frozen=True)
class TruthDesign:
    """One truth's design as :func:`prospective` reads it: the truth (``spec``, its
    ``key``), the sample sizes ``ns``, the edge counts ``edges`` the teacher's band is
    taken from, and the ``replicates``."""

    spec: TruthSpec
    key: str
    ns: Sequence[float]
    edges: list[int]
    replicates: int


def prospective(
    design: TruthDesign, estimator: str, metric: str, proto: protocols.Protocol,
    cv_kind: str | None = None, pilot: PilotCv | None = None,
) -> Prospective:  # fmt: skip
    """:class:`Prospective` of one entry (the analysis and :func:`design_power` alike) on
    one truth's ``design``:
    the allowance's log power is in the metric's own scale (d is the square root of
    d^2).  The theorem test's power is the protocol's rule's: separation from e/2
    (``verify.stats.power.power_check``) or the probability of a PASS at e against the
    protocol's floor (``confirm_power``).  ``cv_kind``: another entry's pilot cv
    (a control family's, ``"gp"`` or ``"knn"``: a control entry held to the class band).
    A protocol with a stated rate
    (``verify.reading.stated_rate``) has its exponent and log power in place of the paper's band,
    for every entry but a known-answer control's own.  An entry whose power comes from its
    own pilot (a named regressor: ``verify.reading.pilot``) takes its cvs from ``pilot``;
    without one its power is unknown: ``pilot_cv`` None, the slope SE and half-widths NaN,
    the report saying ``verify.reading.pilot.NO_PILOT``, and each test counted as powered
    wherever its design could decide at some spread (a non-rejection INCONCLUSIVE, not
    labelled UNDECIDABLE for want of a pilot) -- but not where the design cannot decide at
    any spread (``gap <= 0``: the band has no margin to PASS an estimator at e, as a stated
    rate with no log factor under the confirming rule, or the allowance eats half the
    rate), which stays UNDECIDABLE as it would with a pilot.  A pilot without a paired
    difference (``cv_diff`` None: cells without a reference) leaves the attainment test's
    power unknown the same way."""
    spec, key, ns, edges = design.spec, design.key, design.ns, design.edges
    replicates = design.replicates
    ns = list(ns)
    stated = None if is_control(estimator) else stated_rate.band(proto, spec, ns, metric)
    if stated is None:
        lp = band_log_power(spec, ns, edges, estimator, metric, proto.delta, key)
        pred = predicted(spec, estimator, metric)
    else:  # the protocol's stated rate replaces the paper's band (verify.reading.stated_rate)
        pred, lp = stated
    unknown = unknown_diff = False
    if cv_kind is None and own_pilot(estimator):  # never the protocol's (ASVI's) cvs
        unknown = pilot is None
        cv, cv_diff = (math.nan, math.nan) if unknown else (pilot.cv, pilot.cv_diff)
        unknown_diff = unknown or cv_diff is None
        cv_diff = math.nan if cv_diff is None else cv_diff
    else:
        cv, cv_diff = _pilot_cvs(proto, key, spec, estimator, metric, cv_kind)
    se = expected_slope_se(ns, replicates, cv)
    if proto.theorem_rule == "confirm":
        power = confirm_power(ns, pred, lp, se, replicates, proto.level, proto.power_floor)
    else:
        power = power_check(ns, pred, lp, se, replicates, proto.level)
    power = dataclasses.replace(power, pilot_cv=None if unknown else cv)
    c = (
        proto.attainment_log_power
        * log_factor_power(metric, 1)
        / log_factor_power(PRIMARY_METRIC, 1)
    )
    allowance = log_allowance(ns, c)
    a_power = dataclasses.replace(
        attainment_power(ns, spec.predicted(metric), allowance,
                         expected_slope_se(ns, replicates, cv_diff), replicates, proto.level),
        pilot_cv_diff=None if unknown_diff else cv_diff,
    )  # fmt: skip
    if unknown:  # no pilot: unlabelled by power where the design could decide (docstring)
        power = dataclasses.replace(power, separable=bool(power.gap > 0), half_width=math.nan,
                                    probability=None, replicates_needed=None,
                                    n_needed=None)  # fmt: skip
    if unknown_diff:
        a_power = dataclasses.replace(a_power, separable=bool(a_power.gap > 0),
                                      half_width=math.nan)  # fmt: skip
    return Prospective(
        predicted=pred, band_log_power=lp, pilot_cv=None if unknown else cv, slope_se=se,
        theorem_power=power,
        allowance_log_power=c, allowance=allowance, attainment_power=a_power,
        expected_attainment=expected_attainment(spec, estimator, metric, allowance, a_power),
    )  # fmt: skip


@dataclass(frozen=True)
class DesignPower:
    """One truth and estimator's power before training (:func:`design_power`, d^2); the
    attainment columns None where the truth has no attainment test."""

    truth: str
    estimator: str
    refused: str | None
    attainment_refused: str | None
    predicted: float
    band_log_power: float
    pilot_cv: float | None
    slope_se: float
    theorem_power: Power
    attainment_power: AttainmentPower | None
    allowance: float | None
    expected_attainment: Verdict | None
    # a control held to the class band (the confirming rule): that test's power and known
    # answer (None otherwise)
    class_power: Power | None = None
    expected_theorem: Verdict | None = None
    # the probability of an attainment PASS when the paired difference is 0 (an estimator
    # at the reference's rate): 0 where the allowance eats half the rate (no PASS stands)
    # or the gap is not separable (the test has no power)
    attainment_probability: float | None = None


def design_power(
    cfg: SweepConfig, proto: protocols.Protocol, pilots: Mapping | None = None
) -> list[DesignPower]:
    """The prospective power of a sweep's design before any training, per truth and
    estimator (d^2): the band's log power, the pilot cv and the slope SE it implies
    (``verify.stats.slopes.expected_slope_se``), the theorem test's power against e/2
    (``power_check``), the attainment test's against half the reference's rate
    (``attainment_power``) and, for the known-answer control, the answer the design
    implies (:func:`expected_attainment`); a refusal where the verdicts do not apply.
    The teacher's s0 is the median of the design's replicate teachers' edge counts.
    ``pilots``: an entry's own pilot cvs (``verify.reading.pilot.pilot_cvs``) where its power
    comes from its own pilot; without them its power is unknown."""
    ests = cfg.kind.members(cfg)
    m, R, ns = PRIMARY_METRIC, cfg.replicates, list(cfg.ns)
    rows = []
    for t in cfg.truths:
        edges = [t.build(q).n_edges for q in range(R)] if t.kind == "teacher" else []
        refused, att_refused = refusal(t)
        for est in ests:
            pro = prospective(TruthDesign(t, t.key, ns, edges, R), est, m, proto,
                              pilot=(pilots or {}).get((est, t.key, m)))  # fmt: skip
            attains = t.kind == "holder" and att_refused is None
            a_prob = None
            if attains:
                ap, cvd = pro.attainment_power, pro.attainment_power.pilot_cv_diff
                # a PASS stands only where the gap is positive, and a non-rejection is
                # UNDECIDABLE without separation: 0 then (as verify.sizing.size); None: no
                # pilot of its own (unknown)
                a_prob = (None if cvd is None
                          else pass_probability(pro.allowance, expected_slope_se(ns, R, cvd), R,
                                                proto.level)
                          if ap.gap > 0 and ap.separable else 0.0)  # fmt: skip
            cls = known = None
            if is_control(est) and proto.theorem_rule == "confirm" and not refused:
                c = prospective(TruthDesign(t, t.key, ns, edges, R), "asvi", m, proto,
                                cv_kind=control_family(est))  # fmt: skip
                cls = c.theorem_power
                known = expected_class_theorem(t, est, m, cls, (c.predicted, c.predicted + cls.gap))
            rows.append(
                DesignPower(
                    truth=t.key, estimator=est, refused=refused, attainment_refused=att_refused,
                    predicted=pro.predicted, band_log_power=pro.band_log_power,
                    pilot_cv=pro.pilot_cv, slope_se=pro.slope_se,
                    theorem_power=pro.theorem_power,
                    attainment_power=pro.attainment_power if attains else None,
                    allowance=pro.allowance if attains else None,
                    expected_attainment=pro.expected_attainment if attains else None,
                    class_power=cls, expected_theorem=known, attainment_probability=a_prob,
                )
            )  # fmt: skip
    return rows
