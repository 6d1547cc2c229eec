"""The whole step in C (``mlp="native-step"``, ``simulate.core.native.fused_steps``) against
the hand-written step it replaces (``simulate.core.step.spike_slab_step``, eager).

Each comparison runs one step of both from the same state (the batched trainer's, copied
into the C one before every step), so the differences are one step's float rounding, not a
trajectory's.  Tolerances, from the measured differences over these cases (in brackets):
parameters 1e-6 of each row's largest magnitude [1.1e-7: Adam's update is ~lr, so this is
the update's own rounding], the moments 4e-5 of each row's largest [3.9e-6: gradients summed
in another order, the normal transform by another formula], the terms 1e-5 relative
[8.5e-7: float32 sums of up to a few thousand slots].  The negative control (the draws of
another step) misses them by orders of magnitude."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

from simulate.core import Hyper, StepOptions, native
from simulate.core.native import library
from simulate.core.training import build_trainer
from tests.factories import torch_threads

pytestmark = pytest.mark.skipif(
    shutil.which(library._compiler()) is None, reason="no C compiler to build the fused kernel"
)

TOL_PARAMS, TOL_MOMENTS, TOL_TERMS = 1e-6, 4e-5, 1e-5
WIDTHS, SEEDS, DATA = [2, 5, 8], [11, 12, 13], [0, 1, 0]


def _data(p=3, n=300):
    rng = np.random.default_rng(0)
    X = torch.tensor(rng.uniform(-1, 1, (2, n, p)), dtype=torch.float32)
    y = np.sin(3 * X[..., 0].numpy()) + 0.1 * rng.standard_normal((2, n))
    return X, torch.tensor(y, dtype=torch.float32)


def _trainer(hyper, mlp, learn=False, widths=WIDTHS, seeds=SEEDS, data=DATA):
    X, y = _data()
    opts = StepOptions(mlp=mlp, learn_noise=learn)
    return build_trainer(hyper, list(widths), list(seeds), X, y, list(data), depth=2, options=opts)


def _row_rel(a, b):
    return ((a - b).abs().amax(-1) / b.abs().amax(-1).clamp_min(1e-30)).max().item()


def _worst_one_step_differences(hyper, steps=40, learn=False, hold=False, freeze=False, shift=0):
    """The largest one-step differences between the C step and the batched eager step over
    ``steps`` steps (``shift``: the C step draws from that many steps later: the negative
    control)."""
    ref, got = _trainer(hyper, "batched", learn), _trainer(hyper, "native-step", learn)
    if hold:
        ref.hold_locations()
        got.hold_locations()
    if freeze:  # a model the stopping rule holds: its moments decay, its parameters stay
        ref.frozen[1] = got.frozen[1] = True
    worst = dict.fromkeys(("params", "m1", "m2", "L1", "L2", "L3"), 0.0)
    for t in range(steps):
        st = ref.state
        got.state = st._replace(
            params=st.params.clone(),
            opt=type(st.opt)(*(x if x is None else x.clone() for x in st.opt)),
            count=st.count + shift,
        )  # fmt: skip
        if learn:
            got.noise_sd.copy_(ref.noise_sd)
        a, b = ref.advance(), got.advance()
        pairs = (("params", got.state.params, ref.state.params),
                 ("m1", got.state.opt.exp_avg, ref.state.opt.exp_avg),
                 ("m2", got.state.opt.exp_avg_sq, ref.state.opt.exp_avg_sq))  # fmt: skip
        for name, x, y in pairs:
            worst[name] = max(worst[name], _row_rel(x, y))
        for name, x, y in zip(("L1", "L2", "L3"), b.terms, a.terms, strict=True):
            rel = ((x - y).abs() / y.abs().clamp_min(1e-30)).max().item()
            worst[name] = max(worst[name], rel)
        if learn and (t + 1) % 10 == 0:
            ref.update_noise()
    return worst


CASES = {
    "asvi": {},
    "two draws": {"mc_samples": 2},
    "dense": {"family": "dense"},
    "lr_inclusion": {"lr_inclusion": 1e-2},
    "kl warm-up": {"kl_warmup": 20},
    "rmsprop": {"optimizer": "rmsprop"},
    "permutation": {"sampling": "permutation"},
}


@pytest.mark.parametrize("case", list(CASES))
def test_one_step_equals_the_batched_step_to_float_rounding(case):
    worst = _worst_one_step_differences(Hyper(batch_size=64, **CASES[case]))
    assert worst["params"] < TOL_PARAMS, worst
    assert worst["m1"] < TOL_MOMENTS and worst["m2"] < TOL_MOMENTS, worst
    for term in ("L1", "L2", "L3"):
        assert worst[term] < TOL_TERMS, worst


@pytest.mark.parametrize("what", ["learned noise", "held locations", "a frozen model"])
def test_the_trainers_options_reach_the_c_step(what):
    kw = {"learned noise": {"learn": True}, "held locations": {"hold": True},
          "a frozen model": {"freeze": True}}[what]  # fmt: skip
    worst = _worst_one_step_differences(Hyper(batch_size=64), **kw)
    assert worst["params"] < TOL_PARAMS and worst["m2"] < TOL_MOMENTS, worst
    assert max(worst[t] for t in ("L1", "L2", "L3")) < TOL_TERMS, worst


def test_another_steps_draws_are_caught():
    """Negative control: the C step drawing one step later than the batched one."""
    worst = _worst_one_step_differences(Hyper(batch_size=64), steps=5, shift=1)
    assert worst["L1"] > 100 * TOL_TERMS and worst["m2"] > 100 * TOL_MOMENTS, worst


def test_a_frozen_model_does_not_move_but_its_moments_decay():
    tr = _trainer(Hyper(batch_size=64), "native-step")
    for _ in range(5):
        tr.advance()
    tr.frozen[1] = True
    before = tr.state.params[:, 1].clone(), tr.state.opt.exp_avg[:, 1].clone()
    tr.advance()
    assert torch.equal(tr.state.params[:, 1], before[0])
    assert not torch.equal(tr.state.opt.exp_avg[:, 1], before[1])


def test_a_model_trains_the_same_alone_in_any_program_and_at_any_thread_count():
    """Each model's numbers are computed alone: bit for bit the same trained alone, beside
    other models, and on one or two threads."""
    h = Hyper(batch_size=64)
    whole = _trainer(h, "native-step")
    alone = _trainer(h, "native-step", widths=[5], seeds=[12], data=[1])
    threads = torch.get_num_threads()
    try:
        for t in range(60):
            torch.set_num_threads(1 if t % 2 else 2)
            whole.advance()
            alone.advance()
    finally:
        torch.set_num_threads(threads)
    in_whole = whole.state.params[:, 1][:, whole.mask[1].bool()]
    by_itself = alone.state.params[:, 0][:, alone.mask[0].bool()]
    assert in_whole.shape == by_itself.shape and torch.equal(in_whole, by_itself)


def test_the_minibatch_drawn_in_c_is_the_samplers():
    """iid sampling: the step draws and gathers its minibatch in C; handing it the sampler's
    own minibatch instead gives bit for bit the same step."""
    h = Hyper(batch_size=64)
    a, b = _trainer(h, "native-step"), _trainer(h, "native-step")
    for t in range(10):
        held = a.state.health.failed | a.frozen
        inputs = a.sampler.draw(t, held)
        assert inputs.xb is None
        xb, yb = b.sampler.minibatch(t)
        a.state, ia = a.step_fn(a.state, inputs)
        b.state, ib = b.step_fn(b.state, inputs._replace(xb=xb[None].clone(), yb=yb[None].clone()))
        for x, y in zip(ia.terms, ib.terms, strict=True):
            assert torch.equal(x, y)
        assert torch.equal(a.state.params, b.state.params)


@pytest.mark.parametrize(
    "kw, phrase",
    [
        ({"family": "horseshoe"}, "family"),
        ({"slab": "uniform"}, "slab"),
        ({"l3": "exact"}, "l3"),
    ],
)
def test_what_the_c_step_does_not_cover_is_refused_by_name(kw, phrase):
    with pytest.raises(ValueError, match=phrase):
        _trainer(Hyper(batch_size=64, **kw), "native-step")


def test_nothing_to_compile():
    with pytest.raises(ValueError, match="nothing to compile"):
        StepOptions(mlp="native-step", compile=True)
    with pytest.raises(ValueError, match="autograd"):
        StepOptions(mlp="native-step", autograd=True)


def test_a_slot_masked_inside_a_models_width_reads_zero_not_another_models_weight():
    """A mask 0 inside a model's width (not one the layout makes, but one ``fused_steps``
    accepts) is a 0 weight, as in the batched step: the model's terms are the same beside
    another model as alone (the C step's scratch is shared by the models of a thread)."""
    h = Hyper(batch_size=64)
    whole = _trainer(h, "native-step", widths=[8, 5], seeds=[11, 12], data=[0, 1])
    alone = _trainer(h, "native-step", widths=[5], seeds=[12], data=[1])
    whole.mask[1, 0] = 0.0  # the first layer's first weight, a real slot in both layouts
    alone.mask[0, 0] = 0.0
    with torch_threads(1):  # one thread: model 1 runs in model 0's scratch
        a, b = whole.advance(), alone.advance()
    assert torch.equal(a.terms.L1[1:], b.terms.L1) and torch.equal(a.terms.L2[1:], b.terms.L2)


def test_the_cached_checks_see_another_batch_size():
    """The once-per-program checks are keyed by the sizes they check against: the same
    tensors handed with another batch size are refused, not read past their end."""
    from dataclasses import replace

    tr = _trainer(Hyper(batch_size=64), "native-step")
    tr.advance()  # the checks pass and are cached
    inputs = tr.sampler.draw(int(tr.state.count), tr.state.health.failed | tr.frozen)
    st, c = tr.state, tr.step_fn.consts
    E = st.params.shape[1]
    step = torch.full((1, 3, E), 1e-3)
    sd, one = torch.ones(E), torch.ones(1)
    args = (st.params, st.opt, c.mask, c.H, inputs.source, st.count, 1, None, None, sd,
            inputs.held, step, one, one, c.widths)  # fmt: skip
    native.fused_steps(tr.layout, tr.hyper, tr.n, *args)
    with pytest.raises(ValueError, match="iid_base"):
        native.fused_steps(tr.layout, replace(tr.hyper, batch_size=256), tr.n, *args)


def _same_state(a, b):
    pairs = zip((a.params, *a.opt[:2]), (b.params, *b.opt[:2]), strict=True)
    return all(torch.equal(x, y) for x, y in pairs)


@pytest.mark.parametrize(
    "case", ["asvi", "two draws", "dense", "kl warm-up", "rmsprop", "permutation", "lr_inclusion"]
)
def test_several_steps_in_one_call_are_the_one_step_calls_bit_for_bit(case):
    """``Trainer.advance_steps(S)`` (one C call) against S calls of ``advance`` (each one
    C call): parameters, moments and every step's terms equal bit for bit, over calls of
    several sizes, with learned noise, held locations and a frozen model."""
    h = Hyper(batch_size=64, **CASES[case])
    one, many = _trainer(h, "native-step", learn=True), _trainer(h, "native-step", learn=True)
    for tr in (one, many):
        tr.hold_locations() if case == "asvi" else None
        tr.frozen[1] = True
    for S in (1, 7, 3, 16):
        rows = [one.advance() for _ in range(S)]
        got = many.advance_steps(S)
        for name, x in zip(("L1", "L2", "L3"), got.terms, strict=True):
            want = torch.stack([getattr(r.terms, name) for r in rows])
            assert torch.equal(x, want), (case, S, name)
        assert _same_state(one.state, many.state) and one.state.count == many.state.count
        assert torch.equal(one._rss_sum, many._rss_sum) and one._rss_steps == many._rss_steps
        one.update_noise()
        many.update_noise()
        assert torch.equal(one.noise_sd, many.noise_sd)


@pytest.mark.parametrize("cap", [None, 7])
def test_fit_until_with_whole_windows_per_call_stops_where_one_step_calls_stop(cap, monkeypatch):
    """``fit_until`` runs a whole window per C call (``step_fn.multi``; with ``cap``, at
    most that many steps per call, so several calls a window); with the loop forced to one
    step per call the summary and the state are the same bit for bit (the windows' float64
    sums added in order, ``sum_in_order``), with learned noise, a plateau schedule and a
    race; and ``fit`` with recorded steps likewise."""
    from simulate.core import trainer
    from simulate.core.stopping import StopRule

    if cap is not None:
        monkeypatch.setattr(trainer, "STEPS_PER_CALL", cap)
    rule = StopRule(max_steps=700, window=50, tol=2e-2, patience=1, lr_decays=1)
    runs = []
    for multi in (True, False):
        tr = _trainer(Hyper(batch_size=64), "native-step", learn=True)
        tr.step_fn.multi = multi  # the instance's attribute: one step per call
        seen = []

        def race(means, running, seen=seen):  # records what it is asked, stops nothing
            seen.append(means.clone())
            return torch.zeros_like(running)

        summary = tr.fit_until(rule, race=race)
        tr.release_stopped()
        tr.fit(23, record_every=5)
        runs.append((summary, tr, seen))
    (sa, ta, ra), (sb, tb, rb) = runs
    assert sa == sb and _same_state(ta.state, tb.state)
    assert all(torch.equal(x, y) for x, y in zip(ra, rb, strict=True)) and len(ra) > 2
    assert ta.history == tb.history and len(ta.history) == 6
    assert torch.equal(ta.noise_sd, tb.noise_sd)


def test_held_models_left_out_of_a_call_keep_the_same_state():
    """``skip_held``: a held model is not computed (its terms NaN) and its parameters and
    moments are what computing it gives (its moments decay); the others' numbers do not
    move."""
    h = Hyper(batch_size=64)
    a, b = _trainer(h, "native-step"), _trainer(h, "native-step")
    for tr in (a, b):
        tr.advance_steps(5)
        tr.frozen[1] = True
    x, y = a.advance_steps(6), b.advance_steps(6, skip_held=True)
    assert _same_state(a.state, b.state)
    assert torch.isnan(y.terms.L1[:, 1]).all() and not y.failed.any()
    for u, v in zip(x.terms, y.terms, strict=True):
        assert torch.equal(u[:, [0, 2]], v[:, [0, 2]]) and torch.isfinite(u[:, 1]).all()


def test_fit_until_with_learned_noise_keeps_a_held_models_sums_past_its_end():
    """With learned noise ``fit_until`` leaves held models out only of calls that end at a
    window end (whose noise update drops their sums); a run that ends short of one keeps
    every model's sum, so the sds after ``release_stopped`` are those of one-step calls."""
    from simulate.core.stopping import StopRule

    rule = StopRule(max_steps=130, window=50, tol=0.5, patience=1)  # every model stops at 100
    sds = []
    for multi in (True, False):
        tr = _trainer(Hyper(batch_size=64), "native-step", learn=True)
        tr.step_fn.multi = multi
        summary = tr.fit_until(rule)
        assert summary["converged"] == [True] * 3 and summary["steps"] == [100] * 3
        tr.frozen[:] = False
        tr.frozen[0] = True  # model 0 stopped: the last 30 steps' sums must still be whole
        tr.fit_until(StopRule(max_steps=20, window=50))
        tr.release_stopped()
        tr.update_noise()
        sds.append((tr.noise_sd.clone(), tr._rss_steps))
    assert torch.equal(sds[0][0], sds[1][0]) and sds[0][1] == sds[1][1] == 0


def test_a_failure_inside_a_call_is_recorded_at_its_step_and_holds_the_model():
    """A model whose objective turns non-finite at a step inside an S-step call is held
    from the next step on and recorded as failed at that step, as S one-step calls do."""
    h = Hyper(batch_size=64)
    one, many = _trainer(h, "native-step"), _trainer(h, "native-step")
    for tr in (one, many):
        tr.state.params[2, 1] = 200.0  # model 1: every inclusion logit huge, S = H: L3 not finite
    rows = [one.advance() for _ in range(5)]
    got = many.advance_steps(5)
    assert got.failed[:, 1].tolist() == [True, False, False, False, False]
    assert torch.equal(got.failed, torch.stack([r.failed for r in rows]))
    assert all(torch.equal(x, y) for x, y in zip(one.state.health, many.state.health, strict=True))
    assert int(many.state.health.failed_step[1]) == 0 and _same_state(one.state, many.state)


def test_sum_in_order_is_the_loops_sum_bit_for_bit():
    from simulate.core.stopping import sum_in_order

    g = torch.Generator().manual_seed(0)
    rows = torch.randn(300, 7, generator=g, dtype=torch.float64) * 10.0 ** torch.randint(
        -8, 8, (300, 7), generator=g
    )
    acc = torch.randn(7, generator=g, dtype=torch.float64)
    loop = acc.clone()
    for r in rows:
        loop += r
    assert torch.equal(sum_in_order(acc, rows), loop)
    assert not torch.equal(acc + rows.sum(0), loop)  # the order matters: a plain sum differs


def test_a_call_takes_at_most_steps_per_call_and_permutation_minibatches_stay_bounded():
    """``Trainer.steps_per_call``: ``STEPS_PER_CALL`` with iid sampling (progress is called
    at least that often by ``fit``), and with permutation sampling no more steps than keep
    the call's gathered minibatches within ``MINIBATCH_BYTES``."""
    from simulate.core import trainer

    tr = _trainer(Hyper(batch_size=64), "native-step")
    assert tr.steps_per_call() == trainer.STEPS_PER_CALL
    calls = []
    tr.fit(1203, progress=lambda i, n: calls.append(i))
    assert calls == [500, 1000, 1203] and tr.state.count == 1203
    perm = _trainer(Hyper(batch_size=64, sampling="permutation"), "native-step")
    per_step = 3 * 64 * (3 + 2) * 4  # E m (p + 1 inputs and the target) floats
    assert perm.steps_per_call() == min(trainer.STEPS_PER_CALL, trainer.MINIBATCH_BYTES // per_step)
    old = trainer.MINIBATCH_BYTES
    try:
        trainer.MINIBATCH_BYTES = 10 * per_step
        assert perm.steps_per_call() == 10
        trainer.MINIBATCH_BYTES = 1
        assert perm.steps_per_call() == 1
    finally:
        trainer.MINIBATCH_BYTES = old
    assert _trainer(Hyper(batch_size=64), "batched").steps_per_call() == 1


def _avoid_fma_bits(tune: str) -> str | None:
    """GCC's ``avoid-fma-max-bits`` for this CPU without AVX-512 under ``-mtune=tune`` (None:
    not GCC, not x86-64 or no FMA here)."""
    import subprocess

    cc = library._compiler()
    base = [cc, "-march=native", "-mno-avx512f", f"-mtune={tune}"]
    try:
        fma = subprocess.run([*base, "-dM", "-E", "-x", "c", "-"], input="", capture_output=True,
                             text=True, timeout=60)  # fmt: skip
        par = subprocess.run([*base, "-Q", "--help=params"], capture_output=True, text=True,
                             timeout=60)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    if fma.returncode or "__FMA__" not in fma.stdout or par.returncode:
        return None
    line = [ln for ln in par.stdout.splitlines() if "avoid-fma-max-bits" in ln]
    return line[0].split()[-1] if line else None


def _trained_with(flags, cache, monkeypatch, steps=200):
    """The parameters after ``steps`` C steps with the library built with ``flags``."""
    monkeypatch.setattr(library, "_FLAGS", list(flags))
    monkeypatch.setattr(library, "_lib", None)
    monkeypatch.setenv("ASVI_RATES_CACHE", str(cache))
    tr = _trainer(Hyper(batch_size=64), "native-step")
    for _ in range(steps):
        tr.advance()
    monkeypatch.setattr(library, "_lib", None)  # the next build's library, not this one
    return tr.state.params.clone()


def test_the_build_tunes_for_no_particular_cpu():
    """The build names its tuning (``-mtune=generic``), so that the code follows the
    instruction set, not the CPU's model that ``-march=native`` would tune for (the native
    module's docstring, "Arithmetic"); any ``-mtune`` replaces the detected one."""
    assert "-mtune=generic" in library._FLAGS and "-march=native" in library._FLAGS


@pytest.mark.skipif(
    _avoid_fma_bits("znver3") in (None, _avoid_fma_bits("generic")),
    reason="not GCC on an x86-64 CPU with FMA, or its Zen 3 and generic tunings fuse alike",
)
def test_a_zen_tuning_changes_the_numbers(monkeypatch, tmp_path):
    """Why the build names its tuning: built as a Zen 2/3 machine would build it without
    ``-mtune=generic`` (``-march=native`` detecting ``-mtune=znver3``; no AVX-512, VL 8, as
    on those CPUs) the C step trains to other numbers than the generic build's, since that
    tuning leaves some multiply-adds unfused (``avoid-fma-max-bits``, checked to differ
    before the test runs).  That the build's explicit ``-mtune=generic`` replaces the
    detected tuning is GCC's rule, which only a Zen machine could test (emulated, the
    native module's docstring: an Intel machine built ``-march=znver3 -mtune=generic``
    trained as its own generic build)."""
    at = library._FLAGS.index("-march=native") + 1
    ours = [*library._FLAGS[:at], "-mno-avx512f", *library._FLAGS[at:]]
    zen = [f if f != "-mtune=generic" else "-mtune=znver3" for f in ours]
    generic = _trained_with(ours, tmp_path / "ours", monkeypatch)
    assert not torch.equal(_trained_with(zen, tmp_path / "zen", monkeypatch), generic)
