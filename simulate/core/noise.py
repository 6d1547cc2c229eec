"""The learned noise's variational EM, as methods of :class:`simulate.core.trainer.Trainer`
(:class:`LearnedNoise`, a base class of it): the update of each model's noise sd from the
steps' own estimates of ``E_q[RSS]``, collected since the last update, and the pause and
resumption of the updates (the method: ``Trainer``'s docstring, ``options.learn_noise``)."""

from __future__ import annotations

import torch

from simulate.core.stopping import sum_in_order

__all__ = ["LearnedNoise"]


class LearnedNoise:
    """The learned noise's methods of :class:`simulate.core.trainer.Trainer`, which holds
    their state: ``noise_sd [E]`` (None: the noise is known), ``noise_updates``,
    ``noise_floor``, ``_rss_sum [E]`` and ``_rss_steps`` (made in ``Trainer.__init__``), and
    reads ``n``, ``state`` and ``frozen``."""

    def update_noise(self) -> None:
        """The EM step on the learned noise (``Trainer``'s docstring, ``options.learn_noise``):
        each model not held gets ``sigma^2 = mean over the steps since the last update of the
        step's RSS estimate, divided by n``, floored at ``noise_floor^2``; nothing happens
        before a step."""
        if self.noise_sd is None:
            raise ValueError("this trainer's noise is known (learn_noise=False)")
        if self._rss_steps == 0:
            return
        var = (self._rss_sum / self._rss_steps / self.n).clamp_min(self.noise_floor**2)
        held = self.state.health.failed | self.frozen
        ok = ~held & torch.isfinite(var)
        new = torch.where(ok, var.sqrt().to(self.noise_sd.dtype), self.noise_sd)
        self.noise_sd.copy_(new)  # in place: the step's constants hold this tensor
        self._rss_sum.zero_()
        self._rss_steps = 0

    def pause_noise(self) -> None:
        """Hold every model's learned noise sd where it is (a warm-up at the start value):
        no updates, and the steps until :meth:`resume_noise` are not collected."""
        if self.noise_sd is None:
            raise ValueError("this trainer's noise is known (learn_noise=False)")
        self.noise_updates = False

    def resume_noise(self) -> None:
        """Update the learned noise sds again (after :meth:`pause_noise`)."""
        if self.noise_sd is None:
            raise ValueError("this trainer's noise is known (learn_noise=False)")
        self.noise_updates = True

    def _learning_noise(self) -> bool:
        return self.noise_sd is not None and self.noise_updates

    def _collect_rss(self, L1: torch.Tensor) -> None:
        """Each model's estimate of ``E_q[RSS]`` from its step's ``L1 = (n/2) log(2 pi s^2)
        + RSS / (2 s^2)`` (the minibatch sum scaled to n), added up until
        :meth:`update_noise`; ``L1 [E]`` one step's, or ``[S, E]`` S steps' (added in
        order: the same sum as S calls)."""
        s2 = (self.noise_sd * self.noise_sd).to(torch.float64)
        L1 = L1.detach().to(torch.float64)
        rss = 2 * s2 * (L1 - 0.5 * self.n * torch.log(2 * torch.pi * s2))
        if rss.dim() == 1:
            self._rss_sum += rss
            self._rss_steps += 1
        else:
            self._rss_sum.copy_(sum_in_order(self._rss_sum, rss))
            self._rss_steps += rss.shape[0]
