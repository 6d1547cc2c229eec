"""Growing-n sweeps: what a sweep is (``setup``: its configuration, estimator kinds,
tiers, recipes, truths and widths), its records files (``store``: the locked store, their
reading and checks, provenance and fingerprint), what trains (``train``: jobs, cells, ASVI's
job, the known-answer controls, a named regressor, the budget control's continuation) and
how it runs (``run``: the runner, a local pool, a Dask cluster); the command line
(``cli``; ``python -m simulate.sweep``), the measured cost table (``costs``) and the
records' opt-in audit (``audit``; ``python -m simulate.sweep.audit``)."""
