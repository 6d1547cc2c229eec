"""A readable report of what the theory says at one (n, p, alpha): ``python -m theory``."""

from __future__ import annotations

import argparse
import dataclasses
import decimal
import math
import sys
from dataclasses import dataclass
from typing import Any

import mpmath

from theory.bounds import eps_n, lemma_6_1, optimal_structure, r_n, theorem_4_1_bound, xi_bound
from theory.conditions import condition_5_3
from theory.exponents import METRICS, corollary_6_1_rate, log_factor_power, predicted_exponent
from theory.plumbing.cli import Parser, print_error
from theory.plumbing.paths import check_output_file, path_arg, write_json
from theory.priors import log_prior_N
from theory.proved import (
    DEFAULT_DESIGN,
    decreases_over,
    premises,
    proved_log_power,
    proved_slopes,
    vacuity_n,
)
from theory.qstar import q_star_log10

__all__ = ["ReportInputs", "report", "format_report", "main"]


def _f(x) -> float:
    """``x`` as the report's double; ``ValueError`` where it is beyond doubles (the theory's
    functions hold it in mpmath: ``xi`` of 1e602 at alpha = 1000)."""
    v = float(x)
    if not math.isfinite(v) and mpmath.isfinite(x):
        raise ValueError(f"{mpmath.nstr(x, 6)} is beyond the largest double")
    return v


def g(x) -> str:
    """Six significant digits."""
    return f"{float(x):.6g}"


@dataclass(frozen=True)
class ReportInputs:
    """The report's inputs beyond (n, p, alpha), with the command line's defaults:
    ``holder_norm`` (the Hoelder norm of f_0, 1), ``B`` (Lemma 4.1's parameter bound, 2),
    ``C_N`` (Lemma 6.1's constant, 1), ``lam`` (the prior on N's lambda, 10), ``delta`` (the
    log power, 1) and ``N_max`` (the (N*, s*) search's largest N; None: its default).  Each is
    checked by the formula that uses it."""

    holder_norm: Any = 1
    B: Any = 2
    C_N: Any = 1
    lam: Any = 10
    delta: Any = 1
    N_max: Any = None


def report(n, p, alpha, inputs: ReportInputs | None = None, **by_name) -> dict:
    """Every theory quantity at (n, p, alpha) as plain floats/ints (JSON-ready).

    The other inputs come as ``inputs`` (:class:`ReportInputs`) or by name,
    ``report(n, p, alpha, holder_norm=1, B=2, C_N=1, lam=10, delta=1, N_max=None)``, a name
    replacing that field of ``inputs`` (an unknown name is a ``TypeError``).
    Unknown constants (M, C, C' of Lemmas 4.1-4.2, C'' of the corollaries) are set to 1.
    """
    if inputs is None:
        inputs = ReportInputs()
    elif not isinstance(inputs, ReportInputs):
        raise TypeError(f"report() takes its inputs by name or as a ReportInputs, got {inputs!r}")
    fields = {f.name for f in dataclasses.fields(ReportInputs)}
    for name in by_name:
        if name not in fields:
            raise TypeError(f"report() got an unexpected keyword argument {name!r}")
    inputs = dataclasses.replace(inputs, **by_name) if by_name else inputs
    return _report(n, p, alpha, inputs)


def _report(n, p, alpha, inputs: ReportInputs) -> dict:
    """:func:`report` once its inputs are one :class:`ReportInputs`."""
    holder_norm, B, C_N, lam, delta = (
        inputs.holder_norm, inputs.B, inputs.C_N, inputs.lam, inputs.delta
    )  # fmt: skip
    N_max = inputs.N_max
    net = lemma_6_1(n, p, alpha, C_N)
    L, N, s = net.L, net.N, net.s
    xi = xi_bound(n, N, p, alpha, holder_norm)
    thm = theorem_4_1_bound(n, L, N, s, p, xi, B=B, delta=delta)
    theorem = {k: _f(v) for k, v in thm.items()}  # beyond doubles: refused before the search
    opt = optimal_structure(n, p, alpha, holder_norm, L=L, B=B, N_max=N_max)
    return {
        "inputs": {
            "n": n,
            "p": p,
            "alpha": alpha,
            "holder_norm": holder_norm,
            "B": B,
            "C_N": C_N,
            "lam": lam,
            "delta": delta,
            "constants M, C, C'": 1,
        },
        "lemma_6_1": {
            "L": L,
            "N": N,
            "width": net.width,
            "s": s,
            "s_bound": _f(net.s_bound),
            "H": net.H,
            "N_raw": net.N_raw,
            "N_clamped": net.N_clamped,
            "s_clamped": net.s_clamped,
        },
        "terms": {
            "r_n": _f(r_n(n, L, N, s, p, B)),
            "eps_n^2": _f(eps_n(n, L, N, s, p, delta=delta) ** 2),
            "xi_bound": _f(xi),
        },
        "theorem_4_1": theorem,
        "optimal": {
            "N": opt["N"],
            "s": opt["s"],
            "width": opt["width"],
            "r_n": _f(opt["r_n"]),
            "xi": _f(opt["xi"]),
            "objective": _f(opt["objective"]),
            "search_cap": opt["N_max"],
            "condition_5_3": condition_5_3(L, opt["N"], opt["s"], p),
        },
        "q_star_log10": {
            slab: _f(q_star_log10(n, L, N, s, p, max(B, 1), slab))
            for slab in ("gaussian", "uniform")
        },
        "log_prior_N": _f(log_prior_N(N, lam)),
        "corollary_6_1_rate": _f(corollary_6_1_rate(n, alpha, p, delta)),
        "predicted_exponent": {m: _f(predicted_exponent(alpha, p, m)) for m in METRICS},
        "log_factor_power": {m: log_factor_power(m, delta) for m in METRICS},
        "proved": _proved(n, p, alpha, holder_norm, delta),
    }


# the largest n vacuity_n scans for the report
VACUITY_SCAN = 10**40


def _proved(n, p, alpha, holder_norm, delta) -> dict:
    """The proved bounds' section of the report (``theory.proved``), at unit constants, B =
    2 and C_N = 1 whatever the report's B and C_N (the proved bound's defaults): Theorem
    4.1's vacuity n (None: above 1 up to :data:`VACUITY_SCAN`), both theorems' band log
    power and log-log slope over :data:`theory.proved.DEFAULT_DESIGN` (None where the bound
    is undefined at one of its n, with the reason), Lemma 4.2's ratio at n."""
    out = {
        "constants": "C, C', C'', M, C_N = 1; B = 2",
        "vacuity_n": vacuity_n(alpha, p, holder_norm, delta, n_max=VACUITY_SCAN),
        "vacuity_scan": VACUITY_SCAN,
        "design": list(DEFAULT_DESIGN),
        "sharp_log_power": log_factor_power("d2", delta),
    }
    for which in ("theorem-4.1", "theorem-5.1"):
        key = which.replace("-", "_").replace(".", "_")
        try:
            dec = decreases_over(DEFAULT_DESIGN, alpha, p, holder_norm, delta, which)
            c = proved_log_power(DEFAULT_DESIGN, alpha, p, holder_norm, delta, which)
            out[key] = {"log_power": c, "slope": dec.slope, "decreases": dec.decreases}
        except ValueError as exc:
            out[key] = {"log_power": None, "slope": None, "decreases": None, "why": str(exc)}
    ps = proved_slopes(DEFAULT_DESIGN, alpha, p, holder_norm, delta)
    out["theorem_4_1_constants"] = {"slope_low": ps.low, "slope_high": ps.high,
                                    "read": ps.read, "undefined": ps.undefined}  # fmt: skip
    out["lemma_4_2_ratio"] = premises(n, alpha, p).ratio
    return out


def _format_proved(pr: dict, n) -> list:
    """The report's lines of :func:`_proved`'s section."""
    v = pr["vacuity_n"]
    design = f"n = {pr['design'][0]}..{pr['design'][-1]}"
    lines = ["", "Proved bounds (unit constants, B = 2, C_N = 1; theory.proved):"]
    if v is None:
        lines.append(
            "  the proved bound (Theorem 4.1 at Lemma 6.1, unit constants) is above 1 -- says"
            f" nothing -- at every n up to {pr['vacuity_scan']:.3g} scanned"
        )
    else:
        lines.append(
            "  the proved bound (Theorem 4.1 at Lemma 6.1, unit constants) is above 1 -- says"
            f" nothing -- for n < {v:.4g}"
        )
    for key, name in (
        ("theorem_4_1", "Theorem 4.1 at Lemma 6.1"),
        ("theorem_5_1", "Theorem 5.1 at (N*, s*)"),
    ):
        t = pr[key]
        if t["log_power"] is None:
            lines.append(f"  {name}: undefined over {design} ({t['why']})")
            continue
        trend = "falls" if t["decreases"] else "RISES"
        lines.append(
            f"  {name}: band log power c = {g(t['log_power'])} over {design}"
            f" (sharp reading {g(pr['sharp_log_power'])})"
        )
        lines.append(f"    log-log slope {g(t['slope'])}: the bound {trend} over the design")
    k = pr.get("theorem_4_1_constants")  # a report written before it has none
    if k is not None and k["slope_low"] is not None:
        lines.append(
            f"  Theorem 4.1 over C'/C in 1e-3..1e3 and C_N in 1/2..8 ({k['read']} choices):"
            f" log-log slope {g(k['slope_low'])} .. {g(k['slope_high'])} over {design}"
            + (": for some constants it does not fall" if k["slope_high"] >= 0 else "")
        )
    lines.append(
        f"  Lemma 4.2's max{{s log(nL/s), L s log(pN)}} / n at n = {n:.6g}:"
        f" {g(pr['lemma_4_2_ratio'])} (o(1) asked)"
    )
    return lines


def format_report(r: dict) -> str:
    i, net, t, thm, opt = r["inputs"], r["lemma_6_1"], r["terms"], r["theorem_4_1"], r["optimal"]
    lines = [
        f"asvi-rates theory report: n = {i['n']}, p = {i['p']}, alpha = {i['alpha']}, "
        f"Hoelder norm = {i['holder_norm']}, B = {i['B']}, delta = {i['delta']}",
        "(unknown constants M, C, C', C'' set to 1: bounds show shape, not level)",
        "",
        "Lemma 6.1 network (L hidden layers of width 12pN):",
        f"  L = {net['L']}   N = {net['N']}   width 12pN = {net['width']}   edges H = {net['H']}",
        f"  s = {net['s']}   (printed bound {g(net['s_bound'])}"
        + (", capped at H" if net["s_clamped"] else "")
        + ")"
        + (f"   N clamped to 1 (printed value {net['N_raw']})" if net["N_clamped"] else ""),
        "",
        "Error terms at the Lemma 6.1 network:",
        f"  variational   r_n      = {g(t['r_n'])}",
        f"  estimation    eps_n^2  = {g(t['eps_n^2'])}",
        f"  approximation xi bound = {g(t['xi_bound'])}",
        f"Theorem 4.1 bound on E_q d^2: {g(thm['estimation'])} + {g(thm['variational'])} + "
        f"{g(thm['approximation'])} = {g(thm['total'])}"
        + ("   (vacuous: d^2 <= 1 always)" if thm["total"] >= 1 else ""),
        "",
        "(N*, s*) = argmin r_n + xi bound (Section 5):",
        f"  N* = {opt['N']}   width = {opt['width']}   s* = {opt['s']}   "
        f"r_n = {g(opt['r_n'])}   xi = {g(opt['xi'])}   sum = {g(opt['objective'])}",
        f"  Condition 5.3 (s* >= 12pN* + L): {opt['condition_5_3']}",
        *(
            [f"  N* is the search's cap N = {opt['search_cap']}: the minimiser lies beyond it"]
            if opt["N"] == opt["search_cap"]
            else []
        ),
        "",
        "q* constants of the proof of Lemma 4.1 (log10):",
        f"  Gaussian slab sigma_n^2: {g(r['q_star_log10']['gaussian'])}   "
        f"uniform slab a_n: {g(r['q_star_log10']['uniform'])}",
        f"log pi(N = {net['N']}) with lambda = {i['lam']}: {g(r['log_prior_N'])}",
        "",
        f"Corollary 6.1 rate [n^(-a/(2a+p)) log^delta n]^2 = {g(r['corollary_6_1_rate'])}",
        "Predicted exponents of n (log factors excluded; log n power in brackets):",
    ]
    for m, e in r["predicted_exponent"].items():
        lines.append(f"  {m:5s} {g(e):>10s}   [log^{g(r['log_factor_power'][m])} n]")
    if "proved" in r:  # a report written before issue 75 has none
        lines += _format_proved(r["proved"], i["n"])
    return "\n".join(lines)


def sample_size(text: str):
    """``--n``: the decimal ``text`` read exactly -- an int where it writes an integer
    (``10000``, ``1e4`` and ``1e300`` are the integers they write, so L's ``floor(log2 n)``
    and Lemma 6.1's integers are exact: ``theory.bounds.lemma_6_1``), else a float.  Any
    finite number up to the largest double (1.8e308, :data:`N_LIMIT`) is taken, its range
    (> 1) checked by the theory's functions; beyond, ``argparse.ArgumentTypeError``: the
    report's numbers are doubles (the functions themselves take larger n).  (An integer
    below 2^53 is the one a float gave, so every report there is as it was.)"""
    try:
        d = decimal.Decimal(text.strip())
    except decimal.InvalidOperation:
        raise argparse.ArgumentTypeError(f"n must be a number, got {text!r}") from None
    if not d.is_finite():
        raise argparse.ArgumentTypeError(f"n must be a finite number > 1, got {text}")
    if d > N_LIMIT:
        raise argparse.ArgumentTypeError(
            f"n = {text} is beyond the report's doubles (at most {float(N_LIMIT):.6g});"
            " the theory's functions take it: e.g. theory.lemma_6_1(10**400, p, alpha)"
        )
    return int(d) if d == d.to_integral_value() else float(d)


# the largest n the report takes: its numbers are doubles
N_LIMIT = decimal.Decimal(sys.float_info.max)


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(prog="python -m theory", description=__doc__)
    ap.add_argument(
        "--n",
        type=sample_size,
        default=10000,
        help="sample size: any number > 1 up to 1.8e308, the largest double (the report's"
        " numbers are doubles; the theory's functions take larger n as ints or mpmath"
        " numbers); an integer, 1e300 too, is read exactly",
    )
    ap.add_argument("--p", type=int, default=1, help="input dimension (positive integer)")
    ap.add_argument("--alpha", type=float, default=1.0, help="Hoelder smoothness (> 0)")
    ap.add_argument("--holder-norm", type=float, default=1.0, help="Hoelder norm of f_0")
    ap.add_argument("--B", type=float, default=2.0, help="parameter bound B of Lemma 4.1")
    ap.add_argument("--C-N", type=float, default=1.0, help="constant C_N of Lemma 6.1")
    ap.add_argument("--lam", type=float, default=10.0, help="lambda of the prior on N")
    ap.add_argument("--delta", type=float, default=1.0, help="log power delta (>= 1)")
    ap.add_argument("--json", type=path_arg, metavar="PATH", help="also write the report as JSON")
    return ap


_INPUT_NAMES = ("n", "p", "alpha", "holder_norm", "B", "C_N", "lam", "delta")


def _report_or_range_error(n, args) -> dict:
    """:func:`report`, or -- the inputs being valid -- a ``ValueError`` saying which inputs
    carried a quantity of the theory out of double precision (``alpha = 1000`` makes Lemma
    6.1's approximation bound xi about 1e602) instead of naming the internal quantity
    alone."""
    try:
        inputs = ReportInputs(args.holder_norm, args.B, args.C_N, args.lam, args.delta)
        return report(n, args.p, args.alpha, inputs)
    except ValueError as exc:
        msg = str(exc)
        if msg.split(" ", 1)[0] in _INPUT_NAMES:  # an input out of its range: said as is
            raise
        detail = msg if len(msg) <= 120 else msg[:117] + "..."
        raise ValueError(
            f"at n = {n:g}, p = {args.p}, alpha = {args.alpha:g} the theory's quantities leave"
            f" double precision ({detail}); the report evaluates them as floats: use a smaller"
            " alpha or p"
        ) from None


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if not args.n > 1:
            raise ValueError(f"n must be a finite number > 1, got {args.n}")
        for name, v in (("alpha", args.alpha), ("holder-norm", args.holder_norm)):
            if not (math.isfinite(v) and v > 0):
                raise ValueError(f"--{name} must be a finite number > 0, got {v}")
        n = args.n  # exact: sample_size
        if args.json:
            check_output_file(args.json, "--json")
        r = _report_or_range_error(n, args)
    except ValueError as exc:
        print_error(exc)
        return 2
    print(format_report(r))
    if args.json:
        write_json(args.json, r)
    return 0
