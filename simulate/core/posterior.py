"""What a trained batch of variational posteriors says: draws, predictions, ELBO, summaries.

A :class:`Posterior` is a snapshot of E models' variational parameters (no optimiser
state).  Its draws use their own counter-based streams (``rng.STREAM_EVAL_*``), so
evaluating never disturbs training and is reproducible from the seeds.  Evaluations run in
``eval_dtype`` (float64 by default: ELBOs, sums over all n points, are compared across
widths).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import torch
from scipy.special import ndtr

from simulate.core import rng
from simulate.core.compact import draw_pass
from simulate.core.hyper import Hyper
from simulate.core.layout import Layout, neg_log_lik
from simulate.core.likelihoods import likelihood_of
from simulate.core.objective import ModelSpec, draw_network, family_of, kl_terms
from theory import hellinger_sq_pointwise, log_prior_N

__all__ = [
    "ELBO_DRAWS",
    "MIN_ELBO_DRAWS",
    "PREDICT_DRAWS",
    "RISK_DRAWS",
    "Posterior",
    "mixture_quantiles",
    "select_width",
]

# Monte Carlo draws of the networks, each default said once here: for a prediction (the
# posterior mean, sd and the test metrics) in every driver; for the full-data ELBO behind
# the width selection (eq. (13)), at least MIN_ELBO_DRAWS (the selection rule's floor, which
# the sweeps and the estimators enforce); for the held-out risk the stopping rule may watch
# at window ends.
PREDICT_DRAWS = 30
ELBO_DRAWS = 10
MIN_ELBO_DRAWS = 10
RISK_DRAWS = 10
# Posterior.elbo keeps its draws across the data's chunks up to this many bytes
KEEP_DRAWS_BYTES = 64 << 20


@dataclass
class Posterior:
    layout: Layout
    hyper: Hyper
    params: torch.Tensor  # [3, E, P]
    seeds: torch.Tensor  # [E]
    eval_dtype: torch.dtype = torch.float64
    # [E]: each model's learned Gaussian noise sd (``StepOptions(learn_noise=True)``); None:
    # the known ``hyper.sigma``
    noise_sd: torch.Tensor | None = None

    def __post_init__(self):
        self.params = self.params.detach().to(self.eval_dtype)
        if self.noise_sd is not None:
            self.noise_sd = (
                torch.as_tensor(self.noise_sd)
                .detach()
                .to(device=self.params.device, dtype=self.eval_dtype)
            )
            if self.noise_sd.shape != (self.E,):
                raise ValueError(f"noise_sd must be [{self.E}], got {tuple(self.noise_sd.shape)}")
        self.mask = self.layout.mask(self.params.device, self.eval_dtype)
        self.H = self.mask[:, : self.layout.P_net].sum(-1)
        self.node_index = (
            self.layout.node_index(self.params.device) if self.layout.node_scales else None
        )
        counter = self.layout.counters(self.params.device)
        self._streams = tuple(
            rng.Stream(rng.seed_key(self.seeds, s)[:, None], counter)
            for s in (rng.STREAM_EVAL_EPS, rng.STREAM_EVAL_GUMBEL)
        )

    @property
    def E(self) -> int:
        return self.layout.E

    def draw(self, t: int) -> torch.Tensor:
        """Posterior draw number t of every model, ``[E, P]``: indicators exactly
        Bernoulli(nu) (module docstring of ``simulate.core``), slab values from the slab."""
        model = ModelSpec(self.hyper, self.layout, self.mask, node_index=self.node_index)
        return draw_network(self.params, model, *self._streams, t, hard_only=True)

    # ------------------------------------------------------------------ predictions
    def _x(self, X) -> torch.Tensor:
        if isinstance(X, np.ndarray) and not X.flags.writeable:
            X = X.copy()  # torch would share a read-only buffer (and warn)
        X = torch.as_tensor(X, dtype=self.eval_dtype, device=self.params.device)
        if X.ndim == 3 and X.shape[0] == self.E and X.shape[2] == self.layout.p:
            return X  # each model its own inputs
        if X.ndim != 2 or X.shape[1] != self.layout.p:
            raise ValueError(
                f"X must be (m, {self.layout.p}) or ({self.E}, m, {self.layout.p}),"
                f" got {tuple(X.shape)}"
            )
        return X.unsqueeze(0).expand(self.E, -1, -1)

    def outputs(self, X, draws: int = PREDICT_DRAWS) -> torch.Tensor:
        """Network outputs of ``draws`` posterior draws at shared inputs X (m, p), or at
        each model's own inputs X (E, m, p): ``[draws, E, out_dim, m]``."""
        x = self._x(X)
        with torch.no_grad():
            xa, scratch = self.layout.augment(x), {}  # once for every draw (Layout.forward)
            lay = self.layout
            return torch.stack([draw_pass(lay, self.draw(t))(x, xa, scratch) for t in range(draws)])

    def predict_mean(self, X, draws: int = PREDICT_DRAWS) -> torch.Tensor:
        """The paper's posterior-mean predictor ``(1/30) sum_t f_{theta_t}(x)``, ``[E, m]``
        (regression) or the mean class probabilities ``[E, classes, m]`` (classification);
        X shared ``(m, p)`` or each model's own ``(E, m, p)`` (:meth:`outputs`)."""
        return likelihood_of(self.hyper).mean_prediction(self.outputs(X, draws))

    def noise_sd_all(self) -> torch.Tensor:
        """Each model's Gaussian noise sd ``[E]``: learned, or ``hyper.sigma`` for all."""
        if self.noise_sd is not None:
            return self.noise_sd
        return torch.full((self.E,), float(self.hyper.sigma), dtype=self.eval_dtype,
                          device=self.params.device)  # fmt: skip

    def predict_std(self, X, draws: int = PREDICT_DRAWS) -> torch.Tensor:
        """Predictive sd of y, ``sqrt(Var_q f(x) + sigma^2)`` over ``draws`` draws, ``[E, m]``
        (each model's own sigma where the noise was learned)."""
        f = self.outputs(X, draws)[:, :, 0, :]
        return torch.sqrt(f.var(0, unbiased=False) + self.noise_sd_all()[:, None] ** 2)

    # ------------------------------------------------------------------ summaries
    def edges(self) -> dict:
        """Posterior edge counts: ``sum_i nu_i`` and ``#{nu_i > 0.5}`` over real edges (every
        edge for the families without indicators: Dense-BNN and HS-BNN)."""
        mask = self.mask[:, : self.layout.P_net]
        if family_of(self.hyper).indicators:
            nu = torch.sigmoid(self.params[2]) * mask
        else:
            nu = mask.clone()
        return {
            "sum_nu": nu.sum(-1).cpu().numpy(),
            "n_nu_gt_half": ((nu > 0.5) & (mask > 0)).sum(-1).cpu().numpy(),
            "H": self.H.cpu().numpy(),
        }

    def hellinger_draws(self, f0, X, draws: int = PREDICT_DRAWS) -> np.ndarray:
        """``[draws, E]``: squared Hellinger distance ``d^2(P_theta_t, P_0)`` of each posterior
        draw, averaged over the sample X of inputs (``theory.hellinger_sq_pointwise``).
        A model whose draw is not finite everywhere (a diverged model) gets NaN there."""
        return self.test_metrics(f0, X, draws)[0]

    def test_metrics(self, f0, X, draws: int = PREDICT_DRAWS) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`hellinger_draws` ``[draws, E]`` and :meth:`l2sq_mean` ``[E]`` from one pass
        of the ``draws`` networks over X (the two are the same draws' outputs: computing them
        apart ran every forward pass twice, a third of a full-tier job's evaluation).  ``f0``:
        the truth (a callable), or its values at X, ``[m]`` or one row per model ``[E, m]``
        (each replicate its own truth).  The distance is the theory's, at its known
        ``hyper.sigma``: a posterior with learned noise is refused."""
        if self.noise_sd is not None:
            raise ValueError("d^2 is defined at the theory's known sigma; this noise was learned")
        x = self._x(X)
        if callable(f0):
            truth = np.asarray(f0(np.asarray(X)), dtype=float).reshape(1, -1)
        else:
            truth = np.asarray(f0, dtype=float)
            truth = truth.reshape(1, -1) if truth.ndim == 1 else truth
            if truth.shape[-1] != x.shape[-2] or truth.shape[0] not in (1, self.E):
                raise ValueError(f"truth values must be [m] or [{self.E}, m], got {truth.shape}")
        out = np.full((draws, self.E), np.nan)
        outs = []
        with torch.no_grad():
            xa, scratch = self.layout.augment(x), {}  # once for every draw (Layout.forward)
            for t in range(draws):
                f = draw_pass(self.layout, self.draw(t))(x, xa, scratch)  # live units only
                outs.append(f)
                diff = f[:, 0, :].cpu().numpy() - truth
                ok = np.isfinite(diff).all(-1)
                if ok.all():  # the usual case: no copy of the [E, m] differences
                    out[t] = np.asarray(hellinger_sq_pointwise(diff, self.hyper.sigma)).mean(-1)
                elif ok.any():
                    d2 = hellinger_sq_pointwise(diff[ok], self.hyper.sigma)
                    out[t, ok] = np.asarray(d2, dtype=float).mean(-1)
            fhat = torch.stack(outs)[:, :, 0, :].mean(0).cpu().numpy()
        return out, ((fhat - truth) ** 2).mean(-1)

    def hellinger_sq(self, f0, X, draws: int = PREDICT_DRAWS) -> np.ndarray:
        """VB-posterior mean of the squared Hellinger distance (left side of Theorem 4.1),
        per model: Monte Carlo over ``draws`` posterior draws and the sample X of inputs
        (e.g. a large U([-1,1]^p) sample)."""
        return self.hellinger_draws(f0, X, draws).mean(0)

    def l2sq_mean(self, f0, X, draws: int = PREDICT_DRAWS) -> np.ndarray:
        """Squared L2 error of the posterior-mean predictor, ``E_X (fhat - f0)^2``, per model."""
        fhat = self.predict_mean(X, draws).cpu().numpy()
        truth = np.asarray(f0(np.asarray(X)), dtype=float).reshape(1, -1)
        return ((fhat - truth) ** 2).mean(-1)

    # ------------------------------------------------------------------ ELBO
    def elbo(self, X, y, data_index=None, draws: int = ELBO_DRAWS, chunk: int = 8192) -> dict:
        """ELBO of each model on its full training set (``X [D, n, p]``, ``y [D, n]``),
        ``-(L1 + L2 + L3)`` with L1 the full-data negative log-likelihood averaged over
        ``draws`` posterior draws (the selection rule takes at least ``MIN_ELBO_DRAWS``), L2, L3 as
        in training, at each model's learned noise sd where it has one.  Returns per-model
        numpy arrays ``elbo, L1, L2, L3`` and, for regression, ``rss``: the same draws'
        mean residual sum of squares, ``E_q[sum_i (y_i - f(x_i))^2]`` (whose ``/ n`` is the
        ELBO-maximising noise variance given q)."""
        if draws < 1:
            raise ValueError(f"draws must be >= 1, got {draws}")
        X = torch.as_tensor(X, dtype=self.eval_dtype, device=self.params.device)
        ydt = likelihood_of(self.hyper).target_dtype(self.eval_dtype)
        y = torch.as_tensor(y, device=self.params.device).to(ydt)
        if X.ndim == 2:
            X, y = X.unsqueeze(0), y.unsqueeze(0)
        d = (
            torch.zeros(self.E, dtype=torch.int64)
            if data_index is None
            else torch.as_tensor(data_index, dtype=torch.int64)
        ).to(self.params.device)
        n = X.shape[1]
        L1 = torch.zeros(self.E, dtype=self.eval_dtype, device=self.params.device)
        gaussian = self.hyper.likelihood == "gaussian"
        rss = torch.zeros_like(L1)
        with torch.no_grad():
            # chunks outside, draws inside: each chunk's inputs gathered and augmented once
            # for every draw; the per-(draw, chunk) sums are then added in the order of the
            # draws-outside loop (draw 0's chunks, then draw 1's, ...), so L1 and rss are
            # the same sums bit for bit whichever loop is outside
            # the draws kept while they are small (else drawn again for each chunk: the same
            # numbers, counter-based)
            keep = draws * self.E * self.layout.P * 8 <= KEEP_DRAWS_BYTES
            passes = [draw_pass(self.layout, self.draw(t)) for t in range(draws)] if keep else None
            chunks = range(0, n, chunk)
            parts = [[None] * len(chunks) for _ in range(draws)]
            scratch = {}
            for c, a in enumerate(chunks):
                xb, yb = X[d, a : a + chunk], y[d, a : a + chunk]
                xa = self.layout.augment(xb)
                for t in range(draws):
                    fw = passes[t] if keep else draw_pass(self.layout, self.draw(t))
                    out = fw(xb, xa, scratch)  # the draw's live units (simulate.core.compact)
                    nll = neg_log_lik(out, yb, self.hyper, self.noise_sd).sum(-1)
                    sq = ((yb - out[:, 0, :]) ** 2).sum(-1) if gaussian else None
                    parts[t][c] = (nll, sq)
            for row in parts:
                for nll, sq in row:
                    L1 += nll
                    if gaussian:
                        rss += sq
            L1 /= draws
            rss /= draws
            L2, L3 = kl_terms(
                self.params, self.hyper, self.layout, self.mask, self.H, self.node_index
            )
        terms = {"L1": L1, "L2": L2, "L3": L3}
        out = {k: v.cpu().numpy() for k, v in terms.items()}
        out["elbo"] = -(out["L1"] + out["L2"] + out["L3"])
        if gaussian:
            out["rss"] = rss.cpu().numpy()
        return out


@functools.lru_cache(maxsize=256)
def _log_priors(widths: tuple, lam) -> tuple:
    """``log pi(N)`` of each width (``theory.log_prior_N``), kept: every record read
    recomputes its selection (``simulate.sweep.store.validate``), and each call is ~0.2 ms."""
    return tuple(float(log_prior_N(w, lam)) for w in widths)


def select_width(elbo: np.ndarray, widths, lam: float, failed=None) -> dict:
    """ASVI selection, eq. (13) / Algorithm 1: the width maximising the penalised ELBO
    ``Omega(N) + log pi(N)`` with ``pi(N) = lam^N / ((e^lam - 1) N!)`` (``theory.log_prior_N``).

    Choice: N is the hidden width itself (not width / 12p): the paper's experiments put the
    prior's mode, lambda = 10, at the teacher's width 10.  Failed models (non-finite loss)
    are never selected; if every candidate failed a ``FloatingPointError`` is raised.
    Returns every candidate's ``elbo``, ``log_prior`` and ``penalized`` and the winner.
    """
    widths = [int(w) for w in widths]
    elbo = np.asarray(elbo, dtype=float)
    log_prior = np.array(_log_priors(tuple(widths), lam))
    pen = elbo + log_prior
    ok = np.isfinite(pen)
    if failed is not None:
        ok &= ~np.asarray(failed, dtype=bool)
    if not ok.any():
        raise FloatingPointError("ASVI selection: every candidate width failed (non-finite ELBO)")
    k = int(np.argmax(np.where(ok, pen, -np.inf)))
    return {
        "widths": widths,
        "elbo": elbo,
        "log_prior": log_prior,
        "penalized": pen,
        "index": k,
        "width": widths[k],
        "eligible": ok,
    }


def mixture_quantiles(f, s, qs=(0.05, 0.95), iters: int = 60) -> list[np.ndarray]:
    """Quantiles of the predictive mixture ``(1/T) sum_t N(f_t, s^2)`` at each point:
    ``f [T, m]`` the draws' predictions, ``s`` the noise sd (a number or ``[m]``), ``qs``
    levels in (0, 1); one ``[m]`` array per level.  By bisection on the mixture's CDF
    (``iters`` halvings of a bracket 9 sd beyond the draws: well below float64 resolution
    at 60).  The central 90% predictive interval is ``qs=(0.05, 0.95)``."""

    f = np.asarray(f, dtype=float)
    if f.ndim != 2:
        raise ValueError(f"f must be [draws, m], got shape {f.shape}")
    s = np.broadcast_to(np.asarray(s, dtype=float), f.shape[1:])
    if not np.all(s > 0):
        raise ValueError("the noise sd must be positive")
    out = []
    for q in qs:
        if not 0 < q < 1:
            raise ValueError(f"quantile levels must lie in (0, 1), got {q}")
        lo, hi = f.min(0) - 9 * s, f.max(0) + 9 * s
        for _ in range(iters):
            mid = 0.5 * (lo + hi)
            below = ndtr((mid[None, :] - f) / s[None, :]).mean(0) < q
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        out.append(0.5 * (lo + hi))
    return out
