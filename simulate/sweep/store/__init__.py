"""The records files: the locked, resumable store (``records``), reading and checking a file
(``schema``, ``validate``, with the rules of each field, ``rules``, of a control's record,
``control_record``, and of a named regressor's, ``regressor_record``), and a record's
provenance against its fingerprint (``provenance``, ``fingerprint``)."""
