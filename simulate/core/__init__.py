"""The batched spike-and-slab variational core (paper's appendix "Implementation").

E independent ReLU networks (depth L = number of hidden layers, as in ``theory.network``;
possibly different widths, padded to the largest and masked) live in one parameter tensor
``params`` of shape ``[3, E, P]``: per weight and bias the slab location, the slab scale
(unconstrained) and the inclusion logit.  One training step samples every model's network,
computes the three loss terms per model, back-propagates once (by hand: no autograd graph
for the default family, see :func:`spike_slab_step`) and applies one Adam update;
models never interact, so model e behaves exactly as if trained alone (tested).

The step is a pure function over typed values, in the shape of functional optimisation
libraries: ``init_state -> State`` (parameters, the optimiser's moments ``OptState``, the
step count, the failures ``Health``); a ``Sampler`` draws each step's ``Inputs``
(minibatches and noise) from counter-based streams; ``build_step(...)`` gives ``step(state,
inputs) -> (state, Info)`` around a kernel of ``simulate.core.step`` and an optimiser
``(init, factors, update)`` of ``simulate.core.optim``; ``Trainer`` is the plain loop over them
with the stopping rule.

Variational family (eq. (vbpost)): ``q(theta_i) = nu_i M(theta_i) + (1 - nu_i) delta_0``;
each slab ``M`` is one class of ``simulate.core.slabs``.

* Gaussian slab (default): ``M = N(mu, sigma^2)``, ``sigma = softplus(rho)``
  (the paper's ``sigma' = log(exp(sigma) - 1)``), prior slab ``N(0, sigma_0^2)``.
* Uniform slab: ``M = U(c - h, c + h)`` inside the prior slab ``U(-B0, B0)``:
  ``c = B0 tanh(a)``, ``h = (B0 - |c|) sigmoid(b)`` keeps the support inside [-B0, B0],
  as the theory requires (a variational support outside the prior's has infinite KL).
* ``nu = sigmoid(logit)``; the paper's ``nu' = log((1 - nu)/nu)`` is ``-logit``.

Indicators (eq. (loss1)): ``G = sigmoid((logit + log(u/(1-u))) / tau)`` with tau = 0.5; the
forward pass uses the hard ``gamma = 1(G > 0.5)``, the backward pass the relaxed ``G``
(straight-through on the indicator: ``gamma_st = gamma + G - stop_grad(G)``).  Since
``log(u/(1-u))`` is logistic, ``P(G > 0.5) = nu`` exactly, so the same sampler gives exact
posterior draws at prediction time.  The printed eq. (grad) could also be read as evaluating
the whole likelihood gradient at the relaxed network; we follow the usual straight-through
reading (the one the predecessor paper's public code uses), which needs one forward pass.

Loss (eq. (el)), returned per model and per term:

* ``L1 = -(n/m)(1/K) sum_j sum_k log p(D_j | theta^(k))`` (minibatch Monte Carlo);
* ``L2 = sum_i nu_i KL(M_i || M_0)``: eq. (loss2) for the Gaussian slab,
  ``sum_i nu_i log(B0 / h_i)`` for the uniform slab;
* ``L3``: ``l3="paper"`` (default) is eq. (loss3) as printed,
  ``-0.5 log2(2 pi e S (H - S)/H) + lambda_s S`` with ``S = sum_i nu_i`` -- note the log2 (bits)
  beside nats elsewhere, kept as printed; ``l3="exact"`` is the exact KL of the
  product-Bernoulli q(gamma) to the prior ``pi(gamma|N) = c_1 e^{-lambda_s Gamma} / C(H, Gamma)``
  of eq. (adaprior): ``sum_i [nu_i log nu_i + (1-nu_i) log(1-nu_i)] + lambda_s E[Gamma]
  + E[log C(H, Gamma)] - log c_1`` with ``Gamma`` Poisson-binomial (its law computed exactly by
  a characteristic-function FFT) and ``c_1 = (1 - e^{-lambda_s}) / (1 - e^{-lambda_s (H+1)})``.

Stopping (``Trainer.fit_until``, rule in ``simulate.core.stopping``): each model trains until
its own windowed objective stops improving; a stopped model is *frozen* (``Trainer.frozen``):
the step still computes it (the batch keeps its shape) but leaves its parameters alone,
exactly as for a failed model.

Minibatches (``Sampler.minibatch_index``): by default each model draws its m indices i.i.d. from
its own dataset every step; optionally a fresh per-model permutation every epoch with
``floor(n / m)`` full minibatches (the remainder skipped).  Either way no ragged batch changes
the shapes.  The baselines' families (Dense-BNN, HS-BNN) are in ``simulate.core.families``.
"""

from __future__ import annotations

from simulate.core.hyper import Hyper
from simulate.core.layout import Layout, mlp_nll_and_grad, neg_log_lik
from simulate.core.objective import (
    ELBOTerms,
    ModelSpec,
    draw_network,
    kl_indicator,
    kl_slab,
    kl_slab_edge,
    kl_terms,
    l3_paper,
    reference_terms,
    sample_theta,
    slab_params,
)
from simulate.core.optim import Factors, Optimizer, OptState, optimizer_of
from simulate.core.options import StepOptions
from simulate.core.sampler import DrawSource, Inputs, Sampler, StepWords, draw_step_inputs
from simulate.core.state import (
    Batch,
    Health,
    State,
    failed_term_names,
    inclusion_logit,
    init_state,
    inverse_softplus,
)
from simulate.core.step import Consts, StepSpec, horseshoe_step, spike_slab_step
from simulate.core.trainer import Trainer
from simulate.core.training_step import Info, Step, build_step, chunk_bounds

# the core's public names, each defined in the module that holds its concern (see above)
__all__ = [
    "Hyper",
    "Layout",
    "Batch",
    "State",
    "Health",
    "OptState",
    "Factors",
    "Optimizer",
    "optimizer_of",
    "Inputs",
    "Sampler",
    "StepOptions",
    "StepSpec",
    "Consts",
    "Info",
    "Step",
    "build_step",
    "spike_slab_step",
    "horseshoe_step",
    "Trainer",
    "chunk_bounds",
    "ELBOTerms",
    "init_state",
    "failed_term_names",
    "inclusion_logit",
    "inverse_softplus",
    "mlp_nll_and_grad",
    "neg_log_lik",
    "draw_network",
    "ModelSpec",
    "draw_step_inputs",
    "DrawSource",
    "StepWords",
    "kl_indicator",
    "kl_slab",
    "kl_slab_edge",
    "kl_terms",
    "l3_paper",
    "reference_terms",
    "sample_theta",
    "slab_params",
]
