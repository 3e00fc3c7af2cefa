"""One PS shard without a process group: tiers keep every row, the optimizer matches torch."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from heterps_exec.model.rows import initial_rows
from heterps_exec.ps import checkpoint
from heterps_exec.ps.shard import Shard
from heterps_exec.ps.spec import PSRequestError, ShardConfig, TableSpec


def _shard(tmp_path, **kw) -> Shard:
    return Shard(ShardConfig(work_dir=str(tmp_path / "live"), **kw))


@pytest.mark.parametrize("policy", ["lru", "lfu", "paddle"])
@pytest.mark.parametrize("rows", [1000, None])
def test_tiny_tiers_never_lose_a_row(tmp_path, policy, rows):
    """Hot 2% and warm 5% of the table: rows travel hot -> warm -> disk and come back intact."""
    cfg = dict(policy=policy, hot_fraction=0.02, warm_fraction=0.05, passes=2,
               unbounded_hot_rows=20, unbounded_warm_rows=50)
    shard = _shard(tmp_path, **cfg)
    spec = TableSpec(name="t", rows=rows, dim=4, optimizer="sgd", lr=0.5)
    i = shard.declare(spec)
    ref = {}  # id -> row, the truth
    rng = np.random.default_rng(0)
    for step in range(30):
        ids = np.unique(rng.integers(0, 1000, 64)).astype(np.int64)
        got = shard.pull(i, ids)
        want = np.stack([ref.get(x, initial_rows("t", [x], 4, 0)[0]) for x in ids.tolist()])
        np.testing.assert_array_equal(got, want)
        grads = rng.standard_normal((ids.size, 4)).astype(np.float32)
        shard.push(i, ids, grads)
        shard.end_step(step)
        for x, g, r in zip(ids.tolist(), grads, want):
            ref[x] = r + np.float32(-0.5) * g
    counts = shard.tables[i].tiers.counts
    assert counts["warm"] > 0 and counts["cold"] > 0 and counts["hot"] > 0
    keys, snap = shard.tables[i].tiers.snapshot()
    ids = shard.tables[i].ids_of(keys)
    for x, r in zip(ids.tolist(), snap):
        np.testing.assert_array_equal(r, ref.get(x, initial_rows("t", [x], 4, 0)[0]))
    shard.close()


@pytest.mark.parametrize("optimizer", ["sgd", "adagrad"])
def test_optimizer_matches_torch_dense(tmp_path, optimizer):
    """Summed pushes of two clients == torch.optim on a dense table; untouched rows stay."""
    rows, dim, lr = 50, 3, 0.3
    spec = TableSpec(name="e", rows=rows, dim=dim, optimizer=optimizer, lr=lr,
                     initial_accumulator=0.1)
    shard = _shard(tmp_path, hot_fraction=0.1, warm_fraction=0.1)
    i = shard.declare(spec)
    w = torch.nn.Parameter(torch.from_numpy(initial_rows("e", np.arange(rows), dim, 0)))
    opt = (torch.optim.SGD([w], lr=lr) if optimizer == "sgd" else
           torch.optim.Adagrad([w], lr=lr, initial_accumulator_value=0.1))
    rng = np.random.default_rng(1)
    for step in range(6):
        grad = np.zeros((rows, dim), np.float32)
        for _ in range(2):  # two clients
            ids = np.unique(rng.integers(0, rows, 12)).astype(np.int64)
            g = rng.standard_normal((ids.size, dim)).astype(np.float32)
            shard.pull(i, ids)
            shard.push(i, ids, g)
            grad[ids] += g
        shard.end_step(step)
        w.grad = torch.from_numpy(grad)
        opt.step()
    got = shard.pull(i, np.arange(rows, dtype=np.int64))
    np.testing.assert_allclose(got, w.detach().numpy(), rtol=0, atol=1e-6)


def test_bad_requests_are_refused_clearly(tmp_path):
    shard = _shard(tmp_path, num_shards=2, shard=1)
    i = shard.declare(TableSpec(name="t", rows=10, dim=2))
    cases = [
        (lambda: shard.pull(i, np.array([-1], np.int64)), "negative id -1"),
        (lambda: shard.pull(i, np.array([11], np.int64)), "id 11 >= rows 10"),
        (lambda: shard.pull(i, np.array([1.0])), "1-D int64"),
        (lambda: shard.pull(i, np.array([[1]], np.int64)), "1-D int64"),
        (lambda: shard.pull(i, np.array([2], np.int64)), "not owned by shard 1"),
        (lambda: shard.pull(7, np.array([1], np.int64)), "unknown table index 7"),
        (lambda: shard.push(i, np.array([1], np.int64), np.zeros((1, 3), np.float32)),
         "float32 (1, 2)"),
        (lambda: shard.push(i, np.array([1], np.int64), np.zeros((1, 2))), "float32 (1, 2)"),
        (lambda: shard.declare(TableSpec(name="t", rows=10, dim=3)), "already declared"),
    ]
    for call, text in cases:
        with pytest.raises(PSRequestError, match=text.replace("(", r"\(").replace(")", r"\)")):
            call()
    assert shard.pull(i, np.array([1, 3], np.int64)).shape == (2, 2)  # still serving


def test_checkpoint_roundtrip_with_rocksdb_and_memmap(tmp_path):
    cfg = dict(hot_fraction=0.1, warm_fraction=0.1, unbounded_hot_rows=4,
               unbounded_warm_rows=4)
    shard = _shard(tmp_path, **cfg)
    a = shard.declare(TableSpec(name="a", rows=100, dim=2, optimizer="adagrad"))
    b = shard.declare(TableSpec(name="b", rows=None, dim=2))
    big = np.array([5, 10**12, 3, 2**62], np.int64)
    for step in range(3):
        shard.push(a, np.arange(0, 100, 7, dtype=np.int64), np.ones((15, 2), np.float32))
        shard.pull(b, big)
        shard.push(b, big, np.full((4, 2), step, np.float32))
        shard.end_step(step)
        checkpoint.save(shard, step, str(tmp_path / "ckpt"))
    want_a = shard.pull(a, np.arange(100, dtype=np.int64))
    want_b = shard.pull(b, big)
    shard.close()
    fresh = _shard(tmp_path, **cfg)
    assert checkpoint.restore(fresh, str(tmp_path / "ckpt")) == 2
    np.testing.assert_array_equal(fresh.pull(0, np.arange(100, dtype=np.int64)), want_a)
    np.testing.assert_array_equal(fresh.pull(1, big), want_b)
    steps = sorted(p.name for p in (tmp_path / "ckpt" / "ps-shard-0").iterdir())
    assert steps == ["LATEST", "step-000000001", "step-000000002"]


def _push_steps(shard: Shard, steps, clients=(3, 5)) -> None:
    """Every client pushes twice to each of `steps` (ids overlapping across clients and
    pushes, so a sum's order shows in its bits), clients in the order given."""
    for step in steps:
        rng = np.random.default_rng(step)
        pushes = {c: [(rng.integers(0, 40, 9).astype(np.int64),
                       rng.standard_normal((9, 3)).astype(np.float32)) for _ in range(2)]
                  for c in sorted(clients)}
        for c in clients:
            for ids, grads in pushes[c]:
                shard.push(0, ids, grads, step, source=c)


def test_a_checkpoint_with_pending_pushes_resumes_to_the_same_rows(tmp_path):
    """An async checkpoint of step 5 at D = 2: steps up to 3 applied, the pushes of 4 and 5
    pending. A fresh shard restored from it and the live one take the same later pushes (the
    restored one with its clients' pushes arriving the other way round) and end the same
    steps: every row and Adagrad accumulator is the same bytes."""
    spec = TableSpec(name="e", rows=40, dim=3, optimizer="adagrad", lr=0.3,
                     initial_accumulator=0.1)
    cfg = dict(hot_fraction=0.1, warm_fraction=0.1)
    live = _shard(tmp_path / "a", **cfg)
    live.declare(spec)
    _push_steps(live, range(6))
    for step in range(4):
        live.end_step(step)
    checkpoint.save(live, 5, str(tmp_path / "ckpt"))
    applied, pending = checkpoint.load_pending(checkpoint.latest(str(tmp_path / "ckpt"), 0))
    assert applied == 3 and [p[:2] for p in pending[0]] == [
        (s, c) for s in (4, 5) for c in (3, 3, 5, 5)]
    restored = _shard(tmp_path / "b", **cfg)
    assert checkpoint.restore(restored, str(tmp_path / "ckpt")) == 5 and restored.step == 3
    _push_steps(live, range(6, 9))
    _push_steps(restored, range(6, 9), clients=(5, 3))
    for step in range(4, 9):
        live.end_step(step)
        restored.end_step(step)
    ids = np.arange(40, dtype=np.int64)
    want, got = live.tables[0], restored.tables[0]
    assert np.array_equal(want.tiers.peek(want.keys_of(ids)), got.tiers.peek(got.keys_of(ids)))
    assert not want.pending and not got.pending


def test_a_checkpoint_saved_without_pending_pushes_loads_with_none(tmp_path):
    """A checkpoint from before pending pushes were saved (no "applied", no pending arrays)
    restores with its own step applied and nothing pending."""
    shard = _shard(tmp_path / "a")
    shard.declare(TableSpec(name="e", rows=40, dim=3))
    _push_steps(shard, range(2))
    shard.end_step(0)
    shard.end_step(1)
    path = checkpoint.save(shard, 1, str(tmp_path / "ckpt"))
    with np.load(f"{path}/table-0.npz") as z:
        ids, rows = z["ids"], z["rows"]
    np.savez(f"{path}/table-0.npz", ids=ids, rows=rows)
    meta = json.loads(open(f"{path}/meta.json").read())
    del meta["applied"]
    open(f"{path}/meta.json", "w").write(json.dumps(meta))
    fresh = _shard(tmp_path / "b")
    assert checkpoint.restore(fresh, str(tmp_path / "ckpt")) == 1 and fresh.step == 1
    assert not fresh.tables[0].pending
    all_ids = np.arange(40, dtype=np.int64)
    assert np.array_equal(fresh.pull(0, all_ids), shard.pull(0, all_ids))
