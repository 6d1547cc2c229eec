import os

from hypothesis import HealthCheck, settings

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

# Under pytest-xdist (pyproject's addopts: one worker process per core) each worker and
# every process it starts runs one torch thread: two workers of two threads each on two
# cores ran 10-14x slower than one of two.  A test that needs more threads sets them itself
# (and restores them).
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["MKL_NUM_THREADS"] = "1"

    import torch

    torch.set_num_threads(1)
