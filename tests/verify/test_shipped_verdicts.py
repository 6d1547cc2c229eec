"""Every shipped records file re-verifies to the JSON report and exit status pinned in
``tests/data/shipped-verdicts.json`` (``tests.shipped_verdicts``): a refactor of the harness
changes no verdict and no byte of a report.  Three files by default (a quick tier's, the
known-answer control's, a confirmatory sweep with its budget control); all of them with
``-m slow``.  A change meant to move a report regenerates the pins on purpose
(``python -m tests.shipped_verdicts --write``) and says why in its commit."""

import pytest

from tests.shipped_verdicts import pinned, reverify, shipped_records

DEFAULT = ("records-quick.jsonl.gz", "records-confirm4-gp.jsonl.gz",
           "records-confirm4-holder-a05.jsonl.gz")  # fmt: skip


def test_every_shipped_records_file_is_pinned():
    assert sorted(pinned()) == shipped_records()
    assert set(DEFAULT) <= set(shipped_records())


@pytest.mark.parametrize("name", DEFAULT)
def test_a_shipped_records_file_re_verifies_as_pinned(name):
    assert reverify(name) == pinned()[name]


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in shipped_records() if n not in DEFAULT])
def test_every_other_shipped_records_file_re_verifies_as_pinned(name):
    assert reverify(name) == pinned()[name]
