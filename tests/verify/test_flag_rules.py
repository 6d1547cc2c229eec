"""No option of ``python -m verify.rates`` silently ignored (issue 61, item 9): every option
is either one that acts wherever it is accepted or has a row of the table that refuses it,
in one line and exit 2 before anything is read or trained, in the runs that would not use
it (``verify.cli.flag_rules``).  The parser is walked, so a new option that is in neither
fails here, and every row is tried, for each of its options, on a command it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.factories import run_main
from verify import protocol as protocols
from verify.cli import flag_rules
from verify.cli.rates_args import build_parser, parser_defaults, protocol_of, tier_of
from verify.cli.runspec import RunSpec, spec_defaults
from verify.rates import main

ROOT = Path(__file__).resolve().parents[2]
QUICK = str(ROOT / "figures" / "reference" / "records-quick.jsonl.gz")
DRY = ["--tier", "quick", "--dry-run"]
GP = ["--tier", "gp", "--dry-run"]

# (row of the table, option): a command in which the option would be ignored, so refused
IGNORED = {
    ("records", "out"): ["--records", QUICK, "--out", "x.jsonl"],
    ("records", "workers"): ["--records", QUICK, "--workers", "2"],
    ("records", "scheduler"): ["--records", QUICK, "--scheduler", "127.0.0.1:8786"],
    ("records", "new_file"): ["--records", QUICK, "--new-file"],
    ("records", "accept_code_change"): ["--records", QUICK, "--accept-code-change"],
    ("records", "recipe"): ["--records", QUICK, "--recipe", "baseline"],
    ("records", "control_every_n"): ["--records", QUICK, "--control-every-n"],
    ("records", "control_from_start"): ["--records", QUICK, "--control-from-start"],
    ("records", "pilot_replicates"): ["--records", QUICK, "--pilot-replicates", "3"],
    ("no-records", "partial"): [*DRY, "--partial"],
    ("no-scheduler", "scheduler_timeout"): [*DRY, "--scheduler-timeout", "5"],
    ("no-scheduler", "worker_timeout"): [*DRY, "--worker-timeout", "5"],
    ("no-control", "control_records"): [*DRY, "--no-control", "--control-records", "c.jsonl"],
    ("no-control", "control_every_n"): [*GP, "--control-every-n"],
    ("no-control", "control_from_start"): [*GP, "--control-from-start"],
    ("confirmatory", "control_records"): [
        "--tier",
        "confirm3",
        "--dry-run",
        "--control-records",
        "c.jsonl",
    ],  # fmt: skip
    ("confirmatory", "control_every_n"): [
        "--tier",
        "confirm3",
        "--dry-run",
        "--control-every-n",
    ],  # fmt: skip
    ("gp", "recipe"): [*GP, "--recipe", "baseline"],
    ("gp", "depth"): [*GP, "--depth", "3"],
    ("gp", "l3"): [*GP, "--l3", "exact"],
    ("gp", "start"): [*GP, "--start", "random"],
    ("gp", "lambda_s_a"): [*GP, "--lambda-s-a", "0.2"],
    ("gp", "lam"): [*GP, "--lam", "5"],
    ("gp", "mlp"): [*GP, "--mlp", "native-step"],
    ("gp", "compile"): [*GP, "--no-compile"],
}


def _rows() -> set[tuple[str, str]]:
    return {(r.name, d) for r in flag_rules.RULES for d in r.options}


def _abs(argv):
    return [a if a != QUICK else f"{ROOT}/{QUICK}" for a in argv]


def test_every_option_acts_or_has_a_rule():
    """The walk: each option of the parser is in ``TAKES_EFFECT`` or in a row of ``RULES``
    or ``DRY_RUN_IDLE`` (a new option in none is one nothing decided about), none names
    an option the parser does not have, and each row's flag is named as the parser spells
    it."""
    actions = {a.dest: a for a in build_parser()._actions if a.dest != "help"}
    ruled = {d for _, d in _rows()} | set(flag_rules.DRY_RUN_IDLE)
    listed = set(flag_rules.TAKES_EFFECT) | ruled
    assert set(actions) - listed == set(), "options neither acting everywhere nor ruled"
    assert listed - set(actions) == set(), "rules or notes of options the parser does not have"
    assert set(flag_rules.TAKES_EFFECT).isdisjoint(ruled)
    assert set(IGNORED) == _rows(), "every row needs, per option, a command it refuses"
    for dest in ruled:
        for value in ("x", True, False):
            if value is False and len(actions[dest].option_strings) < 2:
                continue
            assert flag_rules._flag(dest, value) in actions[dest].option_strings, dest


@pytest.mark.parametrize("key", sorted(IGNORED), ids="-".join)
def test_an_option_a_run_would_ignore_is_one_line(key, tmp_path, monkeypatch, capsys):
    """Before: each of these ran (a re-read, a dry run) as if the option were not given;
    now exit 2, one line that names the option and what to do instead, refused by its own
    row of the table."""
    row, dest = key
    argv = _abs(IGNORED[key])
    args = build_parser().parse_args(argv)
    tier = tier_of(args, protocol_of(args))
    ctx = flag_rules.context(tier, args.tier in protocols.CONFIRM_TIERS)
    hit = flag_rules.refused(args, parser_defaults(), ctx)
    assert hit is not None and hit[:2] == (row, dest), hit
    monkeypatch.chdir(tmp_path)
    status = main([*argv, "--figures", str(tmp_path / "f")])
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    assert status == 2 and len(lines) == 1, (status, err[-2000:])
    given = next(a for a in IGNORED[key] if a.startswith("--") and a[2:].replace("-", "_")
                 in (dest, "no_" + dest))  # fmt: skip
    assert lines[0].startswith(f"error: {given} "), lines[0]
    assert "drop" in lines[0] or "give" in lines[0], lines[0]
    assert not (tmp_path / "f").exists() and not (tmp_path / "x.jsonl").exists()


def test_the_defaults_are_not_taken_for_options_given():
    """An option left at its default is not given: the plain quick tier, a re-read and a
    confirmatory dry run pass every rule, and a dry run without run-only options says
    nothing more."""
    d = parser_defaults()
    for argv in ([], ["--records", QUICK], ["--tier", "confirm4", "--dry-run"]):
        args = build_parser().parse_args(argv)
        tier = tier_of(args, protocol_of(args))
        flag_rules.refuse_ignored(args, d, tier, args.tier in protocols.CONFIRM_TIERS)
        assert flag_rules.dry_run_note(args, d) is None


def test_a_training_flag_with_records_and_truths_with_records(tmp_path):
    """Not among the issue's reproducers: ``--records FILE --workers 2`` (and ``--truth``
    groups with ``--records``) read the records and dropped the flag; now one line, exit 2,
    through the command line, nothing written."""
    for extra in (["--workers", "2"], ["--truth", "holder", "--alpha", "0.5"]):
        r = run_main("verify.rates", "--records", ROOT / QUICK, "--json", tmp_path / "r.json",
                     *extra, cwd=tmp_path)  # fmt: skip
        lines = [x for x in r.stderr.splitlines() if x.strip()]
        assert r.returncode == 2 and len(lines) == 1, r.stderr[-2000:]
        assert lines[0].startswith(f"error: {extra[0]} ") and "--records" in lines[0]
        assert not (tmp_path / "r.json").exists() and not (tmp_path / "results").exists()


def test_a_dry_run_names_the_options_it_does_not_use(tmp_path):
    """A dry run of a documented command (``--json``, ``--markdown`` appended) is still
    the plan, and now says that those act on the run, not on the dry run."""
    r = run_main("verify.rates", "--tier", "confirm3", "--dry-run", "--out", tmp_path / "r.jsonl",
                 "--json", tmp_path / "c.json", "--markdown", tmp_path / "c.md",
                 cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    first = r.stdout.splitlines()[0]
    assert first.startswith("note: --json, --markdown act on the run itself"), first
    assert not (tmp_path / "c.json").exists() and not (tmp_path / "c.md").exists()


def test_the_step_flags_move_a_confirmatory_design_and_say_so(tmp_path):
    """The issue's reproducer ``--tier confirm3 --mlp native-step --no-compile --dry-run``:
    both flags take effect (every ASVI sweep of the plan, and its control, runs the C step
    uncompiled; ``verify.cli.plan.planned_sweep``), a note says the run is an exploratory re-run
    of the design at another float rounding, and no rule of the table refuses them."""
    from verify.cli.plan import planned_sweep
    from verify.cli.rates_args import checked_overrides

    argv = ["--tier", "confirm3", "--mlp", "native-step", "--no-compile", "--dry-run",
            "--out", str(tmp_path / "r.jsonl")]  # fmt: skip
    args = RunSpec.from_namespace(build_parser().parse_args(argv))
    proto = protocol_of(args)
    tier = tier_of(args, proto)
    flag_rules.refuse_ignored(args, spec_defaults(), tier, True)
    plan = planned_sweep(args, [], tier, checked_overrides(args), proto)
    assert plan.runs
    for run in plan.runs:
        assert (run.sweep.config.mlp, run.sweep.config.compile) == ("native-step", False)
        assert (run.control.config.mlp, run.control.config.compile) == ("native-step", False)
    r = run_main("verify.rates", *argv, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "note: the step differs from protocol confirm-v3's design" in r.stdout
    assert "exploratory" in r.stdout and "records carry the step" in r.stdout


@pytest.mark.parametrize("flag", ["--scheduler-timeout", "--worker-timeout"])
def test_a_sweep_deadline_without_a_scheduler_is_one_line(tmp_path, flag):
    """``simulate.sweep``: a cluster's deadline given without ``--scheduler`` was accepted
    and did nothing; now one line, exit 2, nothing made."""
    r = run_main("simulate.sweep", "--truth", "holder", "--alpha", "0.5", "--p", "1", "--n",
                 "100", "200", "400", "--replicates", "2", "--out", "res/x.jsonl", flag, "5",
                 cwd=tmp_path)  # fmt: skip
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.returncode == 2 and len(lines) == 1, r.stderr[-2000:]
    assert lines[0].startswith(f"error: {flag} is a deadline") and "--scheduler" in lines[0]
    assert not (tmp_path / "res").exists()
