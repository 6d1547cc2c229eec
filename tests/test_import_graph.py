"""The project's import graph (tests/import_graph.py): no new import circles, no new hidden
imports.  The caps are today's counts, to be lowered as circles are cut (issue 76, item 5:
zero circles counting deferred and type-only imports, at most two deferred in-project
imports, each with its reason)."""

from tests import import_graph

# The circles left, counting deferred and type-only imports (python -m tests.import_graph
# prints each with the imports that close it); each is cut only in a file another change owns:
# * simulate.core.trainer <-> until: until imports Trainer for typing, trainer imports
#   until's loop (the training loop's rework, issue 76 item 6);
# * simulate.sweep.schema -> validate -> provenance -> fingerprint -> schema: fingerprint
#   imports SCHEMA from schema; from simulate.sweep.rules (its leaf home) it is no circle;
# * simulate.sweep.config -> foreign -> cells -> config (and cells -> jobs -> config):
#   config's deferred import of foreign.check_regressor_data, a data check that imports
#   nothing foreign runs, whose move to a leaf (with foreign's _SPEC) cuts it.
MAX_CIRCLES = 3
# the modules in those circles, together (a circle split in two counts one more circle)
MAX_MODULES_IN_CIRCLES = 10
# In-project imports made inside a function.  Those left: verify/__init__.py's
# check_rate on first use (`import verify` imports no command), verify/logfactor.py's
# verify.records (the statistics import neither torch nor the sweep), and in files another
# change owns simulate/sweep/provenance.py's fingerprint (the records' reading recomputes a
# configuration: issue 76 item 3), simulate/sweep/config.py's foreign (the circle above),
# verify/check.py's eight and verify/rates_args.py's two.
MAX_DEFERRED = 14


def test_the_graph_reads_every_package():
    names = import_graph.modules()
    for package in import_graph.PACKAGES:
        assert package in names
    edges = import_graph.edges()
    assert {e.kind for e in edges} <= {"top", "deferred", "type"}
    # a known top-level import and a `from package import module` resolved to the module
    pairs = {(e.source, e.target) for e in edges}
    assert ("simulate.sweep.schema", "simulate.sweep.validate") in pairs
    assert ("verify.design", "verify.stated_rate") in pairs


def test_circles_are_found():
    edges = [
        import_graph.Edge("a", "b", "top", "a.py", 1),
        import_graph.Edge("b", "c", "deferred", "b.py", 1),
        import_graph.Edge("c", "a", "type", "c.py", 1),
        import_graph.Edge("c", "d", "top", "c.py", 2),
        import_graph.Edge("d", "e", "top", "d.py", 1),
        import_graph.Edge("e", "d", "top", "e.py", 1),
    ]
    assert import_graph.circles(edges) == [["a", "b", "c"], ["d", "e"]]
    assert import_graph.circles(edges, kinds=("top",)) == [["d", "e"]]
    assert [e.where() for e in import_graph.deferred(edges)] == ["b.py:1"]


def test_no_more_import_circles():
    found = import_graph.circles(import_graph.edges())
    assert len(found) <= MAX_CIRCLES, import_graph.report()
    assert sum(map(len, found)) <= MAX_MODULES_IN_CIRCLES, import_graph.report()


def test_no_more_deferred_imports():
    found = import_graph.deferred(import_graph.edges())
    assert len(found) <= MAX_DEFERRED, import_graph.report()
