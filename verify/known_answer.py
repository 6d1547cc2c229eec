"""Which estimators are known-answer controls, by name: the Gaussian process
(``gp-matern-NU``, ``simulate.sweep.gp``) and k-NN (``knn-matched``, ``knn-kK``,
``simulate.sweep.knn``), whose proven rate an entry is held to in place of the paper's band
(``verify.design``).  A leaf: ``verify.design`` and ``verify.stated_rate`` both read it
(``verify.design`` names it again)."""

from __future__ import annotations

__all__ = ["CONTROL_FAMILIES", "control_family", "is_control"]

# the known-answer controls' families: estimator-name prefix -> family
CONTROL_FAMILIES = {"gp-matern-": "gp", "knn-": "knn"}


def control_family(estimator: str) -> str | None:
    """The known-answer family of an estimator: ``"gp"`` (``gp-matern-NU``,
    ``simulate.sweep.gp``), ``"knn"`` (``knn-matched``, ``knn-kK``, ``simulate.sweep.knn``),
    None for any other (ASVI, its arms, a named regressor: no known answer)."""
    for prefix, family in CONTROL_FAMILIES.items():
        if estimator.startswith(prefix):
            return family
    return None


def is_control(estimator: str) -> bool:
    """Whether an estimator is a known-answer control's (:func:`control_family`)."""
    return control_family(estimator) is not None
