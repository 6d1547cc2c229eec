"""asvi-rates ``figures``: every figure and table, drawn from the records of ``simulate``
and the analyses of ``verify`` (``python -m figures``)."""
