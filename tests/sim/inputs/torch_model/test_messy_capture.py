"""Models as people write them (tests/fixtures/ctr_models/messy.py) captured into the layer
chain: unused steps and submodules never change the chain, modules that ignore the meta
device are built on the CPU (and the capture says so), and every one of them plans."""

from __future__ import annotations

import json

import pytest
import torch

from heterps_sim.cli import main
from heterps_sim.inputs.torch_model import capture_section, section_model_spec
from heterps_sim.inputs.torch_model.section import TorchModelSection
from tests.exec.model.test_messy_models import CASES, FIELDS, IDS, scenario

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


@pytest.mark.parametrize("cls, why", [
    ("OldTensorParam", "(field_weight was made on cpu)"),
    ("MovesItself", "(there its factory raised NotImplementedError: Cannot copy out of meta tensor)")])
def test_a_module_ignoring_the_meta_device_is_captured_on_the_cpu(cls, why, capsys,
                                                                  monkeypatch):
    from heterps_sim.inputs.torch_model import notices
    monkeypatch.setattr(notices, "SAID", set())  # said once per process: say it here
    chain = capture_section(section(cls), source="s.yaml")
    assert chain.captured.device == "cpu"
    assert chain.names == ["embedding", "fc", "out", "loss"]
    err = capsys.readouterr().err.strip()
    assert err == (f"s.yaml: model.module: {MESSY}:{cls} ignores the meta device {why}; built "
                   "it on the CPU to capture it (its tables take memory)")
    other = capture_section(section("UnusedLinear"), source="s.yaml")  # well-behaved: on meta
    assert other.captured.device == "meta" and not capsys.readouterr().err


def test_an_unused_submodule_changes_nothing_in_the_chain():
    unused = section_model_spec(section("UnusedLinear"), source="s.yaml")
    plain = section_model_spec(section("MovesItself"), source="s.yaml")  # same layers
    assert [la.name for la in unused.layers] == ["embedding", "fc", "out", "loss"]
    assert [(la.name, la.param_bytes, la.flops) for la in unused.layers] == \
        [(la.name, la.param_bytes, la.flops) for la in plain.layers]


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_messy_model_plans(tmp_path, case, capsys):
    path = scenario(tmp_path, case)
    code = main(["schedule", str(path), "--quiet", "--json", "--verify", "none"])
    out, err = capsys.readouterr()
    assert code == 0, err
    plan = json.loads(out)
    layers = [la for stage in plan["plan"]["stages"] for la in stage["layers"]]
    assert layers[0] == "embedding" and layers[-1] == "loss"


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


def test_a_layer_whose_backward_fails_is_one_line_exit_2(tmp_path, capsys):
    """A custom op with no gradient formula (tests/fixtures/ctr_models/broken.py): the capture
    and the whole-model trial (a forward) pass, the per-layer measurement's backward does not;
    `check` names the model, the layer and the way out in one line."""
    path = scenario(tmp_path, "unused", module="NoGradientOp", kwargs={},
                    inputs=[{"name": "x", "shape": [4]}])
    path.write_text(path.read_text().replace("ctr_models.messy:NoGradientOp",
                                             "ctr_models.broken:NoGradientOp"))
    from heterps_sim.inputs.torch_model.trial import check_runs
    check_runs(TorchModelSection.model_validate({  # the whole model's forward runs
        "module": "tests.fixtures.ctr_models.broken:NoGradientOp",
        "inputs": [{"name": "x", "shape": [4]}]}), source="s.yaml")
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "model.module: layer 'out' of NoGradientOp cannot be trained: its backward fails" \
        in err and "heterps_fixtures.soft_clip" in err and "register_autograd" in err


def test_an_op_with_no_meta_kernel_is_measured_on_the_cpu(tmp_path, capsys):
    """torch.bincount cannot run on the meta device: the measurement says so and measures on
    the CPU, with the same FLOPs as the same chain measured there directly."""
    from heterps_sim.inputs.torch_model.chain import measure
    spec = section_model_spec(section("BatchFrequency"), source="s.yaml")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "calls aten::bincount, which cannot run on the meta " \
        "device; measured on the CPU instead" in err, err
    direct = measure(capture_section(section("BatchFrequency"), source="s.yaml",
                                     device="cpu"))[0]
    assert spec.layers == direct.layers and spec.layers[-1].name == "loss"
    assert spec.layers[0].table_rows == sum(FIELDS)
