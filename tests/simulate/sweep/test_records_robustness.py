"""Records files under a full disk, a second name and another platform's locks."""

from __future__ import annotations

import errno
import importlib.util
import json
import os
import re
import sys

import pytest

import theory.plumbing.jsonl as records_mod
from tests.simulate.sweep.test_records_integrity import SWEEP, cli, one_line_error
from theory.plumbing.jsonl import RecordsError, append_jsonl, exclusive_writer, read_jsonl

SCHEMA = "asvi-rates/test/1"


def rec(i: int) -> dict:
    return {"schema": SCHEMA, "cell": i, "payload": "x" * 200}


class DiskFillsUp:
    """``os.write`` that writes ``room`` more bytes in all, in short writes of at most
    ``chunk`` bytes, then fails with ENOSPC (a disk that fills up mid-record)."""

    def __init__(self, room: int, chunk: int = 64):
        self.room, self.chunk, self.real = room, chunk, os.write

    def __call__(self, fd, data):
        if self.room <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        n = min(len(data), self.chunk, self.room)
        self.room -= n
        return self.real(fd, bytes(data[:n]))


def test_short_writes_are_completed(tmp_path, monkeypatch):
    path = tmp_path / "r.jsonl"
    monkeypatch.setattr(records_mod.os, "write", DiskFillsUp(room=10**9, chunk=7))
    append_jsonl(path, [rec(0), rec(1)])
    assert [r["cell"] for r in read_jsonl(path, SCHEMA)] == [0, 1]


def test_a_full_disk_mid_record_leaves_a_resumable_file_with_no_lost_cell(tmp_path, monkeypatch):
    """The disk fills inside the third record: the file is cut back to two whole records
    (no fragment for the next append to glue onto), the error names the file, and once
    space is back the remaining cells append cleanly -- every cell there exactly once."""
    path = tmp_path / "r.jsonl"
    append_jsonl(path, [rec(0)])
    line = len(json.dumps(rec(1), sort_keys=True)) + 1
    monkeypatch.setattr(records_mod.os, "write", DiskFillsUp(room=line + line // 2))
    with pytest.raises(RecordsError, match=r"r\.jsonl: could not append.*No space left"):
        append_jsonl(path, [rec(1), rec(2), rec(3)])
    assert path.read_bytes().endswith(b"\n")
    assert [r["cell"] for r in read_jsonl(path, SCHEMA)] == [0, 1]
    monkeypatch.undo()  # space is back: the run resumes with the cells not written
    append_jsonl(path, [rec(2), rec(3)])
    assert [r["cell"] for r in read_jsonl(path, SCHEMA)] == [0, 1, 2, 3]


def test_the_lock_follows_the_file_not_its_name(tmp_path, monkeypatch):
    """A second writer through a symbolic link, or through a relative name from another
    folder, finds the first writer's lock."""
    real = tmp_path / "data" / "r.jsonl"
    real.parent.mkdir()
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    (tmp_path / "other").mkdir()
    with exclusive_writer(real):
        with pytest.raises(RecordsError, match="being written by another run"):
            with exclusive_writer(link):
                pass
        monkeypatch.chdir(tmp_path / "other")
        with pytest.raises(RecordsError, match="being written by another run"):
            with exclusive_writer(os.path.join("..", "data", "r.jsonl")):
                pass
    with exclusive_writer(link):  # released: the link takes it
        pass


def test_a_sweep_through_a_symlink_exits_2_while_another_writes(tmp_path):
    real = tmp_path / "r.jsonl"
    link = tmp_path / "alias.jsonl"
    link.symlink_to(real)
    with exclusive_writer(real):  # a sweep holding the file under its own name
        r = cli("simulate.sweep", *SWEEP, "--out", str(link))
    assert one_line_error(r) and "being written by another run" in r.stderr
    assert not real.exists()


def test_records_import_without_fcntl(monkeypatch):
    """Where ``fcntl`` does not exist (Windows) the module imports and locks through
    ``msvcrt`` (faked here: its lock calls are recorded)."""
    calls = []

    class FakeMsvcrt:
        LK_NBLCK, LK_UNLCK = 2, 0

        @staticmethod
        def locking(fd, mode, nbytes):
            calls.append((mode, nbytes))

    monkeypatch.setitem(sys.modules, "fcntl", None)  # import fcntl -> ImportError
    monkeypatch.setitem(sys.modules, "msvcrt", FakeMsvcrt)
    spec = importlib.util.spec_from_file_location("records_windows", records_mod.__file__)
    mod = importlib.util.module_from_spec(spec)  # a separate copy: the real module untouched
    spec.loader.exec_module(mod)
    assert mod.fcntl is None
    fd = os.open(os.devnull, os.O_RDONLY)
    try:
        mod._lock(fd)
        mod._unlock(fd)
    finally:
        os.close(fd)
    assert calls == [(2, 1), (0, 1)]


# ------------------------------------------------------------------ bad input is exit 2
def rewritten(path, tmp_path, edit, line: int = 1):
    """A copy of the records file ``path`` with record ``line`` (0-based) edited."""
    lines = path.read_text().splitlines()
    rec = json.loads(lines[line])
    edit(rec)
    lines[line] = json.dumps(rec)
    out = tmp_path / "edited.jsonl"
    out.write_text("\n".join(lines) + "\n")
    return out


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda r: r.update(fingerprint=[1]), "'fingerprint' must be a string"),
        (lambda r: r.pop("per_width"), "'per_width' must be an object"),
        (lambda r: r.pop("config"), "record lacks 'config'"),
        (lambda r: r["cell"].pop("replicate"), "'cell.replicate' must be an integer"),
        (lambda r: r.update(metrics=None), "'metrics' must be an object"),
        (lambda r: r["cell"].update(n="128"), "'cell.n' must be an integer"),
        (lambda r: r.update(failed="false"), "'failed' must be true or false"),
    ],
)
def test_a_malformed_record_is_bad_input_naming_its_line(recorded, tmp_path, capsys, edit, message):
    """Exit 2 with the file, the line and the field -- not a traceback and exit 1 (the
    FAIL code) or 4."""
    from verify.rates import main

    _, path = recorded
    bad = rewritten(path, tmp_path, edit)
    assert main(["--records", str(bad), "--no-control"]) == 2
    err = capsys.readouterr().err
    assert f"{bad}, line 2: {message}" in err and "Traceback" not in err


def test_inputs_and_outputs_must_be_regular_files(recorded, tmp_path, capsys):
    """``--records /dev/zero`` would read for ever and a FIFO would hang: both refused at
    once; ``--out /dev/null`` is refused without creating ``/dev/null.lock``."""
    from verify.rates import main

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for source in (os.devnull, "/dev/zero", str(fifo)):
        if not os.path.exists(source):
            continue
        assert main(["--records", source, "--no-control"]) == 2
        assert "not a regular file" in capsys.readouterr().err
    with pytest.raises(RecordsError, match="not a regular file"):
        with exclusive_writer(os.devnull):
            pass
    assert not os.path.exists(os.devnull + ".lock")
    r = cli("simulate.sweep", *SWEEP, "--out", os.devnull)
    assert one_line_error(r) and "not a regular file" in r.stderr


def test_a_crash_while_reading_is_exit_4_never_1(recorded, tmp_path, monkeypatch, capsys):
    """Whatever goes wrong reading the input is a crash (4), not a FAIL verdict (1)."""
    import verify.rates as rates

    _, path = recorded

    def boom(*_a, **_k):
        raise MemoryError

    monkeypatch.setattr(rates, "existing_records", boom)
    assert rates.main(["--records", str(path), "--no-control"]) == 4
    assert "crashed (exit 4)" in capsys.readouterr().err


def other_code(r) -> None:
    """Make ``r`` a record of another configuration, whole: written by other code (one
    module's digest changed in its fingerprint's fields, its fingerprint their hash)."""
    from simulate.sweep.store.records import fingerprint

    code = r["fingerprint_fields"]["code"]
    code[sorted(code)[0]] = "0" * 16
    r["fingerprint"] = fingerprint(r["fingerprint_fields"])


def test_mixed_fingerprints_are_named_not_a_crash(recorded, tmp_path, capsys):
    from verify.rates import main

    _, path = recorded
    bad = rewritten(path, tmp_path, other_code)
    assert main(["--records", str(bad), "--no-control"]) == 2
    err = capsys.readouterr().err
    assert "mixes 2 configurations" in err and "Traceback" not in err


def test_a_record_without_its_fingerprints_fields_is_refused_naming_them(
    recorded, tmp_path, capsys
):
    """A record lacking the fields its fingerprint hashes (every sweep writes them) is
    damaged: one line naming the line and the field, not another configuration."""
    from verify.rates import main

    _, path = recorded

    def other(r):
        r["fingerprint"] = "f" * 16
        r.pop("fingerprint_fields")

    bad = rewritten(path, tmp_path, other)
    assert main(["--records", str(bad), "--no-control"]) == 2
    err = capsys.readouterr().err
    assert "line 2: 'fingerprint_fields' must be an object" in err and "Traceback" not in err


# ------------------------------------------------------------------ the control file
@pytest.mark.parametrize(
    "change",
    [
        {},
        {"max_epochs": 30},
        {"stop_risk_tol": 0.1},
        {"start": "both"},
        {"start": "both", "plain_arm": False},  # confirm-v5's
        {"lambda_s_a": 5.0},
    ],
)
def test_control_fields_are_the_control_configurations_fields(change):
    from simulate.sweep.store.fingerprint import fingerprint_fields
    from tests.simulate.sweep.test_records_integrity import cfg
    from verify.reading.controls import control_config, control_fields

    c = cfg(**change)
    assert control_fields(fingerprint_fields(c)) == fingerprint_fields(control_config(c, 1))


def test_a_control_file_of_other_records_is_refused(recorded, tmp_path, capsys):
    """The control of a sweep with another ``lambda_s_a`` beside the records (or given by
    ``--control-records``) is refused naming the field; the records' own control is used."""
    from simulate.sweep.run.runner import run_sweep
    from tests.simulate.sweep.test_records_integrity import cfg, quiet
    from verify.rates import main
    from verify.reading.controls import control_config

    _, path = recorded
    other = tmp_path / "other-double.jsonl"
    run_sweep(control_config(cfg(lambda_s_a=5.0), 1), other, progress=False, log=quiet)
    assert main(["--records", str(path), "--control-records", str(other)]) == 2
    err = capsys.readouterr().err
    assert f"{other} is not the budget-doubling control of {path}" in err
    assert "lambda_s_a 0.1 -> 5.0" in err
    own = tmp_path / "own-double.jsonl"
    run_sweep(control_config(cfg(), 1), own, progress=False, log=quiet)
    assert main(["--records", str(path), "--control-records", str(own)]) != 2


# ------------------------------------------------------------------ the code in the fingerprint
def test_the_fingerprint_hashes_the_code_a_record_runs():
    from simulate.sweep.store.records import code_hashes

    files = code_hashes()
    assert "simulate/core/trainer.py" in files and "simulate/truths/functions.py" in files
    assert "theory/__init__.py" in files
    assert not any(f.startswith(("simulate/bench/", "simulate/experiments/")) for f in files)
    assert all(len(h) == 12 for h in files.values())


def test_resuming_across_a_code_change_is_refused_naming_the_files(tmp_path, monkeypatch):
    """A sweep half-written by one version of the code, resumed by an edited one: refused
    with the edited file named; with ``accept_code_change`` it resumes under the file's
    fingerprint and every record it adds notes the change."""
    import simulate.sweep.store.fingerprint as fingerprint
    from simulate.sweep.run.runner import SweepRunOptions, run_sweep
    from tests.simulate.sweep.test_records_integrity import cfg, quiet

    path = tmp_path / "r.jsonl"
    first = run_sweep(cfg(), path, progress=False, log=quiet, max_jobs=1)
    edited = {**fingerprint.code_hashes(), "simulate/truths/functions.py": "0" * 12}
    monkeypatch.setattr(fingerprint, "code_hashes", lambda: edited)
    with pytest.raises(RecordsError, match=r"code\.simulate/truths/functions\.py"):
        run_sweep(cfg(), path, progress=False, log=quiet)
    recs = run_sweep(cfg(), path, SweepRunOptions(accept_code_change=True), progress=False,
                     log=quiet)  # fmt: skip
    assert len({r["fingerprint"] for r in recs}) == 1  # still one configuration
    added = [r for r in recs if "code_change_accepted" in r]
    assert len(added) == len(recs) - len(first) > 0
    assert all("simulate/truths/functions.py" in r["code_change_accepted"] for r in added)


# ------------------------------------------------------------------ no silent conversion
@pytest.mark.parametrize(
    "field, value, message",
    [
        ("widths", [2.7, 4.2], "every width (widths) must be an integer >= 1, got 2.7"),
        ("widths", "24", "widths must be a non-empty list"),
        ("stop_window", 10.5, "stop_window must be an integer >= 1, got 10.5"),
        ("lambda_s", True, "lambda_s must be a finite number > 0 or None, got True"),
        ("stop_tol", "0.01", "stop_tol must be a finite number > 0, got '0.01'"),
        ("ns", ["345"], "every n (ns) must be an integer >= 2, got '345'"),
        ("ns", [64.0, 128, 256], "every n (ns) must be an integer >= 2, got 64.0"),
    ],
)
def test_a_config_value_of_the_wrong_type_is_refused_not_converted(field, value, message):
    from tests.simulate.sweep.test_records_integrity import cfg

    with pytest.raises(ValueError, match=re.escape(message)):
        cfg(**{field: value})


def test_a_config_file_with_a_wrong_type_is_a_one_line_error(tmp_path):
    conf = tmp_path / "c.json"
    conf.write_text(json.dumps({"ns": [64, 128, 256], "widths": [2.7, 4.2]}))
    r = cli("simulate.sweep", "--truth", "holder", "--alpha", "0.5", "--p", "1",
            "--config", str(conf), "--out", str(tmp_path / "r.jsonl"))  # fmt: skip
    assert one_line_error(r) and "got 2.7" in r.stderr
    assert not (tmp_path / "r.jsonl").exists()


def test_a_cell_recorded_twice_is_refused_naming_both(recorded, tmp_path):
    from simulate.sweep.store.schema import read_records

    _, path = recorded
    lines = path.read_text().splitlines()
    twice = tmp_path / "twice.jsonl"
    twice.write_text("\n".join([*lines, lines[0]]) + "\n")
    with pytest.raises(RecordsError, match=rf"recorded twice \(records 1 and {len(lines) + 1}\)"):
        read_records(twice)


@pytest.mark.parametrize("top", ["[1, 2]", "null", '"ns"'])
def test_a_config_file_that_is_not_an_object_is_a_one_line_error(tmp_path, top):
    conf = tmp_path / "c.json"
    conf.write_text(top)
    r = cli("simulate.sweep", "--truth", "holder", "--alpha", "0.5", "--p", "1",
            "--config", str(conf), "--out", str(tmp_path / "r.jsonl"))  # fmt: skip
    assert one_line_error(r) and "must be a JSON object" in r.stderr


# ------------------------------------------------------------------ messages (item 10)
def test_sweep_workers_0_runs_in_this_process(tmp_path):
    r = cli("simulate.sweep", *SWEEP, "--workers", "0", "--out", str(tmp_path / "r.jsonl"))
    assert r.returncode == 0, r.stderr
    assert len((tmp_path / "r.jsonl").read_text().splitlines()) == 3


def test_outputs_that_cannot_be_written_are_refused_before_any_training(tmp_path, capsys):
    """``/proc`` passes ``os.access`` for root; a device is not a file: both refused at
    once (exit 2), not after the training."""
    from verify.rates import main

    for bad in ("/proc/x.json", os.devnull):
        if bad.startswith("/proc") and not os.path.isdir("/proc/self"):
            continue
        assert main(["--tier", "tiny", "--json", bad]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: --json") and "sweep:" not in err


def test_one_replicate_is_refused_with_the_reason(recorded, tmp_path, capsys):
    from verify.rates import main

    assert main(["--tier", "tiny", "--replicates", "1"]) == 2
    assert "intervals are over replicates" in capsys.readouterr().err
    _, path = recorded
    lines = [x for x in path.read_text().splitlines() if json.loads(x)["cell"]["replicate"] == 0]
    one = tmp_path / "one.jsonl"
    one.write_text("\n".join(lines) + "\n")
    assert main(["--records", str(one), "--no-control"]) == 2
    assert "need at least 2" in capsys.readouterr().err


def test_figures_names_its_own_way_out_of_a_mixed_file(recorded, tmp_path):
    _, path = recorded

    mixed = rewritten(path, tmp_path, other_code)
    r = cli("figures", "--only", "rates", "--records", str(mixed), "--out", str(tmp_path / "f"))
    assert r.returncode == 2 and "figures reads files of one configuration" in r.stderr
    assert "choose one with --fingerprint" not in r.stderr


# ------------------------------------------------------------------ strict JSON (item 9)
def strict_loads(text: str):
    """``json.loads`` that refuses NaN / Infinity tokens, as strict parsers do."""

    def refuse(token):
        raise ValueError(f"non-standard JSON token {token}")

    return json.loads(text, parse_constant=refuse)


def test_records_are_strict_json_and_read_back_their_non_finite_numbers(tmp_path):
    import math

    import numpy as np

    path = tmp_path / "r.jsonl"
    odd = {**rec(0), "per_width": {"d2": [0.1, math.nan, np.float64("inf")]}, "x": -math.inf}
    append_jsonl(path, [odd, rec(1)])
    lines = path.read_text().splitlines()
    first = strict_loads(lines[0])  # no bare NaN / Infinity on disk
    assert first["per_width"]["d2"] == [0.1, None, None] and first["x"] is None
    assert first["nonfinite"] == [
        [["per_width", "d2", 1], "NaN"],
        [["per_width", "d2", 2], "Infinity"],
        [["x"], "-Infinity"],
    ]
    assert "nonfinite" not in strict_loads(lines[1])  # a finite record is unchanged
    back = read_jsonl(path, SCHEMA)
    d2 = back[0]["per_width"]["d2"]
    assert d2[0] == 0.1 and math.isnan(d2[1]) and d2[2] == math.inf and back[0]["x"] == -math.inf
    assert "nonfinite" not in back[0]


def test_an_older_file_with_bare_nan_still_reads(tmp_path):
    import math

    path = tmp_path / "old.jsonl"
    path.write_text(f'{{"schema": "{SCHEMA}", "cell": 0, "v": NaN}}\n')
    assert math.isnan(read_jsonl(path, SCHEMA)[0]["v"])


def test_a_nonfinite_list_that_does_not_fit_its_record_names_the_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(
        json.dumps({"schema": SCHEMA, "v": [1], "nonfinite": [[["v", 5], "NaN"]]}) + "\n"
    )
    with pytest.raises(RecordsError, match=r"bad\.jsonl, line 1: a record's 'nonfinite' list"):
        read_jsonl(path, SCHEMA)


def test_a_failed_cell_is_recorded_and_verified_through_strict_json(tmp_path):
    """A sweep whose cells diverge writes strict JSON and verify.rates reads it back."""
    from simulate.sweep.run.runner import run_sweep
    from tests.simulate.sweep.test_records_integrity import cfg, quiet

    path = tmp_path / "r.jsonl"
    recs = run_sweep(cfg(lr=1e6), path, progress=False, log=quiet)  # diverges at once
    assert any(r["failed"] for r in recs)
    for line in path.read_text().splitlines():
        strict_loads(line)


@pytest.mark.parametrize(
    "grid",
    [["--n", "64", "128", "1000000000000"], ["--n", "64", "128", "256", "--widths", "1000000"]],
)
def test_a_sweep_that_cannot_fit_in_memory_is_refused_before_anything(tmp_path, grid):
    """``--n 10**12`` or a width of 10^6 ended in a MemoryError inside a job; now one line,
    exit 2, nothing locked or written."""
    r = cli("simulate.sweep", "--truth", "holder", "--alpha", "0.5", "--p", "1", *grid,
            "--out", str(tmp_path / "r.jsonl"))  # fmt: skip
    assert one_line_error(r) and "GiB" in r.stderr and "this machine has" in r.stderr
    assert os.listdir(tmp_path) == []


def test_a_tier_s_jobs_fit_easily():
    from simulate.sweep.setup import tiers
    from simulate.sweep.setup.config import SweepConfig

    for name in ("tiny", "quick", "full"):
        spec = tiers.RATES[name]
        assert SweepConfig(truths=spec["truths"], **spec["sweep"]).job_bytes() < 2**30


def test_a_control_beside_records_without_fingerprint_fields_is_refused_not_a_crash(
    recorded, tmp_path, capsys
):
    from verify.rates import main

    _, path = recorded
    bare = rewritten(path, tmp_path, lambda r: r.pop("fingerprint_fields"), line=0)
    ctl = tmp_path / "edited-double.jsonl"
    ctl.write_text(path.read_text())
    assert main(["--records", str(bare)]) == 2
    # refused as it is read (every sweep writes the fields), before the control is matched
    assert "edited.jsonl, line 1: 'fingerprint_fields' must be" in capsys.readouterr().err


@pytest.mark.parametrize(
    "module",
    ["verify.rates", "simulate.sweep", "theory", "figures", "simulate.bench",
     "simulate.experiments.teacher", "simulate.experiments.plain_control", "verify.starts"],
)  # fmt: skip
def test_a_malformed_flag_is_one_line_on_every_command_line(module):
    """``--n 1e3`` (or an unknown flag) was argparse's usage block and the error; every
    entry point parses with ``theory.plumbing.cli.Parser``: one line, exit 2, pointing to --help."""
    r = cli(module, "--workers", "x", "--n", "1e3", "--bogus")
    assert one_line_error(r), (module, r.stderr)
    assert f"see python -m {module} --help" in r.stderr
