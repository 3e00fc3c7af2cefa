"""`schedule` and `simulate` check their plan in the simulator (--verify des, the default):
both numbers printed and kept in the JSON; simulate re-plans (or re-provisions) and writes
the plan that meets the limit in the simulator."""

import dataclasses
import json

import numpy as np
import pytest

from heterps_sim.cli import main
from heterps_sim.core.plan import plan_from_dict
from heterps_sim.core.problem import problem_from_dict
from heterps_sim.des import simulate
from heterps_sim.planner.check import DETERMINISTIC_EFFECTS, VerifySettings
from heterps_sim.testing import chain_problem


def run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def two_stage(tmp_path):
    """Layer 0 runs only on type a, layer 1 only on b: the plan is a 2-stage pipeline whose
    fill and drain (the bubbles effect) the analytic model does not see."""
    nan = np.nan
    p = chain_problem([0.02, 0.05], alpha=0.95, batch_size=64, limit=3000)
    p = dataclasses.replace(
        p, oct_s=np.array([[0.02, nan], [nan, 0.05]]), odt_s=np.array([[0.0, nan], [nan, 0.0]]),
        alpha=np.array([[0.95, nan], [nan, 0.95]]), network_bytes_per_s=np.array([1e9, 1e9]),
        price_per_hour=np.array([2.0, 3.0]), available=(None, None), type_names=("a", "b"),
        type_kinds=("cpu", "cpu"))
    path = tmp_path / "problem.json"
    path.write_text(json.dumps(p.to_json_dict()))
    return path


def test_schedule_prints_and_keeps_the_simulated_numbers(two_stage, capsys):
    code, out, _ = run(["schedule", str(two_stage), "--json"], capsys)
    data = json.loads(out)
    check = data["verify"]
    assert check["effects"] == list(DETERMINISTIC_EFFECTS) and check["status"] == "missed"
    problem = problem_from_dict(json.loads(two_stage.read_text()))
    plan = plan_from_dict(data["plan"]).with_replicas(
        [s["num_replicas"] for s in data["result"]["stages"]])
    sim = simulate(problem, plan, options=VerifySettings().options(),
                   record_spans=False).result
    assert check["simulated"]["throughput"] == sim.throughput < 3000
    assert check["analytic"]["throughput"] == data["result"]["throughput"] >= 3000
    assert code == 0  # schedule's status is the analytic model's; the check says it misses
    code, out, _ = run(["schedule", str(two_stage)], capsys)
    assert "simulator: MISSES the limit" in out and f"{sim.throughput:,.0f}" in out
    code, out, _ = run(["schedule", str(two_stage), "--verify", "none", "--json"], capsys)
    assert json.loads(out)["verify"] is None


def test_simulate_replans_and_writes_the_plan_that_meets_the_limit(two_stage, tmp_path, capsys):
    out_dir = tmp_path / "run"
    code, out, _ = run(["simulate", str(two_stage), "--out", str(out_dir), "--json"], capsys)
    data = json.loads(out)
    check = data["verify"]
    # re-planning (the scheduler at a raised floor) finds a plan before any re-provisioning
    assert code == 0 and check["status"] == "replanned" and check["meets_limit"]
    assert check["replan_rounds"][-1]["meets_limit"] and check["steps"] == []
    grown = check["final"]
    assert grown["simulated"]["throughput"] >= 3000 > check["simulated"]["throughput"]
    assert grown["simulated"]["units"] == [2, 3]
    # the run folder's plan is the grown one, and it meets the limit in a fresh simulation
    plan = plan_from_dict(json.loads((out_dir / "plan.json").read_text()))
    assert [s.num_replicas for s in plan.stages] == [2, 3]
    problem = problem_from_dict(json.loads(two_stage.read_text()))
    sim = simulate(problem, plan, options=VerifySettings().options(),
                   record_spans=False).result
    assert sim.feasible and sim.throughput == grown["simulated"]["throughput"]
    result = json.loads((out_dir / "result.json").read_text())
    assert [s["num_replicas"] for s in result["stages"]] == [2, 3]
    assert result["extra"]["simulated"]["throughput"] == sim.throughput
    assert json.loads((out_dir / "verify.json").read_text())["steps"] == check["steps"]
    assert json.loads((out_dir / "schedule.json").read_text())["verify"]["status"] == \
        "replanned"


def test_simulate_says_plainly_when_no_provisioning_meets_the_limit(two_stage, tmp_path,
                                                                     capsys):
    data = json.loads(two_stage.read_text())
    data["available"] = [1, 3]  # what the analytic plan uses, nothing more
    capped = tmp_path / "capped.json"
    capped.write_text(json.dumps(data))
    code, out, _ = run(["simulate", str(capped), "--out", str(tmp_path / "run")], capsys)
    assert code == 1
    assert "simulator: MISSES the limit: no provisioning of this plan meets the limit" in out
    code, out, _ = run(["simulate", str(capped), "--out", str(tmp_path / "run2"),
                        "--verify", "none"], capsys)
    assert code == 0 and "simulator" not in out
