"""A user's PyTorch model as the planner's layer chain: public-CTR-style DeepFM and DCN
(tests/fixtures/ctr_models) captured with torch.export, checked against hand counts and
against FlopCounterMode over the whole eager model; bad input is one line."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from heterps_sim.inputs.load import load_input
from heterps_sim.inputs.torch_model import model_spec, section_model_spec
from heterps_sim.inputs.torch_model.capture import CaptureError
from heterps_sim.inputs.torch_model.section import TorchModelSection
from tests.fixtures.ctr_models.dcn import DeepCrossNetworkModel
from tests.fixtures.ctr_models.deepfm import DeepFactorizationMachineModel

ROOT = Path(__file__).resolve().parents[4]
FIELDS = [10, 20, 30]
DEEPFM = {"module": "tests.fixtures.ctr_models.deepfm:DeepFactorizationMachineModel",
          "kwargs": {"field_dims": FIELDS, "embed_dim": 4, "mlp_dims": [16, 8], "dropout": 0.0},
          "inputs": [{"name": "ids", "shape": [3], "dtype": "int64", "cardinality": FIELDS}]}


def spec_of(**changes):
    return section_model_spec(TorchModelSection.model_validate({**DEEPFM, **changes}),
                              source="s.yaml")


def test_deepfm_chain_by_hand():
    spec = spec_of()
    names = [la.name for la in spec.layers]
    # each Linear with the BatchNorm, ReLU and Dropout after it; the wrappers' own names
    assert names == ["embedding", "linear", "fm", "mlp.mlp.0", "mlp.mlp.4", "mlp.mlp.8", "loss"]
    by = {la.name: la for la in spec.layers}
    emb = by["embedding"]
    assert (emb.kind, emb.table_rows, emb.table_dim, emb.lookups_per_sample) == ("embedding", 60, 4, 3)
    assert emb.param_bytes == 0 and emb.reads_raw_input
    # live after the shared embedding: its output [3, 4] floats (with gradient), the raw ids
    # (the linear term still reads them) and the label
    assert emb.input_bytes == 3 * 8 + 4
    assert emb.output_bytes == 12 * 4 + 3 * 8 + 4 and emb.output_grad_bytes == 12 * 4
    fc0 = by["mlp.mlp.0"]  # Linear(12, 16) on a tensor with a gradient, then BatchNorm1d(16)
    assert (fc0.forward_flops, fc0.backward_flops) == (2 * 12 * 16, 4 * 12 * 16)
    assert fc0.param_bytes == (12 * 16 + 16) * 4 + 2 * 16 * 4  # BatchNorm weight + bias, no buffers
    # after the first block: its 16 outputs, the linear term's 3 rows (summed where the
    # logits add up, in `loss`) and the FM term, all with gradient; the label
    assert (fc0.output_bytes, fc0.output_grad_bytes) == ((16 + 3 + 1 + 1) * 4, (16 + 3 + 1) * 4)
    assert by["fm"].kind == "interaction" and by["fm"].param_bytes == 0
    assert by["linear"].table_dim == 1 and by["linear"].table_rows == 60
    for a, b in zip(spec.layers, spec.layers[1:]):
        assert b.input_bytes == a.output_bytes
    assert spec.layers[-1].output_bytes == 0


@pytest.mark.parametrize("which", ["deepfm", "dcn"])
def test_layer_flops_add_up_to_the_whole_model(which):
    """Per-layer forward and backward FLOPs (table lookups aside) sum to what FlopCounterMode
    counts on the eager module, forward and backward."""
    torch.manual_seed(0)
    if which == "deepfm":
        model = DeepFactorizationMachineModel(FIELDS, 4, (16, 8), 0.0)
        args = (torch.randint(0, 10, (8, 3)),)
    else:
        model = DeepCrossNetworkModel(FIELDS, 5, 4, 2, (16, 8), 0.0)
        args = (torch.randint(0, 10, (8, 3)), torch.randn(8, 5))
    spec = model_spec(model, args, "bce")
    with FlopCounterMode(display=False) as fwd:
        out = model(*args)
    loss = torch.nn.functional.binary_cross_entropy_with_logits(out, torch.rand(8), reduction="sum")
    with FlopCounterMode(display=False) as bwd:
        loss.backward()
    lookups = sum(la.lookups_per_sample * la.table_dim for la in spec.layers)  # one dim each
    assert sum(la.forward_flops for la in spec.layers) - lookups == fwd.get_total_flops() / 8
    assert sum(la.backward_flops for la in spec.layers) - lookups == bwd.get_total_flops() / 8


def test_dcn_cross_layers_and_coarser_layers():
    section = {"module": "tests.fixtures.ctr_models.dcn:DeepCrossNetworkModel",
               "kwargs": {"field_dims": FIELDS, "num_dense": 5, "embed_dim": 4, "num_layers": 2,
                          "mlp_dims": [16, 8], "dropout": 0.0},
               "inputs": [{"name": "sparse", "shape": [3], "dtype": "int64", "cardinality": 30},
                          {"name": "dense", "shape": [5]}]}
    fine = section_model_spec(TorchModelSection.model_validate(section), source="s.yaml")
    coarse = section_model_spec(TorchModelSection.model_validate({**section, "layers": ["cn"]}),
                                source="s.yaml")
    names = [la.name for la in fine.layers]
    assert names[:3] == ["embedding", "cn.w.0", "cn.w.1"]
    assert [la.name for la in coarse.layers][:2] == ["embedding", "cn"]
    cn = next(la for la in coarse.layers if la.name == "cn")
    parts = [la for la in fine.layers if la.name.startswith("cn.")]
    # the cross bias b[1] is read by the concat after the cross network: with "cn" as one
    # layer it joins it; the FLOPs of the two cross layers are the same either way
    assert cn.forward_flops == sum(la.forward_flops for la in parts)
    assert cn.param_bytes == 2 * 17 * 4 + 2 * 17 * 4  # w0, w1, b0, b1 (input width 17)
    # after w0: x0 (17 floats, also x) and x0.w0; after w1: x0, x1 and x1.w1 (+ the label)
    assert (parts[0].output_grad_bytes, parts[0].output_bytes) == ((17 + 1) * 4, (17 + 1 + 1) * 4)
    assert (parts[1].output_grad_bytes, parts[1].output_bytes) == ((17 + 17 + 1) * 4, 36 * 4)


def test_split_points_merge_runs_of_layers():
    spec = spec_of(split_points=["mlp.mlp.4"])
    fine = {la.name: la for la in spec_of().layers}
    assert [la.name for la in spec.layers] == ["embedding", "mlp.mlp.4", "loss"]
    assert sum(la.flops for la in spec.layers) == sum(la.flops for la in fine.values())
    assert spec.layers[0].output_bytes == fine["mlp.mlp.0"].output_bytes


def test_python_api_equals_the_scenario_path():
    torch.manual_seed(0)
    model = DeepFactorizationMachineModel(FIELDS, 4, (16, 8), 0.0)
    spec = model_spec(model, (torch.randint(0, 10, (8, 3)),), "bce", input_names=["ids"])
    assert spec.layers == spec_of().layers


@pytest.mark.parametrize("changes, field, words", [
    ({"module": "no_such_pkg.mod:Model"}, "model.module", "cannot import module 'no_such_pkg.mod'"),
    ({"module": "tests.fixtures.ctr_models.deepfm:Nope"}, "model.module", "has no 'Nope'"),
    ({"module": "tests.fixtures.ctr_models.broken:raises"}, "model.kwargs", "the factory broke"),
    ({"inputs": [{"name": "ids", "shape": [4], "dtype": "int64", "cardinality": 5}]},
     "model.inputs", "rejects inputs ids[B, 4]"),
    ({"loss": "tests.fixtures.ctr_models.broken:per_sample_loss"}, "model.loss",
     "must return a scalar tensor, got (4,)"),
    ({"layers": ["mlp.nope"]}, "model.layers", "'mlp.nope' is not a submodule"),
    ({"module": "tests.fixtures.ctr_models.broken:BranchOnValues", "kwargs": {},
      "inputs": [{"name": "x", "shape": [4]}]}, "model.module",
     "cannot capture BranchOnValues in module (root) (BranchOnValues.forward"),
])
def test_bad_models_are_one_line(changes, field, words):
    with pytest.raises(CaptureError) as err:
        spec_of(**changes)
    message = str(err.value)
    assert message.startswith(f"s.yaml: {field}: ") and words in message
    assert "\n" not in message


def test_cli_bad_model_exits_2_with_one_line(tmp_path):
    text = (ROOT / "tests/fixtures/ctr_models/deepfm.yaml").read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("loss: bce", "loss: tests.fixtures.ctr_models.broken:per_sample_loss"))
    out = subprocess.run([sys.executable, "-m", "heterps_sim.cli", "problem", str(bad)],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "model.loss" in out.stderr


def test_scenario_with_a_user_model_plans(tmp_path):
    loaded = load_input(ROOT / "tests/fixtures/ctr_models/deepfm.yaml")
    assert loaded.problem.layer_names[0] == "embedding"
    assert loaded.problem.layer_names[-1] == "loss"


def test_zoo_scenarios_never_import_torch():
    code = ("import sys; from heterps_sim.inputs.load import load_input; "
            "load_input('scenarios/exec-tiny.yaml'); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"
