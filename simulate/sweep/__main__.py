"""``python -m simulate.sweep``: :func:`simulate.sweep.runner.main`."""

import sys

from simulate.sweep.runner import main

sys.exit(main())
