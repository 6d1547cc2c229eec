"""Hyperparameters of the batched core (:class:`Hyper`), validated in one place."""

from __future__ import annotations

import math
from dataclasses import dataclass

from simulate.core.families import FAMILIES
from simulate.core.likelihoods import LIKELIHOODS
from simulate.core.slabs import SLABS


@dataclass(frozen=True)
class Hyper:
    """Hyperparameters; defaults are the paper's teacher experiment (appendix C.1)."""

    likelihood: str = "gaussian"  # "gaussian" (known sigma) or "categorical"
    sigma: float = 1.0  # noise sd of the Gaussian likelihood
    sigma_0: float = 0.8  # Gaussian prior slab sd
    B0: float = 2.0  # uniform prior slab half-width
    slab: str = "gaussian"  # or "uniform"
    lambda_s: float = 3.0
    lam: float = 10.0  # prior on the width: pi(N) with N = width
    tau: float = 0.5  # Gumbel-sigmoid temperature
    batch_size: int = 1024
    mc_samples: int = 1  # K
    lr: float = 5e-3
    optimizer: str = "adam"  # or "rmsprop" (simulate.core.optim)
    betas: tuple = (0.9, 0.999)  # Adam's
    rmsprop_alpha: float = 0.99  # RMSprop's smoothing constant (torch.optim.RMSprop's)
    adam_eps: float = 1e-8  # the optimiser's eps (Adam's and RMSprop's)
    l3: str = "paper"  # or "exact"
    sampling: str = "iid"  # minibatches: "iid" (with replacement) or "permutation" (epochs)
    init_mu: float = 0.6  # mu ~ U(-init_mu, init_mu)
    init_sigma: float = 0.0025  # softplus(-6), the predecessor paper's code
    init_nu: float = 0.99
    family: str = "spike_slab"  # or the baselines "dense", "horseshoe" (simulate.core.families)
    hs_b0: float = 1.0  # horseshoe: unit-scale prior C+(0, b0)
    hs_bg: float = 1e-5  # horseshoe: layer-scale prior C+(0, bg)

    def validate(self) -> None:
        if self.likelihood not in LIKELIHOODS:
            raise ValueError(
                f"likelihood must be one of {tuple(LIKELIHOODS)}, got {self.likelihood!r}"
            )
        if self.slab not in SLABS:
            raise ValueError(f"slab must be one of {tuple(SLABS)}, got {self.slab!r}")
        if self.family not in FAMILIES:
            raise ValueError(f"family must be one of {FAMILIES}, got {self.family!r}")
        if self.sampling not in ("iid", "permutation"):
            raise ValueError(f"sampling must be 'iid' or 'permutation', got {self.sampling!r}")
        if self.optimizer not in ("adam", "rmsprop"):
            raise ValueError(f"optimizer must be 'adam' or 'rmsprop', got {self.optimizer!r}")
        if not 0 <= self.rmsprop_alpha < 1:
            raise ValueError(f"rmsprop_alpha must be in [0, 1), got {self.rmsprop_alpha!r}")
        if self.l3 not in ("paper", "exact"):
            raise ValueError(f"l3 must be 'paper' or 'exact', got {self.l3!r}")
        for name in ("sigma", "sigma_0", "B0", "lambda_s", "lam", "tau", "lr", "init_sigma"):
            v = getattr(self, name)
            if isinstance(v, bool) or not (
                isinstance(v, (int, float)) and math.isfinite(v) and v > 0
            ):
                raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
        for name in ("batch_size", "mc_samples"):
            v = getattr(self, name)
            if isinstance(v, bool) or not (isinstance(v, int) and v >= 1):
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
        if isinstance(self.init_nu, bool) or not (
            isinstance(self.init_nu, (int, float)) and 0 < self.init_nu < 1
        ):
            raise ValueError(f"init_nu must be in (0, 1), got {self.init_nu!r}")
        if self.slab == "uniform" and self.init_mu >= self.B0:
            raise ValueError("init_mu must be < B0 for the uniform slab")
