"""asvi-rates ``verify``: does the measured contraction match the theory?

``slopes`` fits log-log slopes with replicate-level intervals; ``theorem`` (the theorem test
with its two controls), ``attainment`` (the attainment test), ``power`` (the theorem test's
prospective power) and ``verdict`` (the outcomes, Holm) hold the verdict rules; ``records``
reads sweep records into typed cells; ``design``, ``analysis``, ``controls`` and ``status``
decide, each result a ``results.MetricResult`` of frozen records; ``rates`` (``python -m
verify.rates``) runs or reads the sweeps of ``simulate.sweep`` and reports (``render``);
``check_rate`` (``verify.cli.check``) is the same run from Python, for notebooks.
"""

import sys as _sys

if _sys.argv[:1] == ["-m"]:  # python -m ...: this installation's packages, or one line
    # (theory.plumbing.installation, run from its file: importing it would import the very
    # theory it checks); then theory's start makes a Ctrl-C in it one line
    import os as _os
    import runpy as _runpy

    _root = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
    _check = _os.path.join(_root, "theory", "plumbing", "installation.py")
    _runpy.run_path(_check)["refuse_shadows"]("verify")
    import theory  # noqa: F401


def __getattr__(name):  # verify.check_rate: imported on first use (the command's modules)
    if name in ("check_rate", "RateCheck", "RunOptions"):
        from verify.cli import check  # noqa: PLC0415

        return getattr(check, name)
    raise AttributeError(f"module 'verify' has no attribute {name!r}")
