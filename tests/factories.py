"""Factories shared by several test modules (one definition each; test modules import
from here, never from one another)."""

import contextlib
import importlib
import io
import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from simulate.core.native import library

NS = np.array([250, 500, 1000, 2000, 4000, 8000])

# the smallest sweep that runs every stage (three n, two replicates, two widths)
SWEEP_TINY = dict(
    ns=[64, 128, 256],
    replicates=2,
    widths=[2, 4],
    max_steps=60,
    stop_window=20,
    batch_size=32,
    n_test=500,
    draws=10,
    replicate_block=1,
)


# the report's last line for each verdict exit status of ``verify.rates``
EXIT_LINES = {
    0: "every d^2 test PASSES",
    1: "some d^2 test FAILS at the family-wise level",
    3: "no d^2 test fails family-wise, but some is INCONCLUSIVE or UNDECIDABLE",
}


def synthetic(exponent, log_power, R, noise, seed, ns=NS, C=0.3):
    """Replicate curves ``C n^e log^c n * exp(u_r + eps_rj)``: a replicate-level effect
    (nested data) plus independent noise, multiplicative."""
    rng = np.random.default_rng(seed)
    base = C * ns**exponent * np.log(ns) ** log_power
    u = rng.normal(0, noise, size=(R, 1))
    eps = rng.normal(0, noise, size=(R, ns.size))
    return base[None, :] * np.exp(u + eps)


def protocol_with(**changes):
    """The default protocol (``verify.protocol``) with ``changes``: e.g. a small pilot cv,
    so that synthetic records of small noise meet a design with power."""
    import dataclasses

    from verify import protocol

    return dataclasses.replace(protocol.load(), **changes)


def tight_protocol():
    """The default protocol with pilot cvs as small as the synthetic records' noise (0.05):
    their designs then have power, so the rules' decided branches can be tested."""
    return protocol_with(pilot_cv={"default": 0.05}, pilot_cv_diff={"default": 0.05})


def fake_records(
    asvi_exp, ref_exp, R=4, ns=(250, 1000, 4000, 16000), noise=0.03, seed=0, teacher_p=None,
    alpha=0.5,
):  # fmt: skip
    """Sweep-shaped records: per-width d2 where width 2 is a flat fixed-size curve, width 8
    follows ``asvi_exp``; ASVI selects width 8; the reference follows ``ref_exp``."""
    rng = np.random.default_rng(seed)
    recs = []
    for q in range(R):
        u = rng.normal(0, noise)
        for n in ns:
            e = lambda u=u: math.exp(u + rng.normal(0, noise))  # noqa: E731
            per = {"d2": [0.2 * n**-0.1 * e(), n**asvi_exp * e(), 1.3 * n**asvi_exp * e()]}
            per["d"] = [math.sqrt(x) for x in per["d2"]]
            per["l2sq"] = [8 * x for x in per["d2"]]
            ref = {"d2": 0.5 * n**ref_exp * e(), "k": 3}
            ref["d"], ref["l2sq"] = math.sqrt(ref["d2"]), 8 * ref["d2"]
            if teacher_p is not None:
                truth = {"kind": "teacher", "p": teacher_p, "alpha": None, "seed": 0,
                         "function": {"n_edges": 165}}  # fmt: skip
                key, ref = f"teacher-p{teacher_p}-s0", None
            else:
                truth = {"kind": "holder", "p": 1, "alpha": alpha, "seed": 0}
                key = f"holder-a{alpha:g}-p1-s0"
            recs.append(
                {
                    "cell": {"truth": key, "n": n, "replicate": q},
                    "truth": truth,
                    "config": {"widths": [2, 8, 32], "lambda_s": 1.0},
                    "failed": False,
                    "selected_width": 8,
                    "selected_at_top": False,
                    "metrics": {m: per[m][1] for m in ("d2", "d", "l2sq")},
                    "per_width": {**per, "steps": [10, 10, 10], "converged": [True, True, False]},
                    "reference": ref,
                }
            )
    return recs


def assert_model_alone(together, e: int, alone) -> None:
    """Model ``e`` of the batched trainer ``together`` has the parameters of the trainer
    ``alone`` of that one model (its real slots; float64 rounding)."""
    mask = together.mask[e] > 0
    np.testing.assert_allclose(
        together.state.params[:, e][:, mask].numpy(),
        alone.state.params[:, 0].numpy(),
        rtol=1e-9,
        atol=1e-12,
    )


def verdict_entry(estimator="asvi", theorem="PASS", attainment="PASS", expected=None,
                  familywise=None):  # fmt: skip
    """A d^2 result of ``verify.reading.analysis`` (on :func:`fake_records`) with its verdicts, a
    control's known answer and the family-wise outcome set (``attainment=None``: no
    attainment test): for the exit-status rules, which read only these."""
    import dataclasses

    from verify.reading.analysis import analyse
    from verify.stats.verdict import Verdict

    r = next(r for r in analyse(fake_records(-0.5, -0.5)) if r.metric == "d2")
    att = None if attainment is None else dataclasses.replace(
        r.attainment, verdict=Verdict(attainment)
    )  # fmt: skip
    return dataclasses.replace(
        r,
        estimator=estimator,
        theorem=dataclasses.replace(r.theorem, verdict=Verdict(theorem)),
        attainment=att,
        decision=dataclasses.replace(
            r.decision,
            expected_attainment=None if expected is None else Verdict(expected),
            fail_familywise=familywise,
        ),
    )


def stable_records(records):
    """Records without the fields that legitimately differ between runs (wall times), as
    sorted JSON strings: two runs' records compared whole."""
    out = []
    for r in records:
        r = dict(r)
        r.pop("timing")
        out.append(json.dumps(r, sort_keys=True))
    return sorted(out)


# the two step paths a bit-for-bit test runs on: the batched one, and the C step where a
# C compiler exists to build it
STEP_MLPS = [
    "batched",
    pytest.param(
        "native-step",
        marks=pytest.mark.skipif(
            shutil.which(library._compiler()) is None, reason="no C compiler for the C step"
        ),
    ),
]


def family_cases(third: dict) -> list:
    """``(Hyper keywords, node_scales)`` of each hand-written kernel's family, in the order
    the kernel tests name them: the spike-and-slab (Gaussian slab), the uniform slab, ``third``
    (the spike-and-slab variant the test adds), Dense-BNN and the horseshoe (its node scales)."""
    return [
        ({}, False), ({"slab": "uniform"}, False), (third, False),
        ({"family": "dense"}, False), ({"family": "horseshoe"}, True),
    ]  # fmt: skip


# ------------------------------------------------------------------ command lines
# ``python -m MODULE`` -> the module whose ``main(argv)`` it runs (each ``__main__`` is
# ``sys.exit(run_main(main))`` of these)
ENTRY_POINTS = {
    "theory": "theory.summary",
    "simulate.sweep": "simulate.sweep.cli",
    "simulate.bench": "simulate.bench.cli",
    "figures": "figures.__main__",
}


def run_main(module: str, *args, cwd=None) -> subprocess.CompletedProcess:
    """``python -m MODULE ARGS`` run in this process through the entry point's
    ``main(argv)``, in ``cwd``, its stdout and stderr captured (the ``CompletedProcess`` a
    real run gives): what a refusal or an exit code says, without the ~4 s a new process
    spends importing torch and the project.
    argparse's ``SystemExit`` is the exit status it carries.  What only a process boundary
    shows (a real exit status, Ctrl-C, start-up) keeps a real process: :func:`run_process`."""
    main = importlib.import_module(ENTRY_POINTS.get(module, module)).main
    argv = [str(a) for a in args]
    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:  # as the interpreter ends on it: a text goes to stderr
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                if not isinstance(exc.code, int | None):
                    print(exc.code, file=sys.stderr)
    finally:
        os.chdir(here)
    code = 0 if code is None else code
    return subprocess.CompletedProcess([module, *argv], code, out.getvalue(), err.getvalue())


def run_process(
    module: str, *args, cwd=None, env=None, timeout=None
) -> subprocess.CompletedProcess:
    """``python -m MODULE ARGS`` in a process of its own (one torch thread), for what only a
    process boundary shows: the status the shell sees, signals, start-up."""
    return subprocess.run(
        [sys.executable, "-m", module, *[str(a) for a in args]],
        capture_output=True, text=True, check=False, cwd=cwd, timeout=timeout,
        env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})},
    )  # fmt: skip


@contextlib.contextmanager
def torch_threads(k: int):
    """Run the body with ``k`` torch threads, then restore the count: the suite's workers
    run one each (``tests/conftest.py``), and a test that compares this process's numbers
    with one-thread worker processes' sets two here, as an unparallelised run has on two
    cores, so that the comparison still covers the thread count."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(k)
    try:
        yield
    finally:
        torch.set_num_threads(before)
