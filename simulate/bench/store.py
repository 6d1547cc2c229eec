"""``python -m simulate.bench.store RECORDS...``: what the records store costs, JSON lines
against SQLite, on real records (the measurement behind keeping JSON lines,
``simulate.sweep.store.records``).

Each file's records are written as a sweep writes them -- one append per job (the records
of one truth and n), each flushed to disk (``records.append_jsonl``) -- and, in the same
process, into SQLite with one transaction per job (``synchronous=FULL``; the WAL journal
and the rollback journal), then read back whole.  Reported per store: the median write
and read time over ``--repeats`` runs, the file's size (SQLite: with its journal), and the
ratio to JSON lines.  Files go to a temporary folder, removed at the end.
"""

from __future__ import annotations

import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time

from theory.plumbing.cli import Parser, print_error, run_main
from theory.plumbing.jsonl import append_jsonl, read_jsonl
from theory.plumbing.paths import path_arg

__all__ = ["store_costs"]

STORES = ("jsonl", "sqlite-wal", "sqlite-delete")


def _jobs(records: list[dict]) -> list[list[dict]]:
    """The records grouped as a sweep appends them: one group per (truth, n)."""
    jobs: dict = {}
    for r in records:
        cell = r.get("cell") or {}
        key = (json.dumps(cell.get("truth"), sort_keys=True), cell.get("n"))
        jobs.setdefault(key, []).append(r)
    return list(jobs.values())


def _jsonl(path: str, jobs, schema: str) -> tuple[float, float, int]:
    t = time.perf_counter()
    for job in jobs:
        append_jsonl(path, job)
    write = time.perf_counter() - t
    t = time.perf_counter()
    read_jsonl(path, schema)
    return write, time.perf_counter() - t, os.path.getsize(path)


def _sqlite(path: str, jobs, journal: str) -> tuple[float, float, int]:
    con = sqlite3.connect(path, isolation_level=None)
    try:
        con.execute(f"PRAGMA journal_mode={journal}")
        con.execute("PRAGMA synchronous=FULL")
        con.execute("CREATE TABLE records (id INTEGER PRIMARY KEY, key TEXT UNIQUE, body TEXT)")
        t = time.perf_counter()
        for i, job in enumerate(jobs):
            con.execute("BEGIN IMMEDIATE")
            for k, r in enumerate(job):
                body = json.dumps(r, sort_keys=True)
                con.execute("INSERT INTO records (key, body) VALUES (?, ?)", (f"{i}.{k}", body))
            con.execute("COMMIT")
        write = time.perf_counter() - t
        t = time.perf_counter()
        [json.loads(b) for (b,) in con.execute("SELECT body FROM records ORDER BY id")]
        read = time.perf_counter() - t
    finally:
        con.close()
    size = sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))
    return write, read, size


def store_costs(path: str, repeats: int = 5) -> dict:
    """``{"records", "appends", store: {"write_ms", "read_ms", "bytes"}}`` for the records
    of ``path`` (medians over ``repeats`` fresh files per store)."""
    if not os.path.isfile(path):
        raise ValueError(f"{path}: not a regular file (records are read from files only)")
    with open(path) as fh:
        records = [json.loads(line) for line in fh if line.strip()]
    if not records:
        raise ValueError(f"{path} holds no records")
    if not all(isinstance(r, dict) and isinstance(r.get("schema"), str) for r in records):
        raise ValueError(f"{path}: not a records file (every line a JSON object with a schema)")
    schema, jobs = records[0]["schema"], _jobs(records)
    runs: dict = {s: [] for s in STORES}
    with tempfile.TemporaryDirectory(prefix="asvi-store-") as tmp:
        for rep in range(repeats):
            for s in STORES:
                target = os.path.join(tmp, f"{rep}-{s}")
                if s == "jsonl":
                    runs[s].append(_jsonl(target, jobs, schema))
                else:
                    runs[s].append(_sqlite(target, jobs, s.split("-")[1]))
    out = {"records": len(records), "appends": len(jobs)}
    for s, v in runs.items():
        out[s] = {
            "write_ms": 1e3 * statistics.median(x[0] for x in v),
            "read_ms": 1e3 * statistics.median(x[1] for x in v),
            "bytes": v[0][2],
        }
    return out


def main(argv=None) -> int:
    ap = Parser(prog="python -m simulate.bench.store", description=__doc__.split("\n\n")[0])
    ap.add_argument("records", nargs="+", type=path_arg, help="records files (JSON lines)")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    if args.repeats < 1:
        print_error(f"--repeats must be >= 1, got {args.repeats}")
        return 2
    for path in args.records:
        try:
            res = store_costs(path, args.repeats)
        except (OSError, ValueError, KeyError) as exc:
            print_error(f"{path}: {exc}")
            return 2
        base = res["jsonl"]
        print(f"{path}: {res['records']} records in {res['appends']} appends")
        for s in STORES:
            r = res[s]
            print(
                f"  {s:14s} write {r['write_ms']:7.1f} ms ({r['write_ms'] / base['write_ms']:.2f}x)"
                f"  read {r['read_ms']:6.1f} ms ({r['read_ms'] / base['read_ms']:.2f}x)"
                f"  size {r['bytes'] / 1e3:8.1f} kB ({r['bytes'] / base['bytes']:.2f}x)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
