"""Rank layout and microbatch routing: every microbatch once per stage, and no deadlock.

The engine's ranks block on receives and on their stage's all-reduce, and send without
blocking. `_run_to_completion` replays every rank's action list under exactly those rules;
if some rank could wait forever, it stops early and the test fails.
"""

from __future__ import annotations

import itertools

import pytest

from heterps_exec.layout import Layout, microbatch_bounds
from heterps_sim.lanes import STEP, B, F

REPLICAS = [(1,), (2,), (2, 1), (1, 2), (1, 2, 1), (2, 2), (3, 2, 1), (1, 3), (2, 3),
            (3, 1, 2), (4, 3, 2), (1, 1, 1, 1), (2, 1, 2, 1)]


def _run_to_completion(layout: Layout, schedule: str, m: int, steps: int) -> dict:
    lists = {r: layout.actions(schedule, *layout.role(r), m, steps)
             for r in range(layout.world_size)}
    pos = dict.fromkeys(lists, 0)
    done: set[tuple[str, int, int]] = set()  # (code, stage, mu)
    at_step_end: dict[tuple[int, int], set[int]] = {}
    progress = True
    while progress:
        progress = False
        for rank, actions in lists.items():
            if pos[rank] == len(actions):
                continue
            stage, replica = layout.role(rank)
            code, mu = actions[pos[rank]]
            if code == F:
                ready = stage == 0 or (F, stage - 1, mu) in done
            elif code == B:
                ready = stage == layout.num_stages - 1 or (B, stage + 1, mu) in done
            else:  # the stage's all-reduce: everyone in the group must be there
                waiting = at_step_end.setdefault((stage, mu), set())
                waiting.add(rank)
                ready = len(waiting) == layout.replicas[stage]
            if ready:
                if code != STEP:
                    assert (code, stage, mu) not in done, "a microbatch ran twice"
                    assert layout.rank_of(stage, mu) == rank, "microbatch on the wrong replica"
                    done.add((code, stage, mu))
                pos[rank] += 1
                progress = True
    stuck = {r: lists[r][pos[r]] for r in lists if pos[r] < len(lists[r])}
    assert not stuck, f"deadlock: {stuck}"
    return {"done": done}


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
