"""Speed-aware sharing: proportional counts, deadlock-free orders, the same update."""

from __future__ import annotations

import itertools
import json
import random

import pytest

from heterps_exec.hps import speed as sharing
from heterps_exec.runtime.layout import Layout
from heterps_sim.core.lanes import B, F
from tests.exec.helpers import (
    SCENARIO,
    assert_matches_reference,
    replay_actions,
    run_exec,
    tiny_plan,
)


def test_counts_follow_speed_sum_to_m_and_respect_the_cap():
    assert sharing.counts([1.0, 1.0, 0.5], 10) == [4, 4, 2]
    assert sharing.counts([1.0, 1.0], 7) in ([4, 3], [3, 4])
    assert sharing.counts([1.0, 0.01], 8) == [8, 0]  # a crawling replica gets nothing
    assert sharing.counts([10.0, 1.0, 1.0], 9) == [6, 2, 1] or \
        sharing.counts([10.0, 1.0, 1.0], 9) == [6, 1, 2]  # capped at 2 x 9 / 3 = 6
    rng = random.Random(0)
    for _ in range(200):
        k, m = rng.randint(1, 5), rng.randint(1, 24)
        speeds = [rng.uniform(0.1, 3.0) for _ in range(k)]
        c = sharing.counts(speeds, m)
        assert sum(c) == m and max(c) <= max(1, -(-2 * m // k))


def test_assignment_interleaves_the_counts():
    a = sharing.assignment([4, 2, 2])
    assert sorted(a) == [0, 0, 0, 0, 1, 1, 2, 2]
    assert a[:2] != [0, 0] or a[2] != 0  # spread, not four in a row
    assert sharing.assignment([3]) == [0, 0, 0]


def test_tracker_averages_and_waits_for_every_replica():
    t = sharing.SpeedTracker(3)
    t.update([0.2, 0.0, 0.1])
    assert t.speeds([0, 1]) == [1.0, 1.0]  # replica 1 not measured yet: equal split
    t.update([0.4, 0.1, 0.1])
    assert t.speeds([0, 2]) == pytest.approx([1 / 0.3, 1 / 0.1])


def _deadlock_free(layout: Layout, schedule: str, assigns: list[list[int]], steps: int) -> None:
    """Replay every rank's actions with blocking receives and per-stage all-reduces."""
    m = len(assigns[0])
    lists = {}
    for rank in range(layout.world_size):
        g, r = layout.role(rank)
        lists[rank] = [a for n in range(steps) for a in
                       sharing.step_actions(schedule, g, layout.num_stages, r, assigns[g], n)]
    done = replay_actions(layout, lists,
                          lambda g, mu: layout.first_rank(g) + assigns[g][mu % m])
    assert len(done) == 2 * layout.num_stages * m * steps


@pytest.mark.parametrize("replicas", [(2, 1), (1, 3), (3, 2, 1), (2, 2, 2), (1, 2, 1, 3)],
                         ids=str)
@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_uneven_assignments_never_deadlock(replicas, schedule):
    rng = random.Random(str(replicas) + schedule)
    layout = Layout(replicas)
    for m in (1, 3, 6, 8):
        for _ in range(10):
            assigns = [sharing.assignment(sharing.counts(
                [rng.uniform(0.1, 2.0) for _ in range(k)], m)) for k in replicas]
            _deadlock_free(layout, schedule, assigns, steps=2)


@pytest.mark.timeout(300)
def test_speed_sharing_moves_work_off_a_slow_replica_and_keeps_the_update(tmp_path):
    plan = tiny_plan(tmp_path / "plan.json", [10], [1, 3], schedule="1f1b", m=6)
    code, out, err = run_exec("run", str(plan), "--scenario", SCENARIO, "--steps", "5",
                              "--lr", "0.5", "--share", "speed", "--slow-replica", "1:2:10",
                              "--out", str(tmp_path / "run"), "--save-state",
                              str(tmp_path / "state.pt"), "--json")
    assert code == 0, err
    result = json.loads(out)
    history = result["extra"]["share_counts"]
    assert history[0] == [[6], [2, 2, 2]]  # nothing measured yet: equal
    assert all(sum(c[1]) == 6 for c in history)
    assert history[-1][1][2] < 2  # the slow replica ends with less than its equal share
    assert_matches_reference(tmp_path / "run", tmp_path / "state.pt", result)


def test_bad_share_options_are_refused(tmp_path):
    plan = tiny_plan(tmp_path / "plan.json", [10], [1, 2])
    for extra, message in ((["--share", "fast"], "--share"),
                           (["--slow-replica", "1:5:2"], "no such replica"),
                           (["--slow-replica", "x"], "STAGE:REPLICA:FACTOR")):
        code, _, err = run_exec("run", str(plan), "--scenario", SCENARIO,
                                "--out", str(tmp_path / "run"), *extra)
        assert code == 2 and message in err


def test_the_orders_cover_each_step_once():
    for schedule, k in itertools.product(["gpipe", "1f1b"], [1, 2, 3]):
        assign = sharing.assignment(sharing.counts([1.0] * k, 6))
        got = sorted((code, mu) for r in range(k)
                     for code, mu in sharing.step_actions(schedule, 0, 2, r, assign, 1)[:-1])
        assert got == sorted((c, 6 + i) for c in (F, B) for i in range(6))
