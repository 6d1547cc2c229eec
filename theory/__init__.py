"""asvi-rates ``theory``: every quantity of Bai, Song and Cheng, *Adaptive Variational
Bayesian Inference for Sparse Deep Neural Network*, exact and evaluable.

Each function accepts sympy symbols (returns an expression), numpy arrays (float64,
vectorised) or numbers (mpmath at ``mpmath.mp.dps``).  Natural logarithms unless the paper
says log2.  Depth convention: L hidden layers of width 12pN (``theory.network``).
"""

import sys as _sys

if _sys.argv[:1] == ["-m"]:  # python -m ...: a Ctrl-C while the toolkit starts is one
    # line; this installation's theory, or one line
    from theory.plumbing.cli import quiet_start as _quiet_start
    from theory.plumbing.installation import refuse_shadows as _refuse_shadows

    _quiet_start()
    _refuse_shadows("theory")

from theory.bounds import (
    BoundConstants,
    Lemma61,
    eps_n,
    eps_star_n,
    lemma_6_1,
    lemma_6_1_sparsity,
    optimal_structure,
    r_n,
    theorem_4_1_bound,
    theorem_5_1_bound,
    xi_bound,
)
from theory.conditions import condition_5_1, condition_5_2, condition_5_3
from theory.exponents import (
    METRICS,
    corollary_6_1_rate,
    corollary_6_2_rate,
    corollary_6_3_rate,
    corollary_6_4_rate,
    derive_exponent,
    design_log_power,
    gp_matern_exponent,
    knn_exponent,
    log_factor_power,
    log_log_slope,
    predicted_exponent,
    teacher_exponent,
    teacher_log_power,
)
from theory.hellinger import hellinger_sq, hellinger_sq_pointwise, hellinger_sq_sup_bound
from theory.network import lemma_width, num_edges
from theory.priors import lambda_s_rule, log_prior_N, log_prior_s
from theory.proved import (
    Decrease,
    Premises,
    decreases_over,
    premises,
    proved_bound,
    proved_log_power,
    proved_slopes,
    teacher_vacuity_n,
    vacuity_n,
)
from theory.qstar import q_star, q_star_log10

__all__ = [
    "METRICS",
    "BoundConstants",
    "Decrease",
    "Premises",
    "design_log_power",
    "decreases_over",
    "Lemma61",
    "condition_5_1",
    "condition_5_2",
    "condition_5_3",
    "corollary_6_1_rate",
    "corollary_6_2_rate",
    "corollary_6_3_rate",
    "corollary_6_4_rate",
    "derive_exponent",
    "eps_n",
    "eps_star_n",
    "gp_matern_exponent",
    "knn_exponent",
    "hellinger_sq",
    "hellinger_sq_pointwise",
    "hellinger_sq_sup_bound",
    "lemma_6_1",
    "lemma_6_1_sparsity",
    "lemma_width",
    "log_factor_power",
    "log_log_slope",
    "log_prior_N",
    "log_prior_s",
    "num_edges",
    "optimal_structure",
    "predicted_exponent",
    "premises",
    "proved_bound",
    "proved_log_power",
    "teacher_exponent",
    "teacher_log_power",
    "lambda_s_rule",
    "q_star",
    "q_star_log10",
    "r_n",
    "theorem_4_1_bound",
    "theorem_5_1_bound",
    "vacuity_n",
    "teacher_vacuity_n",
    "proved_slopes",
    "xi_bound",
]
