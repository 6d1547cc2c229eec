"""The results files' measured numbers (``RESULTS.md``, its pages ``docs/results/*.md`` and
``HISTORY.md``: ``figures.__main__.RESULTS_FILES``), regenerated from the records
(``python -m figures --only results``).

Every table of measured numbers in a results file sits in a *generated block*::

    <!-- generated: KIND records=PATH [metric=NAME] -->
    ...
    <!-- end generated -->

and is rewritten from the records file ``PATH`` (relative to the repository root):

* ``verify-rates`` -- ``python -m verify.rates --markdown``'s table and findings (without
  its heading), the budget-doubling control read from ``PATH``'s ``-double`` file when it
  exists, as ``verify.rates`` does; ``metric=d2`` keeps that metric's rows only;
  ``protocol=NAME`` decides records of no protocol tag under NAME (default: the records'
  own protocol, else ``verify.protocol.DEFAULT``) -- the earlier tiers' pages name the
  protocol their prose was written under, so a new default does not re-decide them;
* ``starts`` -- ``python -m verify.starts PATH``'s per-arm tables, in a code block;
* ``table1``, ``uci``, ``mnist1d``, ``mnist1d-controls`` -- the text table ``python -m
  figures --only NAME`` prints for the experiment's records ``PATH`` (the store its run
  wrote, ``results/figures/STEM-TIER.jsonl``), in a code block; ``tier=NAME`` (default:
  the records' own) names the tier in the caption, and for ``uci`` ``splits=random|standard``
  the split kind (default ``random``).

The blocks name the compressed records shipped in ``figures/reference/`` (read like the
plain ones, ``theory.plumbing.jsonl.read_jsonl``), so a fresh clone regenerates every
block with no training.  A block whose records file is missing is left as it is and
reported, so a regeneration never silently drops a result; a block of an unknown kind
is an error.  The prose between blocks interprets the numbers and is written by hand.
"""

from __future__ import annotations

import os
import re
import shlex
import tempfile

from figures._io import ONE_CONFIG_HINT
from figures.realdata_figures import mnist_controls_table, mnist_table, uci_table
from figures.teacher_figures import table1
from simulate.experiments import mnist, uci
from simulate.experiments import table1 as table1_run
from simulate.sweep.store.schema import read_records
from theory.plumbing.jsonl import RecordsError, being_written, read_jsonl
from theory.plumbing.paths import read_text_bounded, write_atomic
from verify.reading.analysis import analyse
from verify.reading.controls import read_with_control
from verify.report.render import markdown_results
from verify.starts import arms_table

__all__ = ["BLOCK", "render_block", "regenerate"]

BLOCK = re.compile(
    r"(?P<open><!-- generated: (?P<spec>[^\n]*?) -->\n)(?P<body>.*?)"
    r"(?P<close><!-- end generated -->)",
    re.S,
)
# each kind and the options it takes beside records=PATH
KINDS = {
    "verify-rates": {"metric", "protocol"},
    "starts": set(),
    "table1": {"tier"},
    "uci": {"tier", "splits"},
    "mnist1d": {"tier"},
    "mnist1d-controls": {"tier"},
}

# the record schema of each experiment's store (its records are refused otherwise)
EXPERIMENT_SCHEMAS = {
    "table1": table1_run.SCHEMA,
    "uci": uci.UCI_SCHEMA,
    "mnist1d": mnist.MNIST_SCHEMA,
    "mnist1d-controls": mnist.MNIST_CONTROL_SCHEMA,
}


def _parse(spec: str) -> tuple[str, dict]:
    kind, *args = shlex.split(spec)
    if kind not in KINDS:
        raise ValueError(f"generated block of unknown kind {kind!r} (known: {tuple(KINDS)})")
    opts = dict(a.split("=", 1) for a in args)
    if "records" not in opts or set(opts) - {"records"} - KINDS[kind]:
        extra = "".join(f" [{o}=VALUE]" for o in sorted(KINDS[kind]))
        raise ValueError(f"generated block {spec!r}: give records=PATH{extra}")
    return kind, opts


def _experiment_table(kind: str, records: list[dict], opts: dict) -> str:
    """The text table ``python -m figures --only KIND`` prints for these records (its
    files are written to a temporary folder and dropped)."""
    if not records:
        raise RecordsError(f"no records for the {kind} block")
    fields = records[0].get("fingerprint_fields") or {}
    tier = opts.get("tier", fields.get("tier", "-"))
    with tempfile.TemporaryDirectory() as out:
        if kind == "table1":
            return table1(records, out, tier)["text"]
        if kind == "uci":
            return uci_table(records, out, tier, opts.get("splits", "random"))["text"]
        if kind == "mnist1d":
            return mnist_table(records, out, tier)["text"]
        return mnist_controls_table(records, out, tier)["text"]


def render_block(spec: str, root: str = ".") -> str | None:
    """The body of the block ``spec`` from its records under ``root``; None when the
    records file is missing."""
    kind, opts = _parse(spec)
    path = os.path.join(root, opts["records"])
    if not os.path.isfile(path):
        return None
    if being_written(path):
        raise RecordsError(
            f"{path} is being written by another run (its lock is held); regenerate when it"
            " has ended"
        )
    if kind in EXPERIMENT_SCHEMAS:
        records = read_jsonl(path, EXPERIMENT_SCHEMAS[kind])
        return "```\n" + _experiment_table(kind, records, opts) + "\n```\n"
    if kind == "starts":
        return "```\n" + arms_table(read_records(path)) + "\n```\n"
    records, control = read_with_control(path, ONE_CONFIG_HINT)
    metrics = None if "metric" not in opts else {opts["metric"]}
    results = analyse(records, control=control, protocol=opts.get("protocol"))
    return markdown_results(results, None, metrics)


def regenerate(path: str = "RESULTS.md", root: str = ".", log=print) -> dict:
    """Rewrite every generated block of ``path`` from its records, whole or not at all
    (``theory.plumbing.paths.write_atomic``: a full disk or a file-size limit leaves the old file);
    returns the specs ``{"regenerated": [...], "unchanged": [...], "missing": [...]}``
    (missing: records not found, block left as it was).  ``path`` is read only as a
    regular file of bounded size (``ValueError`` otherwise, one line)."""
    text = read_text_bounded(path, "the results file")
    out = {"regenerated": [], "unchanged": [], "missing": []}

    def one(m: re.Match) -> str:
        spec = m.group("spec")
        body = render_block(spec, root)
        if body is None:
            out["missing"].append(spec)
            return m.group(0)
        out["unchanged" if body == m.group("body") else "regenerated"].append(spec)
        return m.group("open") + body + m.group("close")

    new = BLOCK.sub(one, text)
    if new != text:
        write_atomic(path, new)
    for key, specs in out.items():
        for s in specs:
            log(f"{path}: {key}: {s}")
    return out
