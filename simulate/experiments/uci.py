"""The UCI regression protocol (a driver; ``figures.realdata_figures`` draws its tables).

UCI protocol (Hernandez-Lobato and Adams 2015, as the paper follows): 20 random 90/10
train/test splits; inputs and targets standardised on the training part only; one hidden
layer of 50 units; test RMSE in the original units and test log-likelihood (the log of the
posterior predictive density ``(1/30) sum_t N(y; f_t(x), sigma^2)``, in original units),
mean +- standard error over splits.  The noise sd sigma and the prior slab sd sigma_0 are
chosen per split by a grid search on a validation part (20% of the training part, taken
by a fixed permutation), never on the test part; the chosen values are recorded.  Two
selection criteria are run side by side (``UCI_CRITERIA``): the least validation RMSE --
the paper's "grid search that yields the best prediction accuracy", its reading for the
paper's comparison -- and the greatest validation log-likelihood.  The two differ because
sigma is a fixed noise sd: the RMSE criterion tends to pick the smallest sigma of the grid,
whose predictive density is then too narrow for a good test log-likelihood; each record
says which criterion chose it.  Methods: SVI, Dense-BNN, HS-BNN.  Batching: one program
trains the 20 splits of a (method, grid point) together (each model on its own split).
Adam with lr 1e-3 and batch 256 (the paper's UCI settings, ``simulate.core.hyper.PAPER_UCI``);
lambda_s = a (L + 1) log n with a = 0.1 (L = 1 hidden layer).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from typing import NamedTuple

import numpy as np
import torch

from simulate.core import Hyper
from simulate.core.hyper import LAMBDA_S_A, PAPER_UCI, lambda_s_at
from simulate.core.posterior import PREDICT_DRAWS, mixture_quantiles
from simulate.core.training import build_trainer
from simulate.sweep.run.parallel import check_workers, map_unordered
from simulate.sweep.setup import tiers
from simulate.sweep.store.records import RecordStore, tier_store
from simulate.truths.data import (
    UCI_SPLIT_KINDS,
    boston,
    concrete,
    standardize,
    uci_splits,
    uci_standard_splits,
)

__all__ = [
    "DATASETS",
    "UCI_TIERS",
    "UCI_METHODS",
    "UCI_CRITERIA",
    "UCI_SCHEMA",
    "run_uci",
    "uci_store",
    "uci_stem",
]

UCI_SCHEMA = "asvi-rates/uci-record/4"  # 4: picp90, width90; split_kind in the settings
UCI_CRITERIA = ("rmse", "ll")  # how the grid search chooses; see _uci_grid_search
UCI_METHODS = {"SVI": "spike_slab", "Dense-BNN": "dense", "HS-BNN": "horseshoe"}
DATASETS = {"concrete": concrete, "boston": boston}
UCI_TIERS = tiers.UCI


class UciPrior(NamedTuple):
    """What one UCI program trains: the ``family`` (SVI, Dense-BNN, HS-BNN), the noise sd
    ``sigma`` and the prior slab sd ``sigma_0`` (one grid point of the search)."""

    family: str
    sigma: float
    sigma_0: float


def _fit_splits(prior: UciPrior, Xs, ys, epochs, seed, eval_every=None, at_epoch=None):
    """Train one 1-hidden-layer (50 units; ``PAPER_UCI``) model per split (datasets Xs[d],
    ys[d]) of ``prior`` (:class:`UciPrior`) for ``epochs`` epochs; with ``eval_every``,
    ``at_epoch(epoch, posterior)`` is called every ``eval_every`` epochs (and at the end) on
    the models as they are then.  Returns the final posterior and which models failed."""
    family, sigma, sigma0 = prior
    D, n, p = Xs.shape
    hyper = Hyper(
        family=family,
        sigma=sigma,
        sigma_0=sigma0,
        lr=PAPER_UCI["lr"],
        batch_size=min(PAPER_UCI["batch_size"], n),
        lambda_s=lambda_s_at(n, PAPER_UCI["depth"], LAMBDA_S_A["gaussian"]),
    )
    tr = build_trainer(
        hyper,
        [PAPER_UCI["width"]] * D,
        [seed + d for d in range(D)],
        torch.tensor(Xs, dtype=torch.float32),
        torch.tensor(ys, dtype=torch.float32),
        range(D),
        depth=PAPER_UCI["depth"],
    )
    spe = math.ceil(n / hyper.batch_size)
    marks = _checkpoints(epochs, eval_every)
    done = 0
    for ep in marks:
        tr.fit(spe * (ep - done))
        done = ep
        if at_epoch is not None:
            at_epoch(ep, tr.posterior())
    return tr.posterior(), tr.state.health.failed.cpu().numpy()


def _checkpoints(epochs: int, eval_every) -> list[int]:
    """The epochs at which a UCI fit is evaluated: every ``eval_every`` and the last."""
    if not eval_every:
        return [epochs]
    return sorted(set(range(eval_every, epochs + 1, eval_every)) | {epochs})


def _per_model(post, Xs, draws=PREDICT_DRAWS):
    """Draws ``[T, E, m]`` of each model on its own inputs Xs[e] (m, p)."""
    out = np.stack(
        [post.outputs(Xs[e], draws)[:, e, 0, :].cpu().numpy() for e in range(post.E)], axis=1
    )
    return out


def uci_stem(splits: str = "random") -> str:
    """The UCI records' and tables' file stem: ``uci`` for drawn splits, ``uci-standard``
    for the protocol's standard ones."""
    if splits not in UCI_SPLIT_KINDS:
        raise ValueError(f"splits must be one of {UCI_SPLIT_KINDS}, got {splits!r}")
    return "uci" if splits == "random" else "uci-standard"


def uci_store(
    tier: str, out_dir: str, recompute: bool = False, splits: str = "random"
) -> RecordStore:
    """``uci-TIER.jsonl`` (``uci-standard-TIER.jsonl`` for the standard splits), keyed by
    (dataset, method, criterion, split), of the tier's settings and the split kind."""
    key = lambda r: (r["dataset"], r["method"], r["criterion"], r["split"])  # noqa: E731
    required = ("dataset", "method", "criterion", "split", "rmse", "ll", "picp90", "width90")
    settings = {**UCI_TIERS[tier], "split_kind": splits}
    return tier_store(
        out_dir, uci_stem(splits), tier, settings, UCI_SCHEMA, key, required, recompute
    )


def _splits_of(kind: str, n: int, n_splits: int):
    """The tier's ``n_splits`` splits: drawn here (``random``, seed 0) or the protocol's
    standard ones (``simulate.truths.data.uci_standard_splits``: the first ``n_splits``)."""
    if kind == "standard":
        return uci_standard_splits(n, n_splits)
    return uci_splits(n, n_splits, seed=0)


def run_uci(
    tier: str,
    out_dir: str,
    recompute: bool = False,
    log=print,
    splits: str = "random",
    workers: int | None = None,
) -> list[dict]:
    """Every (dataset, method) of the tier not yet recorded: the grid search of sigma and
    sigma_0 on validation parts, then each split refitted with the values each criterion
    chose and scored on its test part (test RMSE, log-likelihood, and the 90% predictive
    interval's coverage and mean width, in the original units).  ``splits``: ``random``
    (drawn here, seed 0) or ``standard`` (the protocol's own, on which the published rows
    were computed: :func:`simulate.truths.data.uci_standard_splits`).  ``workers``: train
    the (dataset, method) units on that many single-threaded worker processes
    (``simulate.sweep.run.parallel``; this process alone writes the records, each unit's as it
    finishes, so a run stopped anywhere loses at most the units in flight).  A unit's
    numbers do not depend on where it ran, up to the float rounding of the thread count
    (a worker has one torch thread)."""
    cfg = UCI_TIERS[tier]
    check_workers(workers)
    store = uci_store(tier, out_dir, recompute, splits)
    with store.writing() as st:
        # a (dataset, method) is done when every (split, criterion) of it is recorded: a
        # unit whose append was cut short (a full disk) is trained again, and its missing
        # records appended (the store skips keys it holds)
        have = Counter(k[:2] for k in st.done)
        done = {u for u, c in have.items() if c >= cfg["splits"] * len(UCI_CRITERIA)}
        todo = [
            (tier, splits, name, method)
            for name in DATASETS
            for method in UCI_METHODS
            if (name, method) not in done
        ]
        for new in map_unordered(_uci_unit, todo, workers):
            st.append(new)
            r = new[0]
            log(f"  uci {tier}: {r['dataset']} {r['method']} ({r['wall_s_method']:.0f} s)")
    return store.read()


def _uci_unit(unit: tuple) -> list[dict]:
    """One (dataset, method) of :func:`run_uci`, ``unit = (tier, splits, dataset, method)``:
    its grid search and refits, one record per (split, criterion).  Module-level, so that a
    worker process can run it."""
    tier, splits, name, method = unit
    cfg = UCI_TIERS[tier]
    X, y = DATASETS[name]()
    parts = _splits_of(splits, len(y), cfg["splits"])
    rng = np.random.default_rng(1)
    n_val = int(round(0.2 * len(parts[0][0])))
    tr_parts, val_parts = [], []
    for tr_idx, _ in parts:
        perm = rng.permutation(tr_idx)
        tr_parts.append(perm[n_val:])
        val_parts.append(perm[:n_val])
    t0 = time.perf_counter()
    family = UCI_METHODS[method]
    best = _uci_grid_search(cfg, family, X, y, tr_parts, val_parts)
    new = _uci_refit(cfg, family, X, y, parts, best, name, method)
    wall = time.perf_counter() - t0
    for r in new:
        r["wall_s_method"] = wall
    return new


def _uci_grid_search(cfg, family, X, y, tr_parts, val_parts) -> dict[str, list[tuple]]:
    """Each split's (sigma, sigma_0, epochs) chosen on its validation part under each
    criterion of :data:`UCI_CRITERIA` (standardised on the fit parts only; a failed fit
    never wins): ``"rmse"``, the least validation RMSE (the paper's "best prediction
    accuracy"), and ``"ll"``, the greatest validation log-likelihood.  Every grid point is
    trained for the tier's ``epochs`` and, with ``eval_every``, scored every ``eval_every``
    epochs, so the number of epochs is chosen too -- where the validation score stops
    improving (without ``eval_every``, the tier's epochs).  Returns criterion -> choices."""
    Xf, yf, Xv, yv = [], [], [], []
    for a, b in zip(tr_parts, val_parts, strict=True):
        _, _, xa, xb = standardize(X[a], X[b])
        mu, sd, ya, yb = standardize(y[a], y[b])
        Xf.append(xa), yf.append(ya), Xv.append(xb), yv.append(yb)
    Xf, yf = np.stack(Xf), np.stack(yf)
    losses = {c: {} for c in UCI_CRITERIA}  # criterion -> (sigma, sigma_0, epoch) -> per split
    for s in cfg["sigmas"]:
        for s0 in cfg["sigma0s"]:

            def score(ep, post, s=s, s0=s0):
                draws = _per_model(post, Xv, PREDICT_DRAWS)  # [T, E, m], standardised units
                both = [_uci_scores(draws[:, d], yv[d], 0.0, 1.0, s) for d in range(len(yv))]
                losses["rmse"][(s, s0, ep)] = np.array([b[0] for b in both])
                losses["ll"][(s, s0, ep)] = -np.array([b[1] for b in both])

            _, failed = _fit_splits(
                UciPrior(family, s, s0), Xf, yf, cfg["epochs"], 100, cfg.get("eval_every"), score
            )
            for table in losses.values():
                for k in [k for k in table if k[:2] == (s, s0)]:
                    table[k] = np.where(failed | ~np.isfinite(table[k]), np.inf, table[k])
    out = {}
    for c, table in losses.items():
        keys = list(table)
        out[c] = [keys[int(np.argmin([table[k][d] for k in keys]))] for d in range(len(yv))]
    return out


def _refit_scorer(want: dict, ds: list, test: tuple, scored: dict, sigma: float):
    """The refit's ``at_epoch``: at each epoch some (split, criterion) of ``want`` (split,
    criterion -> epoch) is read off at, score those splits (of ``ds``, their test parts
    ``test = (Xte, yte, stats)``, standardised inputs, original targets and the targets'
    (mean, sd)) at noise sd ``sigma`` into ``scored[(split, criterion)]``."""
    Xte, yte, stats = test

    def score(ep, post):
        if ep not in want.values():
            return
        draws = _per_model(post, Xte, PREDICT_DRAWS)  # standardised units, [T, E, m]
        for (d, c), e in want.items():
            if e == ep:
                i = ds.index(d)
                scored[(d, c)] = _uci_scores(draws[:, i, :], yte[i], *stats[i], sigma)

    return score


def _uci_refit(cfg, family, X, y, splits, best, name, method) -> list[dict]:
    """Refit each split with its chosen (sigma, sigma_0) on its whole training part and
    score it on its test part after its chosen number of epochs; one record per (split,
    criterion).  ``best`` maps a criterion to each split's (sigma, sigma_0, epochs); a
    split is trained once per chosen (sigma, sigma_0), the splits sharing one train
    together, and each (split, criterion) is read off at its own epoch."""
    new = []
    groups = sorted({b[:2] for choice in best.values() for b in choice})
    for k in groups:
        want = {  # (split, criterion) -> epoch
            (d, c): b[2] for c, choice in best.items() for d, b in enumerate(choice) if b[:2] == k
        }
        ds = sorted({d for d, _ in want})
        Xt_, yt_, Xte, yte, stats = [], [], [], [], []
        for d in ds:
            tr_idx, te_idx = splits[d]
            _, _, xa, xb = standardize(X[tr_idx], X[te_idx])
            mu, sd, ya, _ = standardize(y[tr_idx], y[te_idx])
            Xt_.append(xa), yt_.append(ya), Xte.append(xb), yte.append(y[te_idx])
            stats.append((mu, sd))
        scored = {}
        score = _refit_scorer(want, ds, (Xte, yte, stats), scored, k[0])
        _, failed = _fit_splits(
            UciPrior(family, k[0], k[1]), np.stack(Xt_), np.stack(yt_), max(want.values()), 200,
            cfg.get("eval_every"), score,
        )  # fmt: skip
        for (d, c), ep in sorted(want.items()):
            rmse, ll, picp, width = scored[(d, c)]
            new.append(
                {
                    "schema": UCI_SCHEMA,
                    "dataset": name,
                    "method": method,
                    "criterion": c,
                    "split": d,
                    "sigma": k[0],
                    "sigma_0": k[1],
                    "rmse": rmse,
                    "ll": ll,
                    "picp90": picp,
                    "width90": width,
                    "failed": bool(failed[ds.index(d)]),
                    "epochs": ep,
                }
            )
    return sorted(new, key=lambda r: (UCI_CRITERIA.index(r["criterion"]), r["split"]))


def _uci_scores(f_std, y_orig, mu, sd, sigma) -> tuple[float, float, float, float]:
    """Test RMSE, log-likelihood, 90% interval coverage (PICP) and mean 90% interval width,
    in the original units, from draws ``f_std [T, m]`` in standardised units: the
    posterior mean's RMSE; the log of the predictive mixture ``(1/T) sum_t N(y; f_t,
    (sigma sd)^2)``, averaged over the test points; and that same mixture's central 90%
    interval (its 5% and 95% quantiles, :func:`simulate.core.posterior.mixture_quantiles`):
    the fraction of test targets inside it and its mean width."""

    f = f_std * sd + mu
    s_o = sigma * sd
    rmse = float(np.sqrt(np.mean((f.mean(0) - y_orig) ** 2)))
    logp = -0.5 * np.log(2 * np.pi * s_o**2) - (y_orig[None, :] - f) ** 2 / (2 * s_o**2)
    ll = float(np.mean(np.logaddexp.reduce(logp, axis=0) - np.log(len(f))))
    lo, hi = mixture_quantiles(f, np.full(f.shape[1], s_o), (0.05, 0.95))
    picp = float(np.mean((y_orig >= lo) & (y_orig <= hi)))
    return rmse, ll, picp, float(np.mean(hi - lo))
