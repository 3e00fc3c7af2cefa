"""Every shipped scenario builds, schedules and says what it should; schema stays current."""

import json
from pathlib import Path

import pytest

from heterps_sim.cli import main
from heterps_sim.inputs.load import load_input
from heterps_sim.inputs.scenario import (
    SCHEMA_PATH,
    ScenarioError,
    parse_scenario,
    scenario_json_schema,
    scenario_problem,
)
from heterps_sim.schedulers.base import run_scheduler
from heterps_sim.schedulers.registry import make_scheduler

SCENARIOS = sorted(Path(__file__).resolve().parents[3].joinpath("scenarios").glob("*.yaml"))


def test_enough_scenarios_ship():
    names = {p.stem for p in SCENARIOS}
    assert len(SCENARIOS) >= 8 and "exec-tiny" in names
    problems = {p.stem: load_input(p).problem for p in SCENARIOS}
    assert sum(pr.num_types == 64 for pr in problems.values()) >= 2
    assert any(any(a is not None for a in pr.available) for pr in problems.values())


@pytest.mark.parametrize("path", SCENARIOS + [None], ids=lambda p: p.stem if p else "default")
def test_scenario_schedules_like_the_best_single_type_or_better(path):
    problem = load_input(path).problem
    exact = run_scheduler(make_scheduler("exact"), problem, "least")
    homogeneous = run_scheduler(make_scheduler("homogeneous"), problem, "least")
    if exact.result is None:
        assert homogeneous.result is None
        assert "no plan" in exact.notes["reason"]
        return
    assert exact.result.feasible
    assert exact.result.throughput >= problem.throughput_limit
    if homogeneous.result is not None:
        assert exact.result.cost_usd <= homogeneous.result.cost_usd * (1 + 1e-12)


def test_impossible_scenario_is_reported_clearly(capsys):
    code = main(["schedule", "scenarios/dlrm-impossible.yaml"])
    out = capsys.readouterr().out
    assert code == 1
    assert "no feasible plan" in out and "samples/s" in out


def test_exec_tiny_is_small():
    problem = load_input("scenarios/exec-tiny.yaml").problem
    assert problem.num_layers <= 16 and problem.num_types <= 4


def test_schema_is_current():
    assert json.loads(SCHEMA_PATH.read_text()) == scenario_json_schema(), (
        "regenerate the schema: python -c 'import json; from heterps_sim.inputs.scenario "
        "import scenario_json_schema as s; print(json.dumps(s(), indent=1))' > heterps_sim/inputs/data/scenario.schema.json")


def test_all_errors_reported_at_once_with_paths():
    bad = {"name": "x", "model": {"name": "dlrm", "colour": "red"},
           "workload": {"batch_size": -1, "throughput_limit": 0, "num_samples": 5}}
    with pytest.raises(ScenarioError) as info:
        parse_scenario(bad, "s.yaml")
    msg = str(info.value)
    for needle in ("s.yaml", "model.colour", "workload.batch_size", "workload.throughput_limit"):
        assert needle in msg


def test_unknown_cap_and_type_names():
    scn = parse_scenario({"name": "x", "model": {"name": "tiny-ctr"},
                          "cluster": {"types": ["t4"], "available": {"a100-40gb-sxm": 2}},
                          "workload": {"batch_size": 8, "throughput_limit": 1, "num_samples": 8}})
    with pytest.raises(ScenarioError, match="cluster.available.a100-40gb-sxm: unknown resource type"):
        scenario_problem(scn)


def test_overrides_and_synthetic_types_reach_the_problem():
    scn = parse_scenario({"name": "x", "model": {"name": "tiny-ctr"},
                          "cluster": {"types": ["t4", "a10g"], "overrides": {"t4": {"price_per_hour": 0.1}},
                                      "synthetic": {"count": 3, "seed": 1}, "available": {"t4": 5}},
                          "workload": {"batch_size": 8, "throughput_limit": 1, "num_samples": 8}})
    p = scenario_problem(scn)
    assert p.num_types == 5 and p.price_per_hour[p.type_index("t4")] == 0.1
    assert p.available[p.type_index("t4")] == 5 and p.available[p.type_index("a10g")] is None


@pytest.mark.parametrize("mode", ["least", "exact"])
def test_exact_optimum_never_gets_cheaper_as_the_limit_rises(mode):
    base = load_input("heterps_sim/inputs/data/default.yaml").problem
    costs = []
    for limit in [2e4, 1e5, 3e5, 1e6, 2e6, 2.5e6, 3e6, 4e6, 6e6]:
        outcome = run_scheduler(make_scheduler("exact"), base.with_limit(limit), mode)
        costs.append(outcome.result.cost_usd if outcome.result else float("inf"))
    assert costs[0] < float("inf")
    assert all(b >= a * (1 - 1e-12) for a, b in zip(costs, costs[1:])), costs
