"""The training loop pinned bit for bit: short runs of :meth:`Trainer.fit_until` and
:meth:`Trainer.fit` (the stopping rule firing, the plateau decays of the learning rate on
and off, a race, a shadow rule with a join, learned noise, held locations, each step path)
hashed whole -- parameters, optimiser moments, health, step count, held models, the
summary, the loss history and the states kept at first plateaus -- and compared with the
digests recorded before the loop was rewritten (issue 76, item 6: the estimators train bit
for bit alike).  Float results are exact only on the platform that recorded them (another
torch or another CPU's vector units may round differently), so elsewhere the test skips
and says so; ``python -m tests.simulate.core.test_loop_pinned`` prints this platform's
digests."""

from __future__ import annotations

import hashlib
import json
import platform
import shutil

import numpy as np
import pytest
import torch

from simulate.core import Hyper, StepOptions
from simulate.core.native import library
from simulate.core.stopping import StopRule
from simulate.core.training import build_trainer
from tests.factories import torch_threads

WIDTHS, SEEDS, DATA = [2, 3, 6, 12], [21, 22, 23, 24], [0, 1, 0, 1]
DECAYS = StopRule(max_steps=600, window=50, tol=2e-2, patience=2, kl_abs=20.0, lr_decays=2,
                  lr_factor=0.3)  # fmt: skip
PLAIN = StopRule(max_steps=600, window=50, tol=2e-2, patience=2, kl_abs=20.0)


def _trainer(hyper=None, **options):
    rng = np.random.default_rng(7)
    X = torch.tensor(rng.uniform(-1, 1, (2, 300, 2)), dtype=torch.float32)
    y = torch.tensor(np.sin(3 * X[..., 0].numpy()) + 0.2 * rng.standard_normal((2, 300)),
                     dtype=torch.float32)  # fmt: skip
    hyper = hyper or Hyper(batch_size=32)
    return build_trainer(hyper, WIDTHS, SEEDS, X, y, DATA, depth=2,
                         options=StepOptions(**options))  # fmt: skip


def _digest(tr, summary=None) -> str:
    h = hashlib.sha256()
    st = tr.state
    tensors = [st.params, st.opt.exp_avg, st.opt.exp_avg_sq, *st.health, tr.frozen]
    if tr.lr_scale is not None:
        tensors.append(tr.lr_scale)
    if tr.noise_sd is not None:
        tensors.append(tr.noise_sd)
    for r in tr.plateau_states:
        tensors += [r.models, r.params, r.exp_avg, r.exp_avg_sq]
    for t in tensors:
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    h.update(repr((int(st.count), summary, tr.history)).encode())
    return h.hexdigest()[:24]


def _race(objective, running):  # stops the model with the worst objective at each window
    worst = torch.where(running, objective.nan_to_num(-np.inf), -np.inf).argmax()
    lost = torch.zeros_like(running)
    if int(running.sum()) > 2:
        lost[worst] = True
    return lost


def _decays(mlp="batched"):
    tr = _trainer(mlp=mlp)
    return _digest(tr, tr.fit_until(DECAYS))


def _plain():
    tr = _trainer()
    return _digest(tr, tr.fit_until(PLAIN))


def _decays_inclusion_rate():  # the step size per parameter row times the decays' scale
    tr = _trainer(Hyper(batch_size=32, lr_inclusion=3e-2))
    return _digest(tr, tr.fit_until(DECAYS))


def _decays_rmsprop():
    tr = _trainer(Hyper(batch_size=32, optimizer="rmsprop", lr=3e-3))
    return _digest(tr, tr.fit_until(DECAYS))


def _decays_exact_l3():  # the autograd path
    tr = _trainer(Hyper(batch_size=32, l3="exact"))
    return _digest(tr, tr.fit_until(DECAYS))


def _race_and_decays():
    tr = _trainer()
    return _digest(tr, tr.fit_until(DECAYS, race=_race))


def _held_locations_then_decays():
    tr = _trainer()
    tr.fit(60, record_every=20)
    tr.hold_locations()
    return _digest(tr, tr.fit_until(DECAYS))


def _learned_noise():
    tr = _trainer(learn_noise=True, noise_every=25)
    tr.fit(100, record_every=30)
    return _digest(tr, tr.fit_until(PLAIN))


def _shadow_and_join():
    rule = StopRule(max_steps=400, window=50, tol=2e-2, patience=2, kl_abs=20.0, lr_decays=1)
    base = _trainer()
    first = base.fit_until(rule, shadow=rule.doubled())
    capped = base.capped_models()
    joined = _trainer()
    second = joined.fit_until(rule.doubled(), resume=base.resume_from(capped))
    return _digest(base, first) + _digest(joined, second)


def _twice():  # a second fit_until continues: the scale kept across calls
    tr = _trainer()
    first = tr.fit_until(DECAYS)
    tr.release_stopped()
    return _digest(tr, [first, tr.fit_until(DECAYS)])


CASES = {
    "decays": _decays,
    "plain": _plain,
    "decays_inclusion_rate": _decays_inclusion_rate,
    "decays_rmsprop": _decays_rmsprop,
    "decays_exact_l3": _decays_exact_l3,
    "race_and_decays": _race_and_decays,
    "held_locations_then_decays": _held_locations_then_decays,
    "learned_noise": _learned_noise,
    "shadow_and_join": _shadow_and_join,
    "twice": _twice,
    "decays_native_step": lambda: _decays("native-step"),
}
# the compiled step in chunks of models (each chunk its own scale's rows): ~30 s to compile
SLOW = {
    "decays_compiled_chunks": lambda: _digest(
        tr := _trainer(compile=True, chunk=2), tr.fit_until(DECAYS)
    )
}

PLATFORM = "torch 2.13.0+cpu, x86_64, AVX512"
PINNED = {  # recorded on the loop before issue 76's rewrite (commit 6718b46)
    "decays": "5be61e06957ea2be45f112d8",
    "plain": "86cdffb8fe9d22e16356c680",
    "decays_inclusion_rate": "c1256a32dd83073095208d6d",
    "decays_rmsprop": "08dd59bf61df6fb686069459",
    "decays_exact_l3": "b493bf232631d4f9b3264a5c",
    "race_and_decays": "b5bc2e12ebca6f82ba00dde0",
    "held_locations_then_decays": "aef5394e9bb769bc63fd73ac",
    "learned_noise": "411eb7ebb1c2267c7e1a646e",
    "shadow_and_join": "dc5dc26df2bb4316371ee55ef200b1359134ea6455d6e4f8",
    "twice": "704eb86c174a1616438e14c0",
    "decays_native_step": "331ffdf27588e3f1d5f918ba",
    "decays_compiled_chunks": "caba800817111d167cef0dc4",
}


def _platform() -> str:
    cpu = torch.backends.cpu.get_cpu_capability()
    return f"torch {torch.__version__}, {platform.machine()}, {cpu}"


def _check(case, run):
    if _platform() != PLATFORM:
        pytest.skip(f"pinned on {PLATFORM}; this is {_platform()}")
    if case.endswith("native_step") and shutil.which(library._compiler()) is None:
        pytest.skip("no C compiler for the C step")
    with torch_threads(1):
        got = run()
    assert got == PINNED[case]


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_loop_trains_bit_for_bit_as_pinned(case):
    _check(case, CASES[case])


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(SLOW))
def test_the_compiled_loop_trains_bit_for_bit_as_pinned(case):
    _check(case, SLOW[case])


if __name__ == "__main__":
    torch.set_num_threads(1)
    print(f'PLATFORM = "{_platform()}"')
    print(json.dumps({k: f() for k, f in {**CASES, **SLOW}.items()}, indent=4))
