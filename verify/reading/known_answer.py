"""Which estimators are known-answer controls, by name (asked of their kinds,
``simulate.sweep.setup.kinds``): the Gaussian process
(``gp-matern-NU``, ``simulate.sweep.train.gp``) and k-NN (``knn-matched``, ``knn-kK``,
``simulate.sweep.train.knn``), whose proven rate an entry is held to in place of the paper's band
(``verify.reading.design``).  A leaf: ``verify.reading.design`` and ``verify.reading.stated_rate``
both read it
(``verify.reading.design`` names it again)."""

from __future__ import annotations

from simulate.sweep.setup.kinds import kind_of_name

__all__ = ["control_family", "is_control"]


def control_family(estimator: str) -> str | None:
    """The known-answer family of an estimator (its kind, ``simulate.sweep.setup.kinds``):
    ``"gp"`` (``gp-matern-NU``, ``simulate.sweep.train.gp``), ``"knn"`` (``knn-matched``,
    ``knn-kK``, ``simulate.sweep.train.knn``), None for any other (ASVI, its arms, a named
    regressor: no known answer)."""
    kind = kind_of_name(estimator)
    return kind.name if kind.known_answer else None


def is_control(estimator: str) -> bool:
    """Whether an estimator is a known-answer control's (:func:`control_family`)."""
    return control_family(estimator) is not None
