"""stage_actions: the one microbatch order shared by the simulator and the engine."""

import pytest

from heterps_sim.core.pipeline import max_live_activations, stage_actions


def names(actions):
    return " ".join(f"{a}{i}" for a, i in actions)


def test_documented_examples():
    assert names(stage_actions("gpipe", 0, 3, 4)) == "F0 F1 F2 F3 B0 B1 B2 B3"
    assert names(stage_actions("1f1b", 0, 3, 4)) == "F0 F1 F2 B0 F3 B1 B2 B3"
    assert names(stage_actions("1f1b", 1, 3, 4)) == "F0 F1 B0 F2 B1 F3 B2 B3"
    assert names(stage_actions("1f1b", 2, 3, 4)) == "F0 B0 F1 B1 F2 B2 F3 B3"
    assert stage_actions("async", 1, 3, 4) == stage_actions("1f1b", 1, 3, 4)


def test_fewer_microbatches_than_stages():
    assert names(stage_actions("1f1b", 0, 4, 2)) == "F0 F1 B0 B1"


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b", "async"])
@pytest.mark.parametrize("num_stages, m", [(1, 1), (2, 5), (4, 3), (5, 16)])
def test_every_microbatch_forward_then_backward_once(schedule, num_stages, m):
    for stage in range(num_stages):
        actions = stage_actions(schedule, stage, num_stages, m)
        assert sorted(actions) == sorted([("F", i) for i in range(m)] + [("B", i) for i in range(m)])
        for i in range(m):
            assert actions.index(("F", i)) < actions.index(("B", i))
        # backwards run in microbatch order (what the next stage up sends back)
        assert [i for a, i in actions if a == "B"] == list(range(m))


def test_1f1b_bounds_activation_memory():
    for stage in range(4):
        assert max_live_activations(stage_actions("1f1b", stage, 4, 16)) == 4 - stage
        assert max_live_activations(stage_actions("gpipe", stage, 4, 16)) == 16


def test_bad_arguments():
    with pytest.raises(ValueError, match="schedule"):
        stage_actions("zigzag", 0, 2, 2)
    with pytest.raises(ValueError, match="outside"):
        stage_actions("gpipe", 2, 2, 2)
