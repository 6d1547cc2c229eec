"""Each entry's finding, the report's sentence (:func:`finding`), and the wording of a
verdict's replication (:func:`verdict_text`, :func:`replication_text`); they read
:class:`verify.results.MetricResult`."""

from __future__ import annotations

import math
import textwrap
from typing import TYPE_CHECKING

from verify.stats.verdict import Verdict

if TYPE_CHECKING:  # the results module imports nothing from here; typing only
    from verify.results import MetricResult

__all__ = [
    "SCREEN_WIDTH",
    "on_screen",
    "equivalence_words",
    "finding",
    "readings_lines",
    "verdict_text",
    "replication_text",
]


# the first screen's width (characters): the decision block and the lines said before
# training fit it -- a terminal's default 80 columns, so the answer reads unwrapped
SCREEN_WIDTH = 80


def on_screen(text: str) -> str:
    """``text`` wrapped to :data:`SCREEN_WIDTH` (a line said while a run trains)."""
    lead = text[: len(text) - len(text.lstrip())]
    return "\n".join(textwrap.wrap(text, SCREEN_WIDTH, initial_indent="",
                                    subsequent_indent=lead + "  ")) or text  # fmt: skip


def _range(ns) -> str:
    return f"n = {int(ns[0])}..{int(ns[-1])}"


def finding(r: MetricResult) -> str:
    """The report's sentence for one result of ``verify.reading.analysis``: the attainment
    verdict first, then the theorem test (worded as what it measured: "slower than n^e
    log^c n over n = a..b", "consistent with ..."), the curve's shape, the budget
    control's state and the family-wise adjustment."""
    dec = r.decision
    if dec.refused:
        return f"not decided (verdicts set UNDECIDABLE): {dec.refused}"
    parts = [_attainment_words(r), _theorem_words(r)] + _beside_words(r)
    return "; ".join(parts)


def _attainment_words(r: MetricResult) -> str:
    """:func:`finding`'s attainment part (with its fragility, where fragile)."""
    parts = []
    dec, a, ns = r.decision, r.attainment, r.curve.ns
    if a is None:
        why = dec.attainment_refused or "no reference"
        parts.append(f"attainment not tested ({why})")
    else:
        c, allowed = a.log_power.c_hat, a.allowance_log_power
        if a.verdict == Verdict.PASS:
            parts.append(
                f"attains the reference's rate up to log^{c:.2f} n within the log^{allowed:g} n"
                " allowance"
            )
        elif a.verdict == Verdict.FAIL:
            parts.append(
                f"slower than the class-matched reference beyond the log^{allowed:g} n"
                f" allowance over {_range(ns)} (log^{c:.2f} n)"
            )
        elif a.verdict == Verdict.UNDECIDABLE and a.power.gap <= 0:
            parts.append(
                f"attainment undecidable (log^{c:.2f} n): the log^{allowed:g} n allowance is as"
                " large as half the reference's exponent, so a pass could not tell attainment"
                " from half the rate"
            )
        elif a.verdict == Verdict.UNDECIDABLE:
            parts.append(
                f"attainment undecidable with this design (log^{c:.2f} n; no power against"
                " half the reference's rate)"
            )
        else:
            parts.append(f"attainment inconclusive (log^{c:.2f} n)")
    if a is not None and _fragile(a.replication):
        parts[-1] += f" ({_fragile_words(a.replication)})"
    return parts[-1]


def _theorem_words(r: MetricResult) -> str:
    """:func:`finding`'s theorem-test part (with its fragility, where fragile)."""
    parts = []
    ns = r.curve.ns
    t = r.theorem
    rate = f"n^{t.predicted:.3f} log^{t.band_log_power:.2f} n"
    if t.readings is not None and t.readings.claim.startswith("Corollary 6.1"):
        rate += " (the sharp reading, delta -> 1)"  # verify.stats.readings
    slow = "rejects e/2" if t.control_slow_rejected else "e/2 not rejected"
    if t.verdict == Verdict.FAIL:
        parts.append(
            f"slower than {rate} over {_range(ns)} (a FAIL for every band log power"
            f" below {t.c_flip:.2f})"
        )
    elif t.verdict == Verdict.UNDECIDABLE and t.power.pilot_cv is None:  # no pilot
        parts.append(
            "theorem test undecidable with this design at any spread (its gap"
            f" {t.power.gap:.3f} is not positive: the band has no margin to PASS an estimator"
            " at the exponent, or the log allowance eats the gap to e/2)"
        )
    elif t.verdict == Verdict.UNDECIDABLE and t.rule == "confirm":
        parts.append(
            "theorem test undecidable with this design (the probability of a PASS at the"
            f" exponent is {t.power.probability:.2f}, below the floor {t.power.floor:g})"
        )
    elif t.verdict == Verdict.UNDECIDABLE:
        parts.append("theorem test undecidable with this design (no power against e/2)")
    elif t.verdict == Verdict.PASS and t.direction == "faster":
        parts.append(
            f"consistent with {rate} over {_range(ns)}, faster than the exponent"
            " (easier than its class at these n, or pre-asymptotic)"
            + (f"; {slow}" if t.rule == "confirm" else "")
        )
    elif t.verdict == Verdict.PASS and t.rule == "confirm":
        parts.append(
            f"consistent with {rate} over {_range(ns)} (the interval below the band's top; {slow})"
        )
    elif t.verdict == Verdict.PASS:
        parts.append(f"consistent with {rate} over {_range(ns)} (rejects e/2)")
    else:
        parts.append("theorem test inconclusive")
    if _fragile(t.replication):
        parts[-1] += f" ({_fragile_words(t.replication)})"
    return parts[-1]


_PROVED_WORDS = {
    Verdict.FAIL: "slower than it whatever the constants",
    Verdict.PASS: "within it whatever the constants",
    Verdict.UNDECIDABLE: "for some constants it does not fall over these n: no constraint here",
    Verdict.INCONCLUSIVE: "the constants decide",
}


def _left_out(k: int | None) -> str:
    return f", {k} undefined choices of the grid left out" if k else ""


def readings_lines(r: MetricResult) -> list[str]:
    """The theorem test's readings (``verify.stats.readings``) and the log-factor-or-power test
    (``verify.stats.logfactor``) in words, one line each; none where the entry has neither."""
    out = []
    g = r.theorem.readings
    if g is not None:
        sharp = (
            f"sharp reading (log^{g.sharp_log_power:.2f} n; {g.claim}): {g.sharp_verdict}, a"
            f" FAIL for every delta < {g.delta_flip:.2f}, a PASS from delta >="
            f" {g.delta_pass:.2f}"
        )
        if g.proved_log_power is None:
            proved = (
                f"proved bound ({g.proved_source}): not available (undefined at some n of this"
                " design at unit constants, or no Hoelder norm in the records)"
            )
        else:
            lo, hi = g.proved_range
            vac = g.vacuity_n
            says = ("above 1 up to n = 1e40" if vac is None
                    else f"above 1 (no constraint) for n < {vac:.3g}")  # fmt: skip
            proved = (
                f"proved bound ({g.proved_source}; log^{g.proved_log_power:.2f} n at unit"
                f" constants, log^{lo:.2f}..log^{hi:.2f} n over the constants the theorem"
                f" leaves open{_left_out(g.proved_left_out)}): {g.proved_verdict}"
                f" ({_PROVED_WORDS[g.proved_verdict]}); at"
                f" unit constants {says}, slope {g.proved_slope:+.3f} over the design"
            )
        out.append(sharp + "; " + proved + (f"; {g.premises}" if g.premises else ""))
    if r.log_or_power is not None:
        out.append(f"log factor or power: {r.log_or_power.message}")
    return out


def _beside_words(r: MetricResult) -> list[str]:
    """:func:`finding`'s parts beside the two tests: the class band's verdict, a FAIL not
    surviving the family-wise adjustment, a bend and the budget control's state."""
    dec = r.decision
    parts = []
    ct = r.class_theorem
    if ct is not None:
        known = dec.expected_theorem
        parts.append(
            f"held to the class band n^{ct.predicted:.3f} log^{ct.band_log_power:.2f} n:"
            f" {verdict_text(ct.verdict, ct.replication)}"
            f" (known: {known or 'none at this design'})"
        )
    if dec.fail_familywise is False:
        parts.append("a FAIL at its own level that does not survive the family-wise adjustment")
    if r.curve.bending:
        parts.append(f"bending (top-half slope {r.curve.top_half_slope:.3f}; stated, not deciding)")
    state = None if r.control is None else r.control.state
    if state == "limited":
        parts.append(
            "optimisation-limited (twice the budget moves the slope beyond the margin: the"
            " verdicts are set INCONCLUSIVE)"
        )
    elif state == "undetermined":
        parts.append("budget control undetermined (the slope change's interval crosses the margin)")
    elif state == "converged":
        parts.append("converged by the budget control")
    return parts


def _fragile(rep) -> bool:
    return rep is not None and rep.fragile


def _fragile_words(rep) -> str:
    return (
        f"fragile: {100 * rep.share:.0f}% of {rep.resamples} resamples of replicates give it,"
        f" below the floor {100 * rep.floor:.0f}%; {rep.loo_flips} of {rep.loo_sets}"
        f" leave-one-out sets flip it; margin {rep.margin_se:.2f} SE"
    )


def verdict_text(verdict, rep) -> str:
    """A verdict with ``(fragile)`` beside it where its replication is below the floor."""
    return f"{verdict}{' (fragile)' if _fragile(rep) else ''}"


def replication_text(rep) -> str:
    """``share%, flips/sets LOO, margin SE`` of a verdict's replication; ``-`` without."""
    if rep is None:
        return "-"
    margin = f"{rep.margin_se:+.2f} SE" if math.isfinite(rep.margin_se) else "no margin"
    return f"{100 * rep.share:.0f}%, {rep.loo_flips}/{rep.loo_sets} LOO, {margin}"


def equivalence_words(eq) -> str:
    """The equivalence reading in a phrase (``verify.stats.equivalence``): its verdict, the
    bounds and the interval it read."""
    lo, hi = eq.bounds
    return (
        f"equivalence (slope within {lo:+.3f}..{hi:+.3f}, +-{eq.relative:g}|e|; beside, not"
        f" deciding) {eq.verdict}: interval [{eq.ci[0]:+.3f}, {eq.ci[1]:+.3f}]"
    )
