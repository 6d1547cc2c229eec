"""A stated rate in place of the paper's band (``python -m verify.rates --rate EXPR``).

``EXPR`` (an expression of the rate of d^2 in n, p and alpha; ``theory.rate_expression``) replaces
the paper's band -- Corollaries 6.1/6.2's ``n^e log^(2 delta) n`` for a Hoelder truth,
Corollary 6.4's expression for the teacher -- wherever the verdicts use it: the theorem test
of ASVI's entries and of its arms, its prospective power, the replication, and the class
band a known-answer control is held to under the confirming rule.  Per truth its exponent
and log power over that truth's n are ``theory.rate_expression.stated_band``'s (the teacher's
band's rule: the least-squares log-log slope over the design, ``slope = e + c ell``); d has
half of both.  A Gaussian-process control keeps its own proven rate, and the attainment test
(against the class-matched reference, at the class's rate) is unchanged.

**The protocol** (:func:`with_rate`): like ``--delta``, ``--rate`` makes an exploratory copy
of the run's protocol named ``NAME+rate=EXPR`` (EXPR without its spaces), and is refused under
a confirmatory protocol, whose band was fixed before its run.  Unlike ``--delta``'s copy, the
copy's digest is recomputed: its text is the file's with a ``[stated_rate]`` table appended
(``expr = "EXPR"``) and its digest that text's SHA-256, so the tag every JSON entry carries
names the rate and the digest covers it.

**The report**: :func:`opening_lines` (after the protocol's line: EXPR and each truth's
derived exponent and log power, d^2) and :func:`document_entry` (the JSON report's
``stated_rate`` object: the same, per truth); neither is written without ``--rate``.
"""

from __future__ import annotations

import dataclasses
import hashlib

from simulate.sweep.setup.truth_spec import TruthSpec
from theory.rate_expression import parse_rate, stated_band
from verify import protocol as protocols
from verify.reading.known_answer import is_control

__all__ = ["band", "check_plan", "document_entry", "opening_lines", "with_rate"]


def with_rate(proto, text: str):
    """The exploratory copy of ``proto`` (a ``verify.protocol.Protocol``) that holds the
    stated rate ``text`` (module docstring); ValueError (one line) for a confirmatory
    protocol or an expression ``theory.rate_expression.parse_rate`` refuses."""
    if proto.kind == "confirmatory":
        raise ValueError(
            f"protocol {proto.name} is confirmatory: its band is fixed; give --protocol"
            f" {protocols.DEFAULT} to decide under a stated --rate"
        )
    parse_rate(text)  # refused here, before anything is read
    expr = "".join(text.split())
    body = f'{proto.text.rstrip()}\n\n[stated_rate]\nexpr = "{expr}"\n'
    return dataclasses.replace(
        proto,
        name=f"{proto.name}+rate={expr}",
        digest=hashlib.sha256(body.encode()).hexdigest()[:12],
        text=body,
        stated_rate=expr,
    )


def band(proto, spec: TruthSpec, ns, metric: str) -> tuple[float, float] | None:
    """``(exponent, log power)`` of the stated rate for ``spec`` over ``ns`` in ``metric``'s
    scale, or None when ``proto`` states none (the paper's band holds)."""
    if proto.stated_rate is None:
        return None
    return stated_band(proto.stated_rate, ns, spec.p, spec.alpha).of(metric)


def check_plan(proto, plan) -> None:
    """Derive the stated band of every truth of a training ``plan`` (``verify.cli.plan.Plan``)
    before anything is trained: ValueError naming the truth where it is refused."""
    if proto.stated_rate is None:
        return
    cfgs = [r.sweep.config for r in plan.runs] + ([plan.gp.config] if plan.gp is not None else [])
    for cfg in cfgs:
        for t in cfg.truths:
            try:
                band(proto, t, list(cfg.ns), "d2")
            except ValueError as exc:
                raise ValueError(f"{t.key}: {exc}") from None


def _rows(results) -> list[tuple[str, int, float | None, tuple[int, ...], float, float]]:
    """Per truth ``(truth, p, alpha, ns, exponent, log power)`` as the verdicts used them:
    its first d^2 entry held to the band -- ASVI's (or an arm's) theorem test, or a
    known-answer control's test against the class band (a control's own is its prior's)."""
    seen, out = set(), []
    for r in results:
        control = is_control(r.estimator)
        t = r.class_theorem if control else r.theorem
        if r.metric != "d2" or r.truth in seen or t is None:
            continue
        seen.add(r.truth)
        out.append((r.truth, r.p, r.alpha, r.curve.ns, t.predicted, t.band_log_power))
    return out


def opening_lines(proto, results) -> list[str]:
    """The report's lines on the stated rate, after its protocol line (none without one)."""
    if proto.stated_rate is None:
        return []
    lines = [
        f"stated rate (--rate): {proto.stated_rate} replaces the paper's band (d^2 and squared"
        " L2; d half); exponent e = lim log f / log n, log power c from the least-squares"
        " slope over each truth's n, slope = e + c ell:"
    ]
    for truth, _, _, ns, e, c in _rows(results):
        lines.append(f"  {truth} (n = {ns[0]}..{ns[-1]}): n^{e:.4g} log^{c:.4g} n (e = {e!r},"
                     f" c = {c!r})")  # fmt: skip
    return lines


def document_entry(proto, results) -> dict | None:
    """The JSON report's ``stated_rate`` object: the expression, the protocol tag it is
    decided under, and per truth its n, exponent and log power (d^2); None without one."""
    if proto.stated_rate is None:
        return None
    return {
        "expr": proto.stated_rate,
        "protocol": proto.tag,
        "truths": [
            {"truth": t, "p": p, "alpha": a, "ns": list(ns), "exponent": e, "log_power": c}
            for t, p, a, ns, e, c in _rows(results)
        ],
    }
