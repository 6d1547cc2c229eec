"""The suite's own guards (``tests/suite_guards.py``): each notices what it is there to
notice, and lets the unchanged pass (the negative controls)."""

from __future__ import annotations

import os
import pathlib

from tests import suite_guards as sg

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_every_test_runs_in_an_empty_folder_of_its_own():
    """A command line's relative output (``results/verify-quick/...``) lands here, never in
    the checkout."""
    here = pathlib.Path.cwd()
    assert here.resolve() != ROOT and ROOT not in here.resolve().parents
    assert list(here.iterdir()) == []


def test_a_compiler_setting_left_changed_is_named():
    """The order dependence the guard is there for: inductor's ``cpp.cxx`` left changed
    after a test is a difference naming it; given back by torch's own ``patch``, none."""
    from torch._inductor import config as inductor_config

    before = sg.snapshot()
    with inductor_config.patch({"cpp.cxx": ("/no/such/c++",)}):
        inside = sg.differences(before, sg.snapshot())
    assert any(line.startswith("torch._inductor.config: cpp.cxx") for line in inside), inside
    assert sg.differences(before, sg.snapshot()) == []


def test_environment_threads_and_signal_handlers_are_compared(monkeypatch):
    import signal

    import torch

    before = sg.snapshot()
    monkeypatch.setenv("ASVI_RATES_GUARD_PROBE", "1")
    threads = torch.get_num_threads()
    torch.set_num_threads(threads + 1)
    # a handler other than the one in place: under nohup SIGHUP is already ignored
    probe = signal.SIG_DFL if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN else signal.SIG_IGN
    old = signal.signal(signal.SIGHUP, probe)
    try:
        changed = sg.differences(before, sg.snapshot())
    finally:
        torch.set_num_threads(threads)
        signal.signal(signal.SIGHUP, old)
        monkeypatch.undo()
    assert any("ASVI_RATES_GUARD_PROBE added" in c for c in changed)
    assert any(c.startswith("torch threads:") for c in changed)
    assert any(c.startswith("signal handlers:") for c in changed)
    assert sg.differences(before, sg.snapshot()) == []


def test_the_tree_guard_sees_a_file_added_rewritten_or_removed(tmp_path):
    (tmp_path / "kept.txt").write_text("a")
    (tmp_path / "gone.txt").write_text("b")
    (tmp_path / "results").mkdir()
    guard = sg.TreeGuard(tmp_path)
    assert guard.changes() == []
    (tmp_path / "__pycache__").mkdir()  # the interpreter's bytecode: left out
    (tmp_path / "__pycache__" / "m.pyc").write_bytes(b"x")
    assert guard.changes() == []
    (tmp_path / "results" / "fig.png").write_bytes(b"png")
    (tmp_path / "gone.txt").unlink()
    st = os.stat(tmp_path / "kept.txt")
    (tmp_path / "kept.txt").write_text("aa")
    os.utime(tmp_path / "kept.txt", ns=(st.st_atime_ns, st.st_mtime_ns))  # same time, size not
    assert guard.changes() == [
        f"added {os.path.join('results', 'fig.png')}",
        "removed gone.txt",
        "rewrote kept.txt",
    ]


def test_no_test_monkeypatches_torchs_configuration():
    """torch's compiler settings are thread-local overrides: a ``monkeypatch.setattr`` on
    them and its undo did not give inductor's ``cpp.cxx`` back as it was on a fresh clone
    (a compiled test after it in the same process failed: "cpp.cxx does not exist"), which
    the process-state guard, reading the settings as torch shows them, cannot always see.
    torch's own ``config.patch`` is the way; this holds every test file to it."""
    import re

    pattern = re.compile(r"monkeypatch\.(setattr|delattr)\(\s*[\w.]*(inductor|dynamo)")
    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert offenders == []


def test_the_recursion_limit_is_compared_but_torch_compiles_floor_allowed():
    """torch.compile's first compile raises the limit to 2000 (a library's own, once per
    process); any other change is named."""
    before = {"recursion limit": 1000}
    assert sg.differences(before, {"recursion limit": 2000}) == []
    assert sg.differences({"recursion limit": 3000}, {"recursion limit": 3000}) == []
    assert sg.differences(before, {"recursion limit": 500}) == ["recursion limit: 1000 -> 500"]
    assert sg.differences(before, {"recursion limit": 5000}) == ["recursion limit: 1000 -> 5000"]
    assert sg.differences({"recursion limit": 3000}, {"recursion limit": 2000}) != []
