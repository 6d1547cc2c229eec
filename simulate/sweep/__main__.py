"""``python -m simulate.sweep``: :func:`simulate.sweep.runner.main`, Ctrl-C one line."""

import sys

from simulate.sweep.runner import main
from theory.cli import run_main

sys.exit(run_main(main))
