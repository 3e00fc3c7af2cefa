"""The async schedule's staleness D: the continuous stream never deadlocks waiting for versions.

Oracle: a replay of every replica's action list in which a forward of step t at stage g waits
for its input (stage g - 1) AND for every replica of stage g to have passed its step end of
step t - D - 1 (the update it reads); a backward waits for stage g + 1. Step ends never block
(their all-reduce overlaps). The replay is independent of the bound `staleness` computes.
"""

from __future__ import annotations

import random

import pytest

from heterps_sim.core.asynchrony import staleness, version_of
from heterps_sim.core.lanes import STEP, B, F, num_lanes, replica_actions, stage_orders


def _lists(replicas, m, steps, first):
    lanes = num_lanes(replicas, flush=False)
    out = {}
    for g, k in enumerate(replicas):
        base = stage_orders("async", False, g, len(replicas), m, steps, lanes)
        for r in range(k):
            out[g, r] = replica_actions(base, False, k, r, m, steps, lanes, first_step=first)
    return out


def _replay(replicas, m, steps, first, d) -> set:
    lists = _lists(replicas, m, steps, first)
    pos = dict.fromkeys(lists, 0)
    done: set = set()
    ended: dict = {}  # (stage, step) -> replicas past their step end
    progress = True
    while progress:
        progress = False
        for (g, r), actions in lists.items():
            if pos[g, r] == len(actions):
                continue
            code, mu = actions[pos[g, r]]
            if code == F:
                need = mu // m - d - 1
                ready = (g == 0 or (F, g - 1, mu) in done) and (
                    need < first or len(ended.get((g, need), ())) == replicas[g])
            elif code == B:
                ready = g == len(replicas) - 1 or (B, g + 1, mu) in done
            else:
                ready = True
                ended.setdefault((g, mu), set()).add(r)
            if ready:
                if code != STEP:
                    assert (code, g, mu) not in done, "a microbatch ran twice"
                    assert mu % replicas[g] == r, "a microbatch on the wrong replica"
                    done.add((code, g, mu))
                pos[g, r] += 1
                progress = True
    stuck = {key: lists[key][pos[key]] for key in lists if pos[key] < len(lists[key])}
    assert not stuck, f"deadlock with D = {d}: {stuck}"
    return done


CASES = [([1], 4), ([2], 3), ([1, 1], 1), ([1, 1], 4), ([2, 1], 4), ([1, 2, 1], 4),
         ([3, 2, 1], 6), ([1, 1, 2, 1], 3), ([1, 1, 1, 1], 1), ([5, 3], 7), ([1] * 6, 2)]


@pytest.mark.parametrize("replicas,m", CASES, ids=[f"{r}-m{m}" for r, m in CASES])
def test_the_stream_runs_at_the_computed_staleness(replicas, m):
    d = staleness(replicas, m)
    for first in (0, 3):  # a fresh stream, and one resumed at step 3 (a checkpoint segment)
        done = _replay(replicas, m, 7, first, d)
        mus = range(first * m, (first + 7) * m)
        assert done == {(c, g, mu) for c in (F, B) for g in range(len(replicas)) for mu in mus}


def test_random_layouts_never_deadlock():
    rng = random.Random(7)
    for _ in range(60):
        replicas = [rng.randint(1, 4) for _ in range(rng.randint(1, 5))]
        m = rng.randint(1, 9)
        _replay(replicas, m, 6, rng.randint(0, 2), staleness(replicas, m))


def test_staleness_is_zero_only_without_a_pipeline_and_one_with_enough_microbatches():
    assert staleness([1], 4) == 0  # one stage, one replica: synchronous training
    assert staleness([1, 1, 1], 3) == 1  # m >= stages: PipeDream-2BW's one step behind
    assert staleness([1, 1, 1, 1], 1) == 3  # one microbatch a step: stage 0 runs 3 ahead
    assert staleness([1] * 8, 32) == 1


def test_too_few_microbatches_for_many_stages_is_refused():
    with pytest.raises(ValueError, match="more microbatches"):
        staleness([1] * 80, 1)


def test_version_rule():
    assert [version_of(t, 2) for t in range(6)] == [0, 0, 0, 1, 2, 3]
    assert [version_of(t, 0) for t in range(3)] == [0, 1, 2]
