"""Experiment drivers: they train and write records (``simulate.sweep.store.records.RecordStore``);
``figures`` draws from those records.  ``table1``: the paper's teacher-network experiment
(Table 1, Figure 1(b)); ``uci``: the UCI protocol; ``mnist``: MNIST-1D; ``teacher``: one
teacher run (``python -m simulate.experiments.teacher``).  The growing-n sweeps are
``simulate.sweep``."""
