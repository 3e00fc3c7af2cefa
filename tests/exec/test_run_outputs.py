"""What a finished run leaves: --save-state byte for byte the same for the same seed, and an
honest result from a restart that found every step already done."""

from __future__ import annotations

import json

import pytest
import torch

from heterps_exec.runtime.worker import save_state
from tests.exec.helpers import SCENARIO, assert_matches_reference, run_exec, tiny_plan


def test_save_state_bytes_do_not_depend_on_the_file_name(tmp_path):
    state = {"fc.weight": torch.arange(12.0).reshape(3, 4), "emb.rows": torch.ones(5, 2)}
    save_state(state, tmp_path / ".state.pt.abc123.tmp")
    save_state(state, tmp_path / "elsewhere.pt")
    first, second = ((tmp_path / n).read_bytes() for n in (".state.pt.abc123.tmp", "elsewhere.pt"))
    assert first == second
    assert b"abc123" not in first
    assert torch.equal(torch.load(tmp_path / "elsewhere.pt")["fc.weight"], state["fc.weight"])


@pytest.mark.timeout(300)
def test_two_runs_with_the_same_seed_save_identical_bytes(tmp_path):
    plan = tiny_plan(tmp_path / "plan.json", [], [1], m=2)
    states = []
    for name in ("a", "b"):
        code, _, err = run_exec("run", str(plan), "--scenario", SCENARIO, "--steps", "2",
                                "--seed", "3", "--out", str(tmp_path / name),
                                "--save-state", str(tmp_path / f"{name}.pt"), "--quiet")
        assert code == 0, err
        states.append((tmp_path / f"{name}.pt").read_bytes())
    assert states[0] == states[1]
    assert (tmp_path / "a" / "state.pt").read_bytes() == states[0]


@pytest.mark.timeout(300)
def test_a_restart_with_no_steps_left_finishes_with_an_honest_result(tmp_path):
    """Rank 1 dies after the last step's checkpoint (fault at step STEPS): the restarted
    attempt resumes at step 4 of 4, runs nothing, and says so; the weights are right."""
    plan = tiny_plan(tmp_path / "plan.json", [10], [1, 1], m=2)
    code, out, err = run_exec("run", str(plan), "--scenario", SCENARIO, "--steps", "4",
                              "--out", str(tmp_path / "run"), "--checkpoint-dir",
                              str(tmp_path / "ckpt"), "--checkpoint-every", "2",
                              "--max-restarts", "1", "--inject-fault", "1:4",
                              "--save-state", str(tmp_path / "state.pt"), "--json")
    assert code == 0, err
    result = json.loads(out)
    assert "exitcode: -9" in (tmp_path / "run" / "torchrun.log").read_text()
    assert result["extra"]["first_step"] == 4 and result["extra"]["measured"] is False
    assert result["extra"]["measured_steps"] == 0 and result["step_time_s"] is None
    assert not result["feasible"] and "throughput not measured" in result["reason"]
    assert "step 4 of 4" in result["reason"]
    assert_matches_reference(tmp_path / "run", tmp_path / "state.pt", result)
