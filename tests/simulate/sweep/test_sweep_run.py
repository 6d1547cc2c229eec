"""A growing-n sweep run end to end on the tiny tier: one record per cell, nested data, a
killed sweep resumed to identical records, foreign files refused untouched, bad
configurations refused before any file is made, and the same records from Dask and from
local worker processes."""

import hashlib
import sys

import pytest

from simulate.sweep.run.runner import SweepRunOptions, run_sweep
from simulate.sweep.setup.config import SweepConfig
from simulate.sweep.setup.truth_spec import TruthSpec
from simulate.sweep.store.schema import read_records
from tests.factories import SWEEP_TINY, torch_threads
from tests.factories import stable_records as stable
from theory.plumbing.jsonl import RecordsError

TINY = SWEEP_TINY


def cfg(**kw):
    return SweepConfig(truths=[TruthSpec("holder", p=1, alpha=0.5)], **{**TINY, **kw})


def quiet(*_):
    pass


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The tiny sweep in this process at two torch threads: the Dask and worker-process runs
    below (one thread each) must give its records, whatever the thread count."""
    path = tmp_path_factory.mktemp("a") / "records.jsonl"
    with torch_threads(2):
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


def test_dask_local_cluster_gives_the_same_records(uninterrupted, tmp_path, monkeypatch):
    distributed = pytest.importorskip("distributed")
    recs_a, _ = uninterrupted
    # an in-process cluster puts its workers' scratch folders on this process's sys.path:
    # given back after the test (the suite's guard, tests/suite_guards.py), scratch in tmp_path
    monkeypatch.setattr(sys, "path", list(sys.path))
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0",
        local_directory=str(tmp_path / "dask"),
    ) as cluster:  # fmt: skip
        recs = run_sweep(
            cfg(),
            tmp_path / "d.jsonl",
            SweepRunOptions(scheduler=cluster.scheduler_address),
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


# distributed's worker processes leave a listening socket to the garbage collector
@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_local_workers_give_the_same_records(uninterrupted, tmp_path):
    pytest.importorskip("distributed")
    recs_a, _ = uninterrupted
    recs = run_sweep(cfg(), tmp_path / "w.jsonl", SweepRunOptions(workers=2), progress=False,
                     log=quiet)  # fmt: skip
    assert stable(recs) == stable(recs_a)
    with pytest.raises(ValueError, match="either"):
        run_sweep(cfg(), tmp_path / "x.jsonl", SweepRunOptions("tcp://127.0.0.1:1", workers=2))


def test_jobs_are_handed_out_costliest_first(tmp_path):
    """The sweep hands out its jobs by ``Job.cost`` (the widest, highest-p programs with the
    largest step caps first; at equal cost the larger n), so they do not start last and run
    alone at the end; the killed sweep above resumes to identical records under this
    order.  On the full tier the order follows the measured training seconds of the
    costliest jobs (teacher p = 200 at n = 32,000, then 8,000, then teacher p = 20 at
    32,000)."""
    from simulate.sweep.setup import tiers
    from simulate.sweep.train.jobs import Job, jobs_for

    two = SweepConfig(truths=[TruthSpec("holder", p=1, alpha=0.5), TruthSpec("teacher", p=20)],
                      **TINY)  # fmt: skip
    seen = []
    run_sweep(two, tmp_path / "o.jsonl", progress=False, log=seen.append, max_jobs=1)
    first = {(r["cell"]["truth"], r["cell"]["n"]) for r in read_records(tmp_path / "o.jsonl")}
    assert first == {("teacher-p20-s0", max(TINY["ns"]))}
    full = tiers.RATES["full"]
    order = sorted(jobs_for(SweepConfig(truths=full["truths"], **full["sweep"])), key=Job.cost)
    top = [(j.truth.key, j.n) for j in order[::-1][:3]]
    assert top == [("teacher-p200-s0", 32000), ("teacher-p200-s0", 8000), ("teacher-p20-s0", 32000)]
