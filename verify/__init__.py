"""asvi-rates ``verify``: does the measured contraction match the theory?

``slopes`` fits log-log slopes with replicate-level intervals and holds the verdict rules
(theorem test with its two controls, attainment test); ``rates`` (``python -m
verify.rates``) runs or reads the sweeps of ``simulate.sweep`` and reports.
"""
