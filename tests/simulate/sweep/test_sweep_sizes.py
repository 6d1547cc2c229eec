"""A sweep's sizes are refused before anything is allocated, from the estimate the refusal
prints (``simulate.sweep.run.runner.check_memory``: its records, and each job's data, truth
values, training and evaluation; issue 61, item 2), and everything the project runs today
stays inside them."""

from __future__ import annotations

import glob
import gzip
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

import simulate.core.sizes as sizes
from simulate.sweep.run.runner import check_memory
from simulate.sweep.setup import tiers
from simulate.sweep.setup.config import SweepConfig
from simulate.sweep.setup.truth_spec import TruthSpec
from verify import protocol

ROOT = str(Path(__file__).resolve().parents[3])
REFERENCE = os.path.join(ROOT, "figures", "reference")
GIB = 2**30
HOLDER = TruthSpec("holder", p=1, alpha=0.5)


def test_the_job_estimate_counts_the_truth_s_values_at_n():
    """At n = 10**8 a worker asked for 10.4 GiB in the Hoelder truth's einsum (``[n, K + 1,
    p]`` float64, K + 1 = 14) after the check had estimated the data alone."""
    cfg = SweepConfig(truths=[HOLDER], ns=[64, 128, 10**8])
    parts = {what: b for b, what, _ in cfg.job_parts()}
    truth = parts["the truth's values at 100000000 points"]
    assert truth >= 2 * 10**8 * 14 * 8  # the arguments and their cosines, both live
    assert cfg.job_bytes() >= truth + parts["data of 3 replicates at n = 100000000"]


def _cap_12_gib() -> None:
    """At most 12 GiB of address space (less where the caller's hard limit is less)."""
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    cap = 12 * GIB if hard == resource.RLIM_INFINITY else min(12 * GIB, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))


def test_a_hundred_million_points_are_refused_before_anything(tmp_path):
    """The reproducer, under a 12 GiB limit (the old check passed it against the machine's
    memory; the worker then failed with exit 4): one line naming the truth's values, exit
    2, no folder, lock or records."""
    r = subprocess.run(
        [sys.executable, "-m", "simulate.sweep", "--truth", "holder", "--alpha", "0.5",
         "--p", "1", "--n", "64", "128", "100000000", "--out", "res/r.jsonl"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, preexec_fn=_cap_12_gib,
        env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": ROOT},
    )  # fmt: skip
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.returncode == 2 and len(lines) == 1, (r.returncode, r.stderr[-2000:])
    line = lines[0]
    assert line.startswith("error: one job of this sweep needs at least"), line
    assert "the truth's values at 100000000 points" in line and "this machine has" in line
    assert line.endswith("use smaller --n or --n-test"), line
    assert os.listdir(tmp_path) == []


def test_the_records_of_too_many_replicates_are_refused(monkeypatch):
    monkeypatch.setattr(sizes, "available_bytes", lambda: 16 * GIB)
    with pytest.raises(ValueError) as exc:
        check_memory(SweepConfig(truths=[HOLDER], ns=[64, 128, 256], replicates=10**8))
    msg = str(exc.value)
    assert msg.startswith("this sweep's 300,000,000 records (1 truth x 3 n x 100000000"), msg
    assert msg.endswith("use fewer --replicates (or fewer --n or truths)"), msg


def _every_configuration_run_today():
    """(name, config, jobs at once) of every tier, every confirmatory design's sweeps and
    known-answer control, and every shipped sweep records file's configuration."""
    out = []
    for name, spec in tiers.RATES.items():
        cfg = SweepConfig(truths=spec["truths"], **spec["sweep"])
        out.append((f"tier {name}", cfg, spec.get("workers") or 1))
    for tier, pname in protocol.CONFIRM_TIERS.items():
        d = protocol.design_tier(protocol.load(pname))
        for s in d["sweeps"]:
            cfg = SweepConfig(truths=s["truths"], **s["sweep"])
            out.append((f"{tier} {s['name']}", cfg, d.get("workers") or 1))
        if d.get("gp"):
            cfg = SweepConfig(truths=d["gp"]["truths"], **d["gp"]["sweep"])
            out.append((f"{tier} gp", cfg, d.get("workers") or 1))
    for path in sorted(glob.glob(os.path.join(REFERENCE, "*.jsonl.gz"))):
        with gzip.open(path, "rt") as fh:
            recs = [json.loads(line) for line in fh]
        ff = recs[0].get("fingerprint_fields", {})
        if "n_max" not in ff:  # the real-data and teacher experiments' are not sweeps
            continue
        stored = {k: v for k, v in ff.items() if k not in ("n_max", "schema", "versions", "code")}
        truths = {
            r["cell"]["truth"]: TruthSpec(
                **{k: r["truth"][k] for k in ("kind", "p", "alpha", "seed") if k in r["truth"]}
            )
            for r in recs
        }
        ns = sorted({r["cell"]["n"] for r in recs})
        reps = len({r["cell"]["replicate"] for r in recs})
        cfg = SweepConfig(truths=list(truths.values()), ns=ns, replicates=reps, **stored)
        out.append((os.path.basename(path), cfg, 2))
    return out


def test_everything_the_project_runs_fits_a_machine_of_8_gib(monkeypatch):
    """Every tier, protocol design and shipped records' configuration, at its workers (2
    for the shipped files: the tiers' count), inside the bounds on a machine of 8 GiB (the
    largest: the known-answer control's 1.7 GiB a job)."""
    monkeypatch.setattr(sizes, "available_bytes", lambda: 8 * GIB)
    runs = _every_configuration_run_today()
    assert len(runs) >= 70
    for name, cfg, workers in runs:
        check_memory(cfg, workers)  # raises naming the run if not
        assert cfg.job_bytes() < 2 * GIB, name
