"""``python -m simulate.bench`` (``timing``): the batched core against the ways PyTorch users
train many small models (``baselines``: the textbook single-model trainer and the vmap
ensemble)."""
