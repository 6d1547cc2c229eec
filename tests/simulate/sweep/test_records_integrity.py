"""Records files: one configuration per file, one writer at a time, failed cells recorded;
and every bad input of the sweep and verify.rates command lines a one-line error, exit 2,
with nothing created."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from functools import partial
from operator import eq, not_

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import simulate.sweep.cli as sweep_cli
import simulate.sweep.run.parallel as parallel_mod
import theory.plumbing.jsonl as records_mod
from simulate.core.trainer import Trainer
from simulate.sweep.run.runner import records_path_for, run_sweep
from simulate.sweep.setup.config import SweepConfig
from simulate.sweep.setup.truth_spec import TruthSpec
from simulate.sweep.store.fingerprint import _without_later_defaults, fingerprint_fields
from simulate.sweep.store.records import fingerprint
from simulate.sweep.store.schema import one_configuration, read_records
from tests.factories import SWEEP_TINY, run_main, run_process
from theory.plumbing.jsonl import RecordsError, exclusive_writer
from verify.reading.analysis import analyse
from verify.report.render import format_results

TINY = {**SWEEP_TINY, "max_steps": 40, "n_test": 300, "replicate_block": 2}
SWEEP = ["--truth", "holder", "--alpha", "0.5", "--p", "1", "--n", "64", "128", "256"]
SWEEP += ["--replicates", "1", "--widths", "2", "--max-steps", "30", "--batch-size", "32"]


def cfg(**kw):
    return SweepConfig(truths=[TruthSpec("holder", p=1, alpha=0.5)], **{**TINY, **kw})


def quiet(*_):
    pass


# the command lines run in this process (``main(argv)``); the process boundary itself is
# tested once per entry point (``test_each_entry_point_refuses_in_a_process_of_its_own``)
cli = run_main


def one_line_error(r):
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    return r.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: ")


# ------------------------------------------------------------------ fingerprints
def test_every_record_carries_the_fingerprint_of_its_configuration(recorded):
    recs, _ = recorded
    fp = fingerprint(fingerprint_fields(cfg()))
    assert {r["fingerprint"] for r in recs} == {fp}
    f = recs[0]["fingerprint_fields"]
    assert f["n_max"] == 256 and f["max_steps"] == 40 and "torch" in f["versions"]
    assert "replicates" not in f and "ns" not in f  # bookkeeping: which cells, not what
    # more replicates or a smaller extra n change no cell: same fingerprint
    assert fingerprint(fingerprint_fields(cfg(replicates=5, ns=[32, 64, 128, 256]))) == fp
    # a larger n redraws every replicate's data: another fingerprint
    assert fingerprint(fingerprint_fields(cfg(ns=[64, 128, 512]))) != fp


@pytest.mark.parametrize(
    "change, field", [({"max_steps": 50}, "max_steps 40 -> 50"), ({"seed": 7}, "seed 0 -> 7")]
)
def test_resuming_another_configuration_is_refused_naming_the_fields(recorded, change, field):
    recs, path = recorded
    before = path.read_bytes()
    with pytest.raises(RecordsError, match=field):
        run_sweep(cfg(**change), path, progress=False, log=quiet)
    with pytest.raises(RecordsError, match="--new-file"):
        records_path_for(cfg(**change), str(path))
    assert path.read_bytes() == before


def test_sweep_cli_refuses_a_changed_seed_and_new_file_writes_beside(tmp_path):
    out = tmp_path / "r.jsonl"
    assert cli("simulate.sweep", *SWEEP, "--out", str(out)).returncode == 0
    before = out.read_bytes()
    r = cli("simulate.sweep", *SWEEP, "--seed", "7", "--out", str(out))
    assert one_line_error(r) and "seed 0 -> 7" in r.stderr, r.stderr
    assert out.read_bytes() == before
    r = cli("simulate.sweep", *SWEEP, "--seed", "7", "--out", str(out), "--new-file")
    assert r.returncode == 0, r.stderr
    beside = [p for p in tmp_path.glob("r-*.jsonl")]
    assert len(beside) == 1 and len(read_records(beside[0])) == 3
    assert {x["fingerprint_fields"]["seed"] for x in read_records(beside[0])} == {7}
    assert out.read_bytes() == before
    # verify.rates refuses the two files mixed into one, unless told which
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_bytes(before + beside[0].read_bytes())
    r = cli("verify.rates", "--records", str(mixed), "--figures", str(tmp_path / "f"))
    assert one_line_error(r) and "mixes 2 configurations" in r.stderr and "seed" in r.stderr
    fp = read_records(beside[0])[0]["fingerprint"]
    r = cli("verify.rates", "--records", str(mixed), "--fingerprint", fp[:6], "--figures",
            str(tmp_path / "f"))  # fmt: skip
    # the choice is made (no "mixes" error); one replicate has no interval: refused, saying so
    assert one_line_error(r) and "need at least 2" in r.stderr, r.stderr


def test_one_configuration_chooses_or_refuses(recorded):
    recs, _ = recorded
    other = [{**r, "fingerprint": "0" * 16} for r in recs[:2]]
    with pytest.raises(RecordsError, match="mixes 2 configurations"):
        one_configuration(recs + other)
    assert one_configuration(recs + other, "0000") == other
    assert one_configuration(recs + other, recs[0]["fingerprint"][:5]) == recs
    with pytest.raises(RecordsError, match="matches 0"):
        one_configuration(recs, "ffff")


def test_an_older_schema_is_named(tmp_path):
    path = tmp_path / "old.jsonl"
    path.write_text(json.dumps({"schema": "asvi-rates/sweep-record/2"}) + "\n")
    with pytest.raises(RecordsError, match="another version"):
        read_records(path)


# ------------------------------------------------------------------ one writer
def test_a_second_writer_exits_at_once_and_loses_nothing(recorded, tmp_path):
    path = tmp_path / "r.jsonl"
    with exclusive_writer(path):  # a sweep holding the file
        r = cli("simulate.sweep", *SWEEP, "--out", str(path))
    assert one_line_error(r) and "being written by another run" in r.stderr
    assert not path.exists()  # nothing written, and the first writer's file is its own


def test_two_sweeps_started_together_record_each_cell_once(tmp_path):
    out = tmp_path / "r.jsonl"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "simulate.sweep",
                *SWEEP,
                "--replicates",
                "2",
                "--out",
                str(out),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
        for _ in range(2)
    ]
    errs = [p.communicate(timeout=300)[1] for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert all(e.count("error:") <= 1 for e in errs), errs
    assert codes in ([0, 0], [0, 2])  # the loser either waits its turn (0 jobs) or exits 2
    recs = read_records(out)
    keys = [(r["cell"]["n"], r["cell"]["replicate"]) for r in recs]
    assert len(keys) == len(set(keys)) == 6


def read_only(monkeypatch, folder, file_writable: bool):
    """Make ``folder`` read-only for the records module's ``os.open`` (and its files too,
    unless ``file_writable``), as a mount or a folder without the write bit would: root
    ignores permission bits, so the refusal is simulated where the store meets it."""
    real = os.open
    folder = os.path.realpath(folder)
    writes = os.O_WRONLY | os.O_RDWR

    def fake(p, flags, *a, **k):
        inside = os.path.dirname(os.path.realpath(p)) == folder
        if inside and flags & os.O_CREAT and not os.path.exists(p):
            raise PermissionError(13, "Permission denied", p)
        if inside and flags & writes and not file_writable and os.path.exists(p):
            if not (flags & os.O_CREAT and flags & os.O_EXCL):
                raise PermissionError(13, "Permission denied", p)
        return real(p, flags, *a, **k)

    monkeypatch.setattr(records_mod.os, "open", fake)


def test_a_read_only_file_is_read_when_nothing_is_left(recorded, monkeypatch):
    recs, path = recorded
    read_only(monkeypatch, path.parent, file_writable=False)
    again = run_sweep(cfg(), path, progress=False, log=quiet)  # nothing to train: fine
    assert len(again) == len(recs)
    with pytest.raises(RecordsError, match="cannot write"):
        run_sweep(cfg(replicates=3), path, progress=False, log=quiet)


def test_a_complete_file_in_a_read_only_folder_is_read_without_a_lock_file(
    recorded, tmp_path, monkeypatch
):
    """Issue 38, reproducer 14: the file itself writable, its folder not (before: "cannot
    create its lock file", though nothing needed writing); the lock now lives on the file,
    so nothing is created beside it."""
    recs, src = recorded
    (tmp_path / "ro").mkdir()
    path = tmp_path / "ro" / "r.jsonl"
    shutil.copyfile(src, path)  # a folder holding the records file alone
    before = sorted(os.listdir(path.parent))
    read_only(monkeypatch, path.parent, file_writable=True)
    again = run_sweep(cfg(), path, progress=False, log=quiet)
    assert len(again) == len(recs)
    assert sorted(os.listdir(path.parent)) == before


# ------------------------------------------------------------------ failed cells
def test_a_diverging_cell_is_recorded_failed_and_the_sweep_goes_on(tmp_path, monkeypatch):
    real = Trainer.fit_until

    def diverge_at_128(self, rule, progress=None):
        if self.n == 128:  # every candidate of the n = 128 cells blows up at once
            with torch.no_grad():
                self.state.params[0] = float("inf")
        return real(self, rule, progress)

    monkeypatch.setattr(Trainer, "fit_until", diverge_at_128)
    recs = run_sweep(cfg(), tmp_path / "r.jsonl", progress=False, log=quiet)
    assert len(recs) == 6
    bad = [r for r in recs if r["failed"]]
    assert {r["cell"]["n"] for r in bad} == {128} and len(bad) == 2
    for r in bad:
        assert r["selected_width"] is None and r["metrics"]["d2"] is None
        assert r["per_width"]["failed_step"] == [0, 0]
        assert all(t and "L1" in t for t in r["per_width"]["failed_term"])
    good = [r for r in recs if not r["failed"]]
    assert all(r["selected_width"] in (2, 4) for r in good)
    assert all(t is None for r in good for t in r["per_width"]["failed_term"])


def test_verify_excludes_failed_cells_and_says_so():
    from tests.factories import fake_records

    recs = fake_records(asvi_exp=-0.5, ref_exp=-0.5, R=5)
    victim = next(r for r in recs if r["cell"]["replicate"] == 2 and r["cell"]["n"] == 1000)
    victim.update(failed=True, selected_width=None, metrics=dict.fromkeys(victim["metrics"]))
    res = analyse(recs)
    assert all(r.replicates.excluded == (2,) for r in res)
    assert all(2 not in r.replicates.used and len(r.replicates.used) == 4 for r in res)
    assert res[0].replicates.failed_cells == ((1000, 2),)
    assert "FAILED cells" in format_results(res) and "(1000, 2)" in format_results(res)


# ------------------------------------------------------------------ bad input
BAD_SWEEP = [
    ["--lambda-s", "0"],
    ["--lambda-s", "-1"],
    ["--lambda-s", "nan"],
    ["--workers", "-1"],
    ["--scheduler", "tcp://127.0.0.1:9", "--workers", "1"],
    ["--max-steps", "0"],
    ["--stop-tol", "nan"],
    ["--seed", "-1"],
    ["--out", "."],
]
BAD_CONFIG = [
    {"lr": -1},
    {"sigma": 0},
    {"lam": -1},
    {"init_nu": 1},
    {"n_test": 0},
    {"draws": 0},
    {"depth": 1.5},
    {"lambda_s": float("inf")},
    {"no_such_field": 1},
]


@pytest.mark.parametrize("bad", BAD_SWEEP + [["--config", json.dumps(c)] for c in BAD_CONFIG])
def test_sweep_bad_input_is_one_line_and_creates_nothing(bad, tmp_path):
    args = list(bad)
    if args[0] == "--config":
        (tmp_path / "c.json").write_text(args[1])
        args = ["--config", "c.json"]
    out = [] if "--out" in args else ["--out", "res/r.jsonl"]
    r = cli("simulate.sweep", *SWEEP, *args, *out, cwd=tmp_path)
    assert one_line_error(r), (bad, r.returncode, r.stderr)
    assert sorted(os.listdir(tmp_path)) == (["c.json"] if args[0] == "--config" else [])


def test_a_teacher_truth_takes_no_alpha(tmp_path):
    r = cli("simulate.sweep", "--truth", "teacher", "--alpha", "-5", "--n", "64", "128", "256",
            "--out", "r.jsonl", cwd=tmp_path)  # fmt: skip
    assert one_line_error(r) and "teacher" in r.stderr and os.listdir(tmp_path) == []


def test_unreachable_scheduler_is_an_error_not_a_hang(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(parallel_mod, "SCHEDULER_TIMEOUT_S", 2)
    argv = [*SWEEP, "--scheduler", "tcp://127.0.0.1:9", "--out", str(tmp_path / "r.jsonl")]
    assert sweep_cli.main(argv) == 2
    assert "error:" in capsys.readouterr().err
    assert read_records(tmp_path / "r.jsonl") == []


BAD_VERIFY = [
    ["--replicates", "0"],
    ["--workers", "-1"],
    ["--n", "64", "128"],
    ["--out", "."],
    ["--records", "."],
    ["--records", "typo.jsonl"],
    ["--json", "."],
    ["--figures", "afile"],
    ["--scheduler", "tcp://127.0.0.1:9", "--workers", "1"],
    ["--fingerprint", "abc"],
    ["--lam", "nan"],
    ["--delta", "0.5"],
]


@pytest.mark.parametrize("bad", BAD_VERIFY)
def test_verify_bad_input_is_one_line_and_creates_nothing(bad, tmp_path):
    (tmp_path / "afile").write_text("x")
    r = cli("verify.rates", "--tier", "tiny", *bad, cwd=tmp_path)
    assert one_line_error(r), (bad, r.returncode, r.stderr)
    assert os.listdir(tmp_path) == ["afile"]


def test_verify_json_into_a_missing_folder_is_created(tmp_path, recorded):
    _, path = recorded
    rep = tmp_path / "new" / "deeper" / "rep.json"
    r = cli("verify.rates", "--records", str(path), "--json", str(rep), "--figures",
            str(tmp_path / "f"))  # fmt: skip
    assert r.returncode in (0, 1, 3), r.stderr
    assert len(json.loads(rep.read_text())["results"]) == 3


def test_a_crash_is_exit_4_with_its_traceback(recorded, monkeypatch, capsys):
    import verify.rates as vr

    _, path = recorded

    def boom(*a, **k):
        raise RuntimeError("boom")

    monkeypatch.setattr(vr, "analyse", boom)
    assert vr.main(["--records", str(path), "--no-control"]) == 4
    err = capsys.readouterr().err
    assert "Traceback" in err and "RuntimeError: boom" in err


BAD_OTHER = [
    ("theory", ["--n", "1000", "--p", "1", "--alpha", "0.5", "--json", "."]),
    ("theory", ["--n", "nan", "--p", "1", "--alpha", "0.5"]),
    ("simulate.experiments.teacher", ["--epochs", "nan"]),
    ("simulate.experiments.teacher", ["--epochs", "inf"]),
    ("simulate.experiments.teacher", ["--json", "."]),
    ("simulate.bench", ["--device", "tpu"]),
    ("simulate.bench", ["--threads", "-1"]),
    ("simulate.bench", ["--json", "."]),
    ("figures", ["--records", "typo.jsonl"]),
    ("figures", ["--records", "."]),
    ("figures", ["--out", "afile"]),
    ("simulate.experiments.teacher", ["--seed", "-1"]),
    # root may "access" /proc, where no file can be created: refused before any work
    *[
        (m, [*a, "--json", "/proc/x.json"])
        for m, a in (
            ("theory", ["--n", "1000", "--p", "1", "--alpha", "0.5"]),
            ("simulate.experiments.teacher", []),
            ("simulate.bench", ["--E", "1"]),
        )
        if os.path.isdir("/proc/self")
    ],
    ("simulate.bench", ["--E", "1", "--json", os.devnull]),
    # a newline in a name, a path past PATH_MAX, a name past NAME_MAX: before any folder
    ("theory", ["--n", "1000", "--p", "1", "--alpha", "0.5", "--json", "a\nb/t.json"]),
    ("theory", ["--n", "1000", "--p", "1", "--alpha", "0.5", "--json", "d/" * 2100 + "t.json"]),
    ("theory", ["--n", "1000", "--p", "1", "--alpha", "0.5", "--json", "x" * 300 + "/t.json"]),
    ("figures", ["--out", "f\ng"]),
]


@pytest.mark.parametrize("module, bad", BAD_OTHER)
def test_other_commands_bad_input_is_one_line_and_creates_nothing(module, bad, tmp_path):
    (tmp_path / "afile").write_text("x")
    r = cli(module, *bad, cwd=tmp_path)
    assert one_line_error(r), (module, bad, r.returncode, r.stderr)
    assert os.listdir(tmp_path) == ["afile"]


# one bad input per entry point through a real ``python -m``: the status the shell sees,
# and nothing (a warning, a start-up line) on stderr beside the one line
PROCESS_BAD = [
    ("simulate.sweep", [*SWEEP, "--max-steps", "0", "--out", "res/r.jsonl"]),
    ("verify.rates", ["--tier", "tiny", "--replicates", "0"]),
    ("theory", ["--n", "nan", "--p", "1", "--alpha", "0.5"]),
    ("simulate.experiments.teacher", ["--epochs", "nan"]),
    ("simulate.bench", ["--device", "tpu"]),
    ("figures", ["--records", "typo.jsonl"]),
    ("verify.optimiser", ["--out-dir", "opt", "--n", "100", "--replicates", "2", "--workers", "0",
                          "--json", "opt/records-baseline.jsonl"]),
    ("verify.starts", ["--bogus"]),
    ("verify.results", ["--bogus"]),
    ("simulate.experiments.plain_control", ["--bogus"]),
    ("simulate.experiments.default_fit", ["--bogus"]),
    ("simulate.bench.store", ["--bogus"]),
]  # fmt: skip


@pytest.mark.parametrize("module, bad", PROCESS_BAD)
def test_each_entry_point_refuses_in_a_process_of_its_own(module, bad, tmp_path):
    """What the in-process runs above cannot show: ``python -m MODULE`` itself exits 2 with
    one line and creates nothing (the ``__main__`` wiring, the start-up, the exit status)."""
    (tmp_path / "afile").write_text("x")
    r = run_process(module, *bad, cwd=tmp_path)
    assert one_line_error(r), (module, bad, r.returncode, r.stderr)
    assert os.listdir(tmp_path) == ["afile"]


def test_theory_json_into_a_missing_folder_is_created(tmp_path):
    r = cli("theory", "--n", "1000", "--p", "1", "--alpha", "0.5", "--json", "a/b/t.json",
            cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "lemma_6_1" in json.loads((tmp_path / "a" / "b" / "t.json").read_text())


# ------------------------------------------------------------------ every driver's store
def test_teacher_and_real_data_records_are_one_configuration(tmp_path, monkeypatch):
    """Table 1's, UCI's and MNIST-1D's records files refuse another tier setting by name
    (the figures' --recompute discards them), and hold the same lock as the sweep."""
    import simulate.experiments.mnist as mn
    import simulate.experiments.table1 as ft
    import simulate.experiments.uci as uci
    from simulate.sweep.setup.tiers import TEACHER

    fake = {"method": "SVI", "replicate": 0, "rmse": [1.0], "elbo": [0.0], "schema": ft.SCHEMA}
    monkeypatch.setitem(TEACHER, "tiny", {**TEACHER["tiny"], "epochs": 3})
    with ft.teacher_store("tiny", tmp_path).writing() as st:
        st.append([fake])
    monkeypatch.setitem(TEACHER, "tiny", {**TEACHER["tiny"], "epochs": 2})
    with pytest.raises(RecordsError, match=r"epochs 3 -> 2.*--recompute"):
        ft.run_teacher("tiny", str(tmp_path))
    # more replicates is not another configuration
    monkeypatch.setitem(TEACHER, "tiny", {**TEACHER["tiny"], "epochs": 3, "replicates": 9})
    store = ft.teacher_store("tiny", tmp_path)
    assert store.foreign(store.read()) is None
    for store in (uci.uci_store("tiny", tmp_path), mn.mnist_store("tiny", tmp_path)):
        with exclusive_writer(store.path):
            with pytest.raises(RecordsError, match="another run"):
                with store.writing():
                    pass


def _is_none(v) -> bool:
    return v is None


# the fingerprint's rule as it was written before one rule replaced it, one branch a row: a
# setting, the test of its old default, and the settings unused beside it, dropped with it
_TWELVE_BRANCHES = (
    ("max_epochs", _is_none, ()),
    ("start", partial(eq, "random"), ()),
    ("mlp", partial(eq, "batched"), ()),
    ("protocol", _is_none, ()),
    ("batch_fraction", _is_none, ()),
    ("kl_warmup", not_, ()),
    ("restarts", partial(eq, 1), ()),
    ("continuation", not_, ()),
    ("lr_inclusion", _is_none, ()),
    ("lr_inclusion_ramp", _is_none, ()),
    ("stop_lr_decays", not_, ("stop_lr_factor",)),
    ("stop_risk_tol", _is_none, ("stop_val_fraction", "risk_draws")),
)


def _twelve_branches(d: dict) -> dict:
    """The fingerprint's rule as it was written before one rule replaced it (the oracle):
    each of ``_TWELVE_BRANCHES`` in turn drops its setting, and those beside it, where the
    setting passes its old default's test."""
    d = dict(d)
    for key, at_default, beside in _TWELVE_BRANCHES:
        if at_default(d.get(key)):
            for k in (key, *beside):
                d.pop(k, None)
    return d


_LATER = {
    "max_epochs": st.sampled_from([None, 40, 160]),
    "start": st.sampled_from(["random", "constructive", "both"]),
    "mlp": st.sampled_from(["batched", "native", "native-step"]),
    "protocol": st.sampled_from([None, "confirm-v4@12225bbded07"]),
    "batch_fraction": st.sampled_from([None, 0.1]),
    "kl_warmup": st.sampled_from([0, 500]),
    "restarts": st.sampled_from([1, 3]),
    "continuation": st.booleans(),
    "lr_inclusion": st.sampled_from([None, 0.1]),
    "lr_inclusion_ramp": st.sampled_from([None, 1000]),
    "stop_lr_decays": st.sampled_from([0, 2]),
    "stop_lr_factor": st.sampled_from([0.1, 0.5]),
    "stop_risk_tol": st.sampled_from([None, 0.1]),
    "stop_val_fraction": st.sampled_from([0.2, 0.3]),
    "risk_draws": st.sampled_from([10, 20]),
}


@settings(max_examples=300, deadline=None)
@given(st.fixed_dictionaries(_LATER))
def test_one_rule_drops_what_the_twelve_branches_dropped(later):
    """The fingerprint's one rule (a later setting at its declared default is left out,
    with the settings unused beside it) leaves out exactly what the twelve branches it
    replaced did, over every combination of the later settings: old records keep their
    fingerprints.  The defaults it reads are the dataclass's own."""
    d = {**SweepConfig(truths=[TruthSpec("holder", p=1, alpha=0.5)], ns=[8, 16, 32]).to_dict(),
         **later}  # fmt: skip
    # the settings declared "later" after the one rule replaced the branches (a named
    # regressor, simulate.sweep.train.foreign; the k-NN control's members,
    # simulate.sweep.train.knn) are
    # the rule's alone: at their defaults, left out
    # simulate.sweep.train.knn; the ladder grown at its edge and the plain arm,
    # simulate.sweep.train.edge and .groups) are the rule's alone: at their defaults, left out
    defaults = {"regressor": None, "regressor_params": None, "knn_ks": None,
                "width_edge_max": None, "plain_arm": True}  # fmt: skip
    after = tuple(defaults)
    assert all(d[k] == v for k, v in defaults.items())
    assert _without_later_defaults(d) == _twelve_branches({k: v for k, v in d.items()
                                                           if k not in after})  # fmt: skip
