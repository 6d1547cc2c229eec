"""asvi-rates ``verify``: does the measured contraction match the theory?

``stats`` holds the rules and statistics (slope fits with replicate-level intervals, the
theorem and attainment tests, power, verdicts, replication, the log-factor test, the
theorem's readings); ``reading`` turns records into typed cells and decides each entry
(``reading.analysis``), each result a ``results.MetricResult`` of frozen records;
``report`` prints and draws them and gives the exit status; ``cli`` holds the main job's
run as a value (``cli.runspec.RunSpec``), its flags, plan and dry run.  The commands are
the top-level modules: ``rates`` (``python -m verify.rates``, the main job), ``sizing``,
``starts``, ``optimiser``, ``decided``; ``check_rate`` (``verify.cli.check``) is the main
job from Python, for notebooks.
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
