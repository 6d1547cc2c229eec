"""``python -m simulate.sweep``: :func:`simulate.sweep.run.main`."""

import sys

from simulate.sweep.run import main

sys.exit(main())
