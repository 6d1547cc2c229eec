"""The command-line flags both sweep command lines share (``python -m simulate.sweep``,
``python -m verify.rates``) mapped to :class:`~simulate.sweep.config.SweepConfig`
fields: one mapping, so a flag means one field everywhere."""

from __future__ import annotations

__all__ = ["FLAG_FIELDS", "overrides_from_args"]

# Command-line flags (argparse destinations) -> SweepConfig fields: the one mapping both
# command lines use (``simulate.sweep``, ``verify.rates``); each takes the flags its parser
# defines.
FLAG_FIELDS = {
    "n": "ns", "replicates": "replicates", "widths": "widths", "depth": "depth",
    "max_steps": "max_steps", "max_epochs": "max_epochs", "stop_tol": "stop_tol",
    "batch_size": "batch_size", "lambda_s": "lambda_s", "lambda_s_a": "lambda_s_a",
    "lam": "lam", "l3": "l3", "seed": "seed", "start": "start", "compile": "compile",
    "mlp": "mlp", "n_test": "n_test",
}  # fmt: skip


def overrides_from_args(args) -> dict:
    """The SweepConfig fields the parsed flags ``args`` set (:data:`FLAG_FIELDS`; a flag
    left unset, or one the parser does not define, sets nothing)."""
    return {
        field: getattr(args, dest)
        for dest, field in FLAG_FIELDS.items()
        if getattr(args, dest, None) is not None
    }
