"""Models written in the scenario YAML, and list-valued zoo parameters.

The oracle: every zoo model spelled out in YAML building blocks is the zoo's graph, node for
node (FLOPs, parameter bytes, tables, tensor flow) and layer for layer after flattening.
"""

import math
import subprocess
import sys

import pytest
import yaml

from heterps_sim.core.files import UserFileError
from heterps_sim.inputs import zoo
from heterps_sim.inputs.model_source import section_graph
from heterps_sim.inputs.scenario import parse_scenario, scenario_problem
from heterps_sim.inputs.zoo_params import ParamError

WORKLOAD = {"batch_size": 256, "throughput_limit": 1000, "num_samples": 1e6}
CLUSTER = {"types": ["t4", "xeon-icelake-16vcpu"]}


def _scenario(model: dict) -> dict:
    return {"name": "t", "model": model, "cluster": CLUSTER, "workload": WORKLOAD}


def _graph(layers_yaml: str, name: str = "mine"):
    scn = parse_scenario(_scenario({"name": name, "layers": yaml.safe_load(layers_yaml)}), "s.yaml")
    return section_graph(scn.model, "s.yaml")


TINY_CTR = """
- {type: input, dense: 13, sparse: {ids_0: 1, ids_1: 1, ids_2: 1, ids_3: 1, ids_4: 1, ids_5: 1,
                                    ids_6: 1, ids_7: 1}}
- {type: embedding, name: emb_0, ids: [ids_0], rows: 1000, dim: 8}
- {type: embedding, name: emb_1, ids: [ids_1], rows: 1000, dim: 8}
- {type: embedding, name: emb_2, ids: [ids_2], rows: 1000, dim: 8}
- {type: embedding, name: emb_3, ids: [ids_3], rows: 1000, dim: 8}
- {type: embedding, name: emb_4, ids: [ids_4], rows: 1000, dim: 8}
- {type: embedding, name: emb_5, ids: [ids_5], rows: 1000, dim: 8}
- {type: embedding, name: emb_6, ids: [ids_6], rows: 1000, dim: 8}
- {type: embedding, name: emb_7, ids: [ids_7], rows: 1000, dim: 8}
- {type: concat, name: concat, from: [emb_0, emb_1, emb_2, emb_3, emb_4, emb_5, emb_6, emb_7, dense]}
- {type: mlp, name: fc, widths: [64, 32, 1], last_activation: none}
- {type: loss}
"""

TWO_EMB = """
- {type: input, sparse: {ids_0: 50, ids_1: 10}}
- {type: embedding, name: emb_0, ids: [ids_0], rows: 10000000, dim: 64}
- {type: embedding, name: emb_1, ids: [ids_1], rows: 1000000, dim: 64}
- {type: concat, name: concat, from: [emb_0, emb_1]}
- {type: mlp, name: fc, widths: [512, 256, 128, 1], last_activation: none}
- {type: loss, loss: bce}
"""

MATCHNET = """
- {type: input, sparse: {q_ids: 79, pt_ids: 99, nt_ids: 90}, label: none}
- {type: embedding, name: emb, ids: [q_ids, pt_ids, nt_ids], rows: 1000001, dim: 128,
   outputs: [q_emb, pt_emb, nt_emb]}
- {type: linear, name: q_fc_0, from: q_emb, width: 128, activation: none}
- {type: linear, name: t_fc_0, from: [pt_emb, nt_emb], width: 128, activation: none, count: 2}
- {type: scores, name: match, query: q_fc_0, keys: t_fc_0, dim: 128, op: cosine}
- {type: loss, loss: hinge}
"""

NCE = """
- {type: input, sparse: {center: 1, context: 1, negatives: 5}, label: none}
- {type: embedding, name: in_emb, ids: [center], rows: 354051, dim: 300}
- {type: embedding, name: out_emb_w, ids: [context, negatives], rows: 354051, dim: 300, pooling: none}
- {type: embedding, name: out_emb_b, ids: [context, negatives], rows: 354051, dim: 1, pooling: none}
- {type: scores, name: logits, query: in_emb, keys: out_emb_w, dim: 300, bias: out_emb_b}
- {type: loss}
"""


def _criteo_input(slots, label="float32"):
    return {"type": "input", "dense": 13, "sparse": dict.fromkeys(slots, 1), "label": label}


def _ctr_dnn_layers():
    slots = [f"C{k}" for k in range(1, 27)]
    return yaml.safe_dump([
        _criteo_input(slots, "int64"),
        {"type": "embedding", "name": "emb", "ids": slots, "rows": 1_000_001, "dim": 10,
         "pooling": "mean"},
        {"type": "concat", "name": "concat", "from": ["emb", "dense"]},
        {"type": "mlp", "name": "fc", "widths": [400, 400, 400]},
        {"type": "linear", "name": "fc_3", "width": 2, "activation": "none"},
        {"type": "loss", "loss": "softmax_ce"}], sort_keys=False)


def _dlrm_layers():
    slots = [f"ids_{k}" for k in range(26)]
    return yaml.safe_dump([
        _criteo_input(slots),
        {"type": "mlp", "name": "bot", "from": "dense", "widths": [512, 256, 64, 16]},
        *({"type": "embedding", "name": f"emb_{k}", "ids": [s], "rows": r, "dim": 16}
          for k, (s, r) in enumerate(zip(slots, zoo.CRITEO_KAGGLE_ROWS))),
        {"type": "dot_interaction", "name": "interaction", "dense": "bot",
         "from": [f"emb_{k}" for k in range(26)]},
        {"type": "mlp", "name": "top", "widths": [512, 256, 1], "last_activation": "none"},
        {"type": "loss"}], sort_keys=False)


def _wide_deep_layers():
    slots = [f"C{k}" for k in range(1, 27)]
    return yaml.safe_dump([
        _criteo_input(slots),
        {"type": "embedding", "name": "wide", "ids": slots, "rows": list(zoo.CRITEO_KAGGLE_ROWS),
         "dim": 1, "merge": "sum", "cross_rows": 10_000_000},
        {"type": "embedding", "name": "deep_emb", "ids": slots,
         "rows": list(zoo.CRITEO_KAGGLE_ROWS), "dim": 32},
        {"type": "concat", "name": "concat", "from": ["deep_emb", "dense"]},
        {"type": "mlp", "name": "fc", "widths": [1024, 512, 256, 1], "last_activation": "none"},
        {"type": "add", "name": "combine", "from": ["fc", "wide"]},
        {"type": "loss"}], sort_keys=False)


SPELLED_OUT = {
    "tiny-ctr": lambda: TINY_CTR, "2emb": lambda: TWO_EMB, "matchnet": lambda: MATCHNET,
    "nce": lambda: NCE, "ctr-dnn": _ctr_dnn_layers, "dlrm": lambda: _dlrm_layers(),
    "wide-deep": _wide_deep_layers,
}


@pytest.mark.parametrize("name", sorted(SPELLED_OUT))
def test_a_zoo_model_spelled_out_in_yaml_is_the_zoo_model(name):
    zoo_graph = zoo.model_graph(name, **({"config": "kaggle"} if name == "dlrm" else {}))
    mine = _graph(SPELLED_OUT[name](), name=f"my-{name}")
    assert mine.raw == zoo_graph.raw
    assert mine.tensor_bytes == zoo_graph.tensor_bytes
    assert mine.tensor_grad == zoo_graph.tensor_grad
    assert mine.nodes == zoo_graph.nodes  # op, consumes, produces, FLOPs, params, attrs
    assert mine.to_spec().layers == zoo_graph.to_spec().layers


def test_the_yaml_model_plans_as_the_zoo_model():
    """Same layers -> the same numeric problem, entry for entry."""
    zoo_pb = scenario_problem(parse_scenario(_scenario({"name": "tiny-ctr"})))
    mine = scenario_problem(parse_scenario(_scenario({"name": "mine",
                                                      "layers": yaml.safe_load(TINY_CTR)})))
    assert mine.layer_names == zoo_pb.layer_names
    for field in ("oct_s", "odt_s", "alpha", "boundary_bytes", "param_bytes", "sparse_bytes"):
        a, b = getattr(mine, field), getattr(zoo_pb, field)
        assert ((a == b) | ((a != a) & (b != b))).all(), field


def test_mlp_name_means_its_last_layer_and_from_defaults_to_previous():
    g = _graph("""
- {type: input, dense: 4}
- {type: mlp, name: tower, from: dense, widths: [8, 3]}
- {type: linear, name: head, from: tower, width: 1, activation: none}
- {type: loss}
""")
    assert [n.name for n in g.nodes] == ["input", "tower_0", "tower_1", "head", "loss"]
    assert g.node("head").consumes == ("tower_1",)
    assert g.node("head").attrs["in_features"] == 3
    assert g.node("tower_1").attrs["activation"] == "relu"
    assert g.node("loss").consumes == ("head", "label")


@pytest.mark.parametrize("layers, message", [
    ("[{type: embedding, name: e, ids: [a], rows: 5, dim: 2}, {type: loss}]",
     "model.layers.0: the first entry must be {type: input"),
    ("[{type: input, dense: 3}, {type: linear, name: l, width: 1}]",
     "the last entry must be {type: loss"),
    ("[{type: input, dense: 3}, {type: linear, name: l, from: nope, width: 1}, {type: loss}]",
     "model.layers.1 (linear 'l'): reads unknown tensor 'nope'"),
    ("[{type: input, dense: 3}, {type: linear, name: l, width: 1}, {type: loss}]",
     "model.layers.1 (linear 'l'): needs `from`"),
    ("[{type: input, dense: 3, sparse: {a: 1}}, {type: embedding, name: e, ids: [a], rows: [5, 6],"
     " dim: 2}, {type: concat, name: c, from: [e, dense]}, {type: loss}]",
     "rows: give one table (shared) or one per slot (1), got 2"),
    ("[{type: input, dense: 4}, {type: linear, name: l, from: dense, width: 2, count: 3},"
     " {type: loss}]", "input width 4 does not split into count=3 slices"),
    ("[{type: input, dense: 4}, {type: loss, from: dense}, {type: loss}]",
     "the loss must be the last entry"),
    ("[{type: input, dense: 4, sparse: {a: 1}}, {type: linear, name: l, from: dense, width: 1},"
     " {type: loss}]", "tensors never read: ['a']"),
    ("[{type: input, dense: 4}, {type: linear, name: l, from: dense, width: 2},"
     " {type: add, name: s, from: [l, dense]}, {type: loss}]", "adds tensors of different widths"),
])
def test_a_broken_layer_list_is_one_line_naming_the_entry(layers, message):
    with pytest.raises(UserFileError) as info:
        _graph(layers)
    text = str(info.value)
    assert message in text and text.startswith("s.yaml: model.layers") and "\n" not in text


@pytest.mark.parametrize("model, message", [
    ({"name": "m", "layers": [{"type": "input", "dense": -1}]}, "model.layers.0.input.dense"),
    ({"name": "m", "layers": [{"type": "conv"}]}, "model.layers.0: Input tag 'conv'"),
    ({"name": "m", "layers": [{"type": "mlp", "name": "x", "widths": [4], "extra": 1}]},
     "model.layers.0.mlp.extra"),
    ({"name": "m", "layers": [{"type": "input", "dense": 4}], "params": {"seed": 1}},
     "give params (a zoo model) or layers (a model in YAML), not both"),
    ({"name": "m", "layers": [{"type": "embedding", "name": "bad name", "ids": ["a"], "rows": 4,
                               "dim": 2}]}, "model.layers.0.embedding.name"),
])
def test_schema_errors_name_the_field(model, message):
    with pytest.raises(UserFileError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_scenario(_scenario(model), "s.yaml")


def test_a_layer_model_may_not_take_a_zoo_name():
    with pytest.raises(UserFileError, match="model.name: 'dlrm' is a zoo model"):
        _graph(TWO_EMB, name="dlrm")


# -- list-valued zoo parameters ------------------------------------------------------------

def test_list_params_reach_the_zoo_builder_as_tuples():
    scn = parse_scenario(_scenario({"name": "2emb", "params": {
        "rows": [2000, 3000], "mlp": [64, 32], "ids_per_sample": [4, 2]}}), "s.yaml")
    assert section_graph(scn.model, "s.yaml").nodes == zoo.model_graph(
        "2emb", rows=(2000, 3000), mlp=(64, 32), ids_per_sample=(4, 2)).nodes
    problem = scenario_problem(scn)
    assert problem.layer_names == ("input", "emb_0", "emb_1", "concat", "fc_0", "fc_1", "fc_2", "loss")


def test_a_whole_float_is_an_int_parameter():
    scn = parse_scenario(_scenario({"name": "tiny-ctr", "params": {"rows": 1.0e+4}}), "s.yaml")
    assert section_graph(scn.model).node("emb_0").attrs["tables"] == (10000,)


@pytest.mark.parametrize("params, message", [
    ({"mlp": "64,32"}, "model.params.mlp: expected a list of ints, got the string '64,32'"),
    ({"rows": [1, 2, 3]}, "model.params.rows: Tuple should have at most 2 items"),
    ({"rows": [10, -5]}, "model.params.rows: must be a finite number >= 0, got -5"),
    ({"rows": [10, math.nan]}, "model.params.rows: must be a finite number >= 0, got nan"),
    ({"embedding_dim": 2.5}, "model.params.embedding_dim: Input should be a valid integer"),
    ({"mlps": [4]}, "model.params.mlps: model '2emb' has no such parameter; it takes rows"),
])
def test_bad_zoo_params_are_one_line(params, message):
    scn = parse_scenario(_scenario({"name": "2emb", "params": params}), "s.yaml")
    with pytest.raises(ParamError) as info:
        scenario_problem(scn, None)
    assert message in str(info.value)


def test_the_string_workaround_no_longer_leaks_a_python_error(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(_scenario({"name": "tiny-ctr", "params": {"mlp": "64, 32"}})))
    proc = subprocess.run([sys.executable, "-m", "heterps_sim.cli", "schedule", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "Traceback" not in proc.stderr
    assert "model.params.mlp: expected a list of ints" in proc.stderr
    assert "unsupported operand" not in proc.stderr
