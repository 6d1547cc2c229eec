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
    lines = decided.decision_block(results, "Opening.", "Closing.", [wrong_alpha, other_seed])
    assert all(len(line) <= decided.WIDTH for line in lines)
    text = "\n".join(lines)
    joined = " ".join(line.strip() for line in lines)
    assert lines[0] == "Opening." and lines[-1] == "Closing."
    assert "holder-a0.5-p1-s0 (n = 250..16000, protocol " in joined
    assert f"{decided.CURRENT} decided on this class (n = 250..512000): {other_seed.words()}." in (
        joined
    )
    # the reading the verdict is, the other's verdict and delta_flip / delta_pass beside it
    # (fake records carry no Hoelder norm: the proved bound is not available)
    assert "theorem FAIL (97%) [the sharp reading; proved bound not available; FAIL below" in (
        joined
    )
    teacher = joined.split("teacher-p20-s0 (")[1]
    assert "attainment" not in teacher.split(").")[0]  # no reference for a teacher
    assert f"{decided.CURRENT} has no truth of this class." in teacher
    assert text.count("\n  ") >= 2  # continuation lines indented
    # the arms and the known-answer controls are not truths of the screen
    assert decided.decision_block([], "Opening.", "Closing.", []) == ["Opening.", "Closing."]
