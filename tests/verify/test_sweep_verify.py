"""Sweeps (resume, identical records, Dask) and python -m verify.rates end to end."""

import hashlib
import json
import subprocess
import sys

import pytest

from simulate.sweep.config import SweepConfig
from simulate.sweep.records import RecordsError
from simulate.sweep.runner import run_sweep
from simulate.sweep.schema import read_records
from simulate.sweep.truth_spec import TruthSpec
from tests.factories import EXIT_LINES, SWEEP_TINY
from verify.results import read_results

TINY = SWEEP_TINY


def cfg(**kw):
    return SweepConfig(truths=[TruthSpec("holder", p=1, alpha=0.5)], **{**TINY, **kw})


def stable(records):
    """Records without the fields that legitimately differ between runs (wall times)."""
    out = []
    for r in records:
        r = dict(r)
        r.pop("timing")
        out.append(json.dumps(r, sort_keys=True))
    return sorted(out)


def quiet(*_):
    pass


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    path = tmp_path_factory.mktemp("a") / "records.jsonl"
    return run_sweep(cfg(), path, progress=False, log=quiet), path


def test_sweep_writes_one_record_per_cell(uninterrupted):
    recs, path = uninterrupted
    cells = {(r["cell"]["n"], r["cell"]["replicate"]) for r in recs}
    assert cells == {(n, q) for n in TINY["ns"] for q in range(2)} and len(recs) == 6
    r = recs[0]
    assert r["config"]["stop_rule"] == {
        "max_steps": 60,
        "window": 20,
        "tol": 5e-3,
        "patience": 2,
        "kl_abs": 2.0,
        "risk_tol": None,
    }
    pw = r["per_width"]
    assert all(1 <= s <= 60 for s in pw["steps"]) and len(pw["converged"]) == 2
    assert all(c is False for c, s in zip(pw["converged"], pw["steps"], strict=True) if s == 60)
    assert r["reference"]["k"] >= 1 and r["reference"]["d2"] > 0
    assert r["reference"]["oracle"]["degree"] == 0 and r["reference"]["oracle"]["d2"] > 0
    assert {"d2", "d", "l2sq"} <= set(r["metrics"]) and "versions" in r and "seeds" in r
    assert len(r["per_width"]["elbo"]) == 2 and r["selected_width"] in (2, 4)


def test_nested_data_across_n(uninterrupted):
    recs, _ = uninterrupted
    seeds = {(r["cell"]["replicate"], r["seeds"]["data"]) for r in recs}
    assert len(seeds) == 2  # one data seed per replicate, shared by every n


def test_killed_sweep_resumes_to_identical_records(uninterrupted, tmp_path):
    recs_a, _ = uninterrupted
    path = tmp_path / "b.jsonl"
    run_sweep(cfg(), path, progress=False, log=quiet, max_jobs=2)  # "killed" after 2 jobs
    assert len(read_records(path)) == 2
    with open(path, "ab") as fh:  # and a crash in the middle of an append
        fh.write(b'{"schema": "asvi-rates/sweep-rec')
    recs_b = run_sweep(cfg(), path, progress=False, log=quiet)
    assert stable(recs_b) == stable(recs_a)
    assert len(read_records(path)) == 6  # nothing duplicated, the torn line is gone
    again = run_sweep(cfg(), path, progress=False, log=quiet)  # a re-run trains nothing
    assert stable(again) == stable(recs_a)


def test_foreign_or_corrupt_file_is_refused_untouched(tmp_path):
    for content in (b'{"hello": 1}\n', b"not json at all\n{}\n"):
        path = tmp_path / "x.jsonl"
        path.write_bytes(content)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        with pytest.raises(RecordsError, match="line 1"):
            run_sweep(cfg(), path, progress=False, log=quiet)
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest


def test_dask_local_cluster_gives_the_same_records(uninterrupted, tmp_path):
    distributed = pytest.importorskip("distributed")
    recs_a, _ = uninterrupted
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0"
    ) as cluster:
        recs = run_sweep(
            cfg(),
            tmp_path / "d.jsonl",
            scheduler=cluster.scheduler_address,
            progress=False,
            log=quiet,
        )
    assert stable(recs) == stable(recs_a)


@pytest.mark.parametrize(
    "bad", [{"ns": []}, {"ns": [128, 64, 256]}, {"widths": []}, {"replicates": 0}]
)
def test_bad_sweep_config(bad, tmp_path):
    with pytest.raises(ValueError):
        run_sweep(cfg(**bad), tmp_path / "r.jsonl", progress=False, log=quiet)
    assert not (tmp_path / "r.jsonl").exists()


def run_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "verify.rates", *args], capture_output=True, text=True, check=False
    )


def test_verify_rates_end_to_end_tiny_tier(tmp_path):
    rec, rep, figs = tmp_path / "r.jsonl", tmp_path / "rep.json", tmp_path / "figs"
    md = tmp_path / "rep.md"
    r = run_cli(
        "--tier", "tiny", "--out", str(rec), "--json", str(rep), "--figures", str(figs),
        "--markdown", str(md),
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
        assert dec.protocol.startswith("exploratory-v1@") and dec.records_protocol is None
        assert isinstance(e.attainment.reference.slope, float)
        assert 0 <= e.asvi.converged_fraction <= 1
        assert isinstance(e.control.optimisation_limited, bool)  # the control ran
        assert [c.n for c in e.control.cells] == [128, 512]
    d2 = next(e for e in report if e.metric == "d2")
    assert d2.theorem.predicted == pytest.approx(-0.5)
    assert (figs / "holder-a0.5-p1-s0.png").stat().st_size > 0
    rows = [ln for ln in md.read_text().splitlines() if ln.startswith("| asvi |")]
    assert len(rows) == 3 and all(e.theorem.verdict in md.read_text() for e in report)
    # verifying the records again trains nothing and gives the same report
    r2 = run_cli(
        "--records", str(rec), "--json", str(tmp_path / "rep2.json"), "--figures", str(figs)
    )
    assert r2.returncode == r.returncode
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


# distributed's worker processes leave a listening socket to the garbage collector
@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_local_workers_give_the_same_records(uninterrupted, tmp_path):
    pytest.importorskip("distributed")
    recs_a, _ = uninterrupted
    recs = run_sweep(cfg(), tmp_path / "w.jsonl", workers=2, progress=False, log=quiet)
    assert stable(recs) == stable(recs_a)
    with pytest.raises(ValueError, match="either"):
        run_sweep(cfg(), tmp_path / "x.jsonl", scheduler="tcp://127.0.0.1:1", workers=2)
