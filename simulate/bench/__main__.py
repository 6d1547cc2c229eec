"""``python -m simulate.bench``: :func:`simulate.bench.timing.main`, Ctrl-C one line."""

import sys

from simulate.bench.timing import main
from theory.cli import run_main

sys.exit(run_main(main))
