"""The records files: the locked, resumable store (``records``), reading and checking a file
(``schema``, ``validate``, with the rules of each field, ``rules``, of a control's record,
``control_record``, and of a named regressor's, ``regressor_record``), a record's
provenance checked as data against its fingerprint (``provenance``), the fingerprint's rule
(``fingerprint``, the writer's) and the opt-in audit that re-derives a record's configuration
(``audit``; ``python -m simulate.sweep.audit``).  Reading imports nothing of ``setup``."""
