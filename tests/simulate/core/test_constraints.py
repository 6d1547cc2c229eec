"""The declarative parameter constraints (``simulate.core.constraints``) and the three
configurations that use them: Hyper, StopRule, SweepConfig."""

import math
from numbers import Integral, Real

import numpy as np
import pytest

from simulate.core.constraints import BOOL, POSITIVE, Interval, Options, check
from simulate.core.hyper import Hyper
from simulate.core.stopping import StopRule
from simulate.sweep.setup.config import SweepConfig
from simulate.sweep.setup.truth_spec import TruthSpec


@pytest.mark.parametrize(
    ("c", "good", "bad"),
    [
        (POSITIVE, [1e-300, 1, 2.5, np.float64(3)], [0, -1, math.nan, math.inf, True, "1"]),
        (Interval(Integral, 1, None, "left"), [1, 7, np.int64(3)], [0, 1.0, 2.5, True, None]),
        (Interval(Real, 0, 1, "neither"), [0.5, 1e-9], [0, 1, 1.0, -0.1]),
        (Interval(Real, 0, 1, "left"), [0, 0.999], [1, -1e-12]),
        (Interval(Integral, 0, 5, "both"), [0, 5], [-1, 6]),
        (Options(("iid", "permutation")), ["iid"], ["IID", 0, None]),
        (BOOL, [True, False], [0, 1, "true", None]),
    ],
)
def test_a_constraint_accepts_its_values_and_refuses_the_rest(c, good, bad):
    for v in good:
        assert c.accepts(v), v
    for v in bad:
        assert not c.accepts(v), v


def test_the_error_names_the_field_the_rule_and_the_value():
    with pytest.raises(ValueError, match=r"^lr must be a finite number > 0, got -1$"):
        check("lr", -1, POSITIVE)
    with pytest.raises(ValueError, match=r"risk_tol must be a finite number > 0 or None"):
        check("risk_tol", "x", POSITIVE, None)
    assert check("risk_tol", None, POSITIVE, None) is None
    with pytest.raises(ValueError, match=r"seed must be an integer in \[0, 9223372036854775808\)"):
        check("seed", -1, Interval(Integral, 0, 2**63, "left"))


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: Hyper(lr=0), "lr"),
        (lambda: Hyper(batch_size=True), "batch_size"),
        (lambda: Hyper(init_nu=1.0), "init_nu"),
        (lambda: Hyper(optimizer="sgd"), "optimizer"),
        (lambda: Hyper(betas=(0.9, 1.0)), "betas"),
        (lambda: Hyper(adam_eps=0.0), "adam_eps"),
        (lambda: StopRule(window=0), "window"),
        (lambda: StopRule(risk_tol=math.nan), "risk_tol"),
        (lambda: SweepConfig(truths=[TruthSpec("holder", 1, 0.5)], ns=[8], seed=-1), "seed"),
        (lambda: SweepConfig(truths=[TruthSpec("holder", 1, 0.5)], ns=[8], elbo_draws=9), "elbo"),
        (lambda: SweepConfig(truths=[TruthSpec("holder", 1, 0.5)], ns=[8], compile=1), "compile"),
        (lambda: SweepConfig(truths=[TruthSpec("holder", 1, 0.5)], ns=[8], lr=-1.0), "lr"),
    ],
)
def test_each_configuration_refuses_a_bad_field_by_name(make, field):
    with pytest.raises(ValueError, match=field):
        make()
