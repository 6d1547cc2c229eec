"""asvi-rates ``simulate``: the ASVI algorithm and the experiments that run it.

Data flow (one way): ``theory`` -> ``simulate`` -> ``verify`` -> ``figures``.  Here:
``core`` (E spike-and-slab networks trained by one batched program), ``stopping`` (when a
candidate has converged), ``posterior`` (draws, ELBO, width selection), ``truths`` and
``data`` (ground truths and datasets), ``classical`` (the oracle-tuned reference
estimator), ``sweep`` (growing-n sweeps written as JSON-lines records), ``estimators``
(scikit-learn-style wrappers), ``teacher`` and ``bench`` (command-line drivers).
"""
