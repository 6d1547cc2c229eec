"""The estimator kinds as objects in one registry (``simulate.sweep.setup.kinds``): each owns its
names, checks, cell configuration, memory, cost, run checks and known exponent; a new kind
is a class and an entry in the registry (tested with a toy kind defined here), and no code
outside the registry compares an estimator's name."""

import ast
import pathlib

import numpy as np
import pytest

from simulate.sweep.setup import kinds
from simulate.sweep.setup.config import SweepConfig
from simulate.sweep.setup.truth_spec import TruthSpec
from simulate.sweep.train.jobs import jobs_for

H05 = TruthSpec("holder", p=1, alpha=0.5)
ROOT = pathlib.Path(__file__).resolve().parents[3]


class _Mean(kinds.EstimatorKind):
    """A toy kind: the training mean, everywhere."""

    name = "toy-mean"
    label = "toy"

    def members(self, cfg):
        return ["toy-mean"]

    def owns(self, name):
        return name == "toy-mean"

    def exponent(self, truth, name, metric):
        return 0.0  # a constant never contracts

    def cell_config(self, cfg, n):
        return {"estimator": self.name, "sigma": cfg.sigma, "seed": cfg.seed}

    @staticmethod
    def run(job):
        return [{"cell": c, "prediction": float(np.mean([0.0]))} for c in job.cells()]


@pytest.fixture
def toy(monkeypatch):
    kind = _Mean()
    monkeypatch.setitem(kinds.KINDS, kind.name, kind)
    return kind


def test_a_new_kind_is_a_class_and_a_registry_entry(toy):
    """Registered (and nothing else touched), the toy kind is one a configuration may name,
    and every place that differs by kind asks it: the members a design is powered for, the
    exponent it is tested against, the record's config, the job's memory and cost, and the
    job runner."""
    from simulate.sweep.run.runner import check_memory, run_job
    from verify.protocol import load
    from verify.reading.design import control_family, design_power, predicted

    cfg = SweepConfig(truths=[H05], ns=[64, 128, 256], replicates=2, estimator="toy-mean")
    assert cfg.kind is toy
    assert cfg.cell_config(64, None) == {"estimator": "toy-mean", "sigma": cfg.sigma,
                                         "seed": cfg.seed}  # fmt: skip
    assert "predictions at" in cfg.job_parts()[-1][1]
    check_memory(cfg)
    job = jobs_for(cfg)[0]
    assert job.cost() == 2 * 64**3
    assert run_job(job) == [{"cell": c, "prediction": 0.0} for c in job.cells()]
    assert predicted(H05, "toy-mean", "d2") == 0.0 and control_family("toy-mean") is None
    assert [r.estimator for r in design_power(cfg, load("exploratory-v3"))] == ["toy-mean"]
    assert kinds.kind_of_name("toy-mean") is toy


def test_unregistered_the_toy_kind_is_refused():
    with pytest.raises(ValueError, match="estimator must be one of"):
        SweepConfig(truths=[H05], ns=[64, 128, 256], estimator="toy-mean")


def test_each_kind_knows_its_names_and_exponents():
    assert kinds.kind_of_name("asvi") is kinds.ASVI
    assert kinds.kind_of_name("asvi-constructive") is kinds.ASVI
    assert kinds.kind_of_name("gp-matern-0.5") is kinds.GP
    assert kinds.kind_of_name("knn-matched") is kinds.KNN
    assert kinds.kind_of_name("KNeighborsRegressor") is kinds.REGRESSOR
    assert kinds.ASVI.exponent(H05, "asvi", "d2") is None  # the class band
    assert kinds.GP.exponent(H05, "gp-matern-0.5", "d2") == pytest.approx(-0.5)
    assert kinds.KNN.exponent(H05, "knn-matched", "d2") == pytest.approx(-0.5)
    assert kinds.KNN.exponent(H05, "knn-k3", "d2") == pytest.approx(0.0)
    assert kinds.KNOWN_ANSWER == ("gp", "knn")
    # a setting one kind alone sets is refused beside another, in that kind's words
    with pytest.raises(ValueError, match="knn_ks"):
        SweepConfig(truths=[H05], ns=[64, 128, 256], knn_ks=[3])
    with pytest.raises(ValueError, match="with estimator = 'regressor' alone"):
        SweepConfig(truths=[H05], ns=[64, 128, 256], regressor="a:B")


def _is_estimator(node) -> bool:
    """Whether an expression reads an estimator's name (``estimator``, ``cfg.estimator``,
    ``r.estimator``, ``cfg.get("estimator")``, ``est``)."""
    if isinstance(node, ast.Constant):
        return False
    text = ast.unparse(node)
    return "estimator" in text or text == "est"


def _is_names(node) -> bool:
    """A literal name, a literal collection of names, or a constant's (``ASVI``,
    ``KNOWN_ANSWER``: an upper-case name)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_is_names(e) for e in node.elts)
    return isinstance(node, ast.Name) and node.id.isupper()


def _name_comparisons(path: pathlib.Path) -> list[str]:
    """The comparisons in ``path`` of an estimator's name against a literal (``==
    "gp"``, ``in ("gp", ...)``, ``not in ASVI``, ``.startswith("knn-")``)."""
    hits = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_is_estimator(x) for x in sides) and any(_is_names(x) for x in sides):
                hits.append(f"{path.relative_to(ROOT)}:{node.lineno}")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("startswith", "removeprefix")
                and _is_estimator(node.func.value)):  # fmt: skip
            hits.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return hits


def test_no_code_outside_the_registry_compares_an_estimators_name():
    """Outside ``simulate.sweep.setup.kinds`` (and the records reader's table of the record
    kinds it checks as data, ``validate.OWN_CHECKS``, keyed by a record's own
    ``config.estimator``) no code compares an estimator's name with a literal."""
    hits = []
    for pkg in ("theory", "simulate", "verify", "figures"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if path.name != "kinds.py":
                hits += _name_comparisons(path)
    allowed = {"simulate/sweep/store/validate.py"}
    assert [h for h in hits if h.split(":")[0] not in allowed] == []


def test_the_readers_record_kinds_are_the_registrys():
    """Each kind of the registry whose records are not ASVI's candidates has the reader's
    check of its records (``validate.OWN_CHECKS``, which imports nothing of the registry),
    and the reader checks no kind the registry lacks; the known-answer controls' members
    are read for each known-answer kind."""
    from simulate.sweep.store.control_record import MEMBERS
    from simulate.sweep.store.validate import OWN_CHECKS

    assert set(OWN_CHECKS) == {k for k, kind in kinds.KINDS.items() if not kind.trains_network}
    assert set(MEMBERS) == {k for k, kind in kinds.KINDS.items() if kind.known_answer}
