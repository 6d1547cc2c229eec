"""``python -m simulate.bench``: :func:`simulate.bench.run.main`."""

import sys

from simulate.bench.run import main

sys.exit(main())
