"""The rules and statistics of the verdicts: slope fits and their intervals (``slopes``), the
theorem test (``theorem``), the attainment test (``attainment``), prospective power
(``power``), the verdicts' words (``verdict``), their replication over resamples
(``replication``), the log-factor-or-power test (``logfactor``) and the theorem's readings
(``readings``).  Numbers in, numbers out: nothing here reads a records file or prints."""
