"""--overlap on: gradient buckets all-reduced during the last backward, same update."""

from __future__ import annotations

import json

import pytest

from tests.exec.helpers import SCENARIO, assert_matches_reference, run_exec, tiny_plan


@pytest.mark.timeout(300)
@pytest.mark.parametrize("extra", [[], ["--share", "speed", "--slow-replica", "0:1:40"]],
                         ids=["1f1b", "speed-share-idle-replica"])
def test_overlapped_allreduce_gives_the_same_weights(tmp_path, extra):
    """The second case starves a replica (40x slower: 0 microbatches from step 1 on), so its
    buckets all launch at the step end, in the same order as its peers'."""
    plan = tiny_plan(tmp_path / "plan.json", [10], [2, 2], schedule="1f1b", m=4)
    code, out, err = run_exec("run", str(plan), "--scenario", SCENARIO, "--steps", "4",
                              "--lr", "0.5", "--overlap", "on", *extra,
                              "--out", str(tmp_path / "run"), "--save-state",
                              str(tmp_path / "state.pt"), "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["extra"]["overlap"] is True
    if extra:
        assert result["extra"]["share_counts"][-1][0] == [4, 0]
    assert_matches_reference(tmp_path / "run", tmp_path / "state.pt", result)
