"""The engine with its embedding tables on parameter-server ranks."""

from __future__ import annotations

import json

import pytest

from tests.exec.helpers import SCENARIO, assert_matches_reference, run_exec, tiny_plan


@pytest.mark.timeout(300)
def test_tables_on_the_ps_train_exactly_like_local_tables(tmp_path):
    plan = tiny_plan(tmp_path / "plan.json", [10], [2, 1], schedule="1f1b", m=4)
    code, out, err = run_exec("run", str(plan), "--scenario", SCENARIO, "--steps", "4",
                              "--lr", "0.5", "--ps-shards", "2", "--out", str(tmp_path / "run"),
                              "--save-state", str(tmp_path / "state.pt"), "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["extra"]["ps_shards"] == 2 and result["extra"]["world_size"] == 3
    client = result["extra"]["ps"]["client"]
    assert set(client) == {f"emb_{k}.tables.0" for k in range(8)}
    assert all(c["pull_rows"] > 0 and c["push_rows"] > 0 for c in client.values())
    assert len(result["extra"]["ps"]["servers"]) == 2
    assert_matches_reference(tmp_path / "run", tmp_path / "state.pt", result)


@pytest.mark.timeout(300)
def test_ps_restarts_with_the_trainers_from_the_same_checkpoint(tmp_path):
    plan = tiny_plan(tmp_path / "plan.json", [1, 11], [1, 2, 1], schedule="gpipe", m=2)
    code, out, err = run_exec("run", str(plan), "--scenario", SCENARIO, "--steps", "6",
                              "--optimizer", "adagrad", "--lr", "0.02", "--ps-shards", "1",
                              "--out", str(tmp_path / "run"), "--checkpoint-dir",
                              str(tmp_path / "ckpt"), "--checkpoint-every", "2",
                              "--max-restarts", "1", "--inject-fault", "2:3",
                              "--save-state", str(tmp_path / "state.pt"), "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["extra"]["first_step"] == 2
    assert_matches_reference(tmp_path / "run", tmp_path / "state.pt", result)
