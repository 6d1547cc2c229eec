"""Protocols: every number a verdict depends on, in one versioned file, and its digest.

A protocol is a TOML file in ``verify/protocols/`` (``NAME.toml``).  Its ``[rules]`` hold
what the analysis decides with (interval level, family-wise rule, delta, the theorem
band's log power per truth kind, the attainment allowance, the budget control's
equivalence margin, the starts' criterion); ``[pilot_cv]`` the between-replicate
coefficient of variation of a cell's d^2 that the *prospective* power checks use, and
``[pilot_cv_diff]`` that of the paired difference with the reference (the attainment
test's), both read off earlier records and committed before a run, and optionally
``[pilot_cv_control]`` that of the budget-doubling control's slope change (the
probability that the control can say "converged", printed by ``--dry-run``).  From exploratory-v2
on a protocol also names its theorem rule (``theorem_rule = "confirm"``: a PASS rejects
the bound's violation, ``verify.stats.theorem``; with ``power_floor``, the probability of a PASS
at e below which a non-rejection is UNDECIDABLE) and its ``[replication]`` (bootstrap
``resamples`` of replicates, the stability ``floor`` below which a decided verdict is
fragile, the ``interval`` method, the ``seed``: ``verify.stats.replication``); the earlier
protocols name neither and keep their rule, ``"reject-e/2"``, and are replicated with the
toolkit's defaults (``REPLICATION_DEFAULTS``, said so: ``replication_from``).  A
confirmatory
protocol also holds its ``[design]`` (truths and a fresh truth seed, the n grid,
replicates, the stopping rule, the reference's tuning, the control's size), from which
``verify.rates --tier NAME`` builds its sweeps.

The **digest** is the SHA-256 of the file's bytes (its first 12 hex digits): a record
written under a protocol carries ``"protocol": "NAME@DIGEST"`` (``SweepConfig.protocol``,
part of its fingerprint), every JSON entry of the report carries the protocol it was
decided under, and a report on records of another protocol (or of none) says so.  A
protocol is *exploratory* (``kind = "exploratory"``: rules settled while looking at
results) or *confirmatory* (``kind = "confirmatory"``: committed before its run, its
result reported whatever it says); the version history shows the order.
"""

from __future__ import annotations

import hashlib
import math
import tomllib
from dataclasses import dataclass, field
from importlib import resources

from simulate.sweep.setup.parts import KNOWN_ANSWER
from simulate.sweep.setup.recipes import RECIPE_DEFAULTS, recipe_settings
from simulate.sweep.setup.truth_spec import TruthSpec
from verify.stats.theorem import THEOREM_RULES

__all__ = ["Protocol", "load", "names", "of_records", "DEFAULT"]

DEFAULT = "exploratory-v3"
# what a protocol before exploratory-v2 is replicated with (it names no [replication]):
# the toolkit's, reported as such
REPLICATION_DEFAULTS = {"resamples": 1000, "floor": 0.9, "interval": "t-bootstrap-se", "seed": 0}
INTERVALS = ("t-bootstrap-se",)
KINDS = ("exploratory", "confirmatory")
BAND_RULES = {"holder": "2*delta", "teacher": "corollary-6.4", "gp": "0"}
FAMILYWISE = ("holm", "none")
# the known-answer controls' families (simulate.sweep.setup.parts.KNOWN_ANSWER), each with its
# own pilot cv entry where a protocol gives one
CONTROL_KINDS = KNOWN_ANSWER


@dataclass(frozen=True)
class Protocol:
    """One protocol file, read and checked (module docstring)."""

    name: str
    kind: str
    digest: str
    level: float
    familywise: str
    delta: float
    band_log_power: dict
    attainment_log_power: float
    budget_margin: float
    starts_arm: str
    pilot_cv: dict
    pilot_cv_diff: dict
    design: dict = field(default_factory=dict)
    text: str = ""
    # the theorem test's rule (verify.stats.theorem.THEOREM_RULES) and, under "confirm", the
    # prospective power's floor; the earlier protocols name neither: "reject-e/2"
    theorem_rule: str = "reject-e/2"
    power_floor: float | None = None
    # [replication] (verify.stats.replication): bootstrap resamples of replicates, the stability
    # floor below which a decided verdict is fragile, the interval method, the seed;
    # replication_from: "protocol", or "toolkit" where the protocol predates them
    replication: dict = field(default_factory=lambda: dict(REPLICATION_DEFAULTS))
    replication_from: str = "toolkit"
    # [pilot_cv_control] (optional): the budget control's slope-change cv, for its
    # prospective probability of saying "converged" (verify.sizing.control_probability)
    pilot_cv_control: dict = field(default_factory=dict)
    # a stated rate in place of the paper's band (verify.reading.stated_rate: ``--rate EXPR`` makes
    # an exploratory copy holding it); None: the paper's band
    stated_rate: str | None = None
    # the equivalence reading's margin, a fraction of |e| (verify.stats.equivalence): None,
    # the toolkit's default where the reading is made by default (a stated rate with no log
    # factor); a number (--equivalence-margin, an exploratory copy) reads it for every entry
    equivalence_margin: float | None = None
    # [split] (optional; verify.split): the risk split's metric, its flattening tests'
    # family-wise level and the class floors' settings (simulate.experiments.class_floor)
    split: dict = field(default_factory=dict)

    @property
    def tag(self) -> str:
        """``NAME@DIGEST``: what records and report entries carry."""
        return f"{self.name}@{self.digest}"

    @property
    def alpha_one_sided(self) -> float:
        """Each one-sided test's level: ``(1 - level) / 2`` (the two-sided intervals')."""
        return (1 - self.level) / 2

    def cv_for(self, truth_key: str, kind: str, diff: bool = False,
               control: bool = False) -> float | None:  # fmt: skip
        """The pilot cv of a cell's d^2 for a truth (``diff``: of the paired difference
        with the reference, ``[pilot_cv_diff]``, for the attainment test's power;
        ``control``: of the budget control's slope change, ``[pilot_cv_control]``, None
        where the protocol has none for it): for a known-answer control (``kind`` in
        :data:`CONTROL_KINDS`) its family's entry (``gp``; no protocol has one for ``knn``
        yet, which then takes ``default``), else the truth's own key with the seed part dropped
        (``holder-a1.5-p1``), else its kind's (``holder``, ``teacher``), else
        ``default``."""
        what = "pilot_cv_control" if control else "pilot_cv_diff" if diff else "pilot_cv"
        table = getattr(self, what)
        stem = truth_key.rsplit("-s", 1)[0]
        own = kind in CONTROL_KINDS  # a known-answer family's own entry, not the truth's
        keys = (kind, "default") if own else (truth_key, stem, kind, "default")
        for k in keys:
            if k in table:
                return float(table[k])
        if control:
            return None
        raise ValueError(f"protocol {self.name}: no {what} for {truth_key} (and no default)")


def names() -> list[str]:
    """The protocols shipped in ``verify/protocols``."""
    root = resources.files("verify") / "protocols"
    return sorted(p.name.removesuffix(".toml") for p in root.iterdir() if p.name.endswith(".toml"))


def check_band(name: str, band: dict) -> dict:
    """A protocol's ``[rules.band_log_power]``: :data:`BAND_RULES` (``ValueError``
    otherwise); returned as given.  The Hoelder band is the sharp reading in every protocol:
    the bound the proof gives has no log power of its own over a finite design (its slope
    depends on constants the theorem leaves open), so it is reported beside each verdict
    (``verify.stats.readings``), never deciding."""
    if band != BAND_RULES:
        raise ValueError(f"protocol {name}: band_log_power must be {BAND_RULES}, got {band}")
    return band


def load(name: str = DEFAULT) -> Protocol:
    """Read and check protocol ``name`` (``ValueError`` naming the first bad field)."""
    if name not in names():
        raise ValueError(f"no protocol {name!r}; shipped: {', '.join(names())}")
    raw = (resources.files("verify") / "protocols" / f"{name}.toml").read_bytes()
    data = tomllib.loads(raw.decode())
    rules, cv = data.get("rules", {}), data.get("pilot_cv", {})
    if data.get("name") != name:
        raise ValueError(f"protocol file {name}.toml names itself {data.get('name')!r}")
    if data.get("kind") not in KINDS:
        raise ValueError(f"protocol {name}: kind must be one of {KINDS}, got {data.get('kind')!r}")
    band = check_band(name, dict(rules.get("band_log_power", {})))
    p = Protocol(
        name=name,
        kind=data["kind"],
        digest=hashlib.sha256(raw).hexdigest()[:12],
        level=float(rules["level"]),
        familywise=str(rules["familywise"]),
        delta=float(rules["delta"]),
        band_log_power=band,
        attainment_log_power=float(rules["attainment_log_power"]),
        budget_margin=float(rules["budget_margin"]),
        starts_arm=str(rules["starts_arm"]),
        pilot_cv={k: float(v) for k, v in cv.items()},
        pilot_cv_diff={k: float(v) for k, v in data.get("pilot_cv_diff", {}).items()},
        pilot_cv_control={k: float(v) for k, v in data.get("pilot_cv_control", {}).items()},
        design=data.get("design", {}),
        text=raw.decode(),
        theorem_rule=str(rules.get("theorem_rule", "reject-e/2")),
        power_floor=None if "power_floor" not in rules else float(rules["power_floor"]),
        replication={**REPLICATION_DEFAULTS, **data.get("replication", {})},
        replication_from="protocol" if "replication" in data else "toolkit",
        split=dict(data.get("split", {})),
    )
    _check(p)
    return p


def of_records(tag: str | None) -> Protocol | None:
    """The shipped protocol a records file was written under (``tag``: its
    ``"NAME@DIGEST"``, ``verify.reading.records.records_protocol``) when this toolkit ships that
    file with that digest, so that records are decided by the rules they were written
    under (an earlier protocol keeps deciding its own records as it did); None for
    records of no protocol (they are decided under the default) or of a protocol this
    toolkit does not ship.  ``ValueError`` where the rules cannot be told: records of
    mixed protocols, or of a shipped protocol's name whose file has since changed (its
    digest differs) -- give the protocol to decide them under."""
    if not tag:
        return None
    if tag.startswith("mixed"):
        raise ValueError(f"the records were written under {tag}: give --protocol to decide them")
    name, _, digest = tag.partition("@")
    if name not in names():
        return None
    p = load(name)
    if p.digest != digest:
        raise ValueError(
            f"the records were written under {tag}, but the shipped {name} is {p.tag} (the"
            " file changed since): give --protocol to decide them"
        )
    return p


def _check(p: Protocol) -> None:
    if not 0.5 < p.level < 1:
        raise ValueError(f"protocol {p.name}: level must be in (0.5, 1), got {p.level}")
    if p.familywise not in FAMILYWISE:
        raise ValueError(f"protocol {p.name}: familywise must be one of {FAMILYWISE}")
    if not p.delta >= 1:
        raise ValueError(f"protocol {p.name}: delta must be >= 1, got {p.delta}")
    for k, v in (("attainment_log_power", p.attainment_log_power),
                 ("budget_margin", p.budget_margin)):  # fmt: skip
        if not (math.isfinite(v) and v >= 0):
            raise ValueError(f"protocol {p.name}: {k} must be finite and >= 0, got {v}")
    if p.starts_arm not in ("W", "W0s"):
        raise ValueError(f"protocol {p.name}: starts_arm must be 'W' or 'W0s'")
    if p.theorem_rule not in THEOREM_RULES:
        raise ValueError(f"protocol {p.name}: theorem_rule must be one of {THEOREM_RULES}")
    if p.theorem_rule == "confirm" and not (p.power_floor is not None and 0 < p.power_floor < 1):
        raise ValueError(f"protocol {p.name}: theorem_rule 'confirm' needs a power_floor in (0, 1)")
    rep = p.replication
    if set(rep) != set(REPLICATION_DEFAULTS):
        raise ValueError(
            f"protocol {p.name}: [replication] takes {sorted(REPLICATION_DEFAULTS)},"
            f" got {sorted(rep)}"
        )
    if not (isinstance(rep["resamples"], int) and rep["resamples"] >= 1000):
        raise ValueError(f"protocol {p.name}: [replication] resamples must be an integer >= 1000")
    if not 0 < float(rep["floor"]) <= 1:
        raise ValueError(f"protocol {p.name}: [replication] floor must be in (0, 1]")
    if rep["interval"] not in INTERVALS:
        raise ValueError(f"protocol {p.name}: [replication] interval must be one of {INTERVALS}")
    for what, table in (("pilot_cv", p.pilot_cv), ("pilot_cv_diff", p.pilot_cv_diff)):
        if any(not (v > 0) for v in table.values()) or "default" not in table:
            raise ValueError(f"protocol {p.name}: {what} needs a default and positive values")
    if any(not (math.isfinite(v) and v > 0) for v in p.pilot_cv_control.values()):
        raise ValueError(f"protocol {p.name}: pilot_cv_control needs positive values")


# the confirmatory tiers of ``verify.rates --tier``: each runs its protocol's [design]
CONFIRM_TIERS = {
    "confirm": "confirm-v1", "confirm2": "confirm-v2", "confirm3": "confirm-v3",
    "confirm4": "confirm-v4", "confirm5": "confirm-v5",
}  # fmt: skip


def _recipe_mismatch(d: dict) -> str | None:
    """What is wrong with a design's ``recipe`` (``simulate.sweep.setup.recipes``): each setting
    of the named recipe that differs from the baseline's must be written in
    ``[design.common]`` with the recipe's value, so that the protocol's digest covers it;
    None when they agree (or no recipe is named: the settings are the common ones)."""
    if "recipe" not in d:
        return None

    own = recipe_settings(str(d["recipe"]))
    common = d.get("common", {})
    written = {k: common.get(k, RECIPE_DEFAULTS.get(k)) for k in own}  # unwritten: baseline's
    wrong = {k: (v, written[k]) for k, v in own.items() if written[k] != v}
    if not wrong:
        return None
    return (f"[design.common] disagrees with its recipe {d['recipe']!r}"
            f" (setting: (recipe's, written)): {wrong}")  # fmt: skip


def _own_settings(p: Protocol, sweep: dict) -> dict:
    """A sweep's own ``settings`` (over ``[design.common]``); its replicates, seeds and
    protocol are the sweep's and the design's, never a setting's."""
    own = dict(sweep.get("settings", {}))
    bad = sorted(set(own) & {"replicates", "seed", "protocol", "truths", "estimator"})
    if bad:
        raise ValueError(
            f"protocol {p.name}: sweep {sweep.get('name')!r}: its settings may not set {bad}"
        )
    return own


def design_tier(p: Protocol) -> dict:
    """A confirmatory protocol's ``[design]`` as a tier of ``verify.rates``: its ASVI
    sweeps (``sweeps``: each a name, its truths, its ``simulate.sweep.setup.config.SweepConfig``
    settings -- the shared ``[design.common]``, overridden by the sweep's own ``settings``
    table where it has one (an n grid or a width cap of its own), with its own
    replicates, the protocol's tag and seeds -- and its budget control's replicates),
    whether the control runs at every n, the workers, and the known-answer control's
    sweep (``gp``, or None)."""

    d = p.design
    if not d:
        raise ValueError(f"protocol {p.name} has no [design]: it is not a tier")

    def truths(rows):
        return [TruthSpec(**{**t, "seed": int(d["truth_seed"])}) for t in rows]

    seeds = {"seed": int(d["data_seed"]), "protocol": p.tag}
    bad = _recipe_mismatch(d) or next(
        (f"sweep {s['name']!r}: {why}" for s in d["sweeps"]
         if (why := _recipe_mismatch({**d, "common": {**d["common"], **_own_settings(p, s)}}))),
        None,
    )  # fmt: skip
    if bad:
        raise ValueError(f"protocol {p.name}: {bad}")
    sweeps = [
        {
            "name": s["name"],
            "truths": truths(s["truths"]),
            "sweep": {
                **d["common"],
                **_own_settings(p, s),
                "replicates": int(s["replicates"]),
                **seeds,
            },
            "control_replicates": int(s["control_replicates"]),
        }
        for s in d["sweeps"]
    ]
    gp = None
    if "gp" in d:
        g = d["gp"]
        gp = {
            "name": "gp",
            "truths": truths(g["truths"]),
            "sweep": {**g["sweep"], "estimator": "gp", **seeds},
        }
    return {
        "sweeps": sweeps,
        "control_every_n": bool(d["control_every_n"]),
        "workers": int(d["workers"]),
        "gp": gp,
    }
