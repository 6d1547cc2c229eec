"""asvi-rates ``verify``: does the measured contraction match the theory?

``slopes`` fits log-log slopes with replicate-level intervals; ``theorem`` (the theorem test
with its two controls), ``attainment`` (the attainment test), ``power`` (the theorem test's
prospective power) and ``verdict`` (the outcomes, Holm) hold the verdict rules; ``records``
reads sweep records into typed cells; ``design``, ``analysis``, ``controls`` and ``status``
decide, each result a ``results.MetricResult`` of frozen records; ``rates`` (``python -m
verify.rates``) runs or reads the sweeps of ``simulate.sweep`` and reports (``render``).
"""

import sys as _sys

if _sys.argv[:1] == ["-m"]:  # python -m ...: theory's start makes a Ctrl-C in it one line
    import theory  # noqa: F401
