"""The model zoo: chain invariants, FLOPs/params checked against torch, published configs."""

from __future__ import annotations

import functools
import itertools

import pytest

from heterps_sim.core.spec import LAYER_KINDS
from heterps_sim.inputs import zoo

ALL = zoo.model_names()


def test_registry_lists_every_model():
    assert set(ALL) >= {"2emb", "ctr-dnn", "matchnet", "nce", "dlrm", "wide-deep", "tiny-ctr",
                        "synthetic"}
    assert len(set(ALL)) == len(ALL)
    assert set(zoo.MODELS) == set(ALL)


@pytest.mark.parametrize("name", ALL)
def test_model_is_a_consistent_chain(name):
    model = zoo.get_model(name)
    layers = model.layers
    assert model.source
    assert len({layer.name for layer in layers}) == len(layers)
    assert all(layer.name.isidentifier() for layer in layers)  # torch module names
    assert layers[0].kind == "input" and layers[0].reads_raw_input
    assert layers[-1].kind == "loss" and layers[-1].output_bytes == 0
    assert not any(layer.reads_raw_input for layer in layers[1:])
    assert layers[0].input_bytes == zoo.model_graph(name).raw_bytes > 0
    for prev, layer in itertools.pairwise(layers):
        assert layer.input_bytes == prev.output_bytes, layer.name
    for layer in layers[:-1]:
        assert layer.output_bytes > 0, layer.name
        assert layer.kind in LAYER_KINDS
    for layer in layers:
        if layer.kind == "embedding":
            assert layer.param_bytes == 0 and layer.table_rows > 0 and layer.table_dim > 0
            assert layer.lookups_per_sample > 0
            assert layer.forward_flops == layer.backward_flops == \
                layer.lookups_per_sample * layer.table_dim
        else:
            assert layer.table_rows == layer.table_dim == layer.lookups_per_sample == 0
        if layer.kind != "dense":
            assert layer.param_bytes == 0


def test_boundary_carries_everything_still_needed():
    """dlrm after emb_k: bottom-MLP output, k+1 embeddings, 25-k ids still to look up, label."""
    layers = {layer.name: layer for layer in zoo.get_model("dlrm").layers}
    for k in range(26):
        assert layers[f"emb_{k}"].output_bytes == 64 * 4 + (k + 1) * 64 * 4 + (25 - k) * 8 + 4
    assert layers["input"].output_bytes == 13 * 4 + 26 * 8 + 4
    assert layers["bot_0"].output_bytes == 512 * 4 + 26 * 8 + 4  # raw dense consumed
    assert layers["interaction"].output_bytes == (27 * 26 // 2 + 64) * 4 + 4


# -- FLOPs and parameters against torch -----------------------------------------------------

@functools.cache
def _torch_linear_counts(n_in: int, n_out: int, count: int, input_grad: bool):
    """(forward FLOPs, backward FLOPs, parameter bytes) per sample, as torch counts them."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    batch = 8
    lin = torch.nn.Linear(n_in, n_out, device="meta")
    x = torch.empty(batch * count, n_in, device="meta", requires_grad=input_grad)
    with FlopCounterMode(display=False) as fwd:
        y = torch.relu(lin(x))
    with FlopCounterMode(display=False) as bwd:
        y.backward(torch.ones_like(y))
    params = sum(p.numel() for p in lin.parameters()) * 4
    return fwd.get_total_flops() / batch, bwd.get_total_flops() / batch, params


def _check_dense_layers_against_torch(graph):
    spec = {layer.name: layer for layer in graph.to_spec().layers}
    linears = [n for n in graph.nodes if n.op == "linear"]
    assert [n.name for n in linears] == [n for n, la in spec.items() if la.kind == "dense"]
    for node in linears:
        a = node.attrs
        fwd, bwd, params = _torch_linear_counts(a["in_features"], a["out_features"], a["count"],
                                                a["input_grad"])
        layer = spec[node.name]
        # Exact: torch counts 2*M*N*K per matmul and ignores bias adds and activations, as we do.
        assert (layer.forward_flops, layer.backward_flops, layer.param_bytes) == \
            (fwd, bwd, params), node.name


@pytest.mark.parametrize("name", ALL)
def test_dense_flops_and_params_match_torch(name):
    _check_dense_layers_against_torch(zoo.model_graph(name))


def test_synthetic_dense_flops_match_torch():
    _check_dense_layers_against_torch(zoo.synthetic_graph(64, seed=7))


def test_raw_input_linear_has_no_input_gradient():
    bot_0 = zoo.model_graph("dlrm").node("bot_0")
    assert bot_0.attrs["input_grad"] is False and bot_0.backward_flops == 2 * 13 * 512
    assert zoo.model_graph("dlrm").node("top_0").backward_flops == 4 * 415 * 512


# -- published configurations ----------------------------------------------------------------

def _dense_shapes(graph, prefix):
    return [(n.attrs["in_features"], n.attrs["out_features"]) for n in graph.nodes
            if n.op == "linear" and n.name.startswith(prefix)]


def test_dlrm_terabyte_matches_the_dlrm_repository():
    graph = zoo.model_graph("dlrm")
    layers = graph.to_spec().layers
    embs = [la for la in layers if la.kind == "embedding"]
    assert [la.table_rows for la in embs] == [
        9980333, 36084, 17217, 7378, 20134, 3, 7112, 1442, 61, 9758201, 1333352, 313829, 10,
        2208, 11156, 122, 4, 970, 14, 9994222, 7267859, 9946608, 415421, 12420, 101, 36]
    assert all(la.table_dim == 64 and la.lookups_per_sample == 1 for la in embs)
    assert sum(la.table_rows for la in embs) == 49_126_297
    assert _dense_shapes(graph, "bot") == [(13, 512), (512, 256), (256, 64)]
    # 27 vectors -> 351 pairwise dots + the 64-wide dense vector = 415 inputs to the top MLP
    assert _dense_shapes(graph, "top") == [(415, 512), (512, 512), (512, 256), (256, 1)]
    inter = graph.node("interaction")
    assert inter.forward_flops == 351 * 2 * 64 and inter.backward_flops == 2 * 351 * 2 * 64
    assert len(layers) == 1 + 3 + 26 + 1 + 4 + 1


def test_dlrm_kaggle_config():
    graph = zoo.model_graph("dlrm", config="kaggle")
    embs = [la for la in graph.to_spec().layers if la.kind == "embedding"]
    assert [la.table_rows for la in embs] == [
        1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194, 27,
        14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572]
    assert sum(la.table_rows for la in embs) == 33_762_577
    assert _dense_shapes(graph, "bot") == [(13, 512), (512, 256), (256, 64), (64, 16)]
    assert _dense_shapes(graph, "top") == [(367, 512), (512, 256), (256, 1)]


def test_dlrm_overrides_and_bad_values():
    graph = zoo.model_graph("dlrm", top_mlp=(512, 256, 1))
    assert _dense_shapes(graph, "top") == [(415, 512), (512, 256), (256, 1)]
    with pytest.raises(ValueError, match="embedding dim"):
        zoo.get_model("dlrm", embedding_dim=32)
    with pytest.raises(ValueError, match="kaggle"):
        zoo.get_model("dlrm", config="nope")


def test_ctr_dnn_matches_paddlerec():
    graph = zoo.model_graph("ctr-dnn")
    emb = graph.to_spec().layers[1]
    assert (emb.kind, emb.table_rows, emb.table_dim, emb.lookups_per_sample) == \
        ("embedding", 1_000_001, 10, 26)
    assert _dense_shapes(graph, "fc") == [(26 * 10 + 13, 400), (400, 400), (400, 400), (400, 2)]
    assert graph.node("loss").attrs["loss"] == "softmax_ce"
    assert graph.raw_bytes == 13 * 4 + 26 * 8 + 8


def test_other_models_shapes():
    wd = zoo.model_graph("wide-deep")
    assert _dense_shapes(wd, "fc") == [(26 * 32 + 13, 1024), (1024, 512), (512, 256), (256, 1)]
    assert wd.node("wide").lookups_per_sample == 26 + 325 and wd.node("wide").table_dim == 1
    mn = zoo.model_graph("matchnet")
    assert mn.node("t_fc_0").attrs["count"] == 2 and mn.node("match").attrs["num_keys"] == 2
    nce = zoo.model_graph("nce")
    assert nce.node("out_emb_w").lookups_per_sample == 6
    assert nce.node("logits").forward_flops == 6 * (2 * 300 + 1)
    tiny = zoo.get_model("tiny-ctr")
    assert sum(la.table_rows for la in tiny.layers) == 8 * 1000
    assert sum(la.param_bytes for la in tiny.layers) == 4 * (77 * 64 + 64 + 64 * 32 + 32 + 33)


# -- synthetic chains ------------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 64, 256])
def test_synthetic_chain_has_the_requested_length(n):
    model = zoo.synthetic_chain(n, seed=0)
    layers = model.layers
    assert len(layers) == n
    assert layers[0].reads_raw_input and layers[-1].output_bytes == 0
    for prev, layer in itertools.pairwise(layers):
        assert layer.input_bytes == prev.output_bytes
    assert all(la.output_bytes > 0 for la in layers[:-1])
    assert sum(la.flops for la in layers) > 0
    if n >= 3:
        assert layers[0].kind == "input" and layers[-1].kind == "loss"
    if n >= 5:
        assert any(la.kind == "embedding" for la in layers)
    if n == 1:
        assert layers[0].kind == "dense"


def test_synthetic_chain_is_deterministic_per_seed():
    assert zoo.synthetic_chain(64, seed=3) == zoo.synthetic_chain(64, seed=3)
    assert zoo.synthetic_chain(64, seed=3) != zoo.synthetic_chain(64, seed=4)
    assert zoo.get_model("synthetic", num_layers=256, seed=1) == zoo.synthetic_chain(256, seed=1)
    kinds = [la.kind for la in zoo.synthetic_chain(64, seed=5, num_embedding_layers=4).layers]
    assert kinds == ["input"] + ["embedding"] * 4 + ["dense"] * 58 + ["loss"]


def test_synthetic_chain_rejects_zero_layers():
    with pytest.raises(ValueError, match=r"1\.\.10,000 layers, got 0"):
        zoo.synthetic_chain(0, seed=0)


# -- registry errors -------------------------------------------------------------------------

def test_unknown_model_names_the_known_ones():
    with pytest.raises(KeyError) as err:
        zoo.get_model("resnet")
    assert "resnet" in str(err.value)
    for name in ALL:
        assert name in str(err.value)


def test_unknown_parameter_is_a_clear_error():
    with pytest.raises(TypeError, match="embedding_dim"):
        zoo.get_model("tiny-ctr", embeding_dim=4)


def test_zoo_imports_no_torch():
    import subprocess
    import sys

    code = "import sys, heterps_sim.inputs.zoo; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
