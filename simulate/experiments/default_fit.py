"""``python -m simulate.experiments.default_fit [--n N] [--compile auto|yes|no] [--mlp
auto|batched|native|native-step] [--json PATH]``: what the
regressor's defaults cost and give a practitioner.

``make_pipeline(StandardScaler(), ASVIRegressor(...)).fit`` with every default (learned
noise, standardised targets, the stopping rule capped at ``max_epochs``, lambda_s by the
paper's rule) on scikit-learn's ``make_friedman1`` (p = 10, noise sd 1; training seed 0,
test seed 1): the fit's wall time, each candidate's steps and convergence, the selected
width, the learned noise sd, the test RMSE (the noise floor is 1) and the 90% predictive
interval's coverage of the test targets, and the selected candidate's ELBO and penalised
ELBO (the objective a training recipe is judged by).  ``--recipe NAME`` fits with a
training recipe's parameters (``simulate.estimators.recipe_params``; default: the
estimator's own defaults, the default recipe's).  Any warning the fit raised (the cap
binding) is recorded, not lost."""

from __future__ import annotations

import sys
import time
import warnings

import numpy as np
from sklearn.datasets import make_friedman1
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from simulate.alloc import tune_malloc
from simulate.core.steppath import MLP_KINDS, mlp_help
from simulate.estimators import RECIPE_PARAMS, ASVIRegressor, recipe_params
from simulate.sweep.setup.recipes import RECIPES
from theory.plumbing.cli import Parser, print_error, run_main
from theory.plumbing.paths import check_output_file, path_arg, write_json


def run(n: int = 10_000, n_test: int = 5_000, compile="auto", mlp="auto", **overrides) -> dict:
    """The default fit on ``make_friedman1(n)`` and its scores on ``n_test`` fresh points;
    ``compile`` and ``mlp`` as the estimator takes them (default: its own "auto", the
    path the fit took recorded as ``step_path``); ``overrides``: estimator parameters to
    change (the tests shorten the cap)."""

    X, y = make_friedman1(n_samples=n, n_features=10, noise=1.0, random_state=0)
    Xt, yt = make_friedman1(n_samples=n_test, n_features=10, noise=1.0, random_state=1)
    est = ASVIRegressor(compile=compile, mlp=mlp, progress=False, **overrides)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        model = make_pipeline(StandardScaler(), est).fit(X, y)
        wall = time.perf_counter() - t0
    m = model[-1]
    mean = model.predict(Xt)
    lo, hi = m.predict_interval(model[:-1].transform(Xt), 0.9)
    return {
        "n": n,
        "compiled": m.step_path_["compiled"],
        "step_path": m.step_path_,
        "wall_s": wall,
        "widths": list(m.widths_),
        "n_iter": m.n_iter_.tolist(),
        "converged": m.converged_.tolist(),
        "retired": m.retired_.tolist(),
        "selected_width": m.selected_width_,
        "elbo": float(m.elbo_[m.selected_index_]),
        "penalized_elbo": float(m.penalized_elbo_[m.selected_index_]),
        "params": {k: est.get_params()[k] for k in RECIPE_PARAMS},
        "sigma": m.sigma_,
        "test_rmse": float(np.sqrt(np.mean((mean - yt) ** 2))),
        "picp90": float(np.mean((yt >= lo) & (yt <= hi))),
        "warnings": sorted({str(w.message) for w in caught if "jit" not in str(w.message)}),
    }


def main(argv=None) -> int:
    ap = Parser(prog="python -m simulate.experiments.default_fit", description=__doc__)
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument(
        "--compile",
        choices=["auto", "yes", "no"],
        default="auto",
        help="torch.compile the training step (default: the estimator's auto rule)",
    )
    ap.add_argument(
        "--mlp",
        choices=["auto", *MLP_KINDS],
        default="auto",
        help=mlp_help(
            "default: auto, the estimator's rule: the whole step in C where it builds and serves"
        ),
    )
    ap.add_argument("--json", type=path_arg, metavar="PATH")
    ap.add_argument("--recipe", choices=sorted(RECIPES), help="a training recipe's parameters")
    args = ap.parse_args(argv)
    try:
        if args.n < 10:
            raise ValueError(f"--n must be at least 10, got {args.n}")
        if args.json:
            check_output_file(args.json, "--json")
        overrides = recipe_params(args.recipe) if args.recipe else {}
    except ValueError as exc:
        print_error(exc)
        return 2
    tune_malloc()
    compile = {"auto": "auto", "yes": True, "no": False}[args.compile]
    r = run(args.n, compile=compile, mlp=args.mlp, **overrides)
    print(
        f"{args.recipe or 'default'} ASVIRegressor, friedman1 n = {r['n']}, p = 10"
        f" ({r['step_path']['mlp']} pass{', compiled' if r['compiled'] else ''}): "
        f"{r['wall_s']:.0f} s; width "
        f"{r['selected_width']}, sigma_ {r['sigma']:.3f}, test RMSE {r['test_rmse']:.3f} "
        f"(floor 1), 90% coverage {r['picp90']:.3f}; steps {r['n_iter']}, converged "
        f"{r['converged']}; ELBO {r['elbo']:.1f}, penalised {r['penalized_elbo']:.1f}"
    )
    for w in r["warnings"]:
        print(f"warning: {w}")
    if args.json:
        write_json(args.json, r)
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
