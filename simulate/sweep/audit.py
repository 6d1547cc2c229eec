"""``python -m simulate.sweep.audit RECORDS...``: the opt-in audit of sweep records files.

Every reader checks each record as data (its schema, its ranges, itself, its truth, its
seeds, its fingerprint against its own fingerprint fields): no reader imports or runs the
configuration machinery that wrote it.  What only re-deriving that configuration can check
is this command's (``simulate.sweep.store.audit``): that a record's fingerprint fields are
those the fingerprint's rule gives the configuration they describe, and that its ``config``
is that configuration's cell at the record's n (candidate widths, batch, stopping rule,
lambda_s).  Such a configuration is made and its checks run, so the audit needs this
project's code at a version that knows its settings; a named regressor's class is never
imported.

Prints one line per file (``FILE: N records, all re-derive``) and one per record that does
not (``FILE: record K: the field and what its configuration gives``).  Exit status 0 when
every record of every file re-derives, 1 when one does not, 2 when a file is missing or a
record breaks the readers' checks (the error names it).
"""

from __future__ import annotations

import os
import sys

from simulate.sweep.store.audit import audit_records
from simulate.sweep.store.schema import read_records
from theory.plumbing.cli import Parser, print_error
from theory.plumbing.jsonl import RecordsError
from theory.plumbing.paths import path_arg

__all__ = ["main"]


def main(argv=None) -> int:
    ap = Parser(prog="python -m simulate.sweep.audit", description=__doc__.split("\n\n")[0])
    ap.add_argument("records", nargs="+", type=path_arg, help="sweep records files (.jsonl[.gz])")
    args = ap.parse_args(argv)
    status = 0
    for path in args.records:
        if not os.path.isfile(path):
            print_error(f"no records file {path}")
            return 2
        try:
            records = read_records(path)
        except RecordsError as exc:
            print_error(exc)
            return 2
        problems = audit_records(records)
        for k, text in problems:
            print(f"{path}: record {k}: {text}")
        if problems:
            status = 1
            print(f"{path}: {len(problems)} of {len(records)} records do not re-derive")
        else:
            print(f"{path}: {len(records)} records, all re-derive")
    return status


if __name__ == "__main__":
    sys.exit(main())
