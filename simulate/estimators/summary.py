"""A fitted estimator read the way a statistician reads a fitted model: ``summary()``.

``est.fit_summary()`` is a :class:`FitSummary`, a frozen dataclass of the numbers (its
``repr`` the fields, its ``str`` the table); ``est.summary()`` is that table as plain text:
the candidate widths with their ELBOs, log width priors and penalised ELBOs (eq. (13), the
selected one marked), the kept edges per layer with the inclusion probabilities' mean and
quantiles, the noise sd (learned or fixed), the convergence of each candidate and the
stopping rule, and the step path the fit took.  Every number is read from the fitted
attributes when ``fit_summary`` is called, never cached at fit: change an attribute and the
table shows the change.  Bounds: lines at most :data:`LINE_WIDTH` characters (``render``);
one line per candidate and per layer and 11 to 14 more (phrases wrapped at the width): at
most 27 lines with the regressors' default widths (ten candidates, depth 2), 22 with the
classifiers' (five).

The fit stores what the table needs beyond the attributes it already had
(:func:`store_fit_details`, called at the end of ``fit``, reading only what training left:
no draw, nothing a prediction reads):

* ``inclusion_`` -- the selected candidate's inclusion probabilities nu per layer (a tuple
  of float64 arrays, layer 1 first: each layer's real weights row-major ``out x in``, then
  its biases); all ones for the families without indicators (Dense-BNN, HS-BNN), as
  ``Posterior.edges`` counts them;
* ``stop_rule_`` -- the :class:`~simulate.core.stopping.StopRule` the candidates trained
  under (None: a fixed budget, ``epochs`` given);
* ``convergence_`` -- the stopping rule's per-candidate summary
  (``simulate.core.stopping.StopState.summary``; None for a fixed budget);
* ``n_samples_fit_`` -- the points trained on (n less the validation points held out).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from sklearn.utils.validation import check_is_fitted

from simulate.core.objective import family_of
from simulate.core.stopping import StopRule

__all__ = [
    "KEEP_THRESHOLD",
    "LINE_WIDTH",
    "CandidateFit",
    "FitSummary",
    "FitSummaryMixin",
    "LayerEdges",
    "StopSummary",
    "fit_summary",
    "layer_inclusion",
    "store_fit_details",
]

# An edge is kept when its inclusion probability exceeds this: the paper's count
# ``#{nu_i > 0.5}``, the fit's ``n_edges_gt_half_`` (``Posterior.edges``)
KEEP_THRESHOLD = 0.5
# the table's longest line (characters)
LINE_WIDTH = 100
# the stop labels, in the order the table counts them
STOPS = ("converged", "retired", "capped", "budget", "failed")
_STOP_WHY = {
    "converged": "converged",
    "retired": "retired by the race",
    "capped": "capped at max_epochs",
    "budget": "ran the fixed budget",
    "failed": "failed (non-finite loss)",
}
_PATH_LABEL = {"batched": "batched torch step", "native": "C pass", "native-step": "C step"}


@dataclass(frozen=True)
class CandidateFit:
    """One candidate width: its steps, how it stopped (one of :data:`STOPS`), its ELBO on
    the fit's data, the log width prior ``log pi(N)``, the penalised ELBO (eq. (13)), its
    noise sd in y's units (regressors; None for classifiers) and whether it was selected."""

    width: int
    steps: int
    stop: str
    elbo: float
    log_prior: float
    penalized: float
    noise_sd: float | None
    selected: bool


@dataclass(frozen=True)
class LayerEdges:
    """One layer of the selected network: ``n_in -> n_out`` units, its real edges (weights
    and biases), those kept (nu > :data:`KEEP_THRESHOLD`), the sum of nu, and nu's mean,
    10% quantile, median and 90% quantile."""

    layer: int
    n_in: int
    n_out: int
    edges: int
    kept: int
    expected: float
    mean: float
    q10: float
    median: float
    q90: float

    @property
    def share(self) -> float:
        """The kept edges' share of the layer's edges."""
        return self.kept / self.edges if self.edges else float("nan")


@dataclass(frozen=True)
class StopSummary:
    """How training ended: the rule (None: a fixed budget), the selected candidate's stop
    and steps, the most steps any candidate took, how many candidates stopped each way
    (``(label, count)`` in :data:`STOPS` order), the training's wall seconds, and from the
    rule's bookkeeping (``convergence_``; None where it has none) the selected candidate's
    learning-rate cuts and its last window's changes: the objective's relative change, the
    KL's in nats and the validation risk's relative change."""

    rule: StopRule | None
    selected_stop: str
    selected_steps: int
    n_steps: int
    counts: tuple[tuple[str, int], ...]
    fit_time_s: float
    lr_decays: int | None = None
    rel_change: float | None = None
    kl_change: float | None = None
    risk_change: float | None = None

    @property
    def converged(self) -> bool:
        """Whether the selected candidate stopped by the rule (not the cap or a budget)."""
        return self.selected_stop == "converged"


@dataclass(frozen=True)
class FitSummary:
    """A fitted estimator's numbers (module docstring); ``str`` is the table."""

    estimator: str
    family: str
    likelihood: str
    n_samples: int
    n_features: int
    depth: int
    lam: float
    candidates: tuple[CandidateFit, ...]
    selected_width: int
    indicators: bool
    n_edges_kept: int
    n_edges_expected: float
    layers: tuple[LayerEdges, ...]
    noise: str  # "learned", "fixed" or "none" (a classifier)
    noise_sd: float | None
    stopping: StopSummary
    step_path: str
    compiled: bool

    def __str__(self) -> str:
        return "\n".join(render(self))


def layer_inclusion(posterior, k: int) -> tuple[np.ndarray, ...]:
    """Candidate ``k``'s inclusion probabilities per layer (``inclusion_``, module
    docstring): sigmoid of its logits at its real edges, ones without indicators."""
    layout = posterior.layout
    w = layout.widths[k]
    real = [layout.p] + [w] * layout.depth + [layout.out_dim]
    if family_of(posterior.hyper).indicators:
        nu = torch.sigmoid(posterior.params[2, k, : layout.P_net])
    else:
        nu = torch.ones(layout.P_net, dtype=posterior.params.dtype)
    out = []
    for l, (off, i, o) in enumerate(layout.blocks):
        blk = nu[off : off + o * (i + 1)].view(o, i + 1)
        ri, ro = real[l], real[l + 1]
        out.append(torch.cat([blk[:ro, :ri].reshape(-1), blk[:ro, i]]).cpu().numpy())
    return tuple(np.asarray(a, dtype=np.float64) for a in out)


def store_fit_details(est, rule: StopRule | None, convergence: dict | None, n: int) -> None:
    """Store the attributes the summary reads beyond the fit's others (module docstring):
    ``inclusion_``, ``stop_rule_``, ``convergence_``, ``n_samples_fit_``."""
    est.inclusion_ = layer_inclusion(est.posterior_, int(est.selected_index_))
    est.stop_rule_ = rule
    est.convergence_ = convergence
    est.n_samples_fit_ = int(n)


def _stop(est, k: int) -> str:
    """Candidate k's stop label (:data:`STOPS`)."""
    if bool(est.failed_[k]):
        return "failed"
    if est.stop_rule_ is None:
        return "budget"
    if bool(est.retired_[k]):
        return "retired"
    return "converged" if bool(est.converged_[k]) else "capped"


def _layers(est) -> tuple[LayerEdges, ...]:
    """The selected network's layers from ``inclusion_`` (units from the layout)."""
    layout = est.posterior_.layout
    units = [layout.p] + [int(est.selected_width_)] * layout.depth + [layout.out_dim]
    out = []
    for l, nu in enumerate(est.inclusion_):
        nu = np.asarray(nu, dtype=float)
        q10, med, q90 = np.quantile(nu, (0.1, 0.5, 0.9)) if nu.size else (np.nan,) * 3
        out.append(
            LayerEdges(
                layer=l + 1,
                n_in=units[l],
                n_out=units[l + 1],
                edges=int(nu.size),
                kept=int((nu > KEEP_THRESHOLD).sum()),
                expected=float(nu.sum()),
                mean=float(nu.mean()) if nu.size else float("nan"),
                q10=float(q10),
                median=float(med),
                q90=float(q90),
            )
        )
    return tuple(out)


def _last_window(convergence: dict | None, k: int) -> dict:
    """Candidate k's entries of the rule's bookkeeping (:class:`StopSummary`'s last four)."""
    if convergence is None:
        return {}
    out = {}
    for key in ("lr_decays", "rel_change", "kl_change", "risk_change"):
        v = convergence.get(key)
        if v is not None and v[k] is not None:
            out[key] = int(v[k]) if key == "lr_decays" else float(v[k])
    return out


def fit_summary(est) -> FitSummary:
    """The :class:`FitSummary` of fitted ``est``, read from its fitted attributes now;
    sklearn's ``NotFittedError`` before ``fit`` (or for a fit made before these summaries
    existed, which lacks ``inclusion_``: fit again)."""
    check_is_fitted(est, ("posterior_", "inclusion_"))
    post, sel = est.posterior_, int(est.selected_index_)
    sigmas = getattr(est, "sigma_all_", None)
    cands = tuple(
        CandidateFit(
            width=int(w),
            steps=int(est.n_iter_[k]),
            stop=_stop(est, k),
            elbo=float(est.elbo_[k]),
            log_prior=float(est.selection_["log_prior"][k]),
            penalized=float(est.penalized_elbo_[k]),
            noise_sd=None if sigmas is None else float(sigmas[k]),
            selected=k == sel,
        )
        for k, w in enumerate(est.widths_)
    )
    stops = [c.stop for c in cands]
    stopping = StopSummary(
        rule=est.stop_rule_, selected_stop=cands[sel].stop,
        selected_steps=cands[sel].steps, n_steps=int(est.n_steps_),
        counts=tuple((s, stops.count(s)) for s in STOPS if s in stops),
        fit_time_s=float(est.fit_time_s_), **_last_window(est.convergence_, sel),
    )  # fmt: skip
    if sigmas is None:
        noise, noise_sd = "none", None
    else:
        noise, noise_sd = ("fixed" if post.noise_sd is None else "learned"), float(est.sigma_)
    return FitSummary(
        estimator=type(est).__name__, family=post.hyper.family,
        likelihood=post.hyper.likelihood, n_samples=int(est.n_samples_fit_),
        n_features=int(est.n_features_in_), depth=int(post.layout.depth),
        lam=float(post.hyper.lam), candidates=cands, selected_width=int(est.selected_width_),
        indicators=bool(family_of(post.hyper).indicators),
        n_edges_kept=int(est.n_edges_gt_half_), n_edges_expected=float(est.n_edges_),
        layers=_layers(est), noise=noise, noise_sd=noise_sd, stopping=stopping,
        step_path=str(est.step_path_["mlp"]), compiled=bool(est.step_path_["compiled"]),
    )  # fmt: skip


def _candidate_lines(s: FitSummary) -> list[str]:
    """The width selection: one row per candidate, the selected one marked ``*``."""
    one = len(s.candidates) == 1
    head = (
        "Width: one candidate (no selection)"
        if one
        else f"Width selection, eq. (13): penalised ELBO = ELBO + log pi(N), lam = {s.lam:g}"
    )
    noise = s.noise_sd is not None
    cols = f"{'width':>8} {'steps':>8}  {'stop':<10}{'ELBO':>14}{'log pi(N)':>12}{'penalised':>14}"
    lines = [head, cols + (f"{'noise sd':>11}" if noise else "")]
    for c in s.candidates:
        row = (
            f"{'*' if c.selected else ' '}{c.width:>7} {c.steps:>8}  {c.stop:<10}"
            f"{c.elbo:>14.2f}{c.log_prior:>12.2f}{c.penalized:>14.2f}"
        )
        lines.append(row + (f"{c.noise_sd:>11.4g}" if noise else ""))
    why = "" if one else " (*: the largest penalised ELBO among the candidates that did not fail)"
    lines.append(f"Selected width: {s.selected_width}{why}")
    return lines


def _edge_lines(s: FitSummary) -> list[str]:
    """The kept edges: the fit's count, then per layer of the selected network."""
    total = sum(l.edges for l in s.layers)
    share = s.n_edges_kept / total if total else float("nan")
    if s.indicators:
        head = (
            f"Kept edges (nu > {KEEP_THRESHOLD:g}): {s.n_edges_kept} of {total} ({share:.1%});"
            f" sum of nu {s.n_edges_expected:.2f}"
        )
    else:
        head = f"Edges: {s.n_edges_kept} of {total}, all kept (family {s.family!r}: no indicators)"
    cols = (
        f"{'layer':>8} {'units':>13} {'edges':>8} {'kept':>7} {'share':>7}"
        f" {'mean nu':>8} {'q10':>7} {'median':>7} {'q90':>7}"
    )
    lines = [head, cols]
    for l in s.layers:
        lines.append(
            f"{l.layer:>8} {f'{l.n_in} -> {l.n_out}':>13} {l.edges:>8} {l.kept:>7}"
            f" {l.share:>7.1%} {l.mean:>8.3f} {l.q10:>7.3f} {l.median:>7.3f} {l.q90:>7.3f}"
        )
    return lines


def _noise_line(s: FitSummary) -> str:
    """The noise sd, and whether it was learned or given."""
    if s.noise == "none":
        return f"Noise sd: none ({s.likelihood} likelihood)"
    how = (
        "learned (the ELBO's maximiser, variational EM)"
        if s.noise == "learned"
        else "fixed (sigma given)"
    )
    return f"Noise sd: {s.noise_sd:.4g} in y's units, {how}"


def _pack(pieces: list[str]) -> list[str]:
    """``pieces`` (phrases, each with its own punctuation) joined by spaces into lines of at
    most :data:`LINE_WIDTH` characters, a line broken only between phrases, the later lines
    indented by two."""
    lines = [pieces[0]]
    for piece in pieces[1:]:
        if len(lines[-1]) + 1 + len(piece) <= LINE_WIDTH:
            lines[-1] += " " + piece
        else:
            lines.append("  " + piece)
    return lines


def _rule_lines(rule: StopRule | None, n_steps: int) -> list[str]:
    """The stopping rule in words (or the fixed budget)."""
    if rule is None:
        return [f"Stopping rule: none, a fixed budget of {n_steps} steps (epochs given)"]
    pieces = [
        f"Stopping rule: quiet for {rule.patience} windows of {rule.window} steps:",
        f"the objective's relative change < {rule.tol:g},",
        f"the KL's < max({rule.tol:g} |KL|, {rule.kl_abs:g} nats)",
    ]
    if rule.risk_tol is not None:
        pieces[-1] += ","
        pieces.append(f"the validation risk's < {rule.risk_tol:g}")
    pieces[-1] += ";"
    pieces.append(f"cap {rule.max_steps} steps")
    if rule.lr_decays:
        pieces[-1] += ";"
        pieces.append(f"lr x{rule.lr_factor:g} at the first {rule.lr_decays} plateau(s)")
    return _pack(pieces)


def _stop_lines(s: FitSummary) -> list[str]:
    """Convergence: the selected candidate's stop, the candidates' counts, the rule."""
    st = s.stopping
    verdict = {"converged": "converged", "capped": "budget-limited", "budget": "budget-limited"}
    counts = ", ".join(f"{n} {label}" for label, n in st.counts)
    # a capped candidate short of the cap: the learned noise's two phases share it
    # (simulate.core.training.fit_trainer), the EM phase's budget what the slowest warm-up left
    short = (st.selected_stop == "capped" and st.rule is not None and s.noise == "learned"
             and st.selected_steps < st.rule.max_steps)  # fmt: skip
    pieces = [
        f"Convergence: {verdict.get(st.selected_stop, st.selected_stop)}:",
        f"the selected width {s.selected_width} {_STOP_WHY[st.selected_stop]}",
        f"after {st.selected_steps} steps"
        + (";" if not short else f" of the cap's {st.rule.max_steps} (the learned noise's"),
        *(
            [
                "warm-up and its EM phase share the cap: the EM phase had what the slowest",
                "candidate's warm-up left);",
            ]
            if short
            else []
        ),
        f"candidates: {counts};",
        f"the longest ran {st.n_steps} steps;",
        f"training {st.fit_time_s:.2f} s",
    ]
    changes = [
        f"{what} {value:{fmt}}"
        for what, value, fmt in (
            ("objective's relative change", st.rel_change, ".2g"),
            ("KL's change (nats)", st.kl_change, ".3g"),
            ("validation risk's relative change", st.risk_change, ".2g"),
        )
        if value is not None
    ]
    if st.lr_decays is not None:
        pieces[-1] += ";"
        pieces.append(f"the selected width's lr cut {st.lr_decays} time(s)")
    if changes:
        pieces[-1] += ";"
        pieces += ["its last window:", *[f"{c}," for c in changes[:-1]], changes[-1]]
    return [*_pack(pieces), *_rule_lines(st.rule, st.n_steps)]


def render(s: FitSummary) -> list[str]:
    """The table's lines (module docstring): each at most :data:`LINE_WIDTH` characters
    where the numbers fit their columns (ELBOs below 1e10 nats in magnitude, widths below a
    million); a longer number widens its line rather than being cut."""
    head = (
        f"{s.estimator}: {s.family} family, {s.likelihood} likelihood;"
        f" n = {s.n_samples} fitted, p = {s.n_features}, depth {s.depth}"
    )
    path = f"{_PATH_LABEL.get(s.step_path, s.step_path)} (mlp={s.step_path!r})"
    lines = [
        head,
        *_candidate_lines(s),
        *_edge_lines(s),
        _noise_line(s),
        *_stop_lines(s),
        f"Step path: {path}, {'compiled' if s.compiled else 'not compiled'}",
    ]
    return lines


class FitSummaryMixin:
    """``fit_summary()`` and ``summary()`` for the estimators (module docstring)."""

    def fit_summary(self) -> FitSummary:
        """The fitted model's numbers as a :class:`FitSummary` (``str`` of it: the table)."""
        return fit_summary(self)

    def summary(self) -> str:
        """The fitted model as a plain-text table (``str(self.fit_summary())``)."""
        return str(self.fit_summary())
