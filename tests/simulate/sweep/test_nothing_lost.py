"""Nothing lost: outputs that cannot destroy inputs (by any name), locks on the file rather
than its name, files rewritten whole or not at all, a file still being written never
verified silently, and bounded reads of what the command lines are given.

Each test names the reproducer of issue 38 it encodes (numbered as there); each failed on
the code before the change (the closing note lists before and after)."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import tracemalloc
from pathlib import Path

import pytest

from simulate.sweep.store.records import tier_store
from simulate.sweep.store.schema import SCHEMA
from tests.simulate.sweep.test_records_integrity import SWEEP, cli, one_line_error
from theory.plumbing.jsonl import (
    LINE_LIMIT,
    RecordsError,
    being_written,
    exclusive_writer,
    read_jsonl,
)
from theory.plumbing.paths import atomic_path, check_distinct, protect_inputs, write_atomic
from verify.results import read_results


def copy_records(recorded, folder, name="r.jsonl"):
    _, path = recorded
    dst = folder / name
    shutil.copyfile(path, dst)
    return dst


# ------------------------------------------------------------- 1. no output names an input
@pytest.mark.parametrize("flag", ["--json", "--markdown"])
def test_a_report_may_not_overwrite_its_own_records(recorded, tmp_path, flag):
    """Reproducer 1: ``verify.rates --records r.jsonl --json r.jsonl`` (and --markdown)
    left the report where the records were."""
    path = copy_records(recorded, tmp_path)
    before = path.read_bytes()
    r = cli("verify.rates", "--records", str(path), flag, str(path), "--figures", str(tmp_path))
    assert one_line_error(r) and "may not name an input" in r.stderr, r.stderr
    assert path.read_bytes() == before


def test_a_report_may_not_overwrite_its_records_through_a_hard_link(recorded, tmp_path):
    """The rule on a name the reproducers do not give: a hard link of the records (no path
    resolution joins the two names; the file identity does)."""
    path = copy_records(recorded, tmp_path)
    os.link(path, tmp_path / "alias.json")
    before = path.read_bytes()
    r = cli("verify.rates", "--records", str(path), "--json", str(tmp_path / "alias.json"))
    assert one_line_error(r) and "same file" in r.stderr
    assert path.read_bytes() == before


def test_a_sweep_report_may_not_name_the_records_it_trains(tmp_path):
    """Reproducer 1, sweep mode: ``--out x.jsonl --json x.jsonl`` destroyed the training
    just done; now refused before any training (nothing is created)."""
    out = tmp_path / "x.jsonl"
    r = cli("verify.rates", "--tier", "quick", "--no-compile", "--n", "64", "128", "256",
            "--replicates", "2", "--out", str(out), "--json", str(out), "--no-control")  # fmt: skip
    assert one_line_error(r) and "may not name an input" in r.stderr, r.stderr
    assert not out.exists()


def test_two_outputs_may_not_be_one_file_and_protected_inputs_are_not_replaced(tmp_path):
    a = tmp_path / "a.md"
    with pytest.raises(ValueError, match="one file"):
        check_distinct([("--json", str(a)), ("--markdown", str(tmp_path / "." / "a.md"))])
    src = tmp_path / "in.jsonl"
    src.write_text("keep\n")
    os.symlink(src, tmp_path / "fig.png")
    protect_inputs(str(src))
    try:  # a derived output name (a figure) that resolves to an input
        with pytest.raises(ValueError, match="may not replace an input"):
            write_atomic(tmp_path / "fig.png", "png bytes")
    finally:
        import theory.plumbing.paths as paths_mod

        paths_mod._PROTECTED.clear()
    assert src.read_text() == "keep\n"


# ------------------------------------------------ 2, 4. locks on the file, taken before discards
def test_recompute_takes_the_lock_before_it_discards(recorded, tmp_path):
    """Reproducer 2: ``figures --only rates --tier tiny --recompute`` while a sweep writes
    ``results/records-tiny.jsonl`` deleted the file, then found the lock (exit 2); the
    sweep went on and ended with its first cells gone.  Now: exit 2, the file untouched."""
    (tmp_path / "results").mkdir()
    path = copy_records(recorded, tmp_path / "results", "records-tiny.jsonl")
    before = path.read_bytes()
    with exclusive_writer(path):  # the sweep writing it
        r = cli("figures", "--only", "rates", "--tier", "tiny", "--recompute", cwd=tmp_path)
    assert r.returncode == 2 and "being written by another run" in r.stderr, r.stderr
    assert path.read_bytes() == before


def test_an_experiment_tier_store_discards_only_under_its_lock(tmp_path):
    """The rule on the stores the reproducers do not name (Table 1, UCI, MNIST-1D): their
    ``--recompute`` discards a file only once its lock is held."""
    key, required = (lambda r: (r["i"],)), ("i",)
    store = tier_store(tmp_path, "teacher", "tiny", {"a": 1}, "asvi-rates/t/1", key, required)
    with store.writing() as st:
        st.append([{"schema": "asvi-rates/t/1", "i": 0}, {"schema": "asvi-rates/t/1", "i": 1}])
    before = Path(store.path).read_bytes()
    again = tier_store(tmp_path, "teacher", "tiny", {"a": 1}, "asvi-rates/t/1", key, required,
                       recompute=True)  # fmt: skip
    with exclusive_writer(store.path):  # another run writing it
        with pytest.raises(RecordsError, match="being written"):
            with again.writing():
                pass
    assert Path(store.path).read_bytes() == before
    with again.writing() as st:  # free: discarded under the lock
        assert st.done == set()
    assert read_jsonl(store.path, "asvi-rates/t/1") == []


def test_two_hard_links_of_one_records_file_meet_one_lock(tmp_path):
    """Reproducer 4: ``ln a.jsonl b.jsonl`` let two sweeps write one file at once (the
    lock followed the path)."""
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("")
    os.link(a, b)
    with exclusive_writer(a):
        with pytest.raises(RecordsError, match="being written by another run"):
            with exclusive_writer(b):
                pass
        r = cli("simulate.sweep", *SWEEP, "--out", str(b), "--workers", "0")
    assert one_line_error(r) and "being written by another run" in r.stderr, r.stderr
    assert a.read_text() == ""
    with exclusive_writer(b):  # released: the other name takes it
        pass


# ------------------------------------------------------------ 3. whole or absent
def _regenerable(recorded, tmp_path) -> bytes:
    copy_records(recorded, tmp_path, "r.jsonl")
    doc = tmp_path / "RESULTS.md"
    prose = ("A line of prose that interprets the numbers of the block below. " * 8 + "\n") * 140
    doc.write_text(
        prose + "<!-- generated: verify-rates records=r.jsonl metric=d2 -->\n| stale |\n"
        "<!-- end generated -->\n" + prose
    )
    return doc.read_bytes()


def _fsize_limit(limit):
    def cap():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return cap


def test_results_md_is_rewritten_whole_or_not_at_all(recorded, tmp_path):
    """Reproducer 3: ``figures --only results`` under ``ulimit -f 32`` stopped with ``File
    too large`` and left RESULTS.md cut to 32,768 bytes.  Now the old file stays whole,
    no temporary file is left, and the error is one line."""
    before = _regenerable(recorded, tmp_path)
    assert len(before) > 65536
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    r = subprocess.run(
        [sys.executable, "-m", "figures", "--only", "results", "--out", str(tmp_path / "f")],
        capture_output=True, text=True, cwd=tmp_path, env=env,
        preexec_fn=_fsize_limit(32 * 1024), check=False,
    )  # fmt: skip
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
    assert (tmp_path / "RESULTS.md").read_bytes() == before
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".RESULTS.md")]
    ok = cli("figures", "--only", "results", "--out", str(tmp_path / "f"), cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr  # unlimited: rewritten, whole
    text = (tmp_path / "RESULTS.md").read_text()
    assert "| stale |" not in text and text.endswith(before.decode()[-200:])


def test_an_atomic_write_that_fails_leaves_the_old_file(tmp_path, monkeypatch):
    """The rule on a writer the reproducers do not name (every JSON report): a failure in
    the middle of the write leaves the old file and no temporary one."""
    path = tmp_path / "report.json"
    path.write_text('{"old": true}')
    os.chmod(path, 0o640)

    class Boom(OSError):
        pass

    with pytest.raises(Boom):
        with atomic_path(path) as tmp:
            with open(tmp, "w") as fh:
                fh.write('{"new": ')
            raise Boom("disk full")
    assert path.read_text() == '{"old": true}' and os.listdir(tmp_path) == ["report.json"]
    write_atomic(path, '{"new": true}')
    assert path.read_text() == '{"new": true}'
    assert os.stat(path).st_mode & 0o777 == 0o640  # the old file's permission bits kept


# ------------------------------------------------ 8. a file still being written is not verified
def test_a_records_file_still_being_written_is_refused_unless_partial(recorded, tmp_path):
    """Reproducer 8: ``verify.rates --records X`` while a sweep still wrote X gave a
    verdict on the records so far with no word.  Now exit 2; ``--partial`` reads it and
    every output (printout, JSON, Markdown, figure titles) says so."""
    path = copy_records(recorded, tmp_path)
    out_json, out_md = tmp_path / "v.json", tmp_path / "v.md"
    with exclusive_writer(path):
        assert being_written(path)
        r = cli("verify.rates", "--records", str(path), "--figures", str(tmp_path / "f"))
        assert one_line_error(r) and "being written by another run" in r.stderr, r.stderr
        p = cli("verify.rates", "--records", str(path), "--partial", "--json", str(out_json),
                "--markdown", str(out_md), "--figures", str(tmp_path / "f"))  # fmt: skip
        f = cli("figures", "--only", "rates", "--records", str(path), "--out",
                str(tmp_path / "g"))  # fmt: skip
    assert not being_written(path)
    assert p.returncode in (0, 1, 3), p.stderr
    assert "partial read" in p.stdout
    entries = read_results(str(out_json))  # the schema names the key
    assert all("partial read" in e.decision.partial_read for e in entries)
    assert "PARTIAL READ" in out_md.read_text().splitlines()[0]
    assert f.returncode == 2 and "being written" in f.stderr  # figures: refused too


# ------------------------------------------------ 11. bounded reads
def test_config_from_a_fifo_or_a_device_is_refused_at_once(tmp_path):
    """Reproducer 11: ``--config FIFO`` hung; ``--config /dev/zero`` read without bound."""
    fifo = tmp_path / "cfg.json"
    os.mkfifo(fifo)
    holder = threading.Timer(120, lambda: open(fifo, "w").close())  # unblock an old reader
    holder.daemon = True
    holder.start()
    try:
        for cfg in (fifo, "/dev/zero"):
            r = subprocess.run(
                [sys.executable, "-m", "simulate.sweep", "--config", str(cfg), "--out",
                 str(tmp_path / "r.jsonl")],
                capture_output=True, text=True, timeout=60, check=False,
            )  # fmt: skip
            assert one_line_error(r) and "not a regular file" in r.stderr, r.stderr
    finally:
        holder.cancel()
    assert not (tmp_path / "r.jsonl").exists()


def test_a_records_line_of_gigabytes_is_refused_before_it_is_held(tmp_path):
    """Reproducer 11: a records line of 2 GB was read whole.  Now reading stops at
    ``LINE_LIMIT`` (sparse file: no disk used); peak Python memory well under the line."""
    path = tmp_path / "r.jsonl"
    with open(path, "wb") as fh:
        fh.write(json.dumps({"schema": SCHEMA}).encode() + b"\n")
        fh.seek(2 * 2**30)
        fh.write(b"\n")
    tracemalloc.start()
    try:
        with pytest.raises(RecordsError, match="line 2: longer than"):
            read_jsonl(path, SCHEMA)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * LINE_LIMIT  # the bound, not the line (2 GiB)


def test_a_corrupt_records_file_stops_the_bench_before_any_timing(tmp_path):
    """Reproducer 11: ``--records`` corrupt in the bench ran the whole GEMM benchmark
    before exit 1."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    r = cli("simulate.bench", "--workload", "sweep", "--tier", "quick", "--records", str(bad))
    assert one_line_error(r) and "not JSON" in r.stderr, r.stderr
    assert "GEMM" not in r.stdout


@pytest.mark.parametrize("what", ["missing", "folder"])
def test_figures_without_a_results_file_is_one_line(tmp_path, what):
    """Reproducer 11: figures with no RESULTS.md (or a folder in its place) exited 1 with
    a traceback."""
    if what == "folder":
        (tmp_path / "RESULTS.md").mkdir()
    r = cli("figures", "--only", "results", "--out", str(tmp_path / "f"), cwd=tmp_path)
    assert one_line_error(r) and "--results-md" in r.stderr, r.stderr


def test_a_non_utf8_output_name_is_refused_before_any_lock(tmp_path):
    """Reproducer 11: a non-UTF-8 ``--out`` under a strict stdout exited 1 after creating
    the ``.lock``; now exit 2 before anything is made."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONIOENCODING": "utf-8:strict"}
    out = os.fsencode(tmp_path) + b"/\xff.jsonl"
    r = subprocess.run(
        [sys.executable, "-m", "simulate.sweep", *SWEEP, "--workers", "0", "--out", out],
        capture_output=True, env=env, check=False,
    )  # fmt: skip
    err = r.stderr.decode("utf-8", "replace")
    assert r.returncode == 2 and "not valid UTF-8" in err and len(err.strip().splitlines()) == 1
    assert os.listdir(tmp_path) == []


# ------------------------------------------------ the audit's cases (found after the first pass)
def test_recompute_discards_by_name_and_other_names_keep_their_records(recorded, tmp_path):
    """``--recompute`` removes the records of the name it is given, as removing the name
    did: a hard-linked backup and a symbolic link's target keep theirs."""
    path = copy_records(recorded, tmp_path, "t.jsonl")
    before = path.read_bytes()
    os.link(path, tmp_path / "t.backup")
    (tmp_path / "archive").mkdir()
    kept = copy_records(recorded, tmp_path / "archive", "kept.jsonl")
    os.symlink(kept, tmp_path / "linked.jsonl")
    for name in ("t.jsonl", "linked.jsonl"):
        with exclusive_writer(tmp_path / name, discard=True):
            assert (tmp_path / name).read_bytes() == b""
    assert (tmp_path / "t.backup").read_bytes() == before
    assert kept.read_bytes() == before


def test_a_records_file_replaced_under_its_writer_is_not_appended_to(recorded, tmp_path):
    """Another program replacing the file (an editor's save, a checkout) while a run
    writes it: the run stops instead of appending to a file whose lock it does not hold."""
    path = copy_records(recorded, tmp_path)
    key, required = (lambda r: (r["i"],)), ("i",)
    from simulate.sweep.store.records import RecordStore

    path.write_text("")
    store = RecordStore(path, "asvi-rates/t/1", key, required)
    with store.writing() as st:
        st.append([{"schema": "asvi-rates/t/1", "i": 0}])
        other = tmp_path / "other.jsonl"
        other.write_text("")
        os.replace(other, path)
        with pytest.raises(RecordsError, match="replaced or removed while this run wrote it"):
            st.append([{"schema": "asvi-rates/t/1", "i": 1}])
    assert path.read_text() == ""


def test_a_dangling_link_given_as_records_is_kept_when_nothing_is_written(tmp_path):
    (tmp_path / "archive").mkdir()
    link = tmp_path / "dang.jsonl"
    os.symlink(tmp_path / "archive" / "new.jsonl", link)
    with exclusive_writer(link):
        pass
    assert os.path.islink(link) and os.listdir(tmp_path / "archive") == []


def test_an_atomic_write_through_a_symlink_keeps_the_link(tmp_path):
    (tmp_path / "shared").mkdir()
    target = tmp_path / "shared" / "report.json"
    target.write_text("old")
    os.symlink(target, tmp_path / "link.json")
    write_atomic(tmp_path / "link.json", "new")
    assert os.path.islink(tmp_path / "link.json") and target.read_text() == "new"


def test_an_output_in_a_folder_that_cannot_take_its_temporary_file_is_refused_first(
    tmp_path, monkeypatch
):
    """A writable report in a read-only folder passed the check and failed after the work
    (the report is written beside itself and renamed)."""
    import theory.plumbing.paths as paths_mod
    from theory.plumbing.paths import check_output_file

    (tmp_path / "ro").mkdir()
    report = tmp_path / "ro" / "report.json"
    report.write_text("{}")
    real = os.access
    ro = str(tmp_path / "ro")
    monkeypatch.setattr(
        paths_mod.os, "access", lambda p, m: False if str(p) == ro and m & os.W_OK else real(p, m)
    )
    with pytest.raises(ValueError, match="cannot create files in"):
        check_output_file(report, "--json")


def test_the_optimiser_report_may_not_name_the_records_it_is_about_to_train(tmp_path):
    out_dir = tmp_path / "opt"
    r = cli("verify.optimiser", "--out-dir", str(out_dir), "--n", "100", "--replicates", "2",
            "--workers", "0", "--json", str(out_dir / "records-baseline.jsonl"))  # fmt: skip
    assert one_line_error(r) and "may not name an input" in r.stderr, r.stderr
    assert not out_dir.exists()


def test_a_figure_may_not_be_drawn_over_the_records_before_any_work(recorded, tmp_path):
    (tmp_path / "figs").mkdir()
    truth = recorded[0][0]["cell"]["truth"]
    path = copy_records(recorded, tmp_path / "figs", f"{truth}.png")
    before = path.read_bytes()
    r = cli("verify.rates", "--records", str(path), "--no-control", "--figures",
            str(tmp_path / "figs"))  # fmt: skip
    assert one_line_error(r) and "a figure" in r.stderr, r.stderr
    assert path.read_bytes() == before


def test_an_input_gone_and_its_inode_reused_no_longer_blocks_an_output(tmp_path, monkeypatch):
    """A protected input that is deleted frees its inode; a new file given that inode (seen
    in the suite: one test's output took an earlier test's input's inode) is not the input:
    writing it is allowed.  The input itself, while it exists, stays protected."""
    from theory.plumbing import paths

    gone, new, kept = tmp_path / "gone.jsonl", tmp_path / "new.json", tmp_path / "kept.jsonl"
    new.write_text("{}")
    kept.write_text("{}")
    # the inode reuse, as the file system did it: the deleted input's entry names new's inode
    monkeypatch.setitem(paths._PROTECTED, paths._identity(new), str(gone))
    with paths.atomic_path(new) as tmp:
        Path(tmp).write_text("[]")
    assert new.read_text() == "[]"
    monkeypatch.setitem(paths._PROTECTED, paths._identity(kept), str(kept))
    with pytest.raises(ValueError, match="same file as the input"):
        with paths.atomic_path(kept):
            pass
