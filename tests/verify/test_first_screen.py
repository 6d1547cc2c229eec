"""The answer on the first and last screen (issue 77, item 1): ``verify.rates`` opens and
ends with the decision block (what the run is, one sentence per truth, the exit status;
lines of at most 100 characters); ``--quiet`` prints it alone; the column key is behind
``--explain``."""

from __future__ import annotations

from pathlib import Path

from tests.factories import run_main
from verify.decided import WIDTH

QUICK = Path(__file__).resolve().parents[2] / "figures" / "reference" / "records-quick.jsonl.gz"
RULE = "=" * WIDTH


def _rates(tmp_path, *flags):
    return run_main("verify.rates", "--records", str(QUICK), "--figures", str(tmp_path / "f"),
                    *flags, cwd=tmp_path)  # fmt: skip


def test_quiet_prints_the_decision_block_alone_and_explain_the_key(tmp_path):
    full = _rates(tmp_path)
    quiet = _rates(tmp_path, "--quiet")
    assert quiet.returncode == full.returncode == 3
    block = full.stdout.split(RULE)[1].strip("\n")
    assert quiet.stdout.strip("\n") == block  # the same block, and nothing else
    assert all(len(line) <= WIDTH == 80 for line in quiet.stdout.splitlines())
    assert block.startswith("Records records-quick.jsonl.gz (n <= 4,000), decided under")
    assert "holder-a0.5-p1-s0 (n = 250..4000" in block and "holder-a1.5-p1-s0" in block
    assert block.splitlines()[-2] == "Exit status 3:"  # its words on the next line
    assert "a-pow = " not in full.stdout and "--explain" in full.stdout
    explained = _rates(tmp_path, "--explain")
    assert "  a-pow = computed before the data" in explained.stdout
    assert (tmp_path / "f" / "holder-a0.5-p1-s0.png").exists()  # quiet still draws


def test_a_training_run_says_its_power_in_one_line_and_in_full_after_the_block(tmp_path):
    """Before training one line of the power check; its full text follows the decision
    block (the answer comes first)."""
    r = run_main(
        "verify.rates", "--tier", "tiny", "--n", "128", "256", "512", "--replicates", "2",
        "--estimator", "sklearn.neighbors:KNeighborsRegressor", "--estimator-param",
        "n_neighbors=5", "--out", str(tmp_path / "k.jsonl"), "--figures", str(tmp_path / "f"),
        cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode in (0, 1, 3), r.stderr[-2000:]
    before, block, after = r.stdout.split(RULE)[:3]
    assert "power check (d^2): " in before and "in full after the answer" in before
    long = [x for x in before.splitlines() if len(x) > WIDTH and str(tmp_path) not in x]
    assert long == []  # a line naming a records file is as long as its path
    assert "power check before training (d^2; n = [128, 256, 512]" in after
    assert "Exit status" in block
