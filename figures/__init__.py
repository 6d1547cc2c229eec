"""asvi-rates ``figures``: every figure and table, drawn from the records of ``simulate``
and the analyses of ``verify`` (``python -m figures``)."""

import sys as _sys

if _sys.argv[:1] == ["-m"]:  # python -m ...: theory's start makes a Ctrl-C in it one line
    import theory  # noqa: F401
