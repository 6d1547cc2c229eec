"""asvi-rates ``simulate``: the ASVI algorithm and the experiments that run it.

Data flow (one way): ``theory`` -> ``simulate`` -> ``verify`` -> ``figures``.  Inside,
each folder imports only from the folders above it in this list:

* ``core`` -- the algorithm: E spike-and-slab networks trained by one batched program
  (layout, families, slabs, likelihoods, objective, optimisers, state, sampler, step,
  trainer), the stopping rule, posteriors (draws, ELBO, width selection), the recipe;
* ``truths`` -- ground truths (Hoelder functions, teacher networks), regression data and
  the real datasets;
* ``references`` -- what ASVI is compared with: the classical class-matched estimator,
  plain ReLU networks, constructive starts;
* ``sweep`` -- growing-n sweeps: what a sweep is (spec, tiers), one job, records, workers,
  ``python -m simulate.sweep``, the Gaussian-process known-answer control;
* ``experiments`` -- the paper's other experiments (Table 1, UCI, MNIST-1D, one teacher
  run);
* ``bench`` -- ``python -m simulate.bench`` and the per-model baselines it times.

``estimators`` (scikit-learn-style regressors and classifiers) sits beside them, on
``core``; ``progress`` and ``alloc`` are shared helpers.
"""

import sys as _sys

if _sys.argv[:1] == ["-m"]:  # python -m ...: this installation's packages, or one line
    # (theory.plumbing.installation, run from its file: importing it would import the very
    # theory it checks); then theory's start makes a Ctrl-C in it one line
    import os as _os
    import runpy as _runpy

    _root = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
    _check = _os.path.join(_root, "theory", "plumbing", "installation.py")
    _runpy.run_path(_check)["refuse_shadows"]("simulate")
    import theory  # noqa: F401
