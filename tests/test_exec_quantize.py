"""Quantized boundary traffic: sizes, error bounds, and training that still converges."""

from __future__ import annotations

import json

import pytest
import torch

from heterps_exec import quantize
from heterps_exec.partition import boundary_after
from heterps_sim import zoo
from tests.exec_helpers import SCENARIO, run_exec, tiny_plan


@pytest.mark.parametrize("mode", quantize.MODES)
def test_round_trip_sizes_and_error_bounds(mode):
    torch.manual_seed(0)
    x = torch.randn(33, 77) * torch.logspace(-3, 2, 33).unsqueeze(1)  # rows of every scale
    x[3] = 0.0
    b = quantize.encode(x, mode)
    assert b.dtype == torch.uint8 and b.shape == (33, quantize.nbytes(77, mode))
    y = quantize.decode(b, 77, mode)
    assert y.dtype == torch.float32 and y.shape == x.shape
    assert torch.equal(y[3], x[3])  # an all-zero row stays zero
    err = (y - x).abs()
    if mode == "none":
        assert torch.equal(y, x)
    elif mode == "int8":  # at most half a step of the row's own scale
        step = x.abs().amax(1, keepdim=True) / 127
        assert bool((err <= step / 2 + 1e-7 * x.abs()).all())
    else:  # relative rounding of the half formats
        rel = 2 ** -11 if mode == "fp16" else 2 ** -8
        assert bool((err <= rel * x.abs() + 1e-6).all())


def test_int8_cuts_bytes_at_least_3_5x():
    assert quantize.nbytes(77, "none") / quantize.nbytes(77, "int8") >= 3.5
    with pytest.raises(ValueError, match="quantize mode"):
        quantize.nbytes(4, "int4")


@pytest.mark.parametrize("mode", ["fp16", "int8"])
def test_boundary_keeps_ids_exact_and_floats_close(mode):
    graph = zoo.model_graph("tiny-ctr")
    b = boundary_after(graph, "emb_3", mode)
    torch.manual_seed(1)
    env = {t.name: (torch.randint(0, 1000, (16, t.width)) if t.kind == "int"
                    else torch.randn(16, t.width)) for t in b.tensors}
    message, _ = b.encode(env)
    assert message.shape == (16, b.row_bytes)
    decoded, leaf = b.decode(message)
    for t in b.tensors:
        if t.kind == "int":
            assert torch.equal(decoded[t.name], env[t.name])
        else:
            assert torch.allclose(decoded[t.name], env[t.name], rtol=0.02, atol=0.03)
    grad = torch.randn(16, b.width("grad"))
    back = b.decode_grad(b.encode_grad(grad))
    assert torch.allclose(back, grad, rtol=0.02, atol=0.03)
    assert b.empty_grad(16).shape == (16, b.grad_bytes)


@pytest.mark.timeout(300)
def test_int8_training_moves_3_5x_fewer_bytes_and_matches_fp32_loss(tmp_path):
    plan = tiny_plan(tmp_path / "plan.json", [10], [1, 1], schedule="1f1b", m=4)
    results = {}
    for mode in ("none", "int8"):
        code, out, err = run_exec("run", str(plan), "--scenario", SCENARIO, "--steps", "8",
                                  "--lr", "0.5", "--quantize", mode,
                                  "--out", str(tmp_path / mode), "--json")
        assert code == 0, err
        results[mode] = json.loads(out)["extra"]
    cut = results["none"]["boundary_bytes_per_step"] / results["int8"]["boundary_bytes_per_step"]
    assert cut >= 3.5
    for fp32, int8 in zip(results["none"]["losses"], results["int8"]["losses"], strict=True):
        assert abs(int8 - fp32) <= 0.01 * fp32  # every step, the last one included
