"""The main job's command line and its Python door: the typed run (``runspec``), the flags
and their checks (``rates_args``, ``flag_rules``), the plan (``plan``), the dry run
(``dry_run``) and ``verify.check_rate`` (``check``).  The command itself is
``verify.rates``."""
