"""Running a sweep: the runner (``runner``: checks before anything is written, then the
jobs on a local pool, ``parallel``, or a Dask cluster, ``cluster``, whose workers are set up
by ``worker_setup``)."""
