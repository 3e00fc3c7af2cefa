"""Quantized boundary traffic: sizes, error bounds, and training that still converges."""

from __future__ import annotations

import json

import pytest
import torch

from heterps_exec.hps import quantize
from heterps_exec.model.partition import boundary_after
from heterps_sim.inputs import zoo
from tests.exec.helpers import SCENARIO, run_exec, tiny_plan


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


def test_traffic_stats_closed_form_and_the_mode_rule():
    # rows [3, 4] and [0, 1]: peaks 4 and 1, norm^2 26 -> sqrt(2 * (16 + 1) / 127^2 / 12 / 26)
    error, peak = quantize.traffic_stats(torch.tensor([[3.0, 4.0], [0.0, 1.0]]))
    assert error == pytest.approx((2 * 17 / 127**2 / 12 / 26) ** 0.5, rel=1e-12)
    assert peak == 4.0
    assert quantize.traffic_stats(torch.zeros(3, 5)) == (0.0, 0.0)
    assert quantize.choose_mode(0.004, 1.0, 0.005) == "int8"
    assert quantize.choose_mode(0.006, 1.0, 0.005) == "fp16"
    assert quantize.choose_mode(0.006, 1e5, 0.005) == "bf16"  # beyond fp16's range
    assert quantize.choose_mode(0.006, 1.0, 0.001) == "fp16"
    assert quantize.choose_mode(0.006, 1e5, 0.001) == "none"  # bf16 errs up to 2^-8
    assert quantize.choose_mode(0.006, 1.0, 0.0) == "none"
    # clipped fp16 traffic: look again in a range-safe encoding, whatever the estimate says
    assert quantize.choose_mode(0.001, quantize.FP16_MAX, 0.005, "fp16") == "bf16"
    assert quantize.choose_mode(0.001, quantize.FP16_MAX, 0.001, "fp16") == "none"
    assert quantize.choose_mode(0.001, 1e6, 0.005, "int8") == "int8"  # int8 has no range limit


def test_the_estimate_tracks_the_real_int8_error():
    x = torch.randn(64, 40, generator=torch.Generator().manual_seed(1))
    real = float((quantize.decode(quantize.encode(x, "int8"), 40, "int8") - x).norm() / x.norm())
    assert quantize.traffic_stats(x)[0] == pytest.approx(real, rel=0.15)


@pytest.mark.parametrize("text,want", [("int8", ("int8", quantize.DEFAULT_ERROR_BOUND)),
                                       ("auto", ("auto", quantize.DEFAULT_ERROR_BOUND)),
                                       ("auto:0.05", ("auto", 0.05))])
def test_parse_choice(text, want):
    assert quantize.parse_choice(text) == want


@pytest.mark.parametrize("text", ["int4", "int8:0.1", "auto:x", "auto:-1", "auto:1"])
def test_parse_choice_refuses(text):
    with pytest.raises(ValueError):
        quantize.parse_choice(text)


def test_both_ends_of_a_link_choose_the_same_encodings_every_step():
    """The sender and receiver never talk about modes: they must agree from the traffic."""
    from heterps_exec.hps.auto_quantize import AutoLinks
    cut = boundary_after(zoo.model_graph("tiny-ctr"), "emb_3", "auto")
    up, down = AutoLinks(None, cut, 0.006), AutoLinks(cut, None, 0.006)
    gen = torch.Generator().manual_seed(3)
    seen = set()
    for step in range(6):
        # the traffic changes: Gaussian (int8 will do), heavy-tailed (fp16), heavy-tailed
        # beyond fp16's range (bf16)
        power, scale = [(1, 1.0), (3, 1.0), (3, 1e5)][step % 3]
        for _mu in range(3):
            env = {t.name: (torch.randint(0, 50, (8, t.width), generator=gen) if t.kind == "int"
                            else scale * torch.randn(8, t.width, generator=gen) ** power)
                   for t in cut.tensors}
            sent, _ = up.boundary("out", 1).encode(env)
            up.observe_forward("out", 1, sent)
            buf = down.boundary("in", 0).empty(8)
            assert buf.shape == sent.shape  # the receiver sized its buffer right
            buf.copy_(sent)
            down.observe_forward("in", 0, buf)
            if cut.has_grad:
                grad = torch.randn(8, cut.width("grad"), generator=gen) ** power * scale
                b = down.boundary("in", 0)
                msg = b.encode_grad(grad)
                down.observe_backward("in", 0, b.decode_grad(msg))
                assert up.boundary("out", 1).empty_grad(8).shape == msg.shape
                up.observe_backward("out", 1, up.boundary("out", 1).decode_grad(msg))
        up.end_step()
        down.end_step()
        assert up.link("out", 1).modes == down.link("in", 0).modes
        seen.add(up.link("out", 1).modes)
    assert {m[0] for m in seen} == {"int8", "fp16", "bf16"}  # it followed the traffic


@pytest.mark.timeout(400)
def test_auto_quantization_in_training(tmp_path):
    """auto:0 never loses a bit (the same run as fp32); the default bound ships fewer bytes
    and keeps the loss within 1% of fp32, with two upstream replicas feeding one."""
    plan = tiny_plan(tmp_path / "plan.json", [10], [2, 1], schedule="1f1b", m=4)
    results = {}
    for mode in ("none", "auto:0", "auto"):
        code, out, err = run_exec("run", str(plan), "--scenario", SCENARIO, "--steps", "6",
                                  "--lr", "0.5", "--quantize", mode,
                                  "--out", str(tmp_path / mode.replace(":", "_")), "--json")
        assert code == 0, err
        results[mode] = json.loads(out)["extra"]
    assert results["auto:0"]["losses"] == results["none"]["losses"]
    assert results["auto:0"]["boundary_bytes_per_step"] == results["none"]["boundary_bytes_per_step"]
    assert results["auto"]["boundary_bytes_per_step"] < 0.7 * results["none"]["boundary_bytes_per_step"]
    for fp32, auto in zip(results["none"]["losses"], results["auto"]["losses"], strict=True):
        assert abs(auto - fp32) <= 0.01 * fp32
    # what the ranks ended on: both ends of every link agree, and something was narrowed
    modes = results["auto"]["quantize_modes"]
    links = [(int(rank), key) for rank, table in modes.items() for key in table]
    assert {key for _, key in links} == {"out:2", "in:0", "in:1"}  # ranks 0, 1 -> rank 2
    for rank, key in links:
        side, peer = key.split(":")
        if side == "out":
            assert modes[str(rank)][key] == modes[peer][f"in:{rank}"]
    assert any(m != "none" for table in modes.values() for ms in table.values() for m in ms)
    assert results["none"]["quantize_modes"] is None
