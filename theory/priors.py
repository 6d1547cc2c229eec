"""Priors on the network structure, eq. (prior2) of Section 5 and eq. (adaprior) of the appendix."""

from __future__ import annotations

from theory import _validate as check
from theory._backend import ops_for

__all__ = ["log_prior_N", "log_prior_s", "lambda_s_rule"]


def log_prior_N(N, lam):
    r"""log pi(N) for the width multiplier, eq. (prior2):

    .. math:: \pi(N) = \frac{\lambda^N}{(e^\lambda - 1) N!}, \qquad N \ge 1,

    a Poisson(lambda) law conditioned on N >= 1, so it sums to one over N = 1, 2, ...
    ``log(e^lam - 1)`` is evaluated as ``lam + log(-expm1(-lam))`` (``Ops.log1mexp``): large
    lam does not overflow and small lam keeps its precision (``1 - e^-lam`` rounds to 0 in
    float64 below lam ~ 1e-16, which made the prior +inf).  Natural logarithm.
    """
    check.positive_int("N", N)
    check.real("lam", lam, gt=0)
    ops = ops_for(N, lam)
    N, lam = ops.args(N, lam)
    log_norm = lam + ops.log1mexp(lam)
    return N * ops.log(lam) - log_norm - ops.loggamma(N + 1)


def log_prior_s(s, lam_s, H=None):
    r"""log pi(s) for the sparsity, eq. (prior2): ``pi(s) propto exp(-lam_s s)``, s >= 0.

    Normalised over s = 0, 1, ... (a geometric law): ``log(1 - e^-lam_s) - lam_s s``.
    With ``H`` given, the law is truncated to s <= H (the number of edges), as the support
    ``s = 0 .. H_N`` of Section 5 requires: the normaliser becomes
    ``(1 - e^-lam_s) / (1 - e^{-lam_s (H+1)})``.
    """
    check.positive_int("s", s, ge=0)
    check.real("lam_s", lam_s, gt=0)
    if H is not None:
        check.positive_int("H", H)
        check.check_le("s", s, H, "the number of edges H")
    ops = ops_for(s, lam_s, *(() if H is None else (H,)))
    s, lam_s = ops.args(s, lam_s)
    out = ops.log1mexp(lam_s) - lam_s * s  # accurate for tiny and huge lam_s
    if H is not None:
        (H,) = ops.args(H)
        out = out - ops.log1mexp(lam_s * (H + 1))
    return out


def lambda_s_rule(n, L, a=0.1):
    r"""The sparsity-prior rate of Section 5, at its lower end: ``lambda_s = a (L + 1) log n``
    for a network of ``L`` hidden layers (the theory needs ``n eps*_n^2 / s* >> lambda_s >=
    a L' log n`` for some a > 0, L' its layer count).

    ``L`` is the number of hidden layers, as everywhere in ``theory`` (``theory.network``);
    the rule counts weight layers, ``L + 1``: with it the rule reproduces both values the
    paper's appendix prints, ``lambda_s = 3 (a = 0.1)`` for the teacher experiment (two
    hidden layers, n = 10^4: 0.1 * 3 * log 10^4 = 2.76) and ``lambda_s = 50 (a = 1.5)`` for
    MNIST (two hidden layers, n = 6 * 10^4: 49.5), which the hidden-layer count alone would
    not (1.84 and 33).
    """
    check.real("n", n, gt=1, allowed="> 1")
    check.positive_int("L", L)
    check.real("a", a, gt=0)
    ops = ops_for(n, L, a)
    n, L, a = ops.args(n, L, a)
    return a * (L + 1) * ops.log(n)
