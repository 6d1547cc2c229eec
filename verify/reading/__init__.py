"""From records to results: records read into cells (``records``), a report's entries
beside each other (``entry_records``), the analysis that fits and decides every entry
(``analysis``), the budget-doubling control (``controls``), the design's prospective power
and known answers (``design``), a stated rate in place of the band (``stated_rate``) and
which estimators are known-answer controls (``known_answer``)."""
