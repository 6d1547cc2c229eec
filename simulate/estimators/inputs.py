"""What the estimators accept: the device, the candidate widths, the dtype, counts and seeds,
the targets' scale and the inputs' range, each checked where the value enters (``fit``)."""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np
import torch
from sklearn.utils.validation import validate_data

from simulate.core import sizes
from simulate.core.constraints import Count, Interval, Options, check
from simulate.core.steppath import PATHS


def resolve_device(device) -> torch.device:
    """``torch.device`` for a user's ``device``; CUDA only when asked for and present."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:  # torch's own message lists twenty device types
        raise ValueError(
            f"device must be a torch device such as 'cpu' or 'cuda', got {device!r}"
        ) from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' was asked for but torch.cuda.is_available() is False")
    return dev


def _check_widths(widths) -> list[int]:
    if isinstance(widths, (str, bytes)):  # "24" iterates as "2", "4"
        raise ValueError(f"widths must be a list of positive integers, got {widths!r}")
    try:
        ws = [w for w in widths]
    except TypeError as exc:
        raise ValueError(f"widths must be a list of positive integers, got {widths!r}") from exc
    if not ws:
        raise ValueError("widths must be a non-empty list of positive integers")
    for w in ws:
        if not isinstance(w, numbers.Real) or isinstance(w, bool):
            raise ValueError(f"every width must be an integer >= 1, got {w!r}")
        if not float(w).is_integer() or w < 1:
            raise ValueError(f"every width must be an integer >= 1, got {w!r}")
    return [int(w) for w in ws]


_DTYPES = {"float32": torch.float32, "float64": torch.float64}
_SEED_MAX = (2**63 - 1) // 1000 - 1000  # model seeds are seed * 1000 + k in int64


def _dtype(x) -> torch.dtype:
    if isinstance(x, torch.dtype) and x in _DTYPES.values():
        return x
    if isinstance(x, str) and x in _DTYPES:
        return _DTYPES[x]
    raise ValueError(f"dtype must be 'float32' or 'float64', got {x!r}")


def _integer(name, v, lo=1, hi=None) -> int:
    """``v`` as an int when an integer in [lo, hi] (``simulate.core.constraints``)."""
    return int(check(name, v, Interval(numbers.Integral, lo, hi, "both")))


# ``epochs`` and ``max_epochs``: whole numbers in [1, MAX_EPOCHS].  Why a million: it is
# 140 times the paper's 7000 epochs (the regressors' default cap) and past any budget a fit
# here has used, so a larger number is a slip (``epochs=1e30`` trained without end), not a
# plan.  Within it the step count is exact: the count itself is a Python int
# (``State.count``), ``ceil(epochs * n / m)`` is formed in float64 from numbers far below
# 2**53 (epochs <= 1e6 and n / m <= n), and the sampler's draw numbers ``t K + k`` stay
# below the 2**64 that ``rng.offset_words`` hashes (1e6 n K < 2**64 for any n K under
# 1.8e13).  An integral float (``7000.0``, what ``teacher --epochs`` parses) is accepted as
# the whole number it is; a fraction of an epoch (1.5) is refused.
MAX_EPOCHS = 10**6
EPOCH_COUNT = Count(1, MAX_EPOCHS)


# ``max_epochs="auto"`` (the regressors' default): the stopping rule's cap is the larger of
# the paper's 7000 epochs (``PAPER_EPOCHS``) and ``AUTO_CAP_STEPS`` steps.  Why a floor in
# steps: an epoch is ``n / batch_size`` steps, so at n below the batch (1,024) 7000 epochs
# are 7000 steps, a third of what the stopping rule's own cap (20,000 steps,
# ``simulate.core.stopping``) gives the widest candidate to finish pruning; and a learned
# noise trains in two phases (the warm-up, then variational EM) that share the cap, so the
# floor is twice that.  Measured on scikit-learn's diabetes data (n = 331 to 442, the
# defaults): under 7000 steps every fit stopped candidates at the cap (a
# ``ConvergenceWarning``); under 40,000 the candidates converged by 18,000 steps or were
# retired by the race, no warning, in 2-3 s a fit.  From n of about 5,900 up the
# paper's cap is the larger one and nothing changes.
AUTO_CAP_STEPS = 40_000


def cap_steps(max_epochs, per_epoch: float, paper_epochs: int) -> int:
    """The stopping rule's cap in steps (the comment above): ``max_epochs`` epochs of
    ``per_epoch`` steps as given, or for ``"auto"`` the larger of ``paper_epochs`` epochs and
    :data:`AUTO_CAP_STEPS` steps (ValueError for anything else)."""
    if isinstance(max_epochs, str) and max_epochs == "auto":
        return max(AUTO_CAP_STEPS, math.ceil(float(paper_epochs) * per_epoch))
    epochs = check("max_epochs", max_epochs, EPOCH_COUNT, Options(("auto",)))
    return max(1, math.ceil(float(int(epochs)) * per_epoch))


# Targets whose sd lies outside [1e-30, 1e30] are fitted (standardised: ``_standardise``)
# with a warning: float32, the core's training dtype, holds about [1.2e-38, 3.4e38], so such
# targets could not have entered it as they are; the margin of 1e8 leaves room for the
# squares and products of y's units that a user may go on to form in float32.
Y_SCALE_RANGE = (1e-30, 1e30)
_F32 = np.finfo(np.float32)


def _standardise(y: np.ndarray) -> tuple[float, float, np.ndarray]:
    """``(mean, sd, (y - mean) / sd)`` of finite targets at any scale float64 holds.

    ``y.std()`` squares y's deviations: at a scale of 1e-300 the squares underflow to 0 (the
    targets were taken as constant and fitted as such, silently) and at 1e300 they overflow
    to inf.  Here y is first multiplied by ``2**-e``, the power of two just above max|y| (an
    exact scaling: only the exponent changes), so its values lie in (-1, 1), where neither
    the mean nor the squares can under- or overflow; the mean and sd found there are scaled
    back by ``2**e`` and the standardised values are formed there.  Scaling by a power of two
    commutes with every rounding, so where nothing under- or overflows this is ``y.mean()``,
    ``y.std()`` and ``(y - y.mean()) / y.std()`` bit for bit: fits at ordinary scales do not
    move.  When every target is the same number, sd is 0 and the mean is that number (where
    ``y.mean()`` can round off it: three 0.1s give 0.1 + 1.4e-17, which ``y.std()`` took for a
    spread of 1.4e-17 and the fit for a signal).  A spread that float64 cannot hold (targets
    0 and 5e-324: the sd is 2**-1075) is a ``ValueError``, never a sd of 0 beside
    standardised values."""
    top = float(np.max(np.abs(y)))
    if top == 0.0 or np.all(y == y[0]):  # constant: no spread to measure (y - mean: zeros)
        mean = float(y.mean()) if top == 0.0 else float(y[0])
        return mean, 0.0, y - mean
    e = math.frexp(top)[1]  # top = f 2**e with f in [0.5, 1)
    z = np.ldexp(y, -e)
    mz, sz = float(z.mean()), float(z.std())
    sd = math.ldexp(sz, e)
    if sd == 0.0 or not math.isfinite(sd):  # the spread itself is below float64's range
        raise ValueError(
            f"y's spread ({sz:.3g} x 2**{e}) is below the smallest float64; multiply y by a"
            " power of ten (and the predictions back by its inverse)"
        )
    return math.ldexp(mz, e), sd, (z - mz) / sz


def validate_numeric(estimator, X, *y, **kw):
    """``sklearn.utils.validation.validate_data(estimator, X, *y, **kw)``, with one clear
    ``ValueError`` where X holds a column that is not numbers (:func:`non_numeric_column`):
    ``X has a non-numeric column (column 1, named 'c', holds 'a'): encode categorical
    columns first, e.g. with sklearn.preprocessing.OneHotEncoder``.

    Why here: a pandas ``category`` column of strings passes ``validate_data`` as an object
    array, and the range check after it (``_check_core_range``) then said ``bad operand
    type for abs(): 'str'``; a text column of a numpy or object array, or of a DataFrame,
    made scikit-learn say ``could not convert string to float: 'a'`` or that ``dtype='numeric'
    is not compatible with arrays of bytes/strings``, naming neither the column nor the fix.
    A ``ValueError`` of ``validate_data`` with X's columns all numbers (a bad y, a sparse
    X) is scikit-learn's own, unchanged, and so is its ``TypeError`` (a dict in X: its
    estimator checks expect that one)."""
    try:
        out = validate_data(estimator, X, *y, **kw)
    except ValueError:
        _refuse_non_numeric(X, None)
        raise
    checked = out[0] if y else out
    if isinstance(checked, np.ndarray) and checked.dtype.kind not in "biufc":
        _refuse_non_numeric(checked, getattr(estimator, "feature_names_in_", None))
    return out


def non_numeric_column(X, names=None) -> str | None:
    """Where X (a DataFrame, an array or nested lists of rows) holds a column that cannot be
    read as float64 numbers: ``"column J, named NAME, holds VALUE"`` of the first such
    column and its first such value (``names``: the columns' names where X is an array
    made from a DataFrame), or None where every column converts (or X has no columns to
    look at: not two-dimensional)."""
    columns = getattr(X, "columns", None)
    if columns is not None and hasattr(X, "iloc"):  # a DataFrame: column by column
        cols = [(j, columns[j], X.iloc[:, j]) for j in range(len(columns))]
    else:
        try:
            a = X if isinstance(X, np.ndarray) else np.asarray(X, dtype=object)
        except (ValueError, TypeError):  # ragged rows: not a table
            return None
        if a.ndim != 2 or a.dtype.kind in "biufc":
            return None
        cols = [(j, None if names is None else names[j], a[:, j]) for j in range(a.shape[1])]
    for j, name, col in cols:
        try:
            np.asarray(col, dtype=np.float64)
        except (ValueError, TypeError):
            bad = next((v for v in np.asarray(col, dtype=object) if not _number(v)), None)
            text = repr(bad) if len(repr(bad)) <= 40 else repr(bad)[:37] + "..."
            named = "" if name is None else f", named {name!r}"
            return f"column {j}{named}, holds {text}"
    return None


def _number(v) -> bool:
    try:
        float(v)
    except (ValueError, TypeError):
        return False
    return True


def _refuse_non_numeric(X, names) -> None:
    where = non_numeric_column(X, names)
    if where is not None:
        raise ValueError(
            f"X has a non-numeric column ({where}): encode categorical columns first, e.g."
            " with sklearn.preprocessing.OneHotEncoder"
        )


def _check_core_range(name: str, a: np.ndarray, dtype: torch.dtype, fix: str) -> None:
    """Refuse values that the cast to float32 (the core's default dtype) would turn into
    inf, or that it would flush to zero or subnormals in a whole column (a feature or
    target that silently becomes constant): ``ValueError`` naming ``fix``."""
    if dtype != torch.float32 or a.size == 0:
        return
    top = np.max(np.abs(a.reshape(a.shape[0], -1)), axis=0)
    if np.any(top > _F32.max):
        raise ValueError(
            f"{name} has values beyond float32's range ({top.max():.3g} > {_F32.max:.3g}): {fix}"
        )
    low = (top > 0) & (top < _F32.tiny)
    if np.any(low):
        raise ValueError(
            f"{name} has a column of values below float32's normal range "
            f"(max |value| {top[low].max():.3g} < {_F32.tiny:.3g}): {fix}"
        )


def check_c_depth(depth: int, mlp) -> None:
    """``ValueError`` (one line) where ``mlp`` names a C step path outright
    (``"native"``, ``"native-step"``) and ``depth`` is past the C code's limit
    (``simulate.core.steppath.StepPath.check_depth``: 63 hidden layers, naming
    ``mlp='batched'`` as the way out); checked with the parameters, before any data work --
    the C code's own check came only once the models, their starts and their trainer were
    built.  ``mlp="auto"`` takes the batched pass for such a network
    (``simulate.estimators.policy._step_options``); other values are refused there."""
    if isinstance(mlp, str) and mlp in PATHS:
        PATHS[mlp].check_depth(depth, "mlp")


# The deepest network a fit builds.  The batched step runs a few torch operations per layer,
# and the layout, the starts and the trainer are built layer by layer in Python, so depth
# costs time long before it costs memory: depth=10**6 at width 2 (6 million parameters,
# within any machine's memory) spent minutes building before its first step, and then
# minutes a step.  The bound is the deepest network the paper prescribes: Lemma 6.1's
# L = 8 + (floor(log2 n) + 5)(1 + ceil(log2 p)) (``theory.lemma_6_1``) at any n below 2**63
# (every count here is an int64) and p up to 2**32, 8 + 67 * 33 = 2219.  Past it a depth is
# a slip, not a plan.
MAX_DEPTH = 8 + (62 + 5) * (1 + 32)


def check_depth_bound(name: str, depth: int) -> None:
    """``ValueError`` (one line) for a depth past :data:`MAX_DEPTH` (the reason is written
    there), before anything is built; checked after :func:`check_fit_sizes`, whose memory
    bound names depth among the sizes to lower where the machine cannot hold the fit."""
    if depth > MAX_DEPTH:
        raise ValueError(
            f"{name}.fit: depth {depth} is past {MAX_DEPTH}, the deepest network Lemma 6.1"
            " prescribes at any n < 2**63 and p <= 2**32 (simulate.estimators.inputs"
            ".MAX_DEPTH; each layer is built and stepped in turn); use a smaller depth"
        )


def check_fit_sizes(name: str, widths, depth: int, data, hyper, draws, itemsize: int) -> None:
    """Refuse, before any tensor is made, a fit whose memory cannot fit in this process
    (``simulate.core.sizes``: a lower bound against the machine's memory or the process's
    limit, the estimate printed): ``ValueError``, one sentence naming what to lower.  The
    bounds of ``widths``, ``depth``, ``batch_size``, ``mc_samples``, ``elbo_draws`` and
    ``predict_draws`` are these three estimates, for the candidates trained in one program
    (``len(widths)`` models padded to the widest, ``P`` parameter slots each), on ``data``
    = ``(n, p, out_dim)``, ``draws`` = ``(elbo_draws, predict_draws)``:

    * training: ``sizes.train_parts`` (~6 copies of ``[3, E, P]``, the further draws'
      noise, ~6 of ``[E, batch, width]`` a draw) in the fit's dtype;
    * the ELBO the widths are selected by: the training state, the posterior in float64
      and ``elbo_draws`` draws' sums per chunk of 8,192 points (``sizes.elbo_bytes``);
    * a prediction at one point: ``predict_draws`` outputs (``sizes.outputs_bytes``)
      beside the posterior (``predict`` checks its own points again)."""
    n, p, out_dim = (int(v) for v in data)
    elbo_draws, predict_draws = (int(v) for v in draws)
    E, W = len(widths), max(widths)
    P = sizes.network_params(p, depth, W, out_dim)
    shape = f"{E} candidate{'s' if E > 1 else ''} of width up to {W} at depth {depth}"
    train = sizes.train_parts(E, P, hyper.batch_size, W, hyper.mc_samples, itemsize)
    state = (train["state"], f"their state (6 copies of 3 x {E} x {P:,} floats)",
             "use smaller widths or depth")  # fmt: skip
    more = "use fewer mc_samples, a smaller batch_size" if hyper.mc_samples > 1 else (
        "use a smaller batch_size")  # fmt: skip
    sizes.Need(f"{name}.fit: training {shape} on {n} points").add(*state).add(
        train["noise"], f"mc_samples={hyper.mc_samples} draws' noise", "use fewer mc_samples"
    ).add(
        train["activations"], f"activations of batch {hyper.batch_size}",
        f"{more} or smaller widths",
    ).check()  # fmt: skip
    post = 8 * 3 * E * P
    sums = sizes.elbo_bytes(E, P, n, W, elbo_draws) - post
    sizes.Need(f"{name}.fit: the ELBO of {shape} on {n} points").add(*state).add(
        post, "the posterior in float64", "use smaller widths or depth"
    ).add(sums, f"elbo_draws={elbo_draws} draws' sums", "use fewer elbo_draws").check()
    sizes.Need(f"{name}: a prediction at one point of {shape}").add(
        post, "the posterior in float64", "use smaller widths or depth"
    ).add(
        sizes.outputs_bytes(predict_draws, E, out_dim, 1),
        f"predict_draws={predict_draws} draws' outputs", "use fewer predict_draws",
    ).check()  # fmt: skip


def check_predict_sizes(name: str, post, draws: int, points: int) -> None:
    """Refuse, before any draw, a prediction whose ``draws`` outputs at ``points`` points
    cannot fit in this process (``simulate.core.sizes.outputs_bytes`` beside the
    posterior): ``ValueError`` naming the fix (fewer points a call, or fewer
    ``predict_draws``)."""
    lay = post.layout
    sizes.Need(f"{name}: predicting {points} points with {draws} draws").add(
        8 * 3 * lay.E * lay.P, "the posterior in float64", "predict fewer points a call"
    ).add(
        sizes.outputs_bytes(draws, lay.E, lay.out_dim, points), "the draws' outputs",
        "predict fewer points a call (or use fewer predict_draws)",
    ).check()  # fmt: skip


# The fewest points a learned noise sd (``sigma="auto"``) rests on without a warning.  The
# sd is the M-step's ``sqrt(E_q[RSS] / n)`` (``simulate.estimators.base``): even from n
# residuals of the true function the variance estimate is chi-square with n degrees of
# freedom, its relative sd ``sqrt(2 / n)``, so the sd's own relative error is about
# ``1 / sqrt(2 n)``: 22% at 10 points, 50% at 2, and every interval's width is as uncertain
# as the sd.  And a network interpolates so few points: their residuals go to 0 and the sd
# to its floor (one training point with learned noise predicted 3.0 +- 0.001, issue 61).
# Below 10 a fit warns (SmallSampleWarning); one point has no residual to learn from at all
# and is refused.
MIN_NOISE_POINTS = 10


class SmallSampleWarning(UserWarning):
    """A regressor learned its noise sd (``sigma="auto"``) from fewer than
    :data:`MIN_NOISE_POINTS` points: its ``sigma_``, ``predict(return_std=True)`` and
    ``predict_interval`` have no firm basis; a known ``sigma`` fixes it."""


def check_noise_points(name: str, n: int, stacklevel: int = 3) -> None:
    """A learned noise sd from ``n`` points: ``ValueError`` for one (no residual to learn
    from; scikit-learn's "1 sample" wording), :class:`SmallSampleWarning` below
    :data:`MIN_NOISE_POINTS` (the reason is written there)."""
    if n < 2:
        raise ValueError(
            f"{name}: sigma='auto' learns the noise sd from the residuals, and 1 sample has"
            " none to learn from; give the known noise sd (sigma=...)"
        )
    if n < MIN_NOISE_POINTS:
        warnings.warn(
            f"{name}: the noise sd was learned from {n} points (fewer than"
            f" {MIN_NOISE_POINTS}): its error is about 1/sqrt(2 n) = {1 / math.sqrt(2 * n):.0%}"
            " at best and a network can fit so few points exactly, so sigma_ and the"
            " predictive intervals have no firm basis; give the known noise sd (sigma=...)",
            SmallSampleWarning,
            stacklevel=stacklevel,
        )


# the former name of ``random_state``, read for one more release (:func:`seed_of`)
SEED_DEPRECATED = "deprecated"


def seed_of(name: str, random_state, seed=SEED_DEPRECATED) -> int:
    """An estimator's (``name``'s) fit seed: ``random_state`` (scikit-learn's name: an
    integer in [0, 2^63), a ``numpy.random.RandomState`` or ``Generator`` drawn from once, or
    None: one drawn from numpy's global generator, as scikit-learn's ``check_random_state``
    reads None); ``seed``, its former name, is read for one more release with a
    ``FutureWarning``."""
    rs = random_state
    if not (isinstance(seed, str) and seed == SEED_DEPRECATED):
        warnings.warn(
            f"{name}: 'seed' was renamed 'random_state' (scikit-learn's name) and will be"
            " removed in the next release; give random_state instead",
            FutureWarning, stacklevel=5,
        )  # fmt: skip
        rs = seed
    if rs is None:  # numpy's global RandomState, as scikit-learn's
        return int(np.random.randint(0, 2**31 - 1))
    if isinstance(rs, np.random.RandomState):
        return int(rs.randint(0, 2**31 - 1))
    if isinstance(rs, np.random.Generator):
        return int(rs.integers(0, 2**31 - 1))
    return _integer("random_state", rs, lo=0, hi=_SEED_MAX)
