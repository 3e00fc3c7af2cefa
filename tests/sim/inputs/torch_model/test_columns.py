"""A model built from feature columns (tests/fixtures/ctr_models/columns.py): the factory gets
the scenario's columns as objects at their offsets in one float input whose first columns
are ids; the input is derived from the columns; bad columns, id columns and extra losses are
one line (exit 2)."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest
import torch
import yaml

from heterps_sim.cli import main
from heterps_sim.inputs.load import load_input
from heterps_sim.inputs.torch_model import section_model_spec
from heterps_sim.inputs.torch_model.capture import (
    CaptureError,
    build_module,
    example_tensor,
    raw_inputs,
)
from heterps_sim.inputs.torch_model.columns import FeatureColumn, feature_columns
from heterps_sim.inputs.torch_model.section import TorchModelSection
from tests.fixtures.ctr_models.columns import DenseFeat, SparseFeat

SCENARIO = Path(__file__).resolve().parents[3] / "fixtures" / "ctr_models" / "columns.yaml"


def section(**changes) -> TorchModelSection:
    doc = yaml.safe_load(SCENARIO.read_text())["model"]
    return TorchModelSection.model_validate({**doc, **changes})


def test_the_input_is_derived_from_the_columns_ids_first():
    s = section()
    assert [i.model_dump(exclude_defaults=True) for i in s.inputs] == [
        {"name": "features", "shape": [6], "id_columns": [40, 25]}]
    assert feature_columns(s) == [
        FeatureColumn(name="user", kind="sparse", cardinality=40, embed_dim=4, offset=0,
                      input="features"),
        FeatureColumn(name="item", kind="sparse", cardinality=25, embed_dim=4, offset=1,
                      input="features"),
        FeatureColumn(name="price", kind="dense", offset=2, input="features"),
        FeatureColumn(name="history", kind="dense", width=3, offset=3, input="features")]
    again = TorchModelSection.model_validate(s.model_dump())  # a run spec re-reads its dump
    assert again.inputs == s.inputs


def test_the_factory_gets_the_librarys_own_column_objects():
    module = build_module(section(), source="s.yaml")
    assert module.sparse == [SparseFeat("user", 40, 4), SparseFeat("item", 25, 4)]
    assert module.dense == [DenseFeat("price", 1), DenseFeat("history", 3)]
    assert module.index == {"user": (0, 1), "item": (1, 2), "price": (2, 3), "history": (3, 6)}


def test_without_a_column_factory_the_factory_gets_feature_columns():
    seen = []

    def factory(columns):
        seen.extend(columns)
        return torch.nn.Linear(6, 1)
    mod = types.ModuleType("columns_probe")
    mod.factory = factory
    sys.modules["columns_probe"] = mod
    try:
        build_module(section(module="columns_probe:factory", column_factory=None, kwargs={},
                             extra_loss=None), source="s.yaml")
    finally:
        del sys.modules["columns_probe"]
    assert [(c.name, c.span) for c in seen] == [("user", slice(0, 1)), ("item", slice(1, 2)),
                                               ("price", slice(2, 3)), ("history", slice(3, 6))]


def test_example_batches_hold_whole_ids_below_each_columns_cardinality():
    (spec,) = raw_inputs(section())
    x = example_tensor(spec, 4000, generator=torch.Generator().manual_seed(0))
    ids = x[:, :2]
    assert torch.equal(ids, ids.floor()) and ids.min() >= 0
    assert ids[:, 0].max() == 39 and ids[:, 1].max() == 24
    assert x[:, 2:].std() > 0.5  # the dense columns stay standard normal


def test_the_model_plans_with_its_columns_as_layers(capsys):
    code = main(["schedule", str(SCENARIO), "--quiet", "--json", "--verify", "none"])
    out, err = capsys.readouterr()
    assert code == 0, err
    layers = [la for st in json.loads(out)["plan"]["stages"] for la in st["layers"]]
    assert layers == ["embeddings.user", "embeddings.item", "wide", "deep.0", "deep.2", "loss"]


BAD_SECTIONS = [
    ({"columns": [{"name": "a", "kind": "sparse"}]}, "a sparse column needs a cardinality"),
    ({"columns": [{"name": "a", "kind": "dense"}, {"name": "b", "kind": "sparse",
                                                   "cardinality": 3}]},
     "list the sparse columns first"),
    ({"columns": [{"name": "a", "kind": "dense", "embed_dim": 3}]},
     "cardinality and embed_dim are for sparse columns"),
    ({"columns": [{"name": "a", "kind": "dense"}, {"name": "a", "kind": "dense"}]},
     "duplicate names ['a']"),
    ({"kwargs": {"columns": []}}, "'columns' is the argument that receives the columns"),
    ({"inputs": [{"name": "x", "shape": [5], "id_columns": [40, 25]}]},
     "give one float input of shape [6] with id_columns [40, 25]"),
    ({"columns": [], "inputs": [{"name": "x", "shape": [3], "dtype": "int64", "cardinality": 4,
                                 "id_columns": [4]}]}, "id_columns are for float inputs"),
    ({"columns": [], "inputs": [{"name": "x", "shape": [3], "id_columns": [4, 4, 4, 4]}]},
     "needs a shape [width] with width >= 4"),
    ({"columns": [], "inputs": [{"name": "x", "shape": [3], "id_columns": [1 << 25]}]},
     "outside [1, 16777216]"),
    ({"columns": [], "inputs": [{"name": "x", "shape": [3], "dtype": "float16",
                                 "id_columns": [5000]}]}, "not whole numbers in float16"),
    ({"columns": [], "inputs": [{"name": "x", "shape": [3], "cardinality": 4}]},
     "a float tensor holding ids declares id_columns"),
    ({"extra_loss": "l2"}, "expected 'package.module:function', got 'l2'"),
    ({"columns": [], "inputs": [{"name": "x", "shape": [3]}]}, "column_factory: there are no "
     "columns"),
]


@pytest.mark.parametrize("changes, words", BAD_SECTIONS)
def test_bad_columns_are_one_line_exit_2(tmp_path, capsys, changes, words):
    doc = yaml.safe_load(SCENARIO.read_text())
    doc["model"].update(changes)
    if "inputs" in changes and not changes.get("columns", True):
        doc["model"].pop("columns")
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(doc))
    assert main(["problem", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{bad}: model" in err and words in err, err


@pytest.mark.parametrize("hook, words", [
    ("tests.fixtures.ctr_models.broken:per_sample_loss", "raised TypeError"),
    ("tests.fixtures.ctr_models.columns:per_row_penalty", "must return a scalar tensor, got (40,)"),
    ("tests.fixtures.ctr_models.columns:constant_penalty", "does not depend on the module's "
     "parameters"),
    ("tests.fixtures.ctr_models.columns:nope", "has no 'nope'"),
])
def test_bad_extra_losses_are_one_line(hook, words):
    with pytest.raises(CaptureError) as err:
        section_model_spec(section(extra_loss=hook), source="s.yaml")
    message = str(err.value)
    assert message.startswith("s.yaml: model.extra_loss: ") and words in message, message
    assert "\n" not in message


def test_a_failing_column_factory_is_one_line():
    with pytest.raises(CaptureError) as err:
        build_module(section(column_factory="tests.fixtures.ctr_models.columns:WideDeep"),
                     source="s.yaml")
    assert str(err.value).startswith("s.yaml: model.column_factory: ")
    assert "raised TypeError" in str(err.value)


def test_a_scenario_loads_through_the_cli_loader():
    assert load_input(SCENARIO).problem.layer_names[0] == "embeddings.user"
