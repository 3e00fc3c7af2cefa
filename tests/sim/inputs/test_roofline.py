"""Roofline profile against hand computations; measured traces override entries."""

import math

import numpy as np
import pytest

from heterps_sim.core.spec import Cluster, Layer, ModelSpec, ProfileOptions, ResourceType, Workload
from heterps_sim.inputs.roofline import (
    DEFAULT_EFFICIENCY,
    TraceError,
    build_problem,
    compute_s,
    load_trace,
    transfer_s,
)

GPU = ResourceType(name="g", kind="gpu", peak_flops_fp32=10e12, peak_flops_fp16=40e12,
                   memory_bytes=16e9, memory_bandwidth_bytes_per_s=500e9,
                   host_link_bytes_per_s=16e9, network_bytes_per_s=2e9, price_per_hour=1.0)
CPU = ResourceType(name="c", kind="cpu", peak_flops_fp32=1e12, peak_flops_fp16=1e12,
                   memory_bytes=64e9, memory_bandwidth_bytes_per_s=100e9,
                   host_link_bytes_per_s=None, network_bytes_per_s=3e9, price_per_hour=0.5)
FC = Layer(name="fc", kind="dense", forward_flops=2e6, backward_flops=4e6, param_bytes=4e6,
           input_bytes=4000, output_bytes=2000)
EMB = Layer(name="emb", kind="embedding", forward_flops=640, backward_flops=640, table_rows=10**6,
            table_dim=64, lookups_per_sample=10, input_bytes=80, output_bytes=2560)


def test_dense_layer_is_compute_bound_on_gpu():
    B = 1000
    expected = B * 6e6 / (10e12 * DEFAULT_EFFICIENCY["dense/gpu"])
    memory = (6 * 4e6 + 3 * B * 6000) / (500e9 * DEFAULT_EFFICIENCY["memory/gpu"])
    assert expected > memory
    assert compute_s(FC, GPU, B, ProfileOptions()) == pytest.approx(expected, rel=1e-12)
    fp16 = compute_s(FC, GPU, B, ProfileOptions(use_fp16=True))
    assert fp16 == pytest.approx(max(expected / 4, memory), rel=1e-12)


def test_embedding_is_memory_and_network_bound():
    B = 1000
    rows = 10 * 64 * 4
    memory = (3 * B * (80 + 2560) + 3 * B * rows) / (100e9 * DEFAULT_EFFICIENCY["memory/cpu"])
    assert compute_s(EMB, CPU, B, ProfileOptions()) == pytest.approx(memory, rel=1e-12)
    # pull + push of rows over the network (CPU) or min(network, host link) (GPU)
    assert transfer_s(EMB, CPU, B) == pytest.approx(2 * B * rows / 3e9)
    assert transfer_s(EMB, GPU, B) == pytest.approx(2 * B * rows / 2e9)


def _problem(layers, types, batch=1000, traces=()):
    model = ModelSpec(name="m", layers=tuple(layers))
    return build_problem(model, Cluster(types=tuple(types)),
                         Workload(batch_size=batch, throughput_limit=1.0, num_samples=1e6),
                         traces=traces)


def test_state_that_does_not_fit_is_null_and_boundaries_carry_both_directions():
    huge = Layer(name="huge", kind="dense", forward_flops=1, backward_flops=2, param_bytes=5e9,
                 input_bytes=8, output_bytes=8)
    p = _problem([FC, huge], [GPU, CPU])
    assert math.isnan(p.oct_s[1, 0]) and not math.isnan(p.oct_s[1, 1])  # 4 x 5 GB > 0.9 x 16 GB
    assert p.boundary_bytes.tolist() == [2 * 1000 * 2000, 0.0]
    assert p.type_kinds == ("gpu", "cpu")


def test_measured_trace_overrides_and_scales_with_batch(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("model,layer,resource,batch_size,oct_s,odt_s\nm,fc,g,500,0.010,\nother,fc,g,500,9,9\n")
    p = _problem([FC], [GPU, CPU], traces=load_trace(f))
    assert p.oct_s[0, 0] == pytest.approx(0.020)
    assert p.odt_s[0, 0] == transfer_s(FC, GPU, 1000)
    assert p.oct_s[0, 1] == compute_s(FC, CPU, 1000, ProfileOptions())


@pytest.mark.parametrize("text, needle", [
    ("model,layer\n", "missing column"),
    ("model,layer,resource,batch_size,oct_s,odt_s\nm,fc,g,x,1,\n", "line 2"),
])
def test_bad_trace_files(tmp_path, text, needle):
    f = tmp_path / "t.csv"
    f.write_text(text)
    with pytest.raises(TraceError, match=needle):
        load_trace(f)
    with pytest.raises(TraceError, match="cannot read"):
        load_trace(tmp_path / "missing.csv")


def test_problem_arrays_are_float64():
    p = _problem([FC, EMB], [GPU, CPU])
    assert p.oct_s.dtype == np.float64 and p.alpha.dtype == np.float64


def test_boundary_counts_only_gradients_that_exist():
    raw_pass = Layer(name="inp", kind="input", forward_flops=1, backward_flops=0, input_bytes=100,
                     output_bytes=100, output_grad_bytes=0.0, reads_raw_input=True)
    emb = Layer(name="e", kind="embedding", forward_flops=1, backward_flops=1, input_bytes=100,
                output_bytes=612, output_grad_bytes=512.0)
    p = _problem([raw_pass, emb, FC], [GPU])
    # raw features move forward only; after the embedding, its 512 B of rows get gradients
    # back while the 100 B of raw features riding along do not
    assert p.boundary_bytes.tolist() == [1000 * 100, 1000 * (612 + 512), 0.0]


def test_zoo_gradient_bytes_are_consistent():
    from heterps_sim.inputs import zoo
    for name in zoo.model_names():
        layers = zoo.get_model(name).layers
        assert layers[0].output_grad_bytes == 0.0, name  # raw data carries no gradient
        for layer in layers:
            assert layer.output_grad_bytes is not None
            assert 0 <= layer.output_grad_bytes <= layer.output_bytes
