"""The package that runs is the package (``theory.plumbing.installation``): an entry point
refuses, one line and exit 2, to run with a ``theory``, ``simulate``, ``verify`` or
``figures`` that is not this installation's -- before the other file's code runs."""

from __future__ import annotations

import os
import subprocess
import sys
import types

import pytest

from theory.plumbing.cli import run_main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the checkout's
CHECK = os.path.join(ROOT, "theory", "plumbing", "installation.py")
MARK = "import pathlib; pathlib.Path('{}').write_text('ran')\n"


def _start(cwd, *argv) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": ROOT, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300, check=False)  # fmt: skip


def test_a_theory_py_in_the_working_folder_is_refused_before_it_runs(tmp_path):
    """The issue's reproducer: ``python -m verify.rates`` imported a ``theory.py`` there."""
    marker = tmp_path / "ran.txt"
    (tmp_path / "theory.py").write_text(MARK.format(marker))
    done = _start(tmp_path, "-m", "verify.rates", "--help")
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.count("\n") == 1, done.stderr
    assert f"error: theory is {tmp_path / 'theory.py'}, not this installation's" in done.stderr
    assert not marker.exists() and done.stdout == ""


def test_another_projects_package_is_refused(tmp_path):
    """Variant: a ``simulate/`` package of another project (with its ``__init__.py``), under
    ``python -m figures``."""
    (tmp_path / "simulate").mkdir()
    marker = tmp_path / "ran.txt"
    (tmp_path / "simulate" / "__init__.py").write_text(MARK.format(marker))
    done = _start(tmp_path, "-m", "figures", "--help")
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.count("\n") == 1
    assert f"simulate is {tmp_path / 'simulate' / '__init__.py'}" in done.stderr
    assert not marker.exists()


def _shadowing_from(cwd) -> str:
    code = (f"import runpy, sys; sys.path.insert(0, {str(cwd)!r}); "
            f"print(runpy.run_path({CHECK!r})['shadowing']())")  # fmt: skip
    done = _start(cwd, "-c", code)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_folders_without_init_do_not_shadow(tmp_path):
    """A results folder named ``figures`` (no ``__init__.py``) is no package where a regular
    one exists: not refused (the negative control); a ``verify.py`` beside it is."""
    for name in ("figures", "theory"):
        (tmp_path / name).mkdir()
    assert _shadowing_from(tmp_path) == "None"
    (tmp_path / "verify.py").write_text("")
    assert _shadowing_from(tmp_path) == repr(("verify", str(tmp_path / "verify.py")))


def test_this_installation_passes():
    """What the suite runs (an editable install or a checkout on PYTHONPATH): no shadow."""
    from theory.plumbing import installation

    assert installation.shadowing() is None
    assert all(sys.modules[n].__file__.startswith(ROOT) for n in ("theory", "simulate"))


def test_run_main_refuses_a_package_imported_from_elsewhere(tmp_path, monkeypatch, capsys):
    fake = types.ModuleType("figures")
    fake.__file__ = str(tmp_path / "figures.py")
    monkeypatch.setitem(sys.modules, "figures", fake)
    with pytest.raises(SystemExit) as done:
        run_main(lambda argv: 0)
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"figures is {tmp_path / 'figures.py'}" in err
