"""Compaction: stopped models leave the running program (``Trainer.fit_until``) and nothing
any model computes changes, bit for bit."""

import numpy as np
import pytest
import torch

from simulate.core import Batch, Compaction, Hyper, Layout, StepOptions, Trainer
from simulate.core.sampler import Sampler
from simulate.core.state import healthy, put_models, take_models
from simulate.core.stopping import StopRule

# compacts whenever a model stopped (the cost rule switched off): the most shape changes
ALWAYS = Compaction(fraction=1.0, compile_s=0.0)
NEVER = Compaction(False)


def problem(p=2, n=600, D=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (D, n, p))
    y = np.sin(3 * X[..., 0]) + 0.3 * rng.standard_normal((D, n))
    return torch.tensor(X, dtype=torch.float32), torch.tensor(y, dtype=torch.float32)


def trained(compact, widths, family="spike_slab", l3="paper", p=2, risk=False, threads=None):
    """A compiled trainer of ``widths`` (on two datasets) fitted under a quick stopping rule,
    and its summary."""
    X, y = problem(p)
    E = len(widths)
    h = Hyper(batch_size=64, family=family, l3=l3)
    layout = Layout(p, 2, widths, node_scales=family == "horseshoe")
    batch = Batch(X, y, torch.tensor([e % 2 for e in range(E)]))
    tr = Trainer(layout, h, list(range(40, 40 + E)), batch, options=StepOptions(compile=True))
    rule = StopRule(
        max_steps=1500, window=100, tol=2e-2, patience=1, risk_tol=0.5 if risk else None
    )
    Xe = X[0, :40].numpy()
    f0e = np.sin(3 * Xe[:, 0])[None].repeat(E, 0)

    def risk_fn(params):
        return tr.posterior(params).test_metrics(f0e, Xe, 3)[1]

    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        conv = tr.fit_until(rule, compact=compact, risk=risk_fn if risk else None)
    finally:
        torch.set_num_threads(before)
    return tr, conv


def assert_same_run(a, b):
    (ta, ca), (tb, cb) = a, b
    assert ca == cb  # steps, converged and the last changes, exactly
    assert torch.equal(ta.state.params, tb.state.params)
    assert all(torch.equal(x, z) for x, z in zip(ta.state.health, tb.state.health, strict=True))
    assert ta.state.count == tb.state.count and torch.equal(ta.frozen, tb.frozen)


@pytest.mark.slow  # a torch.compile per program shape: 60-90 s; the pieces are tested below
def test_compacted_run_equals_the_whole_program_bit_for_bit():
    """Spike-and-slab, compiled, this process's threads, the held-out risk watched (its
    window-end look sees the written-back parameters): models stop at different windows,
    the program shrinks at each, and every number equals the run that never compacts."""
    widths = [16, 8, 4, 2, 16, 8, 4, 2]
    whole = trained(NEVER, widths, risk=True)
    compacted = trained(ALWAYS, widths, risk=True)
    steps = whole[1]["steps"]
    assert len(set(steps)) >= 3, steps  # several stopping points: several compactions
    assert_same_run(whole, compacted)


@pytest.mark.slow
@pytest.mark.parametrize(
    "family, l3, threads",
    [("spike_slab", "paper", 1), ("dense", "paper", None), ("horseshoe", "paper", None)],
)  # fmt: skip
def test_compacted_run_equals_the_whole_program_for_every_step_path(family, l3, threads):
    """The other compiled hand-written steps (one thread; Dense-BNN and HS-BNN's kernels),
    p = 20."""
    widths = [8, 4, 2, 8, 4, 2]
    a = trained(NEVER, widths, family, l3, p=20, threads=threads)
    b = trained(ALWAYS, widths, family, l3, p=20, threads=threads)
    assert_same_run(a, b)


def test_eager_runs_never_compact():
    """Eager steps keep every model in the program (the scalar tail of an eager kernel
    would round a new last model differently: ``Compaction``'s docstring)."""
    assert not ALWAYS.pays(8, 2, 1.0, 10**6, compiled=False)
    assert ALWAYS.pays(8, 2, 1.0, 10**6, compiled=True)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning")  # torch.compile's own, on the complex FFT
def test_the_compiled_autograd_path_never_compacts():
    """The exact L3 (compiled autograd path, whose FFT length is the program's largest edge
    count) keeps its program whole: it runs as it does without compaction although its
    models stop at different windows."""
    widths = [16, 8, 4, 2, 16, 8, 4, 2]
    a = trained(NEVER, widths, l3="exact")
    b = trained(ALWAYS, widths, l3="exact")
    assert not b[0].hand_written and b[0].compiled
    assert len(set(a[1]["steps"])) >= 2
    assert_same_run(a, b)


@pytest.mark.parametrize(
    "E_run, active, step_s, remaining, expected",
    [
        (8, 4, 3e-3, 40_000, True),  # (3 - 0.4) ms * 1/2 * 20,000 = 26 s > 10 s
        (8, 5, 3e-3, 40_000, False),  # more than half still training
        (8, 4, 1e-3, 40_000, False),  # (1 - 0.4) ms * 1/2 * 20,000 = 6 s < 10 s
        (8, 4, 3e-3, 10_000, False),  # 6.5 s: too few steps left
        (8, 0, 3e-3, 40_000, False),  # nobody left: the run ends anyway
        (8, 8, 3e-3, 40_000, False),  # nobody to drop
    ],
)
def test_compaction_pays_when_the_expected_saving_beats_a_compilation(
    E_run, active, step_s, remaining, expected
):
    assert Compaction().pays(E_run, active, step_s, remaining, compiled=True) is expected
    assert not NEVER.pays(E_run, active, step_s, remaining, compiled=True)


def test_take_and_put_models_round_trip():
    tr = Trainer(
        Layout(2, 2, [4, 3, 2]),
        Hyper(batch_size=8),
        [1, 2, 3],
        Batch(*problem(n=50, D=1), torch.zeros(3, dtype=torch.int64)),
    )
    tr.fit(3)
    full = tr.state
    idx = torch.tensor([2, 0])
    part = take_models(full, idx)
    assert part.params.shape[1] == 2 and part.count == full.count == 3
    assert torch.equal(part.params, full.params[:, [2, 0]])
    assert part.params.data_ptr() != full.params.data_ptr()  # a copy: the full state untouched
    moved = part._replace(
        params=part.params + 1,
        count=9,
        health=healthy(2)._replace(failed=torch.tensor([True, False])),
    )
    before = full.params.clone()
    back = put_models(full, idx, moved)
    assert back.count == 9
    assert torch.equal(back.params[:, [2, 0]], before[:, [2, 0]] + 1)
    assert torch.equal(back.params[:, 1], before[:, 1])
    assert back.health.failed.tolist() == [False, False, True]


@pytest.mark.parametrize("sampling", ["iid", "permutation"])
def test_a_sampler_subset_draws_what_its_models_draw_in_the_whole(sampling):
    X, y = problem(p=3, n=500)
    layout = Layout(3, 2, [8, 4, 2, 8, 4, 2, 7])
    batch = Batch(X, y, torch.tensor([0, 0, 0, 1, 1, 1, 0]))
    s = Sampler(layout, Hyper(batch_size=64, sampling=sampling), torch.arange(7) + 5, batch)
    held = torch.zeros(7, dtype=torch.bool)
    for idx in ([5], [0, 3], [2, 4, 5], [6]):
        idx = torch.tensor(idx)
        sub = s.subset(idx)
        for t in (0, 7, 13):  # 13: past the first epoch of permutations
            whole, part = s.draw(t, held), sub.draw(t, held[idx])
            assert torch.equal(whole.xb[idx], part.xb) and torch.equal(whole.yb[idx], part.yb)
            assert torch.equal(whole.noise[:, idx], part.noise)
            assert torch.equal(whole.gumbel[:, idx], part.gumbel)
