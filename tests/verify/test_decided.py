"""The main job's first screen (``verify.decided``): the current confirmatory run's
decision per truth, derived from its shipped records (the file equal to its
regeneration), and matched to a run's truths by class, not by seed."""

import dataclasses

from tests.factories import fake_records
from verify import decided
from verify.reading.analysis import analyse


def test_the_decided_file_equals_its_regeneration():
    """The shipped file is what ``python -m verify.decided`` derives from the records it
    names (so no verdict in it is typed in); every ASVI truth of the run is in it."""
    got = decided.derive()
    assert decided.load() == got
    assert len(got) == len(decided.RECORDS) == 6
    assert all(d.theorem in ("PASS", "FAIL", "INCONCLUSIVE", "UNDECIDABLE") for d in got)
    with open(decided.PATH, encoding="utf-8") as fh:
        assert fh.read() == decided.file_text(got)  # byte for byte, as --check compares


def test_the_first_screen_matches_by_class_and_says_where_there_is_none():
    results = analyse(fake_records(-0.5, -0.5) + fake_records(-0.5, 0, teacher_p=20, seed=1))
    mine = decided.decided_of(results)
    assert [d.truth for d in mine] == ["holder-a0.5-p1-s0", "teacher-p20-s0"]
    other_seed = dataclasses.replace(mine[0], truth="holder-a0.5-p1-s9", theorem="FAIL",
                                     theorem_share=0.97, n_hi=512000)  # fmt: skip
    wrong_alpha = dataclasses.replace(mine[0], truth="holder-a1.5-p1-s9", alpha=1.5)
    lines = decided.summary_lines(results, [wrong_alpha, other_seed])
    assert lines[1].startswith("  holder-a0.5-p1-s0 (n = 250..16000): theorem ")
    assert lines[2] == f"    {decided.CURRENT} n = 250..512000: {other_seed.words()}"
    # the reading the verdict is, the other's verdict and delta_flip / delta_pass beside it
    # (fake records carry no Hoelder norm: the proved bound is not available)
    assert lines[2].startswith(
        f"    {decided.CURRENT} n = 250..512000: theorem FAIL (97%) [the sharp reading;"
        " proved bound not available; FAIL below delta "
    )
    assert lines[3].startswith("  teacher-p20-s0 (n = 250..16000): theorem ")
    assert "attainment" not in lines[3]  # no reference for a teacher
    assert lines[4] == f"    {decided.CURRENT} no truth of this class"
    # the arms and the known-answer controls are not truths of the screen
    assert decided.summary_lines([], []) == []


def test_the_shipped_decision_says_which_reading_and_the_curvature_test():
    """The first screen's line for confirm-v4's alpha = 0.5: its theorem FAIL is the sharp
    reading's, the proved bound PASSes, delta_flip / delta_pass, and the flattening is a power
    (verify.stats.readings, verify.stats.logfactor; re-read, exploratory)."""
    got = {d.truth: d.words() for d in decided.load()}
    words = got["holder-a0.5-p1-s20261203"]
    assert words.startswith(
        "theorem FAIL (100%) [the sharp reading; proved bound UNDECIDABLE; FAIL below delta 1.11;"
        " PASS from 1.19], attainment FAIL (100%)"
    )
    assert words.endswith("flattening a power (+0.156 [+0.115, +0.197])")
    assert "curvature not shown beyond log factors" in got["holder-a1.5-p1-s20261203"]
