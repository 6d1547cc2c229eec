"""Settings said once (issue 39, item 1): the step's options one frozen object validated
when made (``simulate.core.options.StepOptions``), ``Hyper`` validated when made, and the
sparsity price's rule with its one table of a (``simulate.core.hyper``)."""

import dataclasses
import math

import pytest
import torch

from simulate.core import Batch, Hyper, Layout, StepOptions, Trainer
from simulate.core.hyper import LAMBDA_S_A, lambda_s_at


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"compile": 1}, "compile"),
        ({"compile": None}, "compile"),
        ({"chunk": 0}, "chunk"),
        ({"chunk": 2.5}, "chunk"),
        ({"mlp": "fused"}, "mlp"),
        ({"autograd": "yes"}, "autograd"),
        ({"learn_noise": 1}, "learn_noise"),
        ({"noise_every": 0}, "noise_every"),
        ({"noise_every": True}, "noise_every"),
        ({"noise_floor": 0.0}, "noise_floor"),
        ({"noise_floor": math.nan}, "noise_floor"),
    ],
)
def test_step_options_refuse_a_bad_value_naming_the_field(bad, field):
    with pytest.raises(ValueError, match=rf"^{field} must be"):
        StepOptions(**bad)


def test_step_options_are_frozen_and_checked_together_where_they_can_be():
    opts = StepOptions(compile=True, chunk=4, mlp="native")
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.mlp = "batched"
    with pytest.raises(ValueError, match="autograd path"):  # needs no hyperparameter
        StepOptions(mlp="native", autograd=True)
    with pytest.raises(ValueError, match="chunk"):  # a copy is checked like a new one
        dataclasses.replace(opts, chunk=0)


def _batch(E=2, n=64, p=2):
    g = torch.Generator().manual_seed(0)
    X = torch.rand(1, n, p, generator=g) * 2 - 1
    return Batch(X, X[..., 0], torch.zeros(E, dtype=torch.int64))


def test_the_trainer_takes_the_options_whole():
    opts = StepOptions(learn_noise=True, noise_every=7, noise_floor=0.01)
    tr = Trainer(Layout(2, 1, [2, 3]), Hyper(batch_size=16), [1, 2], _batch(), options=opts)
    assert tr.options is opts and (tr.noise_every, tr.noise_floor) == (7, 0.01)
    assert not tr.compiled and tr.hand_written
    with pytest.raises(TypeError):  # no loose keyword bypasses the checked object
        Trainer(Layout(2, 1, [2, 3]), Hyper(batch_size=16), [1, 2], _batch(), compile=True)
    # the check that needs the hyperparameters too, made where both are known
    with pytest.raises(ValueError, match="Gaussian likelihood"):
        Trainer(
            Layout(2, 1, [2, 3], out_dim=2),
            Hyper(batch_size=16, likelihood="categorical"),
            [1, 2],
            Batch(_batch().X, torch.zeros(1, 64, dtype=torch.int64), torch.zeros(2).long()),
            options=StepOptions(learn_noise=True),
        )


@pytest.mark.parametrize(
    ("bad", "field"),
    [({"lr": -1}, "lr"), ({"batch_size": 0}, "batch_size"), ({"l3": "exactly"}, "l3")],
)
def test_hyper_refuses_a_bad_field_when_it_is_made(bad, field):
    with pytest.raises(ValueError, match=rf"^{field} must be"):
        Hyper(**bad)
    with pytest.raises(ValueError, match=rf"^{field} must be"):  # and so does a copy
        dataclasses.replace(Hyper(), **bad)


def test_the_lambda_s_rule_and_its_table_of_a_reproduce_the_paper():
    """The paper's printed lambda_s: 3 for the teacher (two hidden layers, n = 10^4: 2.76)
    and 50 for MNIST (two hidden layers, n = 60,000: 49.5), from the table's a."""
    assert lambda_s_at(10_000, 2, LAMBDA_S_A["gaussian"]) == pytest.approx(0.3 * math.log(1e4))
    assert round(lambda_s_at(10_000, 2, LAMBDA_S_A["gaussian"])) == 3
    assert round(lambda_s_at(60_000, 2, LAMBDA_S_A["categorical"]), 1) == 49.5
    assert isinstance(lambda_s_at(300, 1, 0.1), float)
