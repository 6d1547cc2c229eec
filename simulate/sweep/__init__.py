"""Growing-n sweeps: what a sweep is (``spec``: truths, configuration, jobs, record
schema; ``tiers``), one job (``job``), the records files (``records``), workers
(``parallel``), the command line (``runner``; ``python -m simulate.sweep``) and the
Gaussian-process known-answer control (``gp``)."""
