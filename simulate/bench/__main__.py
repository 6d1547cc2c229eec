"""``python -m simulate.bench``: :func:`simulate.bench.cli.main`, Ctrl-C one line."""

import sys

from simulate.bench.cli import main
from theory.plumbing.cli import run_main

sys.exit(run_main(main))
