"""Policies on tiny exact timelines; replay predicts the shard's own counters; Belady bounds."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

from heterps_exec.ps.shard import Shard
from heterps_exec.ps.spec import ShardConfig, TableSpec
from heterps_sim.tiers.policies import make_policy
from heterps_sim.tiers.replay import (
    belady_hit_rate,
    first_seen_unique,
    ps_options,
    replay_hit_rates,
    zipf_ids,
)


def _hits(policy, batches) -> list[list[int]]:
    """Per batch, the keys that were resident when accessed."""
    out = []
    for keys in batches:
        keys = np.array(keys, dtype=np.int64)
        out.append([int(k) for k in keys if policy.slot_of[k] >= 0])
        policy.access(keys)
    return out


def test_lru_timeline():
    p = make_policy("lru", 2, 10)
    # 1 2 | 1 hit | 3 evicts 2 | 2 evicts 1 | 1 evicts 3 | 2 hit
    assert _hits(p, [[1], [2], [1], [3], [2], [1], [2]]) == [[], [], [1], [], [], [], [2]]


def test_lfu_keeps_the_frequent_row_and_admits_only_more_frequent_ones():
    p = make_policy("lfu", 2, 10)
    # 1 and 2 reach count 3; 3 (count 1) is not admitted; 4 enters on its 4th access,
    # evicting 1 (count 3 like 2, but used longer ago)
    hits = _hits(p, [[1], [1], [2], [2], [1], [3], [2], [4], [4], [4], [4], [4], [1]])
    assert hits == [[], [1], [], [2], [1], [], [2], [], [], [], [], [4], []]


def test_paddle_demotes_rows_unseen_for_n_passes():
    p = make_policy("paddle", 10, 10, passes=2)
    p.access(np.array([1, 2]))  # pass 0
    p.end_pass()
    p.access(np.array([2]))  # pass 1: 1 unseen
    assert len(p.end_pass()[0]) == 0 and p.slot_of[1] >= 0
    keys, _ = p.end_pass()  # pass 2: 1 unseen for 2 passes -> demoted; 2 for 1 -> stays
    assert list(keys) == [1] and p.slot_of[1] == -1 and p.slot_of[2] >= 0


def test_belady_small_case_by_hand():
    # capacity 2, stream a b c a b d a: MIN keeps a,b, skips c: hits a b a -> 3 of 7
    ids = np.array([0, 1, 2, 0, 1, 3, 0])
    assert belady_hit_rate(ids, 2, batch_size=1) == pytest.approx(3 / 7)


@pytest.mark.parametrize("policy", ["lru", "lfu", "paddle"])
def test_replay_predicts_the_shards_own_counters(tmp_path, policy):
    """Same stream through 2 live shards (with data) and through replay: equal counts."""
    rows, batch = 5000, 256
    ids = zipf_ids(batch * 40, rows, 1.1, seed=3)
    counts = dict.fromkeys(("hot", "warm", "cold", "new"), 0)
    for s in range(2):
        shard = Shard(ShardConfig(shard=s, num_shards=2, policy=policy, hot_fraction=0.02,
                                  warm_fraction=0.04, work_dir=str(tmp_path), passes=3))
        shard.declare(TableSpec(name="t", rows=rows, dim=2))
        for step, start in enumerate(range(0, ids.size, batch)):
            u = first_seen_unique(ids[start:start + batch])  # as PSClient sends them
            shard.pull(0, u[u % 2 == s])
            shard.end_step(step)
        for k, v in shard.tables[0].tiers.counts.items():
            counts[k] += v
    total = sum(counts.values())
    rates = replay_hit_rates(ids, policy, int(rows * 0.02), warm_rows=int(rows * 0.04),
                             num_shards=2, batch_size=batch, passes=3)
    for k in counts:
        assert rates[k] == pytest.approx(counts[k] / total)
    assert rates["hot"] <= belady_hit_rate(ids, int(rows * 0.02), num_shards=2,
                                           batch_size=batch) + 1e-12


def test_belady_bounds_every_policy_and_feeds_the_simulator():
    ids = zipf_ids(20000, 10000, 1.05, seed=0)
    best = belady_hit_rate(ids, 200, batch_size=512)
    for policy in ("lru", "lfu", "paddle"):
        assert replay_hit_rates(ids, policy, 200, batch_size=512)["hot"] <= best
    opts = ps_options(ids, "lfu", 200, warm_rows=1000, batch_size=512)
    assert opts.hot.hit_rate + opts.warm.hit_rate + opts.cold.hit_rate == pytest.approx(1.0)
    assert opts.hot.hit_rate == pytest.approx(
        replay_hit_rates(ids, "lfu", 200, warm_rows=1000, batch_size=512)["hot"])


def _evaluate_des(plan, *extra):
    import json

    from heterps_sim.cli import main
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["evaluate", "scenarios/exec-tiny.yaml", str(plan), "--engine", "des",
                     "--effects", "ps", "--json", *extra])
    assert code == 0
    return json.loads(out.getvalue())


def test_simulator_takes_its_ps_hit_rates_from_the_same_replay(tmp_path):
    """`heterps-sim evaluate --effects ps --ps-policy P --ps-stream F`: the DES's tier hit rates
    are the replay's on that stream (4 shards, the simulator's default), and the predicted PS
    time grows as the hot tier shrinks."""
    from heterps_sim.cli import main
    plan = tmp_path / "plan.json"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["schedule", "scenarios/exec-tiny.yaml", "--out", str(plan), "--json"]) == 0
    rows = 20_000
    stream = zipf_ids(100_000, rows, 1.05, seed=4)
    np.save(tmp_path / "ids.npy", stream)
    times = {}
    for policy, hot in (("lfu", 0.05), ("lru", 0.002)):
        r = _evaluate_des(plan, "--ps-policy", policy, "--ps-hot-fraction", str(hot),
                          "--ps-warm-fraction", "0.1", "--ps-stream", str(tmp_path / "ids.npy"),
                          "--ps-batch", "1024", "--ps-rows", str(rows))
        want = replay_hit_rates(stream, policy, int(rows * hot), warm_rows=int(rows * 0.1),
                                num_shards=4, batch_size=1024)
        got = r["extra"]["ps_hit_rates"]
        assert got["hot"] == want["hot"] and got["warm"] == want["warm"]
        assert got["cold"] == pytest.approx(want["cold"] + want["new"], abs=1e-12)
        times[policy] = r["extra"]["ps_time_s"]
    assert times["lru"] > times["lfu"]  # fewer hot hits: slower pulls


def test_a_bad_ps_stream_is_one_line_and_exit_2(tmp_path, capsys):
    from heterps_sim.cli import main
    np.save(tmp_path / "bad.npy", np.array([[1.5]]))
    code = main(["evaluate", "scenarios/exec-tiny.yaml", "none.json", "--engine", "des",
                 "--effects", "ps", "--ps-policy", "lfu", "--ps-stream", str(tmp_path / "bad.npy")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
