"""asvi-rates ``figures``: every figure and table, drawn from the records of ``simulate``
and the analyses of ``verify`` (``python -m figures``)."""

import sys as _sys

if _sys.argv[:1] == ["-m"]:  # python -m ...: this installation's packages, or one line
    # (theory.plumbing.installation, run from its file: importing it would import the very
    # theory it checks); then theory's start makes a Ctrl-C in it one line
    import os as _os
    import runpy as _runpy

    _root = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
    _check = _os.path.join(_root, "theory", "plumbing", "installation.py")
    _runpy.run_path(_check)["refuse_shadows"]("figures")
    import theory  # noqa: F401
