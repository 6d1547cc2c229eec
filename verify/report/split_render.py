"""The risk split's table and decision as printed (``python -m verify.split``): a
``verify.split.Split`` read by its fields (its terms and levels in their order), so this
module imports nothing of the command's."""

from __future__ import annotations

from verify.stats.slopes import top_half

__all__ = ["decision", "render"]


def _fmt_ci(ci) -> str:
    return f"[{ci[0]:+.3g}, {ci[1]:+.3g}]"


def render(sp) -> str:
    """The split's table: per n the terms' means (intervals) and shares, then the levels'
    slopes, the optimum's arms and the per-width gaps at the largest n."""
    lines = [f"{sp.truth}: {sp.metric} split over {sp.replicates} replicates"]
    left = sp.left_out
    if left.get("incomplete"):
        lines.append(f"  left out, not recorded at every n: replicates {left['incomplete']}")
    if left.get("failed"):
        cells = ", ".join(f"n = {n:,} replicate {r}" for n, r in left["failed"])
        lines.append(f"  left out, a failed cell (every candidate diverged): {cells}")
    lines.append(f"{'n':>8s}  " + "  ".join(f"{t:>34s}" for t in sp.term_mean) + f"  {'ASVI':>9s}")
    for j, n in enumerate(sp.ns):
        cols = [
            f"{sp.term_mean[t][j]:9.3g} {_fmt_ci(sp.term_ci[t][j]):>19s} {sp.term_share[t][j]:4.0%}"
            for t in sp.term_mean
        ]
        total = sum(sp.term_mean[t][j] for t in sp.term_mean)
        lines.append(f"{n:8,d}  " + "  ".join(f"{c:>34s}" for c in cols) + f"  {total:9.3g}")
    lines.append("levels: log-log slope [interval]; top-half slope [interval]; bend [interval]")
    for lv in sp.level_slope:
        f = sp.level_slope[lv]
        if f is None:
            lines.append(f"  {lv:>8s}: not fitted (a value is not positive)")
            continue
        lines.append(
            f"  {lv:>8s}: {f['slope']:+.3f} {_fmt_ci(f['ci'])}; {f['top_half_slope']:+.3f}"
            f" {_fmt_ci(f['top_half_ci'])}; bend {f['bend']:+.3f} {_fmt_ci(f['bend_ci'])}"
        )
    if sp.flattening:
        top = [sp.ns[i] for i in top_half(sp.ns)]
        lines.append(
            f"which term flattens over the top half (n = {top[0]:,}..{top[-1]:,}; slope"
            " differences, Bonferroni over three):"
        )
        below = {"class": "reference", "objective": "floor", "optimiser": "optimum"}
        upper = {"class": "floor", "objective": "optimum", "optimiser": "random"}
        for term, t in sp.flattening.items():
            if t is None:
                lines.append(f"  {term:>9s}: not tested (a level is not positive)")
                continue
            lines.append(
                f"  {term:>9s}: slope({upper[term]}) - slope({below[term]}) {t['diff']:+.3f}"
                f" {_fmt_ci(t['ci'])} at {t['level']:.4f}: {t['verdict'].replace('_', ' ')}"
                f" (cv {t['cv']:.2f})"
            )
    arms = ", ".join(f"{a} {k}" for a, k in sorted(sp.optimum_arms.items()))
    lines.append(f"the optimum's arm over the cells: {arms}")
    top = [g for g in sp.width_gaps if g["n"] == sp.ns[-1]]
    lines.append(f"per width at n = {sp.ns[-1]:,}: best constructive minus R")
    for g in top:
        lines.append(
            f"  width {g['width']:4d}: ELBO {g['elbo_gap']:+10.1f} {_fmt_ci(g['elbo_ci'])},"
            f" log risk ratio {g['log_risk_ratio']:+.3f} {_fmt_ci(g['risk_ci'])},"
            f" constructive higher in {g['constructive_higher']}/{g['replicates']}"
            + (" (the replicates grown to it)" if g["replicates"] < sp.replicates else "")
        )
    return "\n".join(lines)


def decision(sp, protocol: str | None, own: bool = False, short: str | None = None) -> str:
    """The split's decision (the protocol's ``[split]`` rule on records written under it,
    ``own``, with every cell of its design recorded; ``short``: what they lack, which makes
    it a partial read, never the decision; else the same rule read exploratorily): the
    terms that flatten, or that none is located, and any term left untested."""
    what = "read (exploratory, not decided)"
    if protocol and own and short:
        what = f"read under protocol {protocol}'s rule (partial: {short}; not its decision)"
    elif protocol and own:
        what = f"protocol {protocol}'s decision"
    elif protocol:
        what = f"read under protocol {protocol}'s rule (exploratory: records not of it)"
    if not sp.flattening:
        return f"{what}: no reference in the cells, no flattening test"
    flat = [t for t, v in sp.flattening.items() if v is not None and v["verdict"] == "flattens"]
    untested = [t for t, v in sp.flattening.items() if v is None]
    tail = f" (not tested: {', '.join(untested)})" if untested else ""
    if flat:
        return f"{what}: the flattening's cause: {', '.join(flat)}{tail}"
    return f"{what}: no term is shown to flatten at this design{tail}"
