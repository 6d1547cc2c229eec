"""``python -m verify.rates``: the toolkit's main job.

The growing-n sweep and slope verification are not built yet (they need the ASVI core of
``simulate``).  Until then this entry point prints the theory's predictions for the default
quick-tier truths, so that the command works and says plainly what it does and does not do.
"""

from __future__ import annotations

import argparse
import sys

from theory.exponents import METRICS, predicted_exponent
from theory.report import format_report, report

QUICK_TRUTHS = [(0.5, 1), (1.0, 1), (1.0, 2)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m verify.rates", description=__doc__)
    ap.add_argument("--tier", choices=["quick"], default="quick")
    ap.add_argument("--n", type=float, default=10000, help="n for the theory report")
    ap.parse_args(argv)
    print("verify.rates: measurement not implemented yet; no slope has been measured.")
    print("Predicted exponents of n (theory, log factors excluded):")
    print(f"  {'alpha':>6s} {'p':>3s} " + " ".join(f"{m:>8s}" for m in METRICS))
    for alpha, p in QUICK_TRUTHS:
        row = " ".join(f"{float(predicted_exponent(alpha, p, m)):8.4f}" for m in METRICS)
        print(f"  {alpha:6.2f} {p:3d} {row}")
    print()
    print(format_report(report(10000, 1, 0.5)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
