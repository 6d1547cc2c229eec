"""The likelihood of the data given a network's outputs, one class per likelihood
(``Hyper.likelihood``): the negative log-likelihood (the summand of eq. (loss1)), its
gradient with respect to the outputs for the hand-written backward, the targets' dtype, and
the posterior-mean prediction.  Adding a likelihood is one class here and its name in
:data:`LIKELIHOODS`.

* :class:`Gaussian` (regression, eq. (1)): ``y = f(x) + N(0, sigma^2)``; outputs
  ``[B, 1, m]``.
* :class:`Categorical` (classification): softmax over ``out_dim`` classes; outputs
  ``[B, classes, m]``, integer targets.
"""

from __future__ import annotations

import math

import torch

__all__ = ["LIKELIHOODS", "Categorical", "Gaussian", "likelihood_of"]


class Gaussian:
    """``y = f(x) + N(0, sigma^2)``: ``sigma`` is ``hyper.sigma`` (the known noise of the
    theory), or per network ``sd [B]`` where the noise is learned (``Trainer(...,
    options=StepOptions(learn_noise=True))``)."""

    @staticmethod
    def nll(out: torch.Tensor, y: torch.Tensor, hyper, sd=None) -> torch.Tensor:
        """``-log N(y; f, sigma^2)`` elementwise ``[B, m]``."""
        if sd is None:
            s2 = hyper.sigma**2
            return 0.5 * math.log(2 * math.pi * s2) + (y - out[:, 0, :]) ** 2 / (2 * s2)
        s2 = (sd * sd)[:, None]
        return 0.5 * torch.log(2 * math.pi * s2) + (y - out[:, 0, :]) ** 2 / (2 * s2)

    @staticmethod
    def nll_grad(out: torch.Tensor, y: torch.Tensor, hyper, sd=None) -> torch.Tensor:
        """d nll / d out, ``[B, 1, m]``."""
        if sd is None:
            return (out - y.unsqueeze(1)) / hyper.sigma**2
        return (out - y.unsqueeze(1)) / (sd * sd)[:, None, None]

    @staticmethod
    def target_dtype(dtype):
        return dtype

    @staticmethod
    def mean_prediction(outputs: torch.Tensor) -> torch.Tensor:
        """The posterior-mean regression function ``[E, m]`` from ``[draws, E, 1, m]``."""
        return outputs[:, :, 0, :].mean(0)


class Categorical:
    """Softmax over the output units."""

    @staticmethod
    def nll(out: torch.Tensor, y: torch.Tensor, hyper, sd=None) -> torch.Tensor:
        """``-log softmax(out)[y]`` elementwise ``[B, m]`` (``sd``: no noise here; None)."""
        logp = torch.log_softmax(out, dim=1)
        return -logp.gather(1, y.unsqueeze(1)).squeeze(1)

    @staticmethod
    def nll_grad(out: torch.Tensor, y: torch.Tensor, hyper, sd=None) -> torch.Tensor:
        """d nll / d out = softmax(out) - onehot(y), ``[B, classes, m]``."""
        g = torch.softmax(out, dim=1)
        g.scatter_add_(1, y.unsqueeze(1), torch.full_like(g[:, :1], -1.0))
        return g

    @staticmethod
    def target_dtype(dtype):
        return torch.int64

    @staticmethod
    def mean_prediction(outputs: torch.Tensor) -> torch.Tensor:
        """The mean class probabilities ``[E, classes, m]`` from ``[draws, E, classes, m]``."""
        return torch.softmax(outputs, dim=2).mean(0)


LIKELIHOODS = {"gaussian": Gaussian(), "categorical": Categorical()}


def likelihood_of(hyper):
    """The likelihood object named by ``hyper.likelihood``."""
    return LIKELIHOODS[hyper.likelihood]
