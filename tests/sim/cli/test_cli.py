"""The heterps-sim commands end to end (in-process), with outputs checked against the model."""

import json

import pytest

from heterps_sim.cli import main
from heterps_sim.core.plan import plan_from_dict
from heterps_sim.inputs.load import load_input
from heterps_sim.planner.pricing import flushed_result
from heterps_sim.schedulers.registry import scheduler_names


def run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_catalog_json_lists_64_types(capsys):
    code, out, _ = run(["catalog", "--json"], capsys)
    types = json.loads(out)
    assert code == 0 and len(types) == 64
    code, out, _ = run(["catalog", "--kind", "gpu", "--json"], capsys)
    assert {t["kind"] for t in json.loads(out)} == {"gpu"}


def test_problem_json_reproduces_every_cost(capsys, tmp_path):
    code, out, _ = run(["problem", "scenarios/exec-tiny.yaml", "--json"], capsys)
    assert code == 0
    f = tmp_path / "problem.json"
    f.write_text(out)
    code, out, _ = run(["schedule", "scenarios/exec-tiny.yaml", "--json"], capsys)
    from_yaml = json.loads(out)
    code, out, _ = run(["schedule", str(f), "--json"], capsys)
    from_json = json.loads(out)
    assert from_yaml["plan"] == from_json["plan"]
    assert from_yaml["result"]["cost_usd"] == pytest.approx(from_json["result"]["cost_usd"], rel=1e-12)


def test_schedule_out_then_evaluate_agree(capsys, tmp_path):
    plan_path = tmp_path / "plan.json"
    code, out, _ = run(["schedule", "--mode", "exact", "--out", str(plan_path), "--json"], capsys)
    scheduled = json.loads(out)
    assert code == 0 and scheduled["scheduler"] == "exact"
    code, out, _ = run(["evaluate", "heterps_sim/inputs/data/default.yaml", str(plan_path), "--mode", "exact", "--json"], capsys)
    evaluated = json.loads(out)
    assert evaluated["cost_usd"] == pytest.approx(scheduled["result"]["cost_usd"], rel=1e-12)
    # both price the plan as it runs: its units and m under the flushed closed form
    problem = load_input(None).problem
    direct = flushed_result(problem, plan_from_dict(json.loads(plan_path.read_text())))
    assert direct.cost_usd == pytest.approx(evaluated["cost_usd"], rel=1e-12)
    assert evaluated["extra"]["model"] == "flushed"


def test_evaluate_with_fixed_replicas(capsys, tmp_path):
    plan = tmp_path / "plan.json"
    layers = list(load_input("scenarios/exec-tiny.yaml").problem.layer_names)
    plan.write_text(json.dumps({"stages": [
        {"layers": layers[:9], "resource": "xeon-icelake-16vcpu", "num_replicas": 2},
        {"layers": layers[9:], "resource": "t4", "num_replicas": 1}]}))
    code, out, _ = run(["evaluate", "scenarios/exec-tiny.yaml", str(plan), "--json"], capsys)
    result = json.loads(out)
    assert result["provisioning"] == "fixed"
    assert [s["num_replicas"] for s in result["stages"]] == [2, 1]
    assert code == (0 if result["feasible"] else 1)


def test_simulate_writes_a_run_folder(capsys, tmp_path):
    out_dir = tmp_path / "run"
    # the simulator's check is tests/sim/cli/test_cli_verify.py's; here the folder itself
    code, out, _ = run(["simulate", "--out", str(out_dir), "--verify", "none"], capsys)
    assert code == 0
    assert "FEASIBLE" in out and "bottleneck" in out and str(out_dir) in out
    for name in ("scenario.yaml", "problem.json", "plan.json", "result.json", "stages.csv", "schedule.json"):
        assert (out_dir / name).is_file(), name
    result = json.loads((out_dir / "result.json").read_text())
    plan = json.loads((out_dir / "plan.json").read_text())
    assert [s["resource"] for s in result["stages"]] == [s["resource"] for s in plan["stages"]]
    # the resolved scenario reproduces the run
    code, out, _ = run(["schedule", str(out_dir / "scenario.yaml"), "--json"], capsys)
    assert json.loads(out)["result"]["cost_usd"] == pytest.approx(result["cost_usd"], rel=1e-12)


@pytest.mark.parametrize("name", scheduler_names())
def test_every_registered_scheduler_runs_from_the_cli(name, capsys):
    from heterps_sim.schedulers.registry import scheduler_class
    fields = scheduler_class(name).Config.model_fields
    extra = (["--set", "updates=20"] if "updates" in fields else []) + (
        ["--set", "budget=500"] if "budget" in fields else [])
    code, out, _ = run(["schedule", "scenarios/exec-tiny.yaml", "--scheduler", name, "--json",
                        *extra], capsys)
    data = json.loads(out)
    assert data["scheduler"] == name and data["wall_s"] >= 0 and "evaluations" in data
    assert code == (0 if data["result"] and data["result"]["feasible"] else 1)


def test_help_has_an_example(capsys):
    for cmd in ("catalog", "check", "problem", "schedule", "evaluate", "simulate"):
        with pytest.raises(SystemExit) as info:
            main([cmd, "--help"])
        assert info.value.code == 0
        assert "example: heterps-sim" in capsys.readouterr().out


def test_set_passes_config_fields_and_rejects_unknown_ones(capsys):
    code, _, err = run(["schedule", "scenarios/exec-tiny.yaml", "--set", "colour=red"], capsys)
    assert code == 2 and "colour" in err and len(err.strip().splitlines()) == 1
    code, _, err = run(["schedule", "scenarios/exec-tiny.yaml", "--set", "nonsense"], capsys)
    assert code == 2 and "KEY=VALUE" in err
    code, out, _ = run(["schedule", "scenarios/exec-tiny.yaml", "--set",
                        "allow_same_type_cuts=true", "--json"], capsys)
    assert code == 0 and json.loads(out)["scheduler"] == "exact"


def test_exact_flushed_takes_its_budget_and_refuses_what_the_pricing_holds(capsys):
    # --set help lists exact-flushed's own fields: its budget reaches the search (a budget of
    # a million units leaves ctr-dnn-64types unproven, the default proves it), and the fields
    # the planner's pricing holds instead are refused in one line naming them
    args = ["schedule", "scenarios/ctr-dnn-64types.yaml", "--scheduler", "exact-flushed",
            "--verify", "none", "--json"]
    code, out, _ = run(args, capsys)
    assert code == 0 and json.loads(out)["proven_optimal"] is True
    code, out, _ = run(args + ["--set", "max_work=1000000"], capsys)
    got = json.loads(out)
    assert code == 0 and got["proven_optimal"] is False and got["gap"] > 0
    # the budget, and the answer's fewest-microbatches step past it (FEWER_M_WORK)
    assert got["notes"]["work"] <= 1_000_000 + 2_000_000
    code, _, err = run(args + ["--set", "microbatches=[4]"], capsys)
    assert code == 2 and "microbatches" in err and "costs.num_microbatches" in err
    assert len(err.strip().splitlines()) == 1
