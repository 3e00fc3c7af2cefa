"""Layers grouped as a person draws them (inputs/torch_model/groups.py): which leaves fuse into
the layer they follow, what each layer is called, and that a grouped layer costs exactly the
sum of the leaf layers it holds (against `layers: leaf` on the same model)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from heterps_sim.inputs.torch_model import capture_section
from heterps_sim.inputs.torch_model.capture import CaptureError, RawInput, capture
from heterps_sim.inputs.torch_model.chain import measure
from heterps_sim.inputs.torch_model.layers import build_chain
from heterps_sim.inputs.torch_model.losses import BUILTIN
from heterps_sim.inputs.torch_model.section import TorchModelSection
from tests.exec.model.test_messy_models import FIELDS


class Swish(nn.Module):
    """A user's own activation: no parameters, elementwise steps only (fuses)."""

    def forward(self, x):
        return x * torch.sigmoid(x)


class Pairs(nn.Module):
    """No parameters but a reduction: an interaction block, a layer of its own."""

    def forward(self, x):
        return (x.unsqueeze(2) * x.unsqueeze(1)).sum(dim=(1, 2)).unsqueeze(1)


class Tower(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.act = Swish()

    def forward(self, x):
        return self.act(self.fc(x))


class Net(nn.Module):
    """A BatchNorm on the raw input (before any layer), an MLP of Linear + BatchNorm + ReLU +
    Dropout and Linear + GELU + LayerNorm, a wrapped Linear + Swish, an interaction block."""

    def __init__(self):
        super().__init__()
        self.norm = nn.BatchNorm1d(4)
        self.mlp = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.5),
                                 nn.Linear(8, 8), nn.GELU(), nn.LayerNorm(8))
        self.tower = Tower()
        self.pairs = Pairs()
        self.out = nn.Linear(9, 1)

    def forward(self, x):
        h = self.tower(self.mlp(self.norm(x)))
        return self.out(torch.cat([h, self.pairs(h)], dim=1)).squeeze(1)


class SharedAct(nn.Module):
    """One ReLU module called after two Linears."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.out = nn.Linear(4, 8), nn.Linear(8, 8), nn.Linear(8, 1)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.out(self.act(self.fc2(self.act(self.fc1(x))))).squeeze(1)


def chain_of(model: nn.Module, layers="grouped", split_points=()):
    torch.manual_seed(0)
    captured = capture(model, [RawInput("x", (4,), torch.float32)], BUILTIN["bce"], "bce",
                       name=type(model).__name__, source="t.yaml")
    return build_chain(captured, layers, list(split_points))


def test_activations_norms_and_dropout_fuse_into_the_layer_they_follow():
    chain = chain_of(Net())
    assert chain.names == ["mlp.0", "mlp.4", "tower", "pairs", "out", "loss"]
    # the BatchNorm on the raw input reads no layer: it joins the first layer reading it
    assert chain.units == [("mlp.0", "norm", "mlp.1", "mlp.2", "mlp.3"),
                           ("mlp.4", "mlp.5", "mlp.6"), ("tower.fc", "tower.act"),
                           ("pairs",), ("out",), ("loss",)]
    leaf = chain_of(Net(), layers="leaf")
    assert leaf.names == ["norm", "mlp.0", "mlp.1", "mlp.2", "mlp.3", "mlp.4", "mlp.5",
                          "mlp.6", "tower.fc", "tower.act", "pairs", "out", "loss"]


def test_names_are_the_module_paths_unique_and_the_same_each_capture():
    """`tower` (a Linear and its Swish) takes the wrapper's name; `mlp.0` not `mlp`, whose
    other leaves are in other layers."""
    names = [chain_of(Net()).names for _ in range(2)]
    assert names[0] == names[1] and len(set(names[0])) == len(names[0])
    assert "tower" in names[0] and "mlp" not in names[0]


def test_a_shared_activation_joins_each_layer_it_follows():
    chain = chain_of(SharedAct())
    assert chain.names == ["fc1", "fc2", "out", "loss"]
    assert chain.units[:2] == [("fc1", "act"), ("fc2", "act")]
    relus = [n for n in chain.captured.graph_module.graph.nodes
             if n.target is torch.ops.aten.relu.default]
    assert [next(i for i, ns in enumerate(chain.nodes) if r in ns) for r in relus] == [0, 1]
    with pytest.raises(CaptureError, match="'act' reads .* made by layer 'fc2'"):
        chain_of(SharedAct(), layers="leaf")  # one layer per leaf: act cannot sit anywhere


def test_explicit_layers_and_split_points_still_decide():
    assert chain_of(Net(), layers=["mlp"]).names == ["mlp", "tower", "pairs", "out", "loss"]
    assert chain_of(Net(), layers=["mlp.1"]).names[:3] == ["mlp.0", "mlp.1", "mlp.4"]
    assert chain_of(Net(), split_points=["tower"]).names == ["mlp.0", "tower", "loss"]
    with pytest.raises(CaptureError) as err:
        chain_of(Net(), split_points=["mlp.2"])
    assert str(err.value).startswith("t.yaml: model.split_points: 'mlp.2' is fused into "
                                     "layer 'mlp.0'")


def assert_sums_of_leaves(grouped, leaf) -> None:
    """Each grouped layer's FLOPs, parameters and tables are the sums of its leaf layers';
    the bytes after it are those after its last leaf."""
    spec, fine = measure(grouped)[0], measure(leaf)[0]
    at = {la.name: k for k, la in enumerate(fine.layers)}
    assert sorted(u for us in grouped.units for u in us) == sorted(at)
    for layer, units in zip(spec.layers, grouped.units, strict=True):
        parts = [fine.layers[at[u]] for u in sorted(units, key=at.__getitem__)]
        for field in ("forward_flops", "backward_flops", "param_bytes", "table_rows",
                      "lookups_per_sample"):
            assert getattr(layer, field) == sum(getattr(p, field) for p in parts), (layer.name, field)
        assert layer.output_bytes == parts[-1].output_bytes, layer.name
        assert layer.output_grad_bytes == parts[-1].output_grad_bytes, layer.name
        assert [at[u] for u in sorted(units, key=at.__getitem__)] == \
            list(range(at[min(units, key=at.__getitem__)], at[max(units, key=at.__getitem__)] + 1))


def test_a_grouped_layer_costs_the_sum_of_its_leaves():
    assert_sums_of_leaves(chain_of(Net()), chain_of(Net(), layers="leaf"))


def test_the_20_layer_fixture_costs_the_sum_of_its_57_leaves():
    section = TorchModelSection.model_validate({
        "module": "tests.fixtures.ctr_models.deep20:DeepCrossFM",
        "kwargs": {"field_dims": FIELDS, "num_dense": 5, "embed_dim": 4, "cross_layers": 4,
                   "mlp_dims": [16] * 12, "dropout": 0.1},
        "inputs": [{"name": "sparse", "shape": [3], "dtype": "int64", "cardinality": FIELDS},
                   {"name": "dense", "shape": [5]}]})
    grouped = capture_section(section, source="s.yaml")
    leaf = capture_section(section.model_copy(update={"layers": "leaf"}), source="s.yaml")
    assert (len(grouped.names), len(leaf.names)) == (20, 57)
    assert grouped.names[:6] == ["embedding", "cn.w.0", "cn.w.1", "cn.w.2", "cn.w.3", "mlp.0"]
    assert grouped.names[-3:] == ["head", "fm", "loss"]
    assert_sums_of_leaves(grouped, leaf)
