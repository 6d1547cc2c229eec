"""The memory pre-check counts the known-answer control's posterior covariances (issue 38,
item 6): a GP sweep whose jobs cannot fit is refused in one line before anything is made,
instead of holding tens of GB unannounced or failing in a worker."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

from simulate.sweep.setup.config import SweepConfig
from simulate.sweep.setup.truth_spec import TruthSpec

ROOT = str(Path(__file__).resolve().parents[3])
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": ROOT}
GP = {"estimator": "gp", "gp_nus": [0.5, 1.5, 2.5], "replicates": 2, "replicate_block": 1}


def _memory_cap() -> None:  # the old check let this run: fail fast instead of swapping
    resource.setrlimit(resource.RLIMIT_AS, (8 * 10**9, 8 * 10**9))


def test_the_gp_estimate_counts_the_test_covariances():
    """At n_test = 20,000 one replicate's posterior holds several 3.2 GB matrices; the
    estimate was the test inputs alone (160 kB)."""
    from simulate.sweep.setup.config import gp_job_bytes

    cfg = SweepConfig(truths=[TruthSpec("holder", p=1, alpha=0.5)], ns=[250, 1000, 4000], **GP)
    assert cfg.n_test == 20_000  # the default the reproducer ran with
    assert cfg.job_bytes() >= gp_job_bytes(4000, 20_000, cfg.draws) > 4 * 8 * 20_000**2
    small = SweepConfig(truths=[TruthSpec("holder", p=1, alpha=0.5)], ns=[250, 1000, 4000],
                        **{**GP, "n_test": 2000})  # fmt: skip
    assert small.job_bytes() < cfg.job_bytes() / 20


def test_a_gp_sweep_that_cannot_fit_is_refused_before_anything(tmp_path):
    """n_test = 200,000: about 1.3 TB for the posterior covariances; one line naming the
    estimate, the machine's memory and --n-test, exit 2, no folder, lock or records."""
    (tmp_path / "gp.json").write_text(json.dumps({**GP, "n_test": 200_000}))
    r = subprocess.run(
        [sys.executable, "-m", "simulate.sweep", "--truth", "holder", "--alpha", "0.5",
         "--p", "1", "--n", "250", "500", "1000", "--config", "gp.json",
         "--out", "res/gp.jsonl"],
        cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=300,
        preexec_fn=_memory_cap,
    )  # fmt: skip
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.returncode == 2 and len(lines) == 1, (r.returncode, r.stderr[-2000:])
    line = lines[0]
    assert line.startswith("error: one job of this GP control needs about"), line
    assert "GiB" in line and "this machine has" in line and "--n-test" in line, line
    assert sorted(os.listdir(tmp_path)) == ["gp.json"]
