"""kill -9 a PS shard at random moments; after restart every row equals its checkpoint state.

The default suite kills a process running the shard's state machine (`Shard`: pulls, pushes,
steps, checkpoints every 3 steps) 5 times; `slow` does it 50 times and also kills real PS
ranks (`serve` behind torch.distributed) while a trainer pulls and pushes, then restarts the
world from the checkpoint directory. Rows are compared bit for bit with a replay of the same
deterministic steps up to the step LATEST names: a torn or half-applied row would differ.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time

import numpy as np
import pytest

from heterps_exec.ps import checkpoint
from heterps_exec.ps.shard import Shard
from heterps_exec.ps.spec import ShardConfig, TableSpec

SPEC = TableSpec(name="emb_0.tables.0", rows=4000, dim=8, optimizer="adagrad", lr=0.1,
                 initial_accumulator=0.1)
LOOSE = TableSpec(name="sparse", rows=None, dim=4, optimizer="sgd", lr=0.5)
CONFIG = dict(policy="lru", hot_fraction=0.02, warm_fraction=0.05, unbounded_hot_rows=50,
              unbounded_warm_rows=100)


def _step(shard: Shard, step: int) -> None:
    rng = np.random.default_rng(step)
    for _ in range(4):  # microbatches
        ids = np.unique(rng.integers(0, SPEC.rows, 300)).astype(np.int64)
        rows = shard.pull(0, ids)
        shard.push(0, ids, (rows * np.float32(0.5) + rng.standard_normal(rows.shape,
                                                                         dtype=np.float32)))
        big = np.unique(rng.integers(0, 2**40, 40)).astype(np.int64)
        shard.push(1, big, shard.pull(1, big) + np.float32(1.0))
    shard.end_step(step)


def _new_shard(live: str) -> Shard:
    shard = Shard(ShardConfig(work_dir=live, **CONFIG))
    shard.declare(SPEC)
    shard.declare(LOOSE)
    return shard


def _victim(root: str, live: str) -> None:
    shard = _new_shard(live)
    step = 0
    while True:
        _step(shard, step)
        if step % 3 == 2:
            checkpoint.save(shard, step, root)
        step += 1


def _expected(upto: int, live: str):
    shard = _new_shard(live)
    for step in range(upto + 1):
        _step(shard, step)
    return [t.tiers.snapshot() + (t,) for t in shard.tables]


def _one_trial(tmp_path, trial: int, rng) -> str:
    root, live = str(tmp_path / f"ckpt{trial}"), str(tmp_path / f"live{trial}")
    proc = multiprocessing.get_context("spawn").Process(target=_victim, args=(root, live))
    proc.start()
    deadline = time.monotonic() + 30
    while checkpoint.latest(root, 0) is None and time.monotonic() < deadline:
        time.sleep(0.01)  # wait for the first checkpoint, then kill at a random moment
    time.sleep(rng.uniform(0.0, 0.4))
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(10)
    path = checkpoint.latest(root, 0)
    assert path is not None, "no checkpoint written within 30 s"
    step, tables = checkpoint.load(path)
    restored = _new_shard(str(tmp_path / f"restored{trial}"))
    assert checkpoint.restore(restored, root) == step
    for (spec, ids, rows), (keys, want_rows, t) in zip(tables, _expected(step, live + "r")):
        assert spec == t.spec
        np.testing.assert_array_equal(ids, t.ids_of(keys))
        np.testing.assert_array_equal(rows, want_rows)
    full = np.arange(SPEC.rows, dtype=np.int64)  # through the tiers, rows never written too
    ref = _new_shard(live + "x")
    for s in range(step + 1):
        _step(ref, s)
    np.testing.assert_array_equal(restored.pull(0, full), ref.pull(0, full))
    return os.path.basename(path)


def _trials(tmp_path, n: int) -> list[str]:
    rng = np.random.default_rng(1234)
    return [_one_trial(tmp_path, i, rng) for i in range(n)]


@pytest.mark.timeout(120)
def test_kill_9_during_pulls_pushes_and_checkpoints_5_trials(tmp_path):
    assert len(_trials(tmp_path, 5)) == 5


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_kill_9_50_trials(tmp_path):
    steps = _trials(tmp_path, 50)
    assert len(set(steps)) > 1  # the kills landed at different points of the run


def _client_step(client, step: int) -> None:
    """_step through a PSClient: the same ids, gradients and order of operations."""
    import torch

    rng = np.random.default_rng(step)
    for _ in range(4):
        ids = np.unique(rng.integers(0, SPEC.rows, 300)).astype(np.int64)
        rows = client.pull(SPEC.name, torch.from_numpy(ids)).numpy()
        grads = rows * np.float32(0.5) + rng.standard_normal(rows.shape, dtype=np.float32)
        client.push(SPEC.name, torch.from_numpy(ids), torch.from_numpy(grads))
        big = torch.from_numpy(np.unique(rng.integers(0, 2**40, 40)).astype(np.int64))
        client.push(LOOSE.name, big, client.pull(LOOSE.name, big) + 1.0)
    client.end_step(step)


def _trainer_until_killed(client, index, root):
    client.declare(SPEC)
    client.declare(LOOSE)
    step = 0
    while True:
        _client_step(client, step)
        if step % 3 == 2:
            client.checkpoint(step, root)
        step += 1


def _read_back(client, index, loose_ids):
    import torch

    client.declare(SPEC)
    client.declare(LOOSE)
    return (client.pull(SPEC.name, torch.arange(SPEC.rows)).numpy(),
            client.pull(LOOSE.name, torch.from_numpy(loose_ids)).numpy())


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_kill_9_a_real_ps_rank_and_restart_the_world(tmp_path):
    """kill -9 PS rank 0 of 2 mid-training; a new world restored from the checkpoint directory
    serves every row exactly as the checkpoint's step left it (3 trials)."""
    from heterps_exec.ps.local import LocalWorld, run_local

    rng = np.random.default_rng(7)
    for trial in range(3):
        root = str(tmp_path / f"ckpt{trial}")
        world = LocalWorld(_trainer_until_killed, (root,), num_servers=2, config=CONFIG,
                           server_options={"checkpoint_dir": root})
        deadline = time.monotonic() + 120
        while checkpoint.latest(root, 1) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(rng.uniform(0.0, 1.0))
        os.kill(world.procs[0].pid, signal.SIGKILL)
        world.kill()
        step = checkpoint.common_step(root, 2)  # a kill between the shards' checkpoints
        ref = _new_shard(str(tmp_path / f"ref{trial}"))
        for s in range(step + 1):
            _step(ref, s)
        loose_keys, _ = ref.tables[1].tiers.snapshot()
        loose_ids = ref.tables[1].ids_of(loose_keys)
        rows, loose = run_local(_read_back, (loose_ids,), num_servers=2, config=CONFIG,
                                restore_dir=root, restore_step=step)[0]
        np.testing.assert_array_equal(rows, ref.pull(0, np.arange(SPEC.rows, dtype=np.int64)))
        np.testing.assert_array_equal(loose, ref.pull(1, loose_ids))
