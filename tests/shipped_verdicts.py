"""What every shipped records file re-verifies to, pinned: ``python -m verify.rates
--records FILE --json J`` run on each sweep records file under ``figures/reference`` (their
budget controls read beside them), its exit status and the SHA-256 of the JSON report it
writes, kept in ``tests/data/shipped-verdicts.json``.

A guard for changes meant to leave behaviour alone (a refactor of the harness): the test
(``tests/verify/test_shipped_verdicts.py``) recomputes them and fails on any difference. A
change meant to move a verdict or a report regenerates the file on purpose, and its commit
says why::

    python -m tests.shipped_verdicts --write     # about 10 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REFERENCE = os.path.join(ROOT, "figures", "reference")
PINNED = os.path.join(ROOT, "tests", "data", "shipped-verdicts.json")


def shipped_records() -> list[str]:
    """The sweep records files under figures/reference (a budget control, ``-double``, is
    read beside its sweep's; the studies' own formats -- mnist1d, uci, teacher-subtract --
    are not sweep records)."""
    return sorted(
        f for f in os.listdir(REFERENCE)
        if f.startswith("records-") and f.endswith(".jsonl.gz") and "-double" not in f
    )  # fmt: skip


def reverify(name: str) -> dict:
    """``{"status": exit status, "json_sha256": digest of the JSON report or None}`` of one
    shipped records file, read in a temporary folder (nothing is written beside it)."""
    with tempfile.TemporaryDirectory() as tmp:
        js = os.path.join(tmp, "r.json")
        cmd = [sys.executable, "-m", "verify.rates", "--records", os.path.join(REFERENCE, name),
               "--json", js, "--figures", os.path.join(tmp, "f")]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": ROOT}  # this checkout's code, whatever is installed
        r = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=600)
        digest = None
        if os.path.exists(js):
            with open(js, "rb") as fh:
                digest = hashlib.sha256(fh.read()).hexdigest()
    return {"status": r.returncode, "json_sha256": digest}


def pinned() -> dict:
    with open(PINNED) as fh:
        return json.load(fh)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m tests.shipped_verdicts",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--write", action="store_true", help="write tests/data/shipped-verdicts.json")
    args = ap.parse_args(argv)
    out = {}
    for name in shipped_records():
        out[name] = reverify(name)
        print(name, out[name], flush=True)
    if args.write:
        os.makedirs(os.path.dirname(PINNED), exist_ok=True)
        with open(PINNED, "w") as fh:
            json.dump(out, fh, indent=1, sort_keys=True)
            fh.write("\n")
    elif os.path.exists(PINNED):
        old = pinned()
        moved = sorted(k for k in set(old) | set(out) if old.get(k) != out.get(k))
        print("moved:", moved or "none")
        return 1 if moved else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
