"""The training recipes: named sets of ``simulate.sweep.setup.config.SweepConfig`` settings that
change how ASVI's optimiser runs, never what it optimises (the ELBO) or what it may see (the
training data only).

``python -m verify.optimiser`` measures each against the constructive posteriors (how far
its random start stops below a better point of its own objective); the sweeps' tiers and
the confirmatory protocols name the one they train with, so that every other recipe
stays one setting away (``verify.rates --recipe``).  The settings:

* ``stop_lr_decays`` / ``stop_lr_factor``: at a plateau of the stopping rule the model's
  learning rate is lowered instead of the model stopped (``simulate.core.stopping``);
* ``lr_inclusion``: the inclusion logits' own learning rate (``simulate.core.Hyper``);
* ``lr_inclusion_ramp``: that rate growing with n (``SweepConfig.lr_inclusion_at``);
* ``max_steps`` / ``max_epochs``: the step cap (``SweepConfig.steps_cap``);
* ``batch_fraction``: a batch that grows with n (``SweepConfig.batch_at``);
* ``kl_warmup``: the KL part's gradient weighted up over the first steps;
* ``restarts``: several random starts per candidate, the one of highest ELBO kept;
* ``continuation``: each candidate started from the narrower one trained before it.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

from simulate.core.constraints import check
from simulate.sweep.setup.config import SweepConfig
from simulate.sweep.setup.settings import declared

__all__ = ["DEFAULT_RECIPE", "RECIPES", "RECIPE_DEFAULTS", "Recipe", "recipe_settings"]

# the recipe the sweeps' tiers, ``python -m simulate.sweep`` and the regressors
# (simulate.estimators.recipe_params) train with unless told otherwise (``--recipe NAME``);
# SweepConfig's own defaults are "baseline"'s, so records written before the recipes existed
# keep their fingerprints.  "logit-ramp-plateau" was chosen on the optimiser benchmark
# (docs/results/optimiser.md, "ASVI's optimiser against its own objective"; exploratory): on
# the teacher p = 20 its gap to the constructive posterior at n = 32,000 covers 0, and
# judged against the baseline on the teachers p = 10 and 200 and the Hoelder truths
# alpha = 0.5 and 1.5 (n = 500..32,000) it lowers the ELBO on no truth at any n (no paired interval
# below 0) at about 1.2-1.4x the training seconds.  "logit20-plateau" (the same rate at
# every n) was not: it lowered the ELBO at n = 500 and 1,000.
DEFAULT_RECIPE = "logit-ramp-plateau"

_DECLARED = declared(SweepConfig)
# the settings every recipe sets, at their declared defaults (the "baseline" recipe; the
# declarations marked ``recipe=True``, simulate.sweep.setup.parts): every recipe's settings start
# from these, so that naming one undoes another's
RECIPE_DEFAULTS = {k: d for k, (d, s) in _DECLARED.items() if s.recipe}
# besides those, a recipe may change the tier's budget (the step cap); nothing else
_BUDGET = ("max_steps", "max_epochs")


@dataclass(frozen=True)
class Recipe:
    """A training recipe: a typed patch of a sweep's settings.  ``changes`` name declared
    SweepConfig settings a recipe may change (:data:`RECIPE_DEFAULTS`' and the budget's),
    each checked against its declared bounds when the recipe is made; :meth:`settings` is
    the patch every user applies the same way (the sweeps' tiers and ``--recipe``,
    ``verify.optimiser``, the protocols' designs, the estimators' ``recipe_params``)."""

    summary: str
    changes: MappingProxyType

    def __post_init__(self):
        object.__setattr__(self, "changes", MappingProxyType(dict(self.changes)))
        for k, v in self.changes.items():
            if k not in RECIPE_DEFAULTS and k not in _BUDGET:
                raise ValueError(
                    f"a recipe changes how the optimiser runs ({sorted(RECIPE_DEFAULTS)} and"
                    f" the budget {list(_BUDGET)}), not {k!r}"
                )
            check(k, v, *_DECLARED[k][1].bounds)

    def settings(self) -> dict:
        """The SweepConfig settings of this recipe: :data:`RECIPE_DEFAULTS` with its
        changes."""
        return {**RECIPE_DEFAULTS, **self.changes}


# name -> the recipe (what it changes, its settings).  "baseline" is the recipe every
# record before the optimiser benchmark was trained with.
RECIPES = {
    "baseline": Recipe("constant lr 5e-3, batch 128, cap max(20,000, 160 epochs)", {}),
    "plateau": Recipe(
        "lr x0.1 at each of 2 plateaus of the stopping rule before it stops the model",
        {"stop_lr_decays": 2},
    ),
    "epochs": Recipe("the cap doubled: max(20,000, 320 epochs)", {"max_epochs": 320}),
    "batch": Recipe(
        "the batch grows with n: max(128, n / 64), 500 at n = 32,000 (the cap's floor of"
        " 20,000 steps is then 312 epochs there)",
        {"batch_fraction": 1 / 64},
    ),
    "kl-warmup": Recipe(
        "the KL part's gradient weighted t / 5,000 over the first 5,000 steps",
        {"kl_warmup": 5000},
    ),
    "restarts": Recipe(
        "3 random starts per candidate, the one of highest ELBO kept",
        {"restarts": 3},
    ),
    "continuation": Recipe(
        "width continuation: each candidate started from the narrower one trained before it",
        {"continuation": True},
    ),
    "logit-lr": Recipe(
        "the inclusion logits' learning rate 10x (5e-2): faster pruning",
        {"lr_inclusion": 5e-2},
    ),
    "budget": Recipe(
        "the step cap's floor doubled: max(40,000, 160 epochs)", {"max_steps": 40_000}
    ),
    "logit-plateau": Recipe(
        "logit-lr and plateau together: the logits at 5e-2, lr x0.1 at each of 2 plateaus",
        {"lr_inclusion": 5e-2, "stop_lr_decays": 2},
    ),
    "logit20-plateau": Recipe(
        "the logits at 1e-1 (20x), lr x0.1 at each of 2 plateaus",
        {"lr_inclusion": 1e-1, "stop_lr_decays": 2},
    ),
    # the logits' rate growing with n (SweepConfig.lr_inclusion_at): lr up to n = 1,000,
    # where logit20-plateau lowered the ELBO, 20x lr from n = 20,000, where it closed most
    # of the gap; the ramp's 1,000 was chosen from those two measurements (exploratory)
    "logit-ramp-plateau": Recipe(
        "the logits' rate lr max(1, n / 1,000), at most 1e-1 (lr at n <= 1,000, 8x at"
        " 8,000, 20x from 20,000); lr x0.1 at each of 2 plateaus",
        {"lr_inclusion": 1e-1, "lr_inclusion_ramp": 1000, "stop_lr_decays": 2},
    ),
    "continuation-logit-ramp-plateau": Recipe(
        "logit-ramp-plateau with width continuation",
        {
            "lr_inclusion": 1e-1,
            "lr_inclusion_ramp": 1000,
            "stop_lr_decays": 2,
            "continuation": True,
        },
    ),
}


def recipe_settings(name: str) -> dict:
    """The SweepConfig settings of recipe ``name``: :data:`RECIPE_DEFAULTS` with its own
    changes (a ``ValueError`` naming the known recipes for any other name)."""
    if name not in RECIPES:
        raise ValueError(f"unknown recipe {name!r}: one of {sorted(RECIPES)}")
    return RECIPES[name].settings()
