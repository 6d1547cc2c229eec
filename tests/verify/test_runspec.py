"""``verify.cli.runspec.RunSpec``: one run of the main job as a value, the same whichever door
it came through (the command line's flags, ``verify.check_rate``'s arguments)."""

import dataclasses

import pytest

from simulate.sweep.setup.param_values import ObjectParam, parse_param, values_at
from verify.cli.rates_args import build_parser, parser_defaults, read_command
from verify.cli.runspec import RunSpec, param_text, spec_defaults


def test_its_fields_are_the_commands_options_with_their_defaults():
    """Every option of ``verify.rates`` is a field under its own name with the command's
    default (so one rule about an option reads either door's run); ``--estimator-param``'s
    list is the typed ``estimator_params``, and ``truths`` the ``--truth`` groups."""
    options = {k: v for k, v in parser_defaults().items() if k != "help"}
    fields = spec_defaults()
    assert set(fields) - set(options) == {"truths", "estimator_params"}
    assert set(options) - set(fields) == {"estimator_param"}
    assert {k: fields[k] for k in options if k in fields} == {
        k: v for k, v in options.items() if k in fields
    }
    assert fields["truths"] == () and fields["estimator_params"] is None


def test_the_command_line_is_a_thin_parser_into_it():
    spec = read_command(["--tier", "tiny", "--n", "100", "200", "400", "--no-control",
                         "--estimator", "sklearn.neighbors:KNeighborsRegressor",
                         "--estimator-param", "n_neighbors=3",
                         "--estimator-param", "weights = distance"]).spec  # fmt: skip
    assert spec.n == (100, 200, 400) and spec.no_control and spec.tier == "tiny"
    assert spec.estimator_params == {"n_neighbors": "3", "weights": "distance"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.tier = "full"  # a value: frozen
    twice = ["--estimator-param", "k=3", "--estimator-param", "k=4"]
    for bad, words in ((["--estimator-param", "k3"], "give NAME=VALUE"), (twice, "twice")):
        args = build_parser().parse_args(["--estimator", "a:B", *bad])
        with pytest.raises(ValueError, match=words):
            RunSpec.from_namespace(args)


def test_a_parameters_value_as_the_spec_holds_it():
    assert param_text("k", 3) == "3" and param_text("w", "distance") == "distance"
    assert param_text("h", (50, 50)) == "(50, 50)" and param_text("x", None) == "None"
    inf = param_text("x", float("inf"))  # repr(inf) is no literal: the object
    assert isinstance(inf, ObjectParam) and inf.value == float("inf")
    with pytest.raises(ValueError, match="not a parameter's name"):
        param_text("not a name", 1)


def test_a_bare_word_is_the_string_and_n_p_alpha_stay_names():
    """``kernel=laplacian`` was refused until quoted; a bare word is now the string (the
    names an expression may use keep their meaning)."""
    assert values_at({"kernel": "laplacian"}, frozenset(), 100, 1, 0.5) == {"kernel": "laplacian"}
    assert values_at({"k": "n"}, frozenset(), 100, 1, 0.5) == {"k": 100.0}
    assert values_at({"k": "'n'"}, frozenset(), 100, 1, 0.5) == {"k": "n"}
    with pytest.raises(ValueError, match="unknown name"):  # a word inside an expression
        values_at({"k": "laplacian + 1"}, frozenset(), 100, 1, 0.5)


def test_an_object_is_carried_in_memory_and_named_by_its_repr():
    import pickle

    from sklearn.gaussian_process.kernels import Matern

    obj = ObjectParam(Matern(nu=0.5))
    assert obj == "@object Matern(length_scale=1, nu=0.5)"
    back = pickle.loads(pickle.dumps(obj))  # to a worker, with its object
    assert back == obj and back.value == Matern(nu=0.5)
    assert values_at({"kernel": obj}, frozenset(), 100, 1, 0.5)["kernel"] is obj.value
    text = str(obj)  # what a reader has: the text, a description
    assert parse_param("kernel", text) == ("object", None)
    assert values_at({"kernel": text}, frozenset(), 100, 1, 0.5) == {"kernel": text}
    # a run that would train from the text alone is refused, naming the parameter
    from simulate.sweep.setup.truth_spec import TruthSpec
    from simulate.sweep.train.foreign import check_regressor

    with pytest.raises(ValueError, match="kernel: an object the records name by its repr"):
        check_regressor("sklearn.gaussian_process:GaussianProcessRegressor", {"kernel": text},
                        [TruthSpec("holder", p=1, alpha=0.5)], [100])  # fmt: skip


def test_an_object_whose_repr_names_an_address_is_refused():
    """A repr like ``<Foo object at 0x7f...>`` differs run to run: the records could not name
    the object again (every resume would be another configuration)."""

    class Foo:
        pass

    with pytest.raises(ValueError, match="names a memory address"):
        ObjectParam(Foo())


def test_planning_opens_no_records_file_and_resolving_does(tmp_path):
    """Planning is a function of the spec (``plan.planned_sweep``: no records file opened,
    nothing printed); the one step that opens the files it would write is
    ``plan.resolved``, run before any training: a damaged file at ``--out`` stops the run
    there, naming it."""
    from theory.plumbing.jsonl import RecordsError
    from verify.cli import plan as plan_mod

    out = tmp_path / "r.jsonl"
    out.write_text("not a record\n")
    cmd = read_command(["--tier", "tiny", "--out", str(out)])
    plan = plan_mod.planned_sweep(cmd.spec, cmd.truths, cmd.tier, cmd.overrides, cmd.proto)
    assert plan.runs[0].sweep.out == str(out)  # (on the code before: RecordsError here)
    with pytest.raises(RecordsError, match="r.jsonl"):
        plan_mod.resolved(plan)
