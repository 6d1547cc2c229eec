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
