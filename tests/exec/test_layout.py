"""Rank layout and microbatch routing: every microbatch once per stage, and no deadlock.

The engine's ranks block on receives and on their stage's all-reduce, and send without
blocking. `_run_to_completion` replays every rank's action list under exactly those rules;
if some rank could wait forever, it stops early and the test fails.
"""

from __future__ import annotations

import itertools

import pytest

from heterps_exec.runtime.layout import Layout, microbatch_bounds
from heterps_sim.core.lanes import STEP, B, F
from tests.exec.helpers import replay_actions

REPLICAS = [(1,), (2,), (2, 1), (1, 2), (1, 2, 1), (2, 2), (3, 2, 1), (1, 3), (2, 3),
            (3, 1, 2), (4, 3, 2), (1, 1, 1, 1), (2, 1, 2, 1)]


def _run_to_completion(layout: Layout, schedule: str, m: int, steps: int) -> dict:
    lists = {r: layout.actions(schedule, *layout.role(r), m, steps)
             for r in range(layout.world_size)}
    return {"done": replay_actions(layout, lists, layout.rank_of)}


@pytest.mark.parametrize("replicas", REPLICAS, ids=str)
@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("m", [1, 2, 3, 4, 6])
def test_routing_runs_every_microbatch_once_without_deadlock(replicas, schedule, m):
    layout = Layout(replicas)
    steps = 3
    out = _run_to_completion(layout, schedule, m, steps)
    want = {(code, g, mu) for code, g, mu in
            itertools.product((F, B), range(len(replicas)), range(m * steps))}
    assert out["done"] == want


def test_ranks_are_numbered_stage_by_stage():
    layout = Layout((3, 2, 1))
    assert layout.world_size == 6
    assert [layout.role(r) for r in range(6)] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (2, 0)]
    assert layout.ranks(1) == [3, 4]
    assert [layout.rank_of(1, mu) for mu in range(4)] == [3, 4, 3, 4]
    with pytest.raises(ValueError):
        layout.role(6)


def test_each_step_ends_once_per_replica_in_order():
    layout = Layout((2, 1))
    for rank in range(3):
        ends = [mu for code, mu in layout.actions("1f1b", *layout.role(rank), 4, 5) if code == STEP]
        assert ends == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("batch,m", [(256, 4), (10, 3), (5, 5), (7, 1)])
def test_microbatches_tile_the_batch(batch, m):
    bounds = microbatch_bounds(batch, m)
    assert bounds[0][0] == 0 and bounds[-1][1] == batch
    assert all(a[1] == b[0] for a, b in itertools.pairwise(bounds))
    sizes = [hi - lo for lo, hi in bounds]
    assert max(sizes) - min(sizes) <= 1
