"""Models as people write them (tests/fixtures/ctr_models/messy.py) captured into the layer
chain: unused steps and submodules never change the chain, modules that ignore the meta
device are built on the CPU (and the capture says so), and every one of them plans."""

from __future__ import annotations

import pytest
import torch

from heterps_sim.inputs.torch_model import capture_section
from heterps_sim.inputs.torch_model.section import TorchModelSection
from tests.exec.model.test_messy_models import FIELDS, IDS

MESSY = "tests.fixtures.ctr_models.messy"


def section(cls: str, **changes) -> TorchModelSection:
    return TorchModelSection.model_validate({
        "module": f"{MESSY}:{cls}", "kwargs": {"field_dims": FIELDS, "embed_dim": 4},
        "inputs": [IDS], **changes})


@pytest.mark.parametrize("layers, names", [
    ("leaf", ["embedding", "proj", "fc", "out", "loss"]),
    (["attn"], ["embedding", "proj", "attn", "fc", "out", "loss"])])
def test_attention_weights_thrown_away_are_in_no_layer(layers, names):
    chain = capture_section(section("AttentionDropsWeights", layers=layers), source="s.yaml")
    assert chain.names == names
    placed = {n for nodes in chain.nodes for n in nodes}
    graph = chain.captured.graph_module.graph
    weights = [n for n in graph.nodes if n.target is torch.ops.aten.mean.dim]
    assert len(weights) == 1 and not weights[0].users  # the averaged weights, unread
    assert weights[0] not in placed and weights[0].args[0] not in placed
    # the softmax feeds the attention output: it stays, after the projection it reads
    softmax = next(n for n in graph.nodes if n.target is torch.ops.aten.softmax.int)
    assert softmax in placed and softmax not in chain.nodes[0]


def test_a_layer_failing_when_measured_alone_is_one_line(monkeypatch):
    """Whatever breaks while one layer runs alone on the example batch (here: made to break)
    is a CaptureError naming the layer, not a traceback."""
    from heterps_sim.inputs.torch_model import chain as chain_mod
    from heterps_sim.inputs.torch_model.capture import CaptureError

    def broken(seg, inputs, batch):
        raise RuntimeError("a view of a leaf Variable that requires grad is being used\nin place")

    monkeypatch.setattr(chain_mod, "_run_layer", broken)
    chain = capture_section(section("UnusedLinear"), source="s.yaml")
    with pytest.raises(CaptureError) as err:
        chain_mod.measure(chain)
    message = str(err.value)
    assert message.startswith("s.yaml: model.module: layer 'embedding' of UnusedLinear fails")
    assert "RuntimeError: a view of a leaf Variable" in message and "\n" not in message
