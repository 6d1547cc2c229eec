"""The sweep tests' shared fixture: one tiny sweep's records."""

import pytest


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """``(records, path)`` of a tiny sweep (``test_records_integrity.cfg()``), per module."""
    from simulate.sweep.run.runner import run_sweep
    from tests.simulate.sweep.test_records_integrity import cfg, quiet

    path = tmp_path_factory.mktemp("rec") / "r.jsonl"
    return run_sweep(cfg(), path, progress=False, log=quiet), path
