"""RESULTS.md's generated blocks (``figures.results_md``): rewritten from their records,
kept and reported when the records are missing, refused when of an unknown kind."""

import json
from pathlib import Path

import pytest

from figures.results_md import regenerate, render_block
from simulate.sweep.store.schema import SCHEMA, read_records
from tests.factories import fake_records
from verify.reading.analysis import analyse
from verify.report.render import markdown_results


def _write(path, records):
    with open(path, "w") as fh:
        for r in records:
            fh.write(json.dumps({**r, "schema": SCHEMA, "fingerprint": "f"}) + "\n")


def _shipped(truth="holder-a0.5-p1-s0", replicates=4):
    """Whole sweep records (every reader checks them: a synthetic record, with no
    configuration its fingerprint hashes, is refused): some of the quick tier's shipped
    ones, of one truth."""
    path = Path(__file__).resolve().parents[2] / "figures/reference/records-quick.jsonl.gz"
    return [
        r for r in read_records(path)
        if r["cell"]["truth"] == truth and r["cell"]["replicate"] < replicates
    ]  # fmt: skip


def test_blocks_are_rewritten_from_their_records_and_missing_ones_are_kept(tmp_path):
    recs = _shipped()
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    doc = tmp_path / "RESULTS.md"
    doc.write_text(
        "prose that stays\n\n"
        "<!-- generated: verify-rates records=r.jsonl metric=d2 -->\n| stale | 0.1 |\n"
        "<!-- end generated -->\n\nmore prose\n\n"
        "<!-- generated: verify-rates records=gone.jsonl -->\nkept as it was\n"
        "<!-- end generated -->\n"
    )
    out = regenerate(str(doc), str(tmp_path), log=lambda *_: None)
    assert out == {
        "regenerated": ["verify-rates records=r.jsonl metric=d2"],
        "unchanged": [],
        "missing": ["verify-rates records=gone.jsonl"],
    }
    text = doc.read_text()
    want = markdown_results(analyse(recs), None, {"d2"})  # the oracle: verify.rates' own
    assert want in text and "| stale |" not in text
    assert "| asvi | holder-a0.5-p1-s0 | d2 |" in want and "| d |" not in want
    assert "prose that stays" in text and "more prose" in text and "kept as it was" in text
    again = regenerate(str(doc), str(tmp_path), log=lambda *_: None)  # idempotent
    assert again["unchanged"] == ["verify-rates records=r.jsonl metric=d2"]
    assert doc.read_text() == text


def test_a_block_of_unknown_kind_or_without_records_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown kind"):
        render_block("tables records=r.jsonl", str(tmp_path))
    with pytest.raises(ValueError, match="records=PATH"):
        render_block("verify-rates metric=d2", str(tmp_path))
    assert render_block("starts records=absent.jsonl", str(tmp_path)) is None


# the generated blocks whose records are lost (none today: every run's records are
# shipped); one listed here is kept as written and reported by the regeneration; re-run its
# tier and ship its records to restore it
LOST = []


def test_every_generated_block_of_results_md_is_regenerated_from_the_shipped_records():
    """A fresh clone regenerates the measured numbers of every results file (RESULTS.md, its
    pages under docs/results/, HISTORY.md) with no training: every block equals its
    rendering from the compressed records in ``figures/reference``, and the only blocks
    without records are the ones listed lost."""
    import pathlib

    from figures.__main__ import RESULTS_FILES
    from figures.results_md import BLOCK

    root = pathlib.Path(__file__).resolve().parents[2]
    missing, checked = [], 0
    for doc in RESULTS_FILES:
        for m in BLOCK.finditer((root / doc).read_text()):
            body = render_block(m.group("spec"), str(root))
            if body is None:
                missing.append(m.group("spec"))
                continue
            assert body == m.group("body"), f"{doc}: block {m.group('spec')} differs"
            checked += 1
    # 34 blocks in RESULTS.md's pages (all of RESULTS.md's before it was split) and 1 in
    # HISTORY.md: a file dropped from RESULTS_FILES would lower the count
    assert missing == LOST and checked >= 35


def test_compressed_records_read_as_the_plain_ones_and_are_never_written(tmp_path):
    import gzip

    from theory.plumbing.jsonl import RecordsError, append_jsonl, exclusive_writer, read_jsonl

    recs = fake_records(-0.5, -0.5)
    plain = tmp_path / "r.jsonl"
    _write(plain, recs)
    packed = tmp_path / "r.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert read_jsonl(packed, SCHEMA) == read_jsonl(plain, SCHEMA)
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(packed.read_bytes()[:-20])
    with pytest.raises(RecordsError, match="not a whole gzip file"):
        read_jsonl(cut, SCHEMA)
    with pytest.raises(RecordsError, match="read-only"):
        append_jsonl(packed, recs[:1])
    with pytest.raises(RecordsError, match="read-only"):
        with exclusive_writer(packed):
            pass
    assert read_jsonl(packed, SCHEMA) == read_jsonl(plain, SCHEMA)


def test_a_block_names_the_protocol_its_records_of_no_tag_are_decided_under(tmp_path):
    """Records of no protocol tag are decided under the default unless the block names
    another: an earlier tier's page names the protocol its prose was written under
    (exploratory-v1's earlier theorem rule gives another report than the default's)."""
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _shipped()))
    spec = "verify-rates records=r.jsonl metric=d2"
    default = render_block(spec, str(tmp_path))
    assert render_block(spec + " protocol=exploratory-v3", str(tmp_path)) == default
    assert render_block(spec + " protocol=exploratory-v1", str(tmp_path)) != default
    with pytest.raises(ValueError, match="no protocol"):
        render_block(spec + " protocol=exploratory-v9", str(tmp_path))
