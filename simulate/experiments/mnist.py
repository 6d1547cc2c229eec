"""The paper's MNIST experiment on MNIST-1D, and the controls of its collapse (drivers;
``figures.realdata_figures`` draws their tables and figures).

MNIST-1D: two hidden layers, trained at each training-set size n of the tier (``ns``; the
paper's MNIST had n = 60,000) on nested training sets with one shared test set
(``simulate.truths.data.mnist1d_split``).  ASVI selects among several widths: the paper used
400, ..., 800 on MNIST; the tiers use grids scaled to this machine with the same ratios
(``MNIST_TIERS``), and the width prior's lambda is the middle candidate (the paper's
lambda = 600 is the middle of 400-800; :func:`mnist_lambda`).  lambda_s = a (L + 1) log n
with the paper's a = 1.5 and L = 2 hidden layers (49.5 at n = 60,000); sigma_0 = 2, batch
512, lr 5e-3 and RMSprop (``Hyper(optimizer="rmsprop")``) as in the paper.  Test accuracy of the
posterior-mean classifier (10 draws) and the fraction of edges kept (sum of inclusion
probabilities over H) are tracked every few epochs for every candidate width and for a
Dense-BNN of each width; ASVI's curve is that of the width it selects at the end, which is
exactly SVI at that width (ASVI trains every candidate and keeps one), so "SVI at the
selected width" is that same curve.
"""

from __future__ import annotations

import math
import os
import time
from typing import NamedTuple

import torch

from simulate.core import Batch, Hyper
from simulate.core.hyper import DEPTH, LAMBDA_S_A, PAPER_MNIST, lambda_s_at
from simulate.core.posterior import ELBO_DRAWS, select_width
from simulate.core.training import build_trainer
from simulate.progress import Progress
from simulate.sweep.setup import tiers
from simulate.sweep.store.records import RecordStore, tier_store
from simulate.truths.data import mnist1d_split, standardize

__all__ = [
    "MNIST_TIERS",
    "MNIST_SCHEMA",
    "run_mnist1d",
    "mnist_store",
    "mnist_lambda",
    "MNIST_CONTROL_VARIANTS",
    "MNIST_CONTROL_SCHEMA",
    "run_mnist1d_controls",
    "control_store",
]

MNIST_SCHEMA = "asvi-rates/mnist1d-record/4"  # 4: "kept_fraction" (was "sparsity")
MNIST_TIERS = tiers.MNIST1D


def mnist_store(tier: str, out_dir: str, recompute: bool = False) -> RecordStore:
    """``mnist1d-TIER.jsonl``: one record per training-set size n, of the tier's settings."""
    key = lambda r: ("mnist1d", r["n"])  # noqa: E731
    settings = MNIST_TIERS[tier]
    required = ("n", "widths", "curves")
    return tier_store(out_dir, "mnist1d", tier, settings, MNIST_SCHEMA, key, required, recompute)


def _accuracy(post, X, y, draws=10):
    probs = post.predict_mean(X, draws).cpu().numpy()  # [E, classes, m]
    return (probs.argmax(1) == y[None, :]).mean(1)


def run_mnist1d(
    tier: str, out_dir: str, recompute: bool = False, log=print, cache_dir: str | None = None
) -> list[dict]:
    """One record per training-set size ``n`` of the tier (``ns``), each trained only if
    not yet recorded (a stopped run loses at most the size in flight); the records sorted
    by n.  The generated data are cached in ``cache_dir`` (default ``OUT_DIR/data``)."""

    cfg = MNIST_TIERS[tier]
    cache = os.path.join(out_dir, "data") if cache_dir is None else cache_dir
    store = mnist_store(tier, out_dir, recompute)
    with store.writing() as st:
        for n in cfg["ns"]:
            if ("mnist1d", n) not in st.done:
                st.append([_train_mnist1d(tier, cfg, n, cache, log)])
        return sorted(st.records, key=lambda r: r["n"])


def mnist_lambda(widths) -> float:
    """The width prior's lambda for a width grid: its middle candidate (the paper's 600 is
    the middle of its grid 400, ..., 800, so a grid scaled by c gets 600 c)."""
    widths = sorted(widths)
    return float(widths[len(widths) // 2])


def _mnist_hyper(cfg: dict, n: int, lam: float, a: float | None = None, **overrides) -> Hyper:
    """The MNIST-1D runs' hyperparameters (the paper's MNIST settings, ``PAPER_MNIST``):
    categorical likelihood, sigma_0 = 2, lambda_s = a (L + 1) log n with L = 2 and the
    paper's a (``LAMBDA_S_A``, 1.5; ``a`` another), batch 512 (or n), Hyper's lr, the tier's
    optimiser; ``overrides`` replace any of them."""
    a = LAMBDA_S_A["categorical"] if a is None else a
    kw = {
        "likelihood": PAPER_MNIST["likelihood"],
        "sigma_0": PAPER_MNIST["sigma_0"],
        "lambda_s": lambda_s_at(n, DEPTH, a),
        "lam": lam,
        "batch_size": min(PAPER_MNIST["batch_size"], n),
        "optimizer": cfg["optimizer"],
    }
    return Hyper(**{**kw, **overrides})


class _Signals(NamedTuple):
    """One draw of MNIST-1D as a fit uses it: the standardised training signals ``Xs`` and
    their labels ``y``, the standardised test signals ``Xts`` and their labels ``yt``."""

    Xs: object
    y: object
    Xts: object
    yt: object


def _mnist_fit(cfg, hyper, widths, seeds, data: _Signals, label, elbo_draws=None):
    """Train one program of models (``widths``, ``seeds``) on the standardised training
    signals ``data.Xs, data.y`` for the tier's epochs; every ``eval_every`` epochs record
    each model's test accuracy (posterior mean, 10 draws) on ``data.Xts, data.yt`` and
    kept-edge fraction and, with ``elbo_draws``, the negative ELBO's parts on the whole
    training set (L1 from that many draws, L2, L3; nats).  Returns the trainer, the training
    batch and the curves."""
    Xs, y, Xts, yt = data

    batch = Batch(
        torch.tensor(Xs[None], dtype=torch.float32),
        torch.tensor(y[None]),
        torch.zeros(len(widths), dtype=torch.int64),
    )
    tr = build_trainer(
        hyper, widths, seeds, batch.X, batch.y, batch.data_index, depth=DEPTH, out_dim=10
    )
    spe = math.ceil(len(y) / hyper.batch_size)
    parts = ("L1", "L2", "L3") if elbo_draws else ()
    curves = {k: [] for k in ("epochs", "accuracy", "kept", *parts)}
    bar = Progress(label)
    for ep in range(cfg["eval_every"], cfg["epochs"] + 1, cfg["eval_every"]):
        tr.fit(spe * cfg["eval_every"])
        bar(ep, cfg["epochs"])
        post = tr.posterior()
        e = post.edges()
        curves["epochs"].append(ep)
        curves["accuracy"].append(_accuracy(post, Xts, yt).tolist())
        curves["kept"].append((e["sum_nu"] / e["H"]).tolist())
        if elbo_draws:
            el = post.elbo(batch.X, batch.y, batch.data_index, draws=elbo_draws)
            for k in parts:
                curves[k].append(el[k].tolist())
    return tr, batch, curves


def _train_mnist1d(tier: str, cfg: dict, n: int, cache: str, log) -> dict:
    """Train SVI at every width (ASVI keeps one) and Dense-BNN at every width on ``n``
    MNIST-1D signals; test accuracy every ``eval_every`` epochs; the record."""
    X, y, Xt, yt = mnist1d_split(n, cfg["n_test"], cfg["pool"], cache_dir=cache)
    mu, sd, Xs, Xts = standardize(X, Xt)
    widths = list(cfg["widths"])
    lam = mnist_lambda(widths)
    curves, out, walls = {}, {}, {}
    for family in ("spike_slab", "dense"):
        t0 = time.perf_counter()
        hyper = _mnist_hyper(cfg, n, lam, family=family)
        seeds = [7 + k for k in range(len(widths))]
        tr, batch, curves[family] = _mnist_fit(
            cfg, hyper, widths, seeds, _Signals(Xs, y, Xts, yt), f"mnist1d {tier} n={n} {family}"
        )
        post = tr.posterior()
        out[family] = (post, batch, tr.state.health.failed.cpu().numpy())
        walls[family] = time.perf_counter() - t0
        log(f"  mnist1d {tier} n={n}: {family} done ({walls[family]:.0f} s)")
    post, batch, failed = out["spike_slab"]
    el = post.elbo(batch.X, batch.y, batch.data_index, draws=ELBO_DRAWS)
    sel = select_width(el["elbo"], widths, lam, failed=failed)
    edges = post.edges()
    return {
        "schema": MNIST_SCHEMA,
        "n": n,
        "n_test": cfg["n_test"],
        "widths": widths,
        "lam": lam,
        "lambda_s": hyper.lambda_s,
        "optimizer": cfg["optimizer"],
        "curves": curves,
        "selected_width": sel["width"],
        "penalized_elbo": sel["penalized"].tolist(),
        "kept_fraction": (edges["sum_nu"] / edges["H"]).tolist(),
        "edges": edges["sum_nu"].tolist(),
        "H": edges["H"].tolist(),
        "failed": {f: out[f][2].tolist() for f in out},
        "wall_s": sum(walls.values()),
        "wall_s_family": walls,
        "epochs": cfg["epochs"],
    }


# One setting of the tier's MNIST-1D run changed at a time (``_mnist_hyper`` overrides; "a"
# sets lambda_s = a (L + 1) log n): which of lambda_s, the optimiser, its step size, the slabs'
# initial sd (hence their initial KL) and the family makes SVI's accuracy fall while it
# prunes.  "paper" is the tier's run itself; "dense" is Dense-BNN on the same seeds.
MNIST_CONTROL_VARIANTS = {
    "paper": {},
    "a=0.1": {"a": 0.1},
    "lambda_s=1e-6": {"lambda_s": 1e-6},
    "adam": {"optimizer": "adam"},
    "lr=1e-3": {"lr": 1e-3},
    "init_sigma=0.05": {"init_sigma": 0.05},
    "dense": {"family": "dense"},
}
MNIST_CONTROL_SCHEMA = "asvi-rates/mnist1d-control/1"
MNIST_CONTROLS = tiers.MNIST1D_CONTROLS


def control_store(tier: str, out_dir: str, recompute: bool = False) -> RecordStore:
    """``mnist1d-controls-TIER.jsonl``: one record per (n, variant)."""
    key = lambda r: (r["n"], r["variant"])  # noqa: E731
    settings = {
        "data": MNIST_TIERS[tier],
        "controls": MNIST_CONTROLS[tier],
        "variants": MNIST_CONTROL_VARIANTS,
    }
    required = ("n", "variant", "curves")
    return tier_store(
        out_dir, "mnist1d-controls", tier, settings, MNIST_CONTROL_SCHEMA, key, required, recompute
    )


def run_mnist1d_controls(
    tier: str, out_dir: str, recompute: bool = False, log=print, cache_dir: str | None = None
) -> list[dict]:
    """The collapse controls: SVI at the tier's control width (``MNIST1D_CONTROLS``), one
    program of ``seeds`` models per (n, variant of :data:`MNIST_CONTROL_VARIANTS`), on the
    same data, seeds and epochs as the tier's MNIST-1D run; every ``eval_every`` epochs
    the test accuracy (posterior mean, 10 draws), the kept-edge fraction and the negative
    ELBO's parts on the whole training set (L1 from 2 draws, L2 the slabs' KL, L3 the
    indicators'), in nats.  Resumable per (n, variant)."""

    cfg, ctl = MNIST_TIERS[tier], MNIST_CONTROLS[tier]
    cache = os.path.join(out_dir, "data") if cache_dir is None else cache_dir
    store = control_store(tier, out_dir, recompute)
    with store.writing() as st:
        for n in ctl["ns"]:
            for name, overrides in MNIST_CONTROL_VARIANTS.items():
                if (n, name) not in st.done:
                    st.append([_train_control(tier, cfg, ctl, n, name, overrides, cache, log)])
        order = list(MNIST_CONTROL_VARIANTS)
        return sorted(st.records, key=lambda r: (r["n"], order.index(r["variant"])))


def _train_control(tier, cfg, ctl, n, name, overrides, cache, log) -> dict:
    t0 = time.perf_counter()
    X, y, Xt, yt = mnist1d_split(n, cfg["n_test"], cfg["pool"], cache_dir=cache)
    _, _, Xs, Xts = standardize(X, Xt)
    lam = mnist_lambda(cfg["widths"])
    over = dict(overrides)
    hyper = _mnist_hyper(cfg, n, lam, a=over.pop("a", None), **over)
    E = ctl["seeds"]
    tr, _, curves = _mnist_fit(
        cfg, hyper, [ctl["width"]] * E, [7 + k for k in range(E)], _Signals(Xs, y, Xts, yt),
        f"mnist1d controls {tier} n={n} {name}", elbo_draws=2,
    )  # fmt: skip
    post = tr.posterior()
    wall = time.perf_counter() - t0
    log(f"  mnist1d controls {tier} n={n}: {name} ({wall:.0f} s)")
    return {
        "schema": MNIST_CONTROL_SCHEMA,
        "n": n,
        "variant": name,
        "overrides": overrides,
        "width": ctl["width"],
        "seeds": [7 + k for k in range(E)],
        "lambda_s": hyper.lambda_s,
        "optimizer": hyper.optimizer,
        "lr": hyper.lr,
        "init_sigma": hyper.init_sigma,
        "family": hyper.family,
        "H": post.edges()["H"].tolist(),
        "curves": curves,
        "failed": tr.state.health.failed.cpu().numpy().tolist(),
        "wall_s": wall,
    }
