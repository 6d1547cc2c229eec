"""``python -m simulate.sweep``: :func:`simulate.sweep.cli.main`, Ctrl-C one line."""

import sys

from simulate.sweep.cli import main
from theory.plumbing.cli import run_main

sys.exit(run_main(main))
