"""Settings said once (``simulate.sweep.setup.settings``, ``simulate.sweep.setup.parts``): every
field
of a sweep's configuration is declared with its help, every declared bound is checked,
every declared flag is one a command line parses into its field, the recipes are typed
patches of declared settings, and the fingerprint's one rule, read from the declarations,
recomputes the shipped records' fingerprint fields from the configurations they describe."""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
from dataclasses import MISSING, dataclass, fields

import pytest

import simulate.sweep.store.fingerprint as fp_mod
from simulate.sweep.cli import SWEEP_FLAGS
from simulate.sweep.cli import build_parser as sweep_parser
from simulate.sweep.setup import settings
from simulate.sweep.setup.config import SWEEP_CONSTRAINTS, SweepConfig
from simulate.sweep.setup.flags import FLAG_FIELDS, overrides_from_args
from simulate.sweep.setup.parts import PARTS
from simulate.sweep.setup.recipes import RECIPE_DEFAULTS, RECIPES, Recipe
from simulate.sweep.setup.truth_spec import TruthSpec
from simulate.sweep.store.records import fingerprint
from verify.cli.rates_args import DESIGN_FLAGS
from verify.cli.rates_args import build_parser as rates_parser

H = TruthSpec("holder", p=1, alpha=0.5)
REFERENCE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "figures", "reference")


def test_every_field_of_the_config_is_declared_once_in_one_part():
    declared = settings.declared(SweepConfig)
    assert list(declared) == [f.name for f in fields(SweepConfig)]  # none undeclared
    owners = [f.name for part in PARTS for f in fields(part)]
    assert sorted(owners) == sorted(declared)  # each in exactly one part
    assert all(s.help for _, s in declared.values())
    # a part is a value of its own, read back from a config
    cfg = SweepConfig(truths=[H], ns=[100], stop_tol=0.01)
    assert cfg.part(PARTS[1]).stop_tol == 0.01


@pytest.mark.parametrize("name", sorted(SWEEP_CONSTRAINTS))
def test_every_declared_bound_is_checked_when_a_config_is_made(name):
    """A value no bound accepts (a string where a number, an option or a flag is) is
    refused naming the field."""
    with pytest.raises(ValueError, match=f"^{name} must be"):
        SweepConfig(truths=[H], ns=[100], **{name: "not-a-value"})


def test_the_bounds_cover_every_setting_a_config_check_does_not_own():
    """Settings without a declared bound are those the config checks by its own code
    (lists, the protocol tag, a named regressor with its parameters, checked by
    ``simulate.sweep.train.foreign.check_regressor``, and the k-NN control's members, by
    ``simulate.sweep.setup.config._check_knn``) -- a new number without a bound fails here."""
    unbounded = {k for k, (_, s) in settings.declared(SweepConfig).items() if not s.bounds}
    assert unbounded == {
        "truths", "ns", "widths", "gp_nus", "protocol", "regressor", "regressor_params",
        "knn_ks",
    }  # fmt: skip


def _values(name):
    """A value the flag of ``name`` parses (two where it takes several)."""
    flag = settings.declared(SweepConfig)[name][1].flag
    if flag.boolean:
        return [flag.option(name)], True
    if flag.choices:
        v = flag.choices[-1]
        return [flag.option(name), v], v
    v = {int: [64, 128, 256], float: [0.25]}[flag.type]
    if flag.nargs is None:
        v = v[:1]
    argv = [flag.option(name), *map(str, v)]
    return argv, v if flag.nargs else v[0]


def test_every_declared_flag_is_parsed_by_a_command_line_into_its_field():
    declared = set(FLAG_FIELDS.values())
    rates = set(DESIGN_FLAGS) | {"compile", "mlp"}
    assert set(SWEEP_FLAGS) | rates == declared  # no flag declared and never offered
    for parser, names in ((sweep_parser(), SWEEP_FLAGS), (rates_parser(), sorted(rates))):
        for name in names:
            argv, want = _values(name)
            assert overrides_from_args(parser.parse_args(argv)) == {name: want}, name
        assert overrides_from_args(parser.parse_args([])) == {}  # unset: nothing set


def test_a_declaration_makes_the_flag_the_bound_and_the_fingerprint_rule():
    """The machinery on a toy part: one declaration gives all of them."""
    from simulate.core.constraints import POSITIVE

    @dataclass(frozen=True)
    class Toy:
        kept: int = settings.setting(help="no default")
        rate: float = settings.setting(
            0.5, POSITIVE, help="a rate", flag=settings.Flag(float), fingerprint="later"
        )

    assert settings.constraints_of(Toy) == {"rate": [POSITIVE]}
    assert settings.defaults_of(Toy) == {"rate": 0.5}
    assert settings.declared(Toy)["kept"][0] is MISSING
    ap = argparse.ArgumentParser()
    settings.add_flags(ap, Toy, ["rate"], {"rate": "here: a note"})
    assert "a rate; here: a note" in ap.format_help()
    assert settings.overrides_from_args(ap.parse_args(["--rate", "2"]), Toy) == {"rate": 2.0}
    with pytest.raises(ValueError, match="declares no flag"):
        settings.add_flags(ap, Toy, ["kept"])
    with pytest.raises(ValueError, match="help"):
        settings.setting(1, help="")
    with pytest.raises(ValueError, match="silences"):
        settings.setting(1, help="x", silences=("y",))


def test_recipes_are_typed_patches_of_declared_settings():
    assert all(isinstance(r, Recipe) for r in RECIPES.values())
    assert RECIPES["baseline"].settings() == RECIPE_DEFAULTS
    assert set(RECIPE_DEFAULTS) == {
        k for k, (_, s) in settings.declared(SweepConfig).items() if s.recipe
    }
    # each recipe's patch makes a valid config (its values passed their bounds when made)
    for r in RECIPES.values():
        SweepConfig(truths=[H], ns=[100], **r.settings())
    with pytest.raises(ValueError, match="not 'seed'"):
        Recipe("a seed is not a recipe", {"seed": 3})
    with pytest.raises(ValueError, match="stop_lr_decays must be"):
        Recipe("negative decays", {"stop_lr_decays": -1})
    with pytest.raises(TypeError):
        RECIPES["plateau"].changes["stop_lr_decays"] = 5  # a recipe is not edited in place


def _shipped_sweep_records():
    """(file, first record) of each shipped sweep records file (the ones whose
    fingerprint names the largest n: the real-data and teacher experiments' are not
    sweeps)."""
    out = []
    for path in sorted(glob.glob(os.path.join(REFERENCE, "*.jsonl.gz"))):
        with gzip.open(path, "rt") as fh:
            line = fh.readline()
        rec = json.loads(line)
        if "n_max" in rec.get("fingerprint_fields", {}):
            out.append((os.path.basename(path), rec))
    return out


def _recomputed(rec) -> dict:
    """The configuration fields of ``rec``'s fingerprint recomputed from the configuration
    they describe, by the declared rule (the one every records reader applies:
    ``simulate.sweep.store.validate``)."""
    ff = rec["fingerprint_fields"]
    stored = {k: v for k, v in ff.items() if k not in fp_mod.PROVENANCE_FIELDS}
    t = rec["truth"]
    truth = TruthSpec(**{k: t[k] for k in ("kind", "p", "alpha", "seed") if k in t})
    return stored, fp_mod.configuration_fields(fp_mod.configuration_of(ff, truth))


def test_the_shipped_records_fingerprints_are_recomputed_from_their_configurations():
    shipped = _shipped_sweep_records()
    assert len(shipped) >= 50  # the confirmatory, full, quick, ... tiers' files
    for name, rec in shipped:
        stored, again = _recomputed(rec)
        assert again == stored, name
        assert fingerprint(rec["fingerprint_fields"]) == rec["fingerprint"], name


def test_without_the_later_defaults_rule_the_shipped_fingerprints_would_change(monkeypatch):
    """Negative control: the rule is what keeps the earlier records' fingerprints."""
    monkeypatch.setattr(fp_mod, "_ADDED_LATER", {})
    changed = [
        name for name, rec in _shipped_sweep_records() if _recomputed(rec)[1] != _recomputed(rec)[0]
    ]
    assert len(changed) >= 40
