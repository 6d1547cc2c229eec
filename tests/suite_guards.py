"""Two guards that keep the suite order-proof and out of the user's checkout.

* **Process state** (:func:`isolated`, autouse for every test): each test runs in a working
  folder of its own (a fresh temporary one: a command line that writes ``results/...``
  relative to its working folder writes there, never into the repository, which under
  pytest-xdist is a worker's working folder), and the process-wide state a test can leave
  changed -- environment variables, the working folder, ``sys.path``, the recursion limit,
  the umask, signal handlers, torch's threads, default dtype and grad mode, torch.compile's
  configuration (``torch._inductor.config``, ``torch._dynamo.config``), numpy's error and
  print settings, matplotlib's ``rcParams`` -- is read before and after it (:func:`snapshot`;
  what torch and matplotlib set of their own on first use in a process is left out, each
  said where it is);
  a test that leaves any of it changed fails at its teardown naming what changed, and the
  environment and working folder are put back so the tests after it run as they would
  alone.  A configuration module first imported during a test is compared from then on.
  This is what makes an order dependence fail by name where it starts (a
  ``monkeypatch.setattr`` on inductor's ``cpp.cxx`` did not give the value back, and a
  compiled test after it in the same process failed), whatever order the tests run in.
* **The checkout** (:class:`TreeGuard`, the controller process only): every file and folder
  under the repository's root (tracked and ignored alike, ``results/`` included) is listed
  with its size and modification time as the session starts and again as it ends; a suite
  that added, removed or rewrote any fails (exit status 1) with the paths listed.  Left
  out: ``.git`` (git's own), ``__pycache__`` (the interpreter's bytecode of the modules it
  imports) and ``.pytest_cache`` (pytest's own cache of the last failures).
"""

from __future__ import annotations

import os
import signal
import sys

import pytest

__all__ = ["TreeGuard", "differences", "isolated", "snapshot", "tree"]

# the configuration modules compared when imported (their get_config_copy())
_CONFIG_MODULES = ("torch._inductor.config", "torch._dynamo.config")
_SIGNALS = tuple(
    getattr(signal, s) for s in ("SIGINT", "SIGTERM", "SIGHUP", "SIGCHLD") if hasattr(signal, s)
)


# what the libraries set of their own on first use in a process, not a test's doing:
# torch.compile's first compile exports its cache folder and a pointer
# (TORCHINDUCTOR_CACHE_DIR, _TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR), and its C++ builder's
# import of setuptools puts setuptools' vendored folder on sys.path
_OWN_ENV_PREFIXES = ("TORCHINDUCTOR_", "_TORCHINDUCTOR_")
# and the project's own: where a step compiles, simulate.core.training_step raises dynamo's
# recompile_limit for the process (never lowers it), as every compiled sweep needs
_OWN_CONFIG = {("torch._dynamo.config", "recompile_limit")}
_OWN_PATH_SUFFIX = os.path.join("setuptools", "_vendor")
# torch.compile's first compile raises the recursion limit to at least this
# (torch/_inductor/compile_fx.py: sys.setrecursionlimit(max(limit, 2000))), never lowers it
_TORCH_RECURSION_FLOOR = 2000


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def snapshot() -> dict:
    """The process-wide state a test could leave changed (module docstring), by name."""
    state = {
        # pytest's own PYTEST_CURRENT_TEST names the phase it is in
        "environment": {
            k: v
            for k, v in os.environ.items()
            if k != "PYTEST_CURRENT_TEST" and not k.startswith(_OWN_ENV_PREFIXES)
        },
        "working folder": os.getcwd(),
        "sys.path": [p for p in sys.path if not str(p).endswith(_OWN_PATH_SUFFIX)],
        "recursion limit": sys.getrecursionlimit(),
        "umask": _umask(),
        "signal handlers": {int(s): signal.getsignal(s) for s in _SIGNALS},
    }
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "get_num_threads"):
        state["torch threads"] = torch.get_num_threads()
        state["torch default dtype"] = torch.get_default_dtype()
        state["torch grad mode"] = torch.is_grad_enabled()
        state["torch deterministic algorithms"] = torch.are_deterministic_algorithms_enabled()
    for name in _CONFIG_MODULES:
        mod = sys.modules.get(name)
        if mod is not None and hasattr(mod, "get_config_copy"):
            state[name] = {
                k: v for k, v in mod.get_config_copy().items() if (name, k) not in _OWN_CONFIG
            }
    np = sys.modules.get("numpy")
    if np is not None:
        state["numpy errors"] = np.geterr()
        state["numpy print options"] = np.get_printoptions()
    mpl = sys.modules.get("matplotlib")
    if mpl is not None and hasattr(mpl, "rcParams"):
        # the backend is resolved on first use (its "auto" sentinel becomes a name), and the
        # figures' code chooses Agg once per process (matplotlib.use, which also turns off
        # backend_fallback): the process's backend, not a setting a test chose
        state["matplotlib rcParams"] = {
            k: v for k, v in mpl.rcParams.items() if k not in ("backend", "backend_fallback")
        }
    return state


def _same(a, b) -> bool:
    try:
        return bool(a == b)
    except Exception:  # an array-valued setting: compared by its text
        return repr(a) == repr(b)


def differences(before: dict, after: dict) -> list[str]:
    """What changed between two :func:`snapshot` s, one line each (state present in both)."""
    out = []
    for name in before.keys() & after.keys():
        a, b = before[name], after[name]
        if isinstance(a, dict) and isinstance(b, dict):
            for k in sorted(a.keys() | b.keys(), key=str):
                if k not in b:
                    out.append(f"{name}: {k} removed (was {a[k]!r})")
                elif k not in a:
                    out.append(f"{name}: {k} added ({b[k]!r})")
                elif not _same(a[k], b[k]):
                    out.append(f"{name}: {k} {a[k]!r} -> {b[k]!r}")
        elif isinstance(a, list) and isinstance(b, list) and a != b:
            gone, new = [x for x in a if x not in b], [x for x in b if x not in a]
            out.append(f"{name}: added {new!r}, removed {gone!r}" if gone or new
                       else f"{name}: reordered")  # fmt: skip
        elif name == "recursion limit" and b == max(a, _TORCH_RECURSION_FLOOR):
            continue  # unchanged, or raised to torch.compile's own floor
        elif not _same(a, b):
            out.append(f"{name}: {a!r} -> {b!r}")
    return sorted(out)


@pytest.fixture(autouse=True)
def isolated(tmp_path_factory):
    """Every test in a working folder of its own, and failed at teardown if it leaves the
    process-wide state changed (module docstring)."""
    before = snapshot()
    here = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("cwd"))
    yield
    os.chdir(here)
    changed = differences(before, snapshot())
    if changed:
        for k in set(os.environ) - set(before["environment"]):
            if k != "PYTEST_CURRENT_TEST" and not k.startswith(_OWN_ENV_PREFIXES):
                del os.environ[k]
        os.environ.update(before["environment"])
        shown = "; ".join(line[:300] for line in changed[:8])
        more = f" (and {len(changed) - 8} more)" if len(changed) > 8 else ""
        pytest.fail(f"the test left process-wide state changed: {shown}{more}", pytrace=False)


_SKIP_DIRS = {".git", "__pycache__", ".pytest_cache"}


def tree(root) -> dict:
    """Every file and folder under ``root`` (but :data:`_SKIP_DIRS`): path -> (kind, size,
    modification time in ns)."""
    out = {}
    for here, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in _SKIP_DIRS]
        for name in dirs + files:
            path = os.path.join(here, name)
            try:
                st = os.lstat(path)
            except OSError:  # removed while walked
                continue
            kind = "dir" if name in dirs else "file"
            size = 0 if kind == "dir" else st.st_size
            mtime = 0 if kind == "dir" else st.st_mtime_ns
            out[os.path.relpath(path, root)] = (kind, size, mtime)
    return out


class TreeGuard:
    """The checkout's tree as the session starts, compared as it ends (module docstring)."""

    def __init__(self, root):
        self.root = str(root)
        self.before = tree(self.root)

    def changes(self) -> list[str]:
        after = tree(self.root)
        out = [f"added {p}" for p in sorted(after.keys() - self.before.keys())]
        out += [f"removed {p}" for p in sorted(self.before.keys() - after.keys())]
        out += [f"rewrote {p}" for p in sorted(self.before.keys() & after.keys())
                if self.before[p] != after[p]]  # fmt: skip
        return out


_GUARD = pytest.StashKey[TreeGuard]()


def pytest_configure(config):
    if not hasattr(config, "workerinput"):  # the controller (or the one process of -n 0)
        config.stash[_GUARD] = TreeGuard(config.rootpath)


def pytest_sessionfinish(session, exitstatus):
    guard = session.config.stash.get(_GUARD, None)
    if guard is None:
        return
    changes = guard.changes()
    if changes:
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        head = f"the suite changed the checkout ({guard.root})"
        lines = [
            *changes[:40],
            *([f"... and {len(changes) - 40} more"] if len(changes) > 40 else []),
        ]
        if tr is not None:
            tr.write_sep("=", head, red=True)
            for line in lines:
                tr.write_line(line, red=True)
        else:
            print("\n".join([head, *lines]), file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
