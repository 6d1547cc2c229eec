"""``python -m simulate.experiments.teacher``: one ASVI run on the paper's teacher-network
experiment.

Teacher 20-10-10-1 (weights U(0.5, 1.5), half set to zero), n = 10,000 training points,
noise sigma = 1, student depth 2, candidate widths 2, 4, ..., 20, and the appendix's
hyperparameters (batch 1024, K = 1, Adam lr 5e-3, lambda_s = 3, lambda = 10,
sigma_0 = 0.8); the number of epochs is a flag (the paper: 7000).  Prints every candidate's
ELBO and penalised ELBO, the selected width, its test RMSE on fresh data and its posterior
edge count, and writes them as JSON with ``--json``.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from simulate.alloc import tune_malloc
from simulate.core.hyper import HYPER_DEFAULTS, PAPER_EPOCHS, PAPER_WIDTHS
from simulate.core.posterior import PREDICT_DRAWS
from simulate.estimators import ASVIRegressor, recipe_params
from simulate.truths.functions import TeacherNetwork, teacher_data
from theory.plumbing.cli import Parser, print_error, run_main
from theory.plumbing.paths import check_output_file, path_arg, write_json


def run(
    epochs: float,
    seed: int,
    n: int = 10_000,
    n_test: int = 10_000,
    widths=PAPER_WIDTHS,
    progress: bool = True,
    compile: bool = False,
) -> dict:
    teacher = TeacherNetwork(seed=seed)  # 20-10-10-1, as in Table 1
    X, y, Xt, yt = teacher_data(teacher, n, n_test, seed)
    model = ASVIRegressor(  # the paper's setting (Hyper's defaults): known sigma = 1 and
        widths=widths, epochs=epochs, random_state=seed, progress=progress, compile=compile,
        sigma=HYPER_DEFAULTS["sigma"], lambda_s=HYPER_DEFAULTS["lambda_s"],  # lambda_s = 3,
        standardize_y=False,  # targets as generated,
        **recipe_params("baseline"),  # and the paper's optimiser (one lr, no plateaus)
    ).fit(X, y)  # fmt: skip
    k = model.selected_index_
    pred = model.predict(Xt)
    post = model.posterior_
    means = post.predict_mean(Xt, PREDICT_DRAWS).cpu().numpy()
    return {
        "epochs": epochs,
        "seed": seed,
        "n": n,
        "steps": model.n_steps_,
        "compiled": bool(compile),
        "step_path": model.step_path_,  # the network's pass the estimator chose (mlp="auto")
        "fit_time_s": model.fit_time_s_,
        "teacher_edges": teacher.n_edges,
        "widths": list(model.widths_),
        "elbo": model.elbo_.tolist(),
        "penalized_elbo": model.penalized_elbo_.tolist(),
        "selected_width": model.selected_width_,
        "test_rmse": float(np.sqrt(np.mean((pred - yt) ** 2))),
        "test_rmse_per_width": np.sqrt(np.mean((means - yt[None, :]) ** 2, axis=1)).tolist(),
        "edges_sum_nu": float(model.n_edges_all_[k]),
        "edges_sum_nu_per_width": model.n_edges_all_.tolist(),
    }


def main(argv=None) -> int:
    ap = Parser(prog="python -m simulate.experiments.teacher", description=__doc__)
    ap.add_argument("--epochs", type=float, default=PAPER_EPOCHS)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--json", type=path_arg, metavar="PATH")
    ap.add_argument(
        "--compile", action="store_true", help="torch.compile the training step (same numbers)"
    )
    args = ap.parse_args(argv)
    try:
        batch = HYPER_DEFAULTS["batch_size"]  # the experiment's batch, Hyper's default
        if not (math.isfinite(args.epochs) and args.epochs > 0) or args.n < batch:
            raise ValueError(
                f"epochs must be a finite number > 0 and n >= {batch} (the batch size), got"
                f" {args.epochs} and {args.n}"
            )
        if not 0 <= args.seed < 2**32:  # numpy's seed range: a traceback otherwise
            raise ValueError(f"--seed must be an integer in [0, 2^32), got {args.seed}")
        if args.json:
            check_output_file(args.json, "--json")
    except ValueError as exc:
        print_error(exc)
        return 2
    tune_malloc()
    r = run(args.epochs, args.seed, args.n, compile=args.compile)
    print(
        f"teacher 20-10-10-1 ({r['teacher_edges']} non-zero edges), n = {r['n']}, "
        f"{r['epochs']} epochs = {r['steps']} steps, {r['fit_time_s']:.0f} s"
    )
    print(f"{'width':>6s} {'ELBO':>12s} {'penalised':>12s} {'test RMSE':>10s} {'sum nu':>8s}")
    for w, e, pe, rm, ed in zip(
        r["widths"],
        r["elbo"],
        r["penalized_elbo"],
        r["test_rmse_per_width"],
        r["edges_sum_nu_per_width"],
        strict=True,
    ):
        mark = " <- selected" if w == r["selected_width"] else ""
        print(f"{w:6d} {e:12.1f} {pe:12.1f} {rm:10.4f} {ed:8.1f}{mark}")
    print(
        f"ASVI: width {r['selected_width']}, test RMSE {r['test_rmse']:.4f}, "
        f"edges {r['edges_sum_nu']:.1f}"
    )
    if args.json:
        write_json(args.json, r)
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
