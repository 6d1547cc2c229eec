"""``python -m theory``: :func:`theory.summary.main`, Ctrl-C one line."""

import sys

from theory.plumbing.cli import run_main
from theory.summary import main

sys.exit(run_main(main))
