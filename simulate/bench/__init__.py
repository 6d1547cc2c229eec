"""``python -m simulate.bench`` (``cli``: its command line; ``timing``: the harness): the
batched core against the ways PyTorch users train many small models (``baselines``: the
textbook single-model trainer and the vmap ensemble)."""
