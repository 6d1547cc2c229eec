"""The numbers written by hand around the generated blocks agree with the blocks (which
``tests/figures/test_results_md.py`` holds equal to their records).

Covered, in RESULTS.md and docs/results/confirm-v4.md, outside the generated blocks:

* every list of local slopes ("local slopes a, b, c", "the spline's a, b, c" or a table cell
  "| a, b, c |", with two or more numbers): a run of consecutive local slopes of one ASVI or
  reference curve of confirm-v4's blocks, each to the decimals shown (the blocks' curves are
  the arithmetic means over replicates, the means every slope is fitted on);
* every ratio "R.Rx at [n =] N": ASVI's mean d^2 over the reference's at n = N in one of
  confirm-v4's blocks, as the block prints it (one decimal).

Not covered: other numbers of the prose (slopes with intervals, shares, costs, means at one
n), which are copied from the blocks' tables by hand.  Tolerance for a local slope: half a
unit of the last decimal shown plus the block's own rounding to three decimals.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from figures.results_md import BLOCK

ROOT = Path(__file__).resolve().parents[2]
PAGES = ("RESULTS.md", "docs/results/confirm-v4.md")
SOURCE = "docs/results/confirm-v4.md"

NUM = r"[-+]?\d+\.\d+"
LISTS = re.compile(
    rf"(?:(?i:local slopes)|the spline's|\|)\s+((?:{NUM},\s+)+{NUM})(?=\s*[|;,)\s]|$)"
)
RATIO = re.compile(r"(\d+\.\d)x at (?:n = )?(\d[\d,]*)")
CURVE = re.compile(r"d2, mean over replicates \(arithmetic\) per n: (.*)")


def _curves():
    """From the source page's blocks: the local-slope lists (ASVI's and the reference's) and
    the ratios per n of every ASVI curve line."""
    slopes, ratios = [], set()
    for m in BLOCK.finditer((ROOT / SOURCE).read_text()):
        for line in m.group("body").splitlines():
            c = CURVE.search(line)
            if not c or not line.startswith("- asvi,"):
                continue
            per_n, _, rest = c.group(1).partition("; local slopes ")
            own, _, ref = rest.partition("; the reference's ")
            slopes.append([float(x) for x in own.split(", ")])
            if ref:
                slopes.append([float(x) for x in ref.split(", ")])
            for n, r in re.findall(r"(\d+): \S+ \((\d+\.\d)x the reference's\)", per_n):
                ratios.add((int(n), float(r)))
    return slopes, ratios


def _prose(text: str) -> str:
    """The text outside the generated blocks, lines joined (a list may wrap)."""
    return " ".join(BLOCK.sub(" ", text).split())


def _decimals(s: str) -> int:
    return len(s.split(".")[1])


def _run_matches(shown: list[str], curve: list[float]) -> bool:
    k = len(shown)
    for i in range(len(curve) - k + 1):
        if all(
            abs(float(x) - curve[i + j]) <= 0.5 * 10 ** -_decimals(x) + 0.0005 + 1e-9
            for j, x in enumerate(shown)
        ):
            return True
    return False


@pytest.mark.parametrize("page", PAGES)
def test_every_local_slope_list_in_the_prose_is_a_blocks_curve(page):
    slopes, _ = _curves()
    assert len(slopes) >= 6  # confirm-v4's Hoelder and teacher curves, and the references
    text = _prose((ROOT / page).read_text())
    found = [re.split(r",\s+", m.group(1)) for m in LISTS.finditer(text)]
    if page == SOURCE:  # the pattern still matches what the page writes
        assert len(found) >= 14, f"{page}: {len(found)} local-slope lists found"
    bad = [", ".join(f) for f in found if not any(_run_matches(f, c) for c in slopes)]
    assert not bad, f"{page}: local slopes not in confirm-v4's blocks: {bad}"


@pytest.mark.parametrize("page", PAGES)
def test_every_ratio_at_a_named_n_in_the_prose_is_a_blocks_ratio(page):
    _, ratios = _curves()
    text = _prose((ROOT / page).read_text())
    found = [(float(r), int(n.replace(",", ""))) for r, n in RATIO.findall(text)]
    if page == SOURCE:
        assert len(found) >= 6
    bad = [
        (r, n) for r, n in found
        if not any(m == n and abs(r - q) <= 1e-9 for m, q in ratios)
    ]  # fmt: skip
    assert not bad, f"{page}: ratios (ratio, n) not in confirm-v4's blocks: {bad}"


def test_the_checker_refuses_a_geometric_mean_number():
    """Negative control: the local slopes and ratio the page used to print, from the means of
    log d^2 (alpha = 1.5: -0.77, -0.58, -0.68, -0.63, -0.41; 9.4x at 512,000), are refused."""
    slopes, ratios = _curves()
    old = ["-0.77", "-0.58", "-0.68", "-0.63", "-0.41"]
    assert not any(_run_matches(old, c) for c in slopes)
    assert (512000, 9.4) not in ratios
