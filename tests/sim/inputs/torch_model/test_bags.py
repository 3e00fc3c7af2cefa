"""Multi-hot (bag) inputs (tests/fixtures/ctr_models/bags.py): forward gets nn.EmbeddingBag's
(ids, offsets) built from padded ids and lengths, the bag is a table looked up mean_length
times per sample, and bad bag declarations are one line."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from heterps_sim.cli import main
from heterps_sim.inputs.torch_model import section_model_spec
from heterps_sim.inputs.torch_model.bags import forward_args
from heterps_sim.inputs.torch_model.capture import example_tensor, raw_inputs
from heterps_sim.inputs.torch_model.section import TorchModelSection

SCENARIO = Path(__file__).resolve().parents[3] / "fixtures" / "ctr_models" / "bags.yaml"


def section(**changes) -> TorchModelSection:
    doc = yaml.safe_load(SCENARIO.read_text())["model"]
    return TorchModelSection.model_validate({**doc, **changes})


def test_padded_ids_and_lengths_become_ids_and_offsets():
    inputs = raw_inputs(section())
    assert [(r.name, r.shape, r.bag, r.lengths_for) for r in inputs] == [
        ("user", (), False, ""), ("history", (6,), True, ""),
        ("history_lengths", (), False, "history"), ("dense", (3,), False, "")]
    padded = torch.tensor([[5, 6, 0, 0, 0, 0], [7, 0, 0, 0, 0, 0], [1, 2, 3, 4, 5, 6]])
    user, dense = torch.tensor([0, 1, 2]), torch.zeros(3, 3)
    args = forward_args(inputs, [user, padded, torch.tensor([2, 1, 6]), dense])
    assert [a.tolist() for a in args[1:3]] == [[5, 6, 7, 1, 2, 3, 4, 5, 6], [0, 2, 3]]
    assert args[0] is user and args[3] is dense
    lengths = example_tensor(inputs[2], 2000, generator=torch.Generator().manual_seed(0))
    assert lengths.dtype == torch.int64 and set(lengths.tolist()) == set(range(1, 7))


def test_the_bag_is_a_table_looked_up_mean_length_times(capsys):
    spec = section_model_spec(section(), source="s.yaml")
    assert [la.name for la in spec.layers] == ["history", "user", "mlp.0", "mlp.2", "loss"]
    bag = spec.layers[0]
    assert (bag.table_rows, bag.table_dim, bag.lookups_per_sample) == (50, 4, 4)  # 3.5 up
    inputs = [dict(i) for i in yaml.safe_load(SCENARIO.read_text())["model"]["inputs"]]
    inputs[1]["mean_length"] = 2
    short = section_model_spec(section(inputs=inputs), source="s.yaml").layers[0]
    assert short.lookups_per_sample == 2
    assert short.forward_flops < bag.forward_flops  # fewer rows summed


def test_the_bag_model_plans(capsys):
    assert main(["schedule", str(SCENARIO), "--quiet", "--json", "--verify", "none"]) == 0


BAD = [
    ({"name": "history", "shape": [6], "bag": True}, "a bag is an integer input of shape"),
    ({"name": "history", "shape": [2, 3], "dtype": "int64", "cardinality": 5, "bag": True},
     "a bag is an integer input of shape [max_len]"),
    ({"name": "history", "shape": [6], "dtype": "int64", "cardinality": 5, "bag": True,
      "mean_length": 7}, "mean_length 7.0 is above max_len 6"),
    ({"name": "history", "shape": [6], "dtype": "int64", "cardinality": 5, "mean_length": 2},
     "mean_length is for bag inputs"),
    ({"name": "user_lengths", "dtype": "int64", "cardinality": 3},
     "duplicate names ['user_lengths']"),
]


@pytest.mark.parametrize("changed, words", BAD)
def test_bad_bags_are_one_line_exit_2(tmp_path, capsys, changed, words):
    doc = yaml.safe_load(SCENARIO.read_text())
    if changed["name"] == "user_lengths":
        doc["model"]["inputs"][0]["bag"] = True
        doc["model"]["inputs"][0]["shape"] = [2]
        doc["model"]["inputs"].append(changed)
    else:
        doc["model"]["inputs"][1] = changed
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(doc))
    assert main(["problem", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err, err
