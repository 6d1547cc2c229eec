"""The fused kernel's cache is trusted only when it is the user's own, and its public op
checks the network it is given (``simulate.core.native``, issue 38).

Loading a library runs its code, so every case where the cache could hold someone else's
library -- a folder others can write or own, a planted library under the computable name,
a symbolic link -- must end in a refusal (one line, exit 2 from the command lines) or a
rebuild, and the planted code must never run (its constructor writes a marker file).  A
damaged cache (truncated, empty, a FIFO, no entry point) is rebuilt, never a signal or a
hang.  Cases that crashed or hung before run in a fresh interpreter, with a timeout, so a
crash is this test's failure and not pytest's death."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from simulate.core import native
from simulate.core.native import library

pytestmark = pytest.mark.skipif(
    shutil.which(library._compiler()) is None, reason="no C compiler to build the fused kernel"
)

ROOT = Path(__file__).resolve().parents[3]
LOAD = "from simulate.core import native\nnative.load()\nprint('loaded')\n"
# the sweep of tests/simulate/sweep/test_records_integrity.py: seconds when it runs at all
SWEEP = ["--truth", "holder", "--alpha", "0.5", "--p", "1", "--n", "64", "128", "256"]
SWEEP += ["--replicates", "1", "--widths", "2", "--max-steps", "30", "--batch-size", "32"]
PLANTED = r"""
#include <stdio.h>
__attribute__((constructor)) static void planted(void) {
    FILE *f = fopen(MARKER, "w");
    if (f) { fputs("planted code ran\n", f); fclose(f); }
}
#ifdef ENTRY
int asvi_fused_mlp_gaussian(void) { return 0; }
#endif
"""


def _env(cache, **extra) -> dict:
    env = {**os.environ, "ASVI_RATES_CACHE": str(cache), "OMP_NUM_THREADS": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    return {**env, **extra}


def _run(args, cache, cwd=None, timeout=180, **extra) -> subprocess.CompletedProcess:
    """``args`` in a fresh process; a hang past ``timeout`` fails the test (the process
    is killed), a signal is its return code."""
    try:
        return subprocess.run(args, capture_output=True, text=True, env=_env(cache, **extra),
                              cwd=cwd, timeout=timeout, check=False)  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"{' '.join(map(str, args))} hung for {timeout} s")


def _py(code, cache, **kw):
    return _run([sys.executable, "-c", code], cache, **kw)


def _cli(module, args, cache, cwd, **kw):
    return _run([sys.executable, "-m", module, *args], cache, cwd=cwd, **kw)


def _sha(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A cache folder with the kernel built once (copied into each test's own cache)."""
    cache = tmp_path_factory.mktemp("built") / "cache"
    r = _py(LOAD, cache)
    assert r.returncode == 0, r.stderr
    return cache / "native"


def _cache(tmp_path, built=None):
    """A cache root of the test's own (mode 0o700) and its ``native`` folder, holding a
    copy of ``built``'s files if given."""
    cache = tmp_path / "cache"
    (cache / "native").mkdir(parents=True, mode=0o700)
    cache.chmod(0o700)
    for f in built.iterdir() if built else ():
        shutil.copy2(f, cache / "native" / f.name)
    return cache, cache / "native"


def _name(monkeypatch, cache, cc=None) -> Path:
    """The library's path in ``cache`` (for this compiler)."""
    monkeypatch.setenv("ASVI_RATES_CACHE", str(cache))
    if cc:
        monkeypatch.setenv("CC", cc)
    return native.library_path()


def _plant(tmp_path, where: Path, entry=True) -> Path:
    """A valid shared object at ``where`` whose constructor writes a marker file (and, with
    ``entry``, which has the kernel's entry point); the marker's path."""
    marker = tmp_path / "marker"
    src = tmp_path / "planted.c"
    src.write_text(PLANTED)
    cmd = [library._compiler(), "-shared", "-fPIC", f'-DMARKER="{marker}"', "-o", str(where)]
    subprocess.run(cmd + (["-DENTRY"] if entry else []) + [str(src)], check=True)
    return marker


def _assert_rebuilt(path: Path):
    """The library at ``path`` is a regular file whose recorded digest is its own."""
    assert stat.S_ISREG(os.lstat(path).st_mode)
    recorded = Path(f"{path}.sha256").read_text().split()[0]
    assert recorded == _sha(path)


def _one_line_refusal(r, *needles):
    assert r.returncode == 2, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


# -- 5: a planted library never runs ----------------------------------------------------------


@pytest.mark.parametrize("digest", ["none", "wrong"])
def test_a_planted_library_under_the_right_name_never_runs(tmp_path, monkeypatch, digest):
    """A valid library with the entry point, planted under the computable name in the
    user's own cache without its digest (or with another): rebuilt, its code never run."""
    cache, _ = _cache(tmp_path)
    path = _name(monkeypatch, cache)
    marker = _plant(tmp_path, path)
    planted = path.read_bytes()
    if digest == "wrong":
        Path(f"{path}.sha256").write_text(f"{hashlib.sha256(b'x').hexdigest()}  {path.name}\n")
    r = _py(LOAD, cache)
    assert r.returncode == 0, r.stderr
    assert not marker.exists()
    assert path.read_bytes() != planted
    _assert_rebuilt(path)


@pytest.mark.parametrize("folder", ["native", "root"])
def test_a_cache_others_can_write_is_refused_by_the_sweep(tmp_path, monkeypatch, folder):
    """A world-writable cache (its ``native`` folder or its root, chmod 0o777) holding a
    planted library -- with its digest recorded, as whoever can write the folder can do:
    ``python -m simulate.sweep --mlp native`` refuses it, one line, exit 2, nothing run
    and nothing written."""
    cache, nat = _cache(tmp_path)
    path = _name(monkeypatch, cache)
    marker = _plant(tmp_path, path)
    Path(f"{path}.sha256").write_text(f"{_sha(path)}  {path.name}\n")
    bad = nat if folder == "native" else cache
    bad.chmod(0o777)
    out = tmp_path / "out.jsonl"
    r = _cli("simulate.sweep", [*SWEEP, "--mlp", "native", "--out", str(out)], cache, tmp_path)
    _one_line_refusal(r, "--mlp native", str(bad), "chmod go-w")
    assert not marker.exists() and not out.exists()


def test_a_cache_others_can_write_is_refused_by_verify(tmp_path, monkeypatch):
    cache, nat = _cache(tmp_path)
    path = _name(monkeypatch, cache)
    marker = _plant(tmp_path, path)
    nat.chmod(0o777)
    args = ["--tier", "tiny", "--mlp", "native", "--no-control", "--dry-run", "--out",
            str(tmp_path / "r.jsonl"), "--figures", str(tmp_path / "figs")]  # fmt: skip
    r = _cli("verify.rates", args, cache, tmp_path)
    _one_line_refusal(r, "--mlp native", str(nat), "chmod go-w")
    assert not marker.exists()


def test_an_untrusted_cache_is_an_error_not_unavailable(tmp_path, monkeypatch):
    """``available()`` answers False for a missing compiler (test_native) but raises for a
    cache others can write: the user is to hear of it."""
    cache, nat = _cache(tmp_path)
    nat.chmod(0o777)
    monkeypatch.setenv("ASVI_RATES_CACHE", str(cache))
    monkeypatch.setattr(library, "_lib", None)
    with pytest.raises(native.NativeUntrusted, match="is writable by others"):
        native.available()
    assert list(nat.iterdir()) == []


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0,
                    reason="another user's folder can only be made as root")  # fmt: skip
@pytest.mark.parametrize("folder", ["native", "root"])
def test_a_cache_of_another_user_is_refused(tmp_path, monkeypatch, folder):
    """As root (the sweep started by root over a cache another user made): a cache folder
    of uid 65534, not writable by others, holding a planted library and its digest."""
    cache, nat = _cache(tmp_path)
    path = _name(monkeypatch, cache)
    marker = _plant(tmp_path, path)
    Path(f"{path}.sha256").write_text(f"{_sha(path)}  {path.name}\n")
    bad = nat if folder == "native" else cache
    os.chown(bad, 65534, 65534)
    r = _py(LOAD, cache)
    assert r.returncode != 0 and "NativeUntrusted" in r.stderr, r.stderr
    assert f"{bad} belongs to uid 65534" in r.stderr
    assert not marker.exists()


# -- the general rule on cases the reproducers do not name ------------------------------------


def test_a_symlink_under_the_library_s_name_is_not_followed(tmp_path, monkeypatch):
    """A link under the library's name to a planted library elsewhere, with the planted
    library's digest recorded beside the link: the link is replaced by a build, the
    planted library neither run nor touched."""
    cache, _ = _cache(tmp_path)
    path = _name(monkeypatch, cache)
    (tmp_path / "elsewhere").mkdir()
    evil = tmp_path / "elsewhere" / "lib.so"
    marker = _plant(tmp_path, evil)
    before = evil.read_bytes()
    Path(f"{path}.sha256").write_text(f"{_sha(evil)}  {path.name}\n")
    path.symlink_to(evil)
    r = _py(LOAD, cache)
    assert r.returncode == 0, r.stderr
    assert not marker.exists() and evil.read_bytes() == before
    _assert_rebuilt(path)


def test_a_group_writable_library_is_refused(tmp_path, monkeypatch, built):
    """The right library with its right digest, but writable by its group: anyone in the
    group could change it under the check, so it is refused, naming the fix."""
    cache, _ = _cache(tmp_path, built)
    path = _name(monkeypatch, cache)
    path.chmod(0o775)
    r = _py(LOAD, cache)
    assert r.returncode != 0 and "NativeUntrusted" in r.stderr, r.stderr
    assert f"chmod go-w {path}" in r.stderr


def test_a_build_makes_private_folders_and_records_the_digest(tmp_path, monkeypatch):
    cache = tmp_path / "a" / "b"
    monkeypatch.setenv("ASVI_RATES_CACHE", str(cache))
    monkeypatch.setattr(library, "_lib", None)
    native.load()
    for folder in (tmp_path / "a", cache, cache / "native"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    _assert_rebuilt(native.library_path())
    assert stat.S_IMODE(native.library_path().stat().st_mode) & 0o022 == 0


# -- 6: the op checks dims and offs against its tensors ---------------------------------------

OP = """
import sys
import torch
from simulate.core import Layout, native
lay = Layout(4, 2, [6, 3])
E, m = 2, 40
g = torch.Generator().manual_seed(0)
theta0 = torch.randn(E, lay.P, generator=g) * 0.3 * lay.mask()
x0 = torch.cat([torch.rand(E, m, 4, generator=g), torch.ones(E, m, 1)], -1)
y0 = torch.randn(E, m, generator=g)
for i, case in enumerate(sys.argv[1:]):
    theta, x, y, scale, sd = theta0.clone(), x0.clone(), y0.clone(), torch.ones(E), torch.ones(E)
    dims, offs = list(lay.dims), [o for o, _, _ in lay.blocks] + [lay.P_net]
    widths = torch.tensor(lay.widths)
    exec(case)
    try:
        torch.ops.asvi_rates.fused_mlp_gaussian(theta, x, y, scale, sd, dims, offs, widths)
    except ValueError:
        print(f"case {i}: ValueError", flush=True)
    else:
        print(f"case {i}: no error", flush=True)
"""
# the refusals first, the control (a consistent network, which runs) last: each refusal is
# then the first call into the op of its kind, and the control sees what they left behind
OP_CASES = [
    ("dims[1] = 10**6", "ValueError"),  # a hidden layer far larger than theta holds
    ("offs = offs[:-1]", "ValueError"),  # a short offs: P_net read past its end
    ("dims = dims[:-1]", "ValueError"),  # a short dims
    ("offs = [0, 72, 30, 79]", "ValueError"),  # blocks out of order
    # a narrower second hidden layer, its offsets consistent: the widths overrun it
    ("dims, offs = [4, 6, 3, 1], [0, 30, 51, 55]", "ValueError"),
    ("dims, offs = [4, 6, 6, 2], offs[:3] + [offs[3] + 7]", "ValueError"),  # 2 outputs
    ("widths = widths.double()", "ValueError"),
    ("", "no error"),  # the control: a consistent network runs
]
_SAID = re.compile(r"case (\d+): (ValueError|no error)$")


@pytest.fixture(scope="module")
def op_calls(tmp_path_factory, built):
    """Every case of ``OP_CASES`` called in one fresh process, in order: the process and
    what each case said (the first line naming it; a case that crashed the process has
    none, nor do the cases after it)."""
    cache, _ = _cache(tmp_path_factory.mktemp("op"), built)
    r = _run([sys.executable, "-c", OP, *[c for c, _ in OP_CASES]], cache)
    said: dict[int, str] = {}
    for line in r.stdout.splitlines():
        m = _SAID.match(line)
        if m:
            said.setdefault(int(m.group(1)), m.group(2))
    return r, said


@pytest.mark.parametrize("i", range(len(OP_CASES)), ids=[c or "control" for c, _ in OP_CASES])
def test_the_op_refuses_dims_and_offs_its_tensors_do_not_hold(op_calls, i):
    """``torch.ops.asvi_rates.fused_mlp_gaussian`` called directly with a network its
    tensors do not hold: a ValueError before the C call (it crashed the process or
    corrupted its heap).  The cases share one process (a start-up each cost ~4 s), each
    from fresh tensors; a crash ends the process, failing its case and every case after
    it, and a heap left corrupt shows at the process's exit
    (``test_the_op_s_refusals_leave_the_process_whole``)."""
    r, said = op_calls
    case, expect = OP_CASES[i]
    assert i in said, (case, r.returncode, r.stderr[-2000:])
    assert said[i] == expect, (case, said[i])


def test_the_op_s_refusals_leave_the_process_whole(op_calls):
    """The process that made every call of ``OP_CASES`` exits 0 with no traceback (a heap
    corrupted by a call that returned aborts at exit, -6)."""
    r, said = op_calls
    assert r.returncode == 0 and "Traceback" not in r.stderr, (r.returncode, r.stderr[-2000:])
    assert len(said) == len(OP_CASES), said


# -- 7: a damaged cache is rebuilt, a failing build says why ----------------------------------


@pytest.mark.parametrize("keep", [0.5, 0.0])
def test_a_truncated_library_is_rebuilt(tmp_path, monkeypatch, built, keep):
    """Half the library (it was SIGBUS), or none of it: the recorded digest differs."""
    cache, _ = _cache(tmp_path, built)
    path = _name(monkeypatch, cache)
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    r = _py(LOAD, cache)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    assert path.stat().st_size > 0
    _assert_rebuilt(path)


def test_a_library_without_the_entry_point_is_rebuilt(tmp_path, monkeypatch):
    cache, _ = _cache(tmp_path)
    path = _name(monkeypatch, cache)
    marker = _plant(tmp_path, path, entry=False)
    r = _py(LOAD, cache)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    assert not marker.exists()
    _assert_rebuilt(path)


def test_a_fifo_under_the_library_s_name_is_replaced_not_waited_on(tmp_path, monkeypatch):
    cache, _ = _cache(tmp_path)
    path = _name(monkeypatch, cache)
    os.mkfifo(path)
    r = _py(LOAD, cache, timeout=90)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    _assert_rebuilt(path)


def test_a_compiler_that_writes_nothing_caches_nothing(tmp_path, monkeypatch):
    """``CC=true``: exit 0, no output: an error naming the compiler; nothing under the
    library's name, no temporary file left."""
    cc = shutil.which("true")
    if cc is None:
        pytest.skip("no `true` command")
    cache, nat = _cache(tmp_path)
    path = _name(monkeypatch, cache, cc=cc)
    monkeypatch.setattr(library, "_lib", None)
    with pytest.raises(native.NativeUnavailable, match=f"`{cc}` exited 0 but wrote no library"):
        native.load()
    assert not os.path.lexists(path) and list(nat.iterdir()) == []


FAKE_CC = """#!/bin/sh
if [ "$1" = "--version" ]; then echo "fakecc 1.0"; exit 0; fi
echo "fused_mlp.c:1:1: warning: a note before the error" >&2
echo "fused_mlp.c:2:1: error: fakecc refuses to build this" >&2
exit 1
"""


def test_the_compiler_s_own_message_reaches_the_sweep(tmp_path, monkeypatch):
    cc = tmp_path / "fakecc"
    cc.write_text(FAKE_CC)
    cc.chmod(0o755)
    cache, nat = _cache(tmp_path)
    out = tmp_path / "out.jsonl"
    args = [*SWEEP, "--mlp", "native", "--out", str(out)]
    r = _cli("simulate.sweep", args, cache, tmp_path, CC=str(cc))
    _one_line_refusal(r, "fakecc refuses to build this", "exited 1")
    assert list(nat.iterdir()) == [] and not out.exists()
    monkeypatch.setenv("ASVI_RATES_CACHE", str(cache))
    monkeypatch.setenv("CC", str(cc))
    monkeypatch.setattr(library, "_lib", None)
    with pytest.raises(native.NativeUnavailable) as info:
        native.load()
    assert "a note before the error" in str(info.value)  # the message's tail, in full


def _unprivileged() -> list[str]:
    """A command prefix under which a folder of mode 0o500 cannot be written: none for a
    user, root without its override of file permissions (``setpriv``) for root."""
    if not hasattr(os, "getuid") or os.getuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("root writes any folder; no setpriv to drop that")
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]


@pytest.mark.parametrize("cmd", ["sweep", "bench"])
def test_an_unwritable_cache_is_named_plainly(tmp_path, cmd):
    """The cache folder exists but cannot be written (mode 0o500): the sweep and the bench
    name it and $ASVI_RATES_CACHE (they said a raw errno, and "no C compiler?")."""
    prefix = _unprivileged()
    cache, nat = _cache(tmp_path)
    nat.chmod(0o500)
    if cmd == "sweep":
        args = ["simulate.sweep", *SWEEP, "--mlp", "native", "--out", str(tmp_path / "o.jsonl")]
    else:
        args = ["simulate.bench", "--table1-block", "SVI", "--mlp", "native", "--steps", "1",
                "--repeats", "1"]  # fmt: skip
    r = _run([*prefix, sys.executable, "-m", *args], cache, cwd=tmp_path)
    _one_line_refusal(r, "--mlp native", str(nat), "$ASVI_RATES_CACHE")
    assert "Errno" not in r.stderr and "no C compiler" not in r.stderr
