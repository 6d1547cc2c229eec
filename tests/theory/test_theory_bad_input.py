"""Every bad input of issue #2 raises a ValueError that names the argument; never a nan."""

import math

import numpy as np
import pytest

import theory as T
from tests.factories import run_main

BAD = [
    ("n", lambda v: T.r_n(v, 3, 2, 10, 1), [1, 0.5, -3, math.nan, math.inf]),
    ("n", lambda v: T.lemma_6_1(v, 1, 1), [1, 0]),
    ("alpha", lambda v: T.lemma_6_1(1000, 1, v), [0, -1, math.nan]),
    ("alpha", lambda v: T.xi_bound(1000, 2, 1, v, 1), [0, -0.5]),
    ("alpha", lambda v: T.predicted_exponent(v, 1), [0, -2]),
    ("p", lambda v: T.r_n(1000, 3, 2, 10, v), [0, -1, 1.5, math.nan]),
    ("p", lambda v: T.lemma_6_1(1000, v, 1), [0, 2.5]),
    ("p", lambda v: T.predicted_exponent(1, v), [0, 0.5]),
    ("N", lambda v: T.r_n(1000, 3, v, 10, 1), [0, -2, 1.5]),
    ("N", lambda v: T.log_prior_N(v, 10), [0, 2.2]),
    ("N", lambda v: T.xi_bound(1000, v, 1, 1, 1), [0]),
    ("s", lambda v: T.r_n(1000, 1, 1, v, 1), [T.num_edges(1, 12, 1) + 1, 0, 2.5]),
    ("s", lambda v: T.eps_n(1000, 1, 1, v, 1), [T.num_edges(1, 12, 1) + 1]),
    ("lam", lambda v: T.log_prior_N(3, v), [0, -1, math.nan]),
    ("lam_s", lambda v: T.log_prior_s(3, v), [0, -1]),
    ("L", lambda v: T.r_n(1000, v, 2, 10, 1), [0, 1.5]),
    ("delta", lambda v: T.eps_n(1000, 3, 2, 10, 1, delta=v), [0.5]),
    ("slab", lambda v: T.q_star_log10(1000, 3, 2, 10, 1, 2, v), ["spike"]),
]


@pytest.mark.parametrize(
    ("name", "call", "value"),
    [(n, c, v) for n, c, vs in BAD for v in vs],
    ids=[f"{n}={v}" for n, _, vs in BAD for v in vs],
)
def test_bad_input_raises_naming_argument(name, call, value):
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        call(value)


def test_bad_array_element_raises():
    with pytest.raises(ValueError, match=r"\bN\b"):
        T.r_n(1000, 3, np.array([1, 2, 0]), 10, 1)


def test_cli_report_and_bad_input():
    ok = run_main("theory", "--n", "10000", "--p", "2", "--alpha", "1")
    assert ok.returncode == 0, ok.stderr
    assert "L = 44" in ok.stdout and "N = 10" in ok.stdout and "-0.5" in ok.stdout
    bad = run_main("theory", "--alpha", "-1")  # a real process: test_records_integrity
    assert bad.returncode == 2 and "alpha" in bad.stderr


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--alpha", "1000"], "at n = 1000, p = 1, alpha = 1000 the theory's quantities leave"),
        (["--alpha", "1e300"], "leave double precision"),
        (["--p", "1000000", "--alpha", "0.5"], "p = 1000000, alpha = 0.5 the theory's"),
        (["--n", "2e308"], "n = 2e308 is beyond the report's doubles"),
        (["--n", "1"], "n must be a finite number > 1, got 1"),
        (["--n", "nan"], "n must be a finite number > 1, got nan"),
        (["--alpha", "-1"], "--alpha must be a finite number > 0"),
    ],
)
def test_the_report_says_which_inputs_leave_its_range(argv, message, capsys):
    """Out-of-range inputs are named as inputs, not by the internal quantity that overflowed
    (xi of 1e602 at alpha = 1000)."""
    from theory.summary import main

    base = {"--n": "1000", "--p": "1"}
    args = [x for k, v in base.items() if k not in argv for x in (k, v)] + argv
    try:
        code = main(args)
    except SystemExit as exc:  # refused while the flags are parsed (argparse)
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
