"""Records read as data (issue 76, item 3): every reader checks a sweep record against the
schema's rules and its own fields -- the fingerprint recomputed from its fingerprint fields,
its config's settings as given against theirs -- without importing the configuration
machinery that wrote it; what only re-deriving that configuration can check is the opt-in
audit (``python -m simulate.sweep.audit``), which a sweep's resume also runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from simulate.sweep.store.rules import CELL_DERIVED, fingerprint
from simulate.sweep.store.schema import read_records
from tests.factories import run_main
from tests.simulate.sweep.test_records_validated import QUICK, assert_refused, edited, lines_of
from theory.plumbing.jsonl import RecordsError

REFERENCE = QUICK.parent
ROOT = Path(__file__).resolve().parents[3]

# the writer's configuration machinery: no reader of records may import it
WRITER = (
    "simulate.sweep.setup.config",
    "simulate.sweep.setup.settings",
    "simulate.sweep.setup.kinds",
    "simulate.sweep.setup.parts",
    "simulate.sweep.setup.param_values",
    "simulate.sweep.setup.regressor_class",
    "simulate.sweep.store.fingerprint",
    "simulate.sweep.store.audit",
)


def refingerprinted(edit):
    """An edit of a record's fingerprint fields that rehashes them: a record whose
    fingerprint is right for the fields it carries."""

    def go(rec):
        edit(rec)
        rec["fingerprint"] = fingerprint(rec["fingerprint_fields"])

    return go


def test_reading_records_imports_nothing_of_the_writers_configuration():
    """A shipped records file (an ASVI sweep's and a GP control's) read in a fresh process:
    none of the configuration's modules is imported (on the code before this change the
    reader's provenance check imported them all, and made a configuration per fingerprint)."""
    code = (
        "import sys\n"
        "from simulate.sweep.store.schema import read_records\n"
        f"n = len(read_records({str(QUICK)!r}))\n"
        f"n += len(read_records({str(REFERENCE / 'records-confirm4-gp.jsonl.gz')!r}))\n"
        f"print(n, [m for m in {WRITER!r} if m in sys.modules])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    count, imported = out.stdout.split(" ", 1)
    assert int(count) > 64
    assert imported.strip() == "[]", imported


def test_a_derived_field_edited_reads_as_data_and_the_audit_names_it(tmp_path):
    """``config.lambda_s`` (the prior's lambda_s the cell derives at its n) edited in one
    record: as data nothing contradicts it, so the reader reads the file; the audit
    re-derives the cell's config and names the field and the record (exit 1)."""
    path = edited(tmp_path, lambda r: r["config"].update(lambda_s=r["config"]["lambda_s"] * 2))
    assert len(read_records(path)) == len(lines_of(QUICK))
    r = run_main("simulate.sweep.audit", str(path))
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"{path}: record 5: 'config.lambda_s'" in r.stdout, r.stdout
    assert "1 of 64 records do not re-derive" in r.stdout, r.stdout


def test_fingerprint_fields_no_configuration_accepts_read_and_the_audit_refuses(tmp_path):
    """A depth of 0 in the fingerprint fields and the config alike, rehashed: a reader
    reads it (depth is a setting, not a record's rule), the audit makes the configuration
    and refuses it, naming why."""

    def edit(rec):
        rec["fingerprint_fields"]["depth"] = 0
        rec["config"]["depth"] = 0

    path = edited(tmp_path, refingerprinted(edit))
    read_records(path)
    r = run_main("simulate.sweep.audit", str(path))
    assert r.returncode == 1
    assert "'fingerprint_fields' describe no sweep configuration" in r.stdout, r.stdout


@pytest.mark.parametrize(
    "edit, field",
    [
        (lambda r: r["fingerprint_fields"].update(lr=0.5), "'config.lr'"),
        (lambda r: r["fingerprint_fields"].update(estimator="gp"), "'config.estimator'"),
        (lambda r: r["fingerprint_fields"].update(n_max=100), "'cell.n'"),
        (lambda r: r["fingerprint_fields"].pop("n_max"), "'cell.n'"),
    ],
    ids=["a-setting", "the-estimator", "n-above-n_max", "no-n_max"],
)
def test_fingerprint_fields_that_contradict_the_record_are_refused_on_reading(
    tmp_path, edit, field
):
    """Fingerprint fields edited and rehashed so that the fingerprint holds: their setting
    against the record's config, their estimator against the record's, their largest n
    against the record's n -- each refused by every reader, naming the field."""
    path = edited(tmp_path, refingerprinted(edit))
    assert_refused(run_main("verify.rates", "--records", str(path)), path, field)


def test_derived_fields_are_the_ones_the_configuration_derives():
    """:data:`CELL_DERIVED` (the reader's list of the config fields an ASVI cell derives
    at its n) against the configuration: the fields of a cell's config that are not
    settings recorded as given, for a configuration whose cells hold every derived field
    (the risk stop on: ``n_train``; the inclusion ramp on: ``lr_inclusion_n``)."""
    from simulate.sweep.setup import config

    cfg = config.SweepConfig(
        truths=[config.TruthSpec("holder", p=1, alpha=0.5)], ns=[64, 128], replicates=2,
        stop_risk_tol=0.1, lr_inclusion_ramp=1.0,
    )  # fmt: skip
    cell = cfg.cell_config(64, cfg.widths_at(64))
    assert set(cell) - set(config._RECORDED) == set(CELL_DERIVED)


def test_every_shipped_records_file_re_derives():
    """The audit over every shipped sweep records file: every record re-derives (exit 0)."""
    files = sorted(str(p) for p in REFERENCE.glob("records-*.jsonl.gz"))
    assert len(files) > 30
    r = run_main("simulate.sweep.audit", *files)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert r.stdout.count("all re-derive") == len(files)


def test_the_audit_names_a_missing_file_and_a_damaged_one(tmp_path):
    r = run_main("simulate.sweep.audit", str(tmp_path / "none.jsonl"))
    assert r.returncode == 2 and "no records file" in r.stderr
    path = edited(tmp_path, lambda r: r["config"].update(seed=1))
    r = run_main("simulate.sweep.audit", str(path))
    assert r.returncode == 2 and "line 5: 'config.seed'" in r.stderr, r.stderr


def test_a_sweep_resumes_only_from_records_its_configuration_writes(recorded, tmp_path):
    """The sweep's resume audits what it resumes from: a record whose derived field was
    edited (which a reader accepts as data) is refused before anything trains."""
    from simulate.sweep.run.runner import run_sweep
    from tests.simulate.sweep.test_records_integrity import cfg, quiet

    _, path = recorded
    lines = path.read_text().splitlines()
    rec = json.loads(lines[0])
    rec["config"]["batch_size"] = rec["config"]["batch_size"] + 1
    lines[0] = json.dumps(rec)
    out = tmp_path / "r.jsonl"
    out.write_text("\n".join(lines) + "\n")
    read_records(out)
    with pytest.raises(RecordsError, match="record 1 is not the one its configuration writes"):
        run_sweep(cfg(), out, progress=False, log=quiet)
