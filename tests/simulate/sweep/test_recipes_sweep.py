"""The optimiser recipes in the sweep (restarts chosen by ELBO, width continuation, the
plateau schedule, a batch growing with n, the KL warm-up), their fingerprints, and the
benchmark that measures them (``verify.optimiser``)."""

import json

import numpy as np
import pytest

from simulate.sweep.run.runner import run_job
from simulate.sweep.setup.config import SweepConfig
from simulate.sweep.setup.truth_spec import TruthSpec
from simulate.sweep.store.fingerprint import fingerprint_fields
from simulate.sweep.train.jobs import jobs_for
from verify.optimiser import gap_table, main

HOLDER = TruthSpec("holder", p=1, alpha=0.5)
TINY = dict(
    ns=[128, 256], replicates=2, widths=[2, 4], max_steps=120, stop_window=40,
    batch_size=64, n_test=500, draws=5, replicate_block=2,
)  # fmt: skip
NEW = ("batch_fraction", "stop_lr_decays", "stop_lr_factor", "kl_warmup", "restarts",
       "continuation", "lr_inclusion", "lr_inclusion_ramp")  # fmt: skip


def _records(**kw):
    cfg = SweepConfig(truths=[HOLDER], **{**TINY, **kw})
    return [r for job in jobs_for(cfg) for r in run_job(job)]


def test_defaults_keep_the_earlier_fingerprints_and_settings_enter_them():
    base = fingerprint_fields(SweepConfig(truths=[HOLDER], ns=[100]))
    assert not set(NEW) & set(base)  # records written before the recipes keep theirs
    settings = (("batch_fraction", 0.1), ("stop_lr_decays", 2), ("kl_warmup", 50),
                ("restarts", 2), ("continuation", True), ("lr_inclusion", 0.05),
                ("lr_inclusion_ramp", 1000))  # fmt: skip
    for field, value in settings:
        fp = fingerprint_fields(SweepConfig(truths=[HOLDER], ns=[100], **{field: value}))
        assert fp[field] == value
    with pytest.raises(ValueError, match="not combined"):
        SweepConfig(truths=[HOLDER], ns=[100], restarts=2, continuation=True)
    for bad in ({"restarts": 0}, {"stop_lr_factor": 1.0}, {"batch_fraction": 0.0},
                {"kl_warmup": -1}, {"stop_lr_decays": 1.5}):  # fmt: skip
        with pytest.raises(ValueError):
            SweepConfig(truths=[HOLDER], ns=[100], **bad)


def test_batch_fraction_grows_the_batch_and_the_cap_counts_its_epochs():
    cfg = SweepConfig(truths=[HOLDER], ns=[100, 32000], batch_size=128, batch_fraction=1 / 64,
                      max_epochs=160, max_steps=1000)  # fmt: skip
    assert cfg.batch_at(32000) == 500 and cfg.batch_at(4000) == 128 and cfg.batch_at(100) == 100
    assert cfg.hyper_at(32000).batch_size == 500
    assert cfg.steps_cap(32000) == 160 * 32000 // 500
    assert cfg.cell_config(32000, [2])["batch_fraction"] == 1 / 64


def test_the_logits_rate_grows_with_n_up_to_lr_inclusion():
    """``lr_inclusion_ramp``: lr (the default step path, None) up to n = ramp, then lr n /
    ramp, at most lr_inclusion; each cell's record carries the rate it trained with."""
    cfg = SweepConfig(truths=[HOLDER], ns=[100], lr=5e-3, lr_inclusion=0.1,
                      lr_inclusion_ramp=1000)  # fmt: skip
    assert cfg.lr_inclusion_at(500) is None and cfg.lr_inclusion_at(1000) is None
    assert cfg.lr_inclusion_at(2000) == pytest.approx(1e-2)
    assert cfg.lr_inclusion_at(8000) == pytest.approx(4e-2)
    assert cfg.lr_inclusion_at(20000) == pytest.approx(0.1) == cfg.lr_inclusion_at(32000)
    assert cfg.hyper_at(500).lr_inclusion is None
    assert cfg.hyper_at(8000).lr_inclusion == pytest.approx(4e-2)
    assert cfg.cell_config(8000, [2])["lr_inclusion_n"] == pytest.approx(4e-2)
    flat = SweepConfig(truths=[HOLDER], ns=[100], lr_inclusion=0.1)
    assert flat.lr_inclusion_at(500) == 0.1 and "lr_inclusion_n" not in flat.cell_config(500, [2])
    # below the ramp the cells train exactly as without the recipe's logits (the same
    # numbers), above it they do not
    below = _records(lr_inclusion=0.1, lr_inclusion_ramp=10_000)
    above = _records(lr_inclusion=0.1, lr_inclusion_ramp=64)
    for b, a, r in zip(below, above, _records(), strict=True):
        assert b["per_width"]["elbo"] == r["per_width"]["elbo"]
        assert a["per_width"]["elbo"] != r["per_width"]["elbo"]


def test_restarts_keep_the_best_elbo_of_each_candidate():
    """Restart 0 is the candidate without restarts (its seeds), so each candidate's ELBO with
    two restarts is at least the one-start ELBO (the same evaluation draws), the winner is
    recorded, and the truth plays no part in the choice."""
    one, two = _records(), _records(restarts=2)
    chosen = []
    for a, b in zip(one, two, strict=True):
        assert a["cell"] == b["cell"] and b["config"]["restarts"] == 2
        ea, eb = np.array(a["per_width"]["elbo"]), np.array(b["per_width"]["elbo"])
        assert (eb >= ea - 1e-6 * np.abs(ea)).all()
        chosen += b["per_width"]["restart"]
        for k, w in enumerate(b["per_width"]["restart"]):
            if w == 0:  # the same model as without restarts
                assert eb[k] == pytest.approx(ea[k], rel=1e-6)
    assert set(chosen) == {0, 1}  # both restarts win somewhere (a negative control)


def test_width_continuation_trains_each_width_from_the_narrower():
    recs = _records(continuation=True)
    base = _records()
    for r, b in zip(recs, base, strict=True):
        assert r["config"]["continuation"] is True
        assert r["per_width"]["elbo"][0] == pytest.approx(b["per_width"]["elbo"][0], rel=1e-6)
        assert r["per_width"]["elbo"][1] != b["per_width"]["elbo"][1]  # started elsewhere


def test_plateau_and_warmup_sweeps_record_their_rule():
    """With a tolerance every window meets (0.5), patience 2 and windows of 40: the warm-up
    of 40 steps makes the window ending at 40 not quiet, so the first plateau is at 120, the
    decay resets the count and the stop comes at 200; without the decay at 120."""
    loose = dict(stop_tol=0.5, stop_kl_abs=1e3, max_steps=400, kl_warmup=40)
    for r in _records(stop_lr_decays=1, **loose):
        rule = r["config"]["stop_rule"]
        assert rule["lr_decays"] == 1 and r["config"]["kl_warmup"] == 40
        assert r["per_width"]["steps"] == [200, 200]
    for r in _records(**loose):
        assert r["per_width"]["steps"] == [120, 120]


def _rec(truth, n, rep, elbos, d2=0.1):
    """A record whose R and constructive arms have the given selected ELBOs."""

    def arm(e):
        return {"selected_width": 2, "per_width": {"elbo": [e], "d2": [d2], "steps": [10]}}

    arms = {a: arm(elbos[a]) for a in ("W0", "W0s", "W", "P")}
    return {"cell": {"truth": truth, "n": n, "replicate": rep}, "failed": False,
            "truth": {"kind": "holder", "p": 1, "alpha": 0.5, "seed": 0},
            "config": {"widths": [2], "stop_rule": {"max_steps": 10}, "seed": 0},
            **arm(elbos["R"]), "arms": arms}  # fmt: skip


def test_gap_is_the_best_constructive_arm_minus_r_paired():
    recs = []
    for rep, (r, w0s, w) in enumerate([(-100, -90, -95), (-110, -100, -80), (-105, -99, -101)]):
        for n in (100, 200):
            recs.append(_rec("t", n, rep, {"R": r, "W0": -1e9, "W0s": w0s, "W": w, "P": 0.0}))
    (row, _) = gap_table(recs, ["t"], [100, 200])
    assert row["gap"] == pytest.approx(np.mean([10, 30, 6]))  # max(W0s, W) - R; P left out
    assert row["gap_W0s"] == pytest.approx(np.mean([10, 10, 6]))
    assert row["W_minus_W0s"] == pytest.approx(np.mean([-5, 20, -2]))
    lo, hi = row["gap_ci"]
    assert lo < row["gap"] < hi and row["capped_R"] == 1.0


def test_recipe_difference_pairs_r_on_the_same_cells_only():
    """ELBO(R) minus ELBO(R) of another recipe, per replicate on the same cells: cells only
    one side has (replicate 3 here) or drawn with another data seed are left out."""
    from verify.optimiser import recipe_difference

    def recs(shift, reps):
        out = []
        for rep in reps:
            for n in (100, 200):
                e = {"R": -100.0 + shift * (rep + 1) + n / 100, "W0": 0.0, "W0s": 0.0, "W": 0.0,
                     "P": 0.0}  # fmt: skip
                out.append(_rec("t", n, rep, e))
        return out

    a, b = recs(1.0, range(4)), recs(0.0, range(3))
    other_seed = recs(-50.0, [0])
    for r in other_seed:
        r["config"]["seed"] = 7
    rows = recipe_difference(a, b + other_seed, ["t"], [100, 200])
    assert [r["n"] for r in rows] == [100, 200] and rows[0]["replicates"] == 3
    assert rows[0]["diff"] == pytest.approx(2.0)  # the mean of 1, 2, 3
    assert rows[0]["ci"][0] < 2.0 < rows[0]["ci"][1]
    same = recipe_difference(b, b, ["t"], [100, 200])
    assert same[1]["diff"] == 0.0 and same[1]["ci"] == [0.0, 0.0]  # a negative control
    assert recipe_difference(a, b, ["other"], [100]) == []


def test_benchmark_command_line_refuses_bad_input(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--recipes", "nonsense"])
    assert e.value.code == 2
    assert main(["--n", "0", "--out-dir", "/nonexistent/dir/x"]) == 2


def test_benchmark_runs_a_recipe_end_to_end(tmp_path, monkeypatch):
    import verify.optimiser as opt

    monkeypatch.setitem(opt.TRUTH_SETS, "tiny", [("teacher", 20, None)])
    monkeypatch.setattr(opt, "BASE", {**opt.BASE, "compile": False, "max_epochs": None,
                                      "max_steps": 80, "stop_window": 40, "elbo_draws": 10,
                                      "n_test": 500, "draws": 5})  # fmt: skip
    out = tmp_path / "b.json"
    rc = main(["--recipes", "plateau", "--truths", "tiny", "--n", "100", "200",
               "--replicates", "2", "--workers", "0", "--out-dir", str(tmp_path),
               "--json", str(out)])  # fmt: skip
    assert rc == 0
    res = json.loads(out.read_text())
    assert [r["n"] for r in res["plateau"]["rows"]] == [100, 200]
    assert (tmp_path / "records-plateau.jsonl").exists()
    # against its own records: every paired difference 0 (the same cells, the same fits)
    rc = main(["--recipes", "plateau", "--truths", "tiny", "--n", "100", "200", "--tabulate",
               "--out-dir", str(tmp_path), "--json", str(out),
               "--against", str(tmp_path / "records-plateau.jsonl")])  # fmt: skip
    assert rc == 0
    res = json.loads(out.read_text())
    assert [r["diff"] for r in res["plateau"]["against"]] == [0.0, 0.0]
    assert "records" not in res["plateau"]


def test_rates_across_n_and_which_limits():
    """The d^2 slopes across n per arm (log-log, per replicate) and their paired difference
    R - best C; the answer reads the ELBO gap first (optimiser: C above R; objective: R above
    C while R's risk is the larger)."""
    from verify.optimiser import limits, rate_rows

    recs = []
    ns = [100, 400]
    for rep in range(3):
        for n in ns:
            r = _rec("t", n, rep, {"R": -100.0 - rep, "W0": -1e9, "W0s": -50.0, "W": -60.0,
                                   "P": 0.0}, d2=0.1 * (n / 100) ** -0.25)  # fmt: skip
            r["arms"]["W0s"]["per_width"]["d2"] = [0.1 * (n / 100) ** (-0.5 - 0.01 * rep)]
            recs.append(r)
    rates = rate_rows(recs, "t", ns)
    assert rates["R"]["slope"] == pytest.approx(-0.25)
    assert rates["W0s"]["slope"] == pytest.approx(-0.51)
    assert rates["R_minus_best_C"]["slope"] == pytest.approx(0.26)  # W0s has the best ELBO
    rows = gap_table(recs, ["t"], ns)
    assert limits(rows, rates).startswith("optimiser")
    flipped = [{**r, "gap": -5.0, "gap_ci": [-9.0, -1.0], "d2_R": 0.2, "d2_constructive": 0.1}
               for r in rows]  # fmt: skip
    assert limits(flipped, rates).startswith("objective")
    flipped[-1]["d2_R"] = 0.05  # R above C and the better fit: nothing shown against either
    assert limits(flipped, rates).startswith("neither")


def test_restarts_with_the_risk_stop_and_the_decays_in_the_records():
    """Restarts beside the held-out risk stop: each restart watches its replicate's held-out
    points (no shape clash); each candidate records the plateaus that lowered its rate."""
    recs = _records(restarts=2, stop_risk_tol=0.5, stop_lr_decays=1, stop_tol=0.5,
                    stop_kl_abs=1e3, max_steps=400)  # fmt: skip
    for r in recs:
        assert r["config"]["n_train"] < r["cell"]["n"]
        assert set(r["per_width"]["restart"]) <= {0, 1}
        assert all(d in (0, 1) for d in r["per_width"]["lr_decays"])


def test_a_config_file_resumes_as_written(tmp_path):
    from simulate.sweep.cli import build_parser, config_from_args
    from simulate.sweep.setup.recipes import DEFAULT_RECIPE, recipe_settings

    cfg_file = tmp_path / "c.json"
    cfg_file.write_text(json.dumps({"ns": [100, 200], "truths": [{"kind": "holder", "p": 1,
                                                                  "alpha": 0.5}]}))  # fmt: skip
    args = build_parser().parse_args(["--config", str(cfg_file)])
    assert config_from_args([], args).stop_lr_decays == 0  # the file's own: the baseline
    args = build_parser().parse_args(["--n", "100", "200"])
    cfg = config_from_args([HOLDER], args)
    assert cfg.lr_inclusion == recipe_settings(DEFAULT_RECIPE)["lr_inclusion"]
    args = build_parser().parse_args(["--config", str(cfg_file), "--recipe", "plateau"])
    assert config_from_args([], args).stop_lr_decays == 2
