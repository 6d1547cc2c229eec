"""The report's key to its columns (``verify.report.render.LEGEND``) against the rules it
describes (issue 77, item 1): a sentence that states what a verdict becomes is checked
against the function that decides it, case by case."""

from __future__ import annotations

import numpy as np

from verify.report.render import LEGEND, format_results
from verify.stats.attainment import attainment_verdicts
from verify.stats.theorem import theorem_verdicts

KEY = dict(LEGEND)


def _one(verdicts) -> str:
    return str(np.asarray(verdicts).item())


def test_a_pow_says_what_the_attainment_rule_does():
    """a-pow "no" (not powered): a PASS stands (the legend used to say it was made
    UNDECIDABLE), a FAIL stands, a non-rejection is UNDECIDABLE (INCONCLUSIVE with power);
    where the allowance eats the half-rate gap an interval within it is UNDECIDABLE."""
    text = KEY["a-pow"]
    allowance = 0.1
    within, across, above = (-0.2, 0.05), (0.0, 0.3), (0.2, 0.4)
    for powered in (False, True):
        assert _one(attainment_verdicts(*within, allowance, powered, gap=0.2)) == "PASS"
        assert _one(attainment_verdicts(*above, allowance, powered, gap=0.2)) == "FAIL"
    assert "a PASS or a FAIL stands either way" in text
    assert _one(attainment_verdicts(*across, allowance, False, gap=0.2)) == "UNDECIDABLE"
    assert _one(attainment_verdicts(*across, allowance, True, gap=0.2)) == "INCONCLUSIVE"
    assert "a non-rejection (the interval across the allowance) is UNDECIDABLE, not" in text
    assert _one(attainment_verdicts(*within, allowance, True, gap=-0.01)) == "UNDECIDABLE"
    assert "within it, the verdict is UNDECIDABLE" in text


def test_power_says_what_the_theorem_rule_does():
    text = KEY["power"]
    top = -0.4
    cases = {"pass": (-0.7, -0.45), "across": (-0.5, -0.3), "fail": (-0.3, -0.1)}
    for powered in (False, True):
        assert _one(theorem_verdicts(*cases["pass"], -0.5, top, powered, "confirm")) == "PASS"
        assert _one(theorem_verdicts(*cases["fail"], -0.5, top, powered, "confirm")) == "FAIL"
    assert _one(theorem_verdicts(*cases["across"], -0.5, top, False, "confirm")) == "UNDECIDABLE"
    assert _one(theorem_verdicts(*cases["across"], -0.5, top, True, "confirm")) == "INCONCLUSIVE"
    assert "without power a non-rejection is UNDECIDABLE, with it INCONCLUSIVE" in text
    assert "a rejection stands either way" in text


def test_the_key_is_behind_explain_and_fits_the_screen():
    assert "columns:" in format_results([], explain=True)
    lines = format_results([], explain=True).splitlines()
    assert all(len(line) <= 100 for line in lines)
    assert sum(line.startswith("  a-pow = ") for line in lines) == 1
    short = format_results([], explain=False)
    assert "a-pow" not in short and "--explain" in short


def test_another_estimators_table_names_its_difference_in_its_own_words():
    """The attainment table's difference column is ``ASVI-ref`` for ASVI only; a control's
    or a named regressor's reads ``est-ref``."""
    import gzip
    import json
    from pathlib import Path

    from verify.reading.analysis import analyse
    from verify.report.tables import _attain_table_lines

    ref = Path(__file__).resolve().parents[2] / "figures" / "reference"
    with gzip.open(ref / "records-confirm4-gp.jsonl.gz", "rt", encoding="utf-8") as fh:
        recs = [json.loads(line) for line in fh]
    gp = [r for r in analyse(recs) if r.attainment is not None]
    assert gp and all(not r.estimator.startswith("asvi") for r in gp)
    header = _attain_table_lines(gp[:1])[0]
    assert "est-ref" in header and "ASVI-ref" not in header
    asvi = [r for r in analyse(_quick()) if r.estimator == "asvi"]
    assert "ASVI-ref" in _attain_table_lines(asvi[:1])[0]


def _quick():
    import gzip
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "figures" / "reference" / "records-quick.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]
