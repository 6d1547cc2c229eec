"""The jobs and what trains in them: a job and the order jobs run in (``jobs``), one cell's
data, reference and record head (``cells``), ASVI's job (``asvi_job``, its width groups,
``groups``), the known-answer controls' (``gp``, ``knn``), a named regressor's (``foreign``)
and the budget-doubling control's continuation (``budget``)."""
