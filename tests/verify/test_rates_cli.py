"""``python -m verify.rates`` end to end: the tiny tier trained and verified (report, JSON,
Markdown, figures; re-verified from its records; the control at every n), bad input
refused with exit 2, corrupt records refused untouched."""

import json

import pytest

from tests.factories import EXIT_LINES, run_main, run_process
from verify import decided
from verify import protocol as protocols
from verify.results import read_results


def run_cli(*args):
    """``python -m verify.rates ARGS`` in this process (``main(argv)``)."""
    return run_main("verify.rates", *args)


def test_verify_rates_end_to_end_tiny_tier(tmp_path):
    rec, rep, figs = tmp_path / "r.jsonl", tmp_path / "rep.json", tmp_path / "figs"
    md = tmp_path / "rep.md"
    r = run_process(  # a process of its own: the status the shell sees
        "verify.rates", "--tier", "tiny", "--out", str(rec), "--json", str(rep), "--figures",
        str(figs), "--markdown", str(md),
    )  # fmt: skip
    assert r.returncode in EXIT_LINES, r.stderr  # not bad input (2), not a crash (4)
    assert EXIT_LINES[r.returncode] in r.stdout  # the code is the report's own conclusion
    assert "budget x2" in r.stdout and "e/2 ctl" in r.stdout and "c_hat" in r.stdout
    report = read_results(str(rep))  # every field of its type, no other (exit on misfit)
    assert {e.metric for e in report} == {"d2", "d", "l2sq"}
    for e in report:
        assert e.theorem.verdict in ("PASS", "FAIL", "INCONCLUSIVE", "UNDECIDABLE")
        assert e.estimator == "asvi" and isinstance(e.theorem.power.separable, bool)
        assert isinstance(e.control.shift.diff.diff, float)
        assert e.attainment.verdict in ("PASS", "FAIL", "INCONCLUSIVE", "UNDECIDABLE")
        assert e.control.state in ("converged", "undetermined", "limited")
        dec = e.decision
        assert dec.protocol.startswith(f"{protocols.DEFAULT}@") and dec.records_protocol is None
        assert isinstance(e.attainment.reference.slope, float)
        assert 0 <= e.asvi.converged_fraction <= 1
        assert isinstance(e.control.optimisation_limited, bool)  # the control ran
        assert [c.n for c in e.control.cells] == [128, 512]
    d2 = next(e for e in report if e.metric == "d2")
    assert d2.theorem.predicted == pytest.approx(-0.5)
    # the first screen, before the tables, and the last: what the tier is, the truth's
    # sentence, the current decision on its class under it, the exit status, lines of at
    # most 100 characters; a fresh run's own records get no note about protocol tags
    rule = "=" * decided.WIDTH
    head, tail = r.stdout.split("\n== ")[0], r.stdout.rstrip().split(f"\n{rule}\n")[-1]
    first = head.split(rule)[1]
    assert first.strip() + "\n" + rule == tail.strip()  # the run ends with the same block
    assert all(len(line) <= decided.WIDTH == 80 for line in first.splitlines())
    flat = " ".join(line.strip() for line in first.strip().splitlines())
    assert flat.startswith("Tier tiny: a smoke test (n <= 512), not evidence; the confirmatory")
    assert "holder-a0.5-p1-s0 (n = 128..512, protocol " in flat
    current = next(d for d in decided.load() if d.cls == ("holder", 1, 0.5))
    assert (f"{decided.CURRENT} decided on this class (n = {current.n_lo}..{current.n_hi}):"
            f" {current.words()}.") in flat  # fmt: skip
    assert f"Exit status {r.returncode}: {EXIT_LINES[r.returncode]}." in flat
    assert "protocol tag" not in r.stdout and "written under no protocol" not in r.stdout
    assert (figs / "holder-a0.5-p1-s0.png").stat().st_size > 0
    rows = [ln for ln in md.read_text().splitlines() if ln.startswith("| asvi |")]
    assert len(rows) == 3 and all(e.theorem.verdict in md.read_text() for e in report)
    # verifying the records again trains nothing and gives the same report
    r2 = run_cli(
        "--records", str(rec), "--json", str(tmp_path / "rep2.json"), "--figures", str(figs)
    )
    assert r2.returncode == r.returncode
    assert "the records were written under no protocol" in r2.stdout  # read back: said
    assert json.loads((tmp_path / "rep2.json").read_text()) == json.loads(rep.read_text())
    r3 = run_cli("--records", str(rec), "--depth", "3")  # training overrides need training
    assert r3.returncode == 2 and "only --lam" in r3.stderr
    # --control-every-n: the sweep and the ends are resumed, only the middle n is trained
    rep4 = tmp_path / "rep4.json"
    r4 = run_cli("--tier", "tiny", "--out", str(rec), "--control-every-n", "--json", str(rep4),
                 "--figures", str(figs))  # fmt: skip
    assert r4.returncode == r.returncode, r4.stderr
    assert "0 jobs to run" in r4.stdout and "1 jobs to run" in r4.stdout
    for e in read_results(str(rep4)):
        assert [c.n for c in e.control.cells] == [128, 256, 512]


@pytest.mark.parametrize(
    "args",
    [
        ["--truth", "sine"],
        ["--truth", "holder", "--alpha", "-1"],
        ["--truth", "holder", "--alpha", "0"],
        ["--truth", "holder", "--alpha", "0.5", "--p", "0"],
        ["--tier", "tiny", "--n", "100", "200"],
        ["--alpha", "0.5"],
        ["--records", "/nonexistent/records.jsonl"],
        ["--tier", "tiny", "--workers", "-1"],
        ["--tier", "tiny", "--lam", "0"],
    ],
)
def test_verify_rates_bad_input_exit_2(args):
    r = run_cli(*args)
    assert r.returncode == 2 and "error" in r.stderr


def test_verify_rates_refuses_corrupt_records_untouched(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"schema": "something-else"}\n')
    before = path.read_bytes()
    r = run_cli("--records", str(path))
    assert r.returncode == 2 and "not an asvi-rates record" in r.stderr
    r = run_cli("--tier", "tiny", "--out", str(path))  # would-be sweep target, also refused
    assert r.returncode == 2 and path.read_bytes() == before
