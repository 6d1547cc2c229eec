import os
import tempfile

import hypothesis.configuration
from hypothesis import HealthCheck, settings

from tests import suite_guards

# Derandomised by default so CI is reproducible; HYPOTHESIS_PROFILE=explore searches wider.
settings.register_profile(
    "ci",
    derandomize=True,
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("explore", max_examples=1000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
# hypothesis keeps its cache (and the explore profile's example database) under the working
# folder's .hypothesis/ unless told otherwise: the suite writes nothing into the checkout
# (suite_guards.TreeGuard), so it lives in the machine's temporary folder, kept across runs
hypothesis.configuration.set_hypothesis_home_dir(
    os.path.join(tempfile.gettempdir(), "asvi-rates-hypothesis")
)

# Under pytest-xdist (pyproject's addopts: one worker process per core) each worker and
# every process it starts runs one torch thread: two workers of two threads each on two
# cores ran 10-14x slower than one of two.  A test that needs more threads sets them itself
# (and restores them).
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["MKL_NUM_THREADS"] = "1"

    import torch

    torch.set_num_threads(1)


# the suite's two guards (tests/suite_guards.py): a test that leaves process-wide state
# changed fails by name, and a suite that changes the checkout's tree fails as a whole
pytest_configure = suite_guards.pytest_configure
pytest_sessionfinish = suite_guards.pytest_sessionfinish
isolated = suite_guards.isolated
