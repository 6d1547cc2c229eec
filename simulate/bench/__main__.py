"""``python -m simulate.bench``: :func:`simulate.bench.timing.main`."""

import sys

from simulate.bench.timing import main

sys.exit(main())
