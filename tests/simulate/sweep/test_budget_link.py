"""The budget-doubling control continued from the sweep's capped candidates
(``simulate.sweep.train.budget``): the control's records are those of training it from the
start, in every field but the wall times, while some candidates were continued; and the
configurations it does not apply to are refused with a reason."""

from __future__ import annotations

import dataclasses
import glob
import json
import os

import pytest

from simulate.sweep.run.runner import SweepRunOptions, run_sweep
from simulate.sweep.setup.config import SweepConfig
from simulate.sweep.setup.truth_spec import TruthSpec
from simulate.sweep.train import asvi_job as job_mod
from simulate.sweep.train import budget as budget_mod
from simulate.sweep.train.budget import BudgetLink, linkable
from simulate.sweep.train.jobs import jobs_for
from tests.factories import STEP_MLPS, SWEEP_TINY, stable_records
from verify.reading.controls import control_config


def _cfg(mlp="batched", **kw):
    # a small cap (4 windows) and one plateau before the stop: some candidates plateau,
    # some run to the cap without one
    tiny = {**SWEEP_TINY, "max_steps": 80, "stop_lr_decays": 1, "widths": [2, 6]}
    return SweepConfig(truths=[TruthSpec("holder", p=1, alpha=0.5)], mlp=mlp, **{**tiny, **kw})


def _quiet(*_):
    pass


@pytest.mark.parametrize("mlp", STEP_MLPS)
def test_the_continued_control_writes_the_records_of_one_from_the_start(tmp_path, mlp,
                                                                         monkeypatch):  # fmt: skip
    cfg = _cfg(mlp)
    ccfg = control_config(cfg, replicates=2, every_n=True)
    assert linkable(cfg, ccfg) is None
    folder = str(tmp_path / "states")
    run_sweep(cfg, tmp_path / "a.jsonl", SweepRunOptions(budget=BudgetLink(folder, "save", ccfg)),
              progress=False, log=_quiet)  # fmt: skip
    files = [f for _, _, fs in os.walk(folder) for f in fs]
    assert files and not [f for f in files if f.endswith(".tmp")]
    kept = [f for f in files if f.endswith(".pt")]
    joined = []
    real = budget_mod.BudgetLink.resume

    def spy(self, *a):
        res = real(self, *a)
        joined.append(0 if res is None else sum(int(r.models.numel()) for r in res))
        return res

    monkeypatch.setattr(budget_mod.BudgetLink, "resume", spy)
    fitted = _count_references(monkeypatch)
    got = run_sweep(ccfg, tmp_path / "c.jsonl",
                    SweepRunOptions(budget=BudgetLink(folder, "load", cfg)),
                    progress=False, log=_quiet)  # fmt: skip
    assert sum(joined) == len(kept)  # every kept state was continued
    assert not fitted  # and every reference was the sweep's
    want = run_sweep(ccfg, tmp_path / "d.jsonl", progress=False, log=_quiet)
    assert len(fitted) == len(want) and all(r["reference"] for r in want)
    assert stable_records(got) == stable_records(want)
    # and the states are of capped candidates: the control ran them past the sweep's cap
    steps = [s for r in got for s in r["per_width"]["steps"]]
    assert max(steps) > cfg.max_steps


def _count_references(monkeypatch) -> list:
    """A list that grows by one per class-matched reference fitted in this process."""
    fitted = []
    real = job_mod.reference
    monkeypatch.setattr(job_mod, "reference", lambda *a: fitted.append(1) or real(*a))
    return fitted


def test_the_control_takes_the_sweep_s_references_as_they_were_kept(tmp_path, monkeypatch):
    """The references the control's records carry are the kept files' (negative control:
    an altered file's number shows in the record, so the equality above is not vacuous;
    an unreadable one is fitted again, with a warning)."""
    cfg = _cfg(ns=[64, 128])
    ccfg = control_config(cfg, replicates=2)
    folder = str(tmp_path / "states")
    link = BudgetLink(folder, "save", ccfg)
    run_sweep(cfg, tmp_path / "a.jsonl", SweepRunOptions(budget=link), progress=False, log=_quiet)
    refs = sorted(glob.glob(os.path.join(folder, "*", "reference-*.json")))
    assert len(refs) == 2 * 2  # both n, both replicates
    with open(refs[0]) as fh:
        altered = json.load(fh)
    altered["d2"] = 0.987654321  # in range: records are validated on reading
    with open(refs[0], "w") as fh:
        json.dump(altered, fh)
    with open(refs[1], "w") as fh:
        fh.write("{not json")
    fitted = _count_references(monkeypatch)
    with pytest.warns(UserWarning, match="computed again"):
        got = run_sweep(ccfg, tmp_path / "c.jsonl",
                        SweepRunOptions(budget=BudgetLink(folder, "load", cfg)),
                        progress=False, log=_quiet)  # fmt: skip
    assert len(fitted) == 1  # the unreadable one
    assert sum(r["reference"]["d2"] == 0.987654321 for r in got) == 1


def test_a_missing_state_trains_from_the_start(tmp_path):
    """The files are a cache: a control with an empty folder writes the same records."""
    cfg = _cfg()
    ccfg = control_config(cfg, replicates=2)
    folder = str(tmp_path / "none")
    got = run_sweep(ccfg, tmp_path / "c.jsonl",
                    SweepRunOptions(budget=BudgetLink(folder, "load", cfg)),
                    progress=False, log=_quiet)  # fmt: skip
    want = run_sweep(ccfg, tmp_path / "d.jsonl", progress=False, log=_quiet)
    assert stable_records(got) == stable_records(want)


@pytest.mark.parametrize(
    "change,why",
    [
        ({"lr": 0.01}, "differ in lr"),
        ({"stop_window": 40}, "differ in stop_window"),
        ({"kl_warmup": 20}, "differ in kl_warmup"),
    ],
)
def test_what_it_does_not_apply_to_is_said(change, why):
    cfg = _cfg()
    ccfg = dataclasses.replace(control_config(cfg, replicates=2), **change)
    assert why in linkable(cfg, ccfg)


def test_a_sweep_it_cannot_continue_is_said():
    cfg = _cfg(max_steps=70)  # not a whole number of windows of 20
    assert "whole number of windows" in linkable(cfg, control_config(cfg, replicates=2))
    cfg = _cfg(kl_warmup=20)
    assert "KL warm-up" in linkable(cfg, control_config(cfg, replicates=2))
    same = _cfg()
    assert "not stricter" in linkable(same, same)


def test_a_program_of_other_models_trains_from_the_start(tmp_path, monkeypatch):
    """A control of fewer replicates than a block (its programs hold other models: the
    batched paths' rounding can depend on a model's place) uses none of the states and
    writes the records of one from the start."""
    cfg = _cfg(replicate_block=2)
    ccfg = control_config(cfg, replicates=1)
    folder = str(tmp_path / "states")
    run_sweep(cfg, tmp_path / "a.jsonl", SweepRunOptions(budget=BudgetLink(folder, "save", ccfg)),
              progress=False, log=_quiet)  # fmt: skip
    assert BudgetLink(folder, "save", ccfg).kept(cfg) > 0
    joined = []
    real = budget_mod.BudgetLink.resume
    monkeypatch.setattr(budget_mod.BudgetLink, "resume",
                        lambda self, *a: joined.append(real(self, *a)) or joined[-1])  # fmt: skip
    got = run_sweep(ccfg, tmp_path / "c.jsonl",
                    SweepRunOptions(budget=BudgetLink(folder, "load", cfg)),
                    progress=False, log=_quiet)  # fmt: skip
    assert joined and all(r is None for r in joined)
    want = run_sweep(ccfg, tmp_path / "d.jsonl", progress=False, log=_quiet)
    assert stable_records(got) == stable_records(want)
    BudgetLink(folder, "save", ccfg).clear(cfg)
    assert not os.path.exists(folder)


def test_a_reference_that_cannot_be_written_leaves_no_partial_file(tmp_path):
    """A reference JSON cannot hold (here: a set) is a warning, and no tmp file stays."""
    cfg = _cfg(ns=[64, 128])
    link = BudgetLink(str(tmp_path / "states"), "save", control_config(cfg, replicates=2))
    job = next(j for j in jobs_for(cfg) if j.n == 64)
    with pytest.warns(UserWarning, match="references not kept"):
        assert link.save_references(cfg, job, [{"d2": 1.0, "bad": {1}}] * len(job.replicates)) == 0
    assert not [f for _, _, fs in os.walk(tmp_path) for f in fs]
