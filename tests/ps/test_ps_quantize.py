"""Quantized PS traffic: exact wire bytes, error bounds, `none` bit-identical, engine loss."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from heterps_exec.hps import quantize
from heterps_exec.ps.local import run_local
from heterps_exec.ps.spec import QUANTIZE, TableSpec
from tests.exec.helpers import SCENARIO, run_exec, tiny_plan

ROWS, DIM, N = 100, 16, 40
BIG = 140_000


def test_spec_lists_the_same_modes_as_quantize():
    assert QUANTIZE == quantize.MODES


def _pull_every_mode(client, index):
    """Per mode: (rows pulled with it, wire bytes of pulls and pushes, server bytes)."""
    client.declare(TableSpec(name="q", rows=ROWS, dim=DIM))
    ids = torch.arange(0, 2 * N, 2)  # N distinct ids, spread over both shards
    exact = client.pull("q", ids, quantize="none").numpy().copy()
    out = {}
    for mode in QUANTIZE:
        before = client.stats()
        rows = client.pull("q", torch.cat([ids, ids[:5]]), quantize=mode)  # repeats: not resent
        client.push("q", ids, torch.zeros(N, DIM), quantize=mode)
        after = client.stats()
        c0, c1 = before["client"]["q"], after["client"]["q"]
        served = [a["tables"]["q"]["bytes_out"] - b["tables"]["q"]["bytes_out"]
                  for a, b in zip(after["servers"], before["servers"], strict=True)]
        received = [a["tables"]["q"]["bytes_in"] - b["tables"]["q"]["bytes_in"]
                    for a, b in zip(after["servers"], before["servers"], strict=True)]
        out[mode] = (rows[:N].numpy().copy(), c1["pull_bytes"] - c0["pull_bytes"],
                     c1["push_bytes"] - c0["push_bytes"], sum(served), sum(received))
    big = TableSpec(name="big", rows=BIG, dim=2, lr=1.0)  # ids of 1.1 MB: beyond INLINE_BYTES
    client.declare(big)
    every = torch.arange(BIG)
    before = client.pull("big", every, quantize="none").clone()
    client.push("big", every, torch.ones(BIG, 2), quantize="none")
    client.end_step(0)
    after = client.pull("big", every, quantize="none")
    return exact, out, (before.numpy(), after.numpy())


@pytest.fixture(scope="module")
def pulled():
    return run_local(_pull_every_mode, num_servers=2)[0]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", QUANTIZE)
def test_wire_bytes_are_cut_exactly(pulled, mode):
    _, out, _ = pulled
    _, pull_bytes, push_bytes, served, received = out[mode]
    per_row = {"none": 4 * DIM, "fp16": 2 * DIM, "bf16": 2 * DIM, "int8": DIM + 4}[mode]
    assert pull_bytes == served == N * per_row
    assert push_bytes == N * (8 + per_row)  # int64 ids, then the encoded gradients
    assert received == N * 8 + N * per_row + N * 8  # the push, plus the pull's ids


@pytest.mark.timeout(120)
def test_none_is_bit_identical_and_int8_within_half_a_step(pulled):
    exact, out, _ = pulled
    assert np.array_equal(out["none"][0], exact)
    scale = np.abs(exact).max(axis=1, keepdims=True) / 127.0
    assert np.all(np.abs(out["int8"][0] - exact) <= scale / 2 + 1e-7)
    assert np.abs(out["int8"][0] - exact).max() > 0  # really quantized
    assert np.allclose(out["fp16"][0], exact, rtol=2.0 ** -11, atol=0)
    assert np.allclose(out["bf16"][0], exact, rtol=2.0 ** -8, atol=0)


@pytest.mark.timeout(120)
def test_requests_of_more_than_a_socket_read_arrive_whole(pulled):
    from heterps_exec.model.rows import initial_rows
    from heterps_exec.ps import transport
    before, after = pulled[2]
    assert BIG * 8 > transport.RECV_CHUNK / 4  # ids and rows span several reads
    assert np.array_equal(before, initial_rows("big", np.arange(BIG), 2, 0))
    assert np.allclose(after, before - 1.0)  # SGD, lr 1, gradient 1


@pytest.mark.timeout(600)
def test_engine_with_int8_ps_rows_trains_within_1pct_of_fp32(tmp_path):
    plan = tiny_plan(tmp_path / "plan.json", [], [1], schedule="gpipe", m=2)  # one stage:
    losses = {}  # the PS rows are the only quantized traffic
    for mode in ("none", "int8"):
        code, out, err = run_exec("run", str(plan), "--scenario", SCENARIO, "--steps", "4",
                                  "--lr", "0.5", "--ps-shards", "1", "--quantize", mode,
                                  "--out", str(tmp_path / mode), "--json")
        assert code == 0, err
        result = json.loads(out)
        losses[mode] = result["extra"]["losses"]
        pulled_bytes = sum(c["pull_bytes"] for c in result["extra"]["ps"]["client"].values())
        unique = sum(c["pull_unique_rows"] for c in result["extra"]["ps"]["client"].values())
        assert unique > 0 and pulled_bytes > 0
        losses[mode + "_bytes_per_row"] = pulled_bytes / unique
        # the run reads its tables back at the end (its state, for the held-out scores): every
        # row once, exact float32 whatever the mode, counted apart from the training traffic
        read = result["extra"]["ps"]["client_apart"]["state"]
        assert set(read) == set(result["extra"]["ps"]["client"])
        for c in read.values():
            assert c["pull_calls"] == 1 and c["pull_rows"] == c["pull_unique_rows"] > 0
            assert c["push_rows"] == 0
        losses[mode + "_read_bytes_per_row"] = (sum(c["pull_bytes"] for c in read.values())
                                                / sum(c["pull_rows"] for c in read.values()))
    assert losses["int8_read_bytes_per_row"] == losses["none_read_bytes_per_row"] \
        == losses["none_bytes_per_row"]  # float32 rows, the width of an unquantized pull
    assert losses["int8_bytes_per_row"] < 0.5 * losses["none_bytes_per_row"]
    assert losses["int8"] != losses["none"]
    for a, b in zip(losses["int8"], losses["none"], strict=True):
        assert abs(a - b) <= 0.01 * abs(b)
