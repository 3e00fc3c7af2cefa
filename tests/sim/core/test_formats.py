"""Plan, problem and result files: round trips and validation."""

import json
import math

import numpy as np
import pytest
from pydantic import ValidationError

from heterps_sim.core.plan import Plan, Stage, plan_from_assignment, plan_from_dict
from heterps_sim.core.problem import problem_from_dict
from heterps_sim.core.result import result_from_dict
from heterps_sim.cost.reference import evaluate_plan
from heterps_sim.testing import random_problem


def test_problem_json_round_trip_keeps_nulls_and_costs():
    rng = np.random.default_rng(3)
    p = random_problem(rng, 5, 4, caps=True, unrunnable=0.3)
    data = json.loads(json.dumps(p.to_json_dict()))
    assert set(data) >= {"batch_size", "throughput_limit", "num_samples", "oct_s", "odt_s", "alpha",
                         "odt_parallel", "boundary_bytes", "network_bytes_per_s", "latency_s",
                         "price_per_hour", "available", "type_names", "layer_names"}
    assert any(x is None for row in data["oct_s"] for x in row)
    q = problem_from_dict(data)
    np.testing.assert_array_equal(np.isnan(p.oct_s), np.isnan(q.oct_s))
    for _ in range(20):
        plan = plan_from_assignment(p.layer_names, p.type_names, rng.integers(0, 4, 5))
        a, b = evaluate_plan(p, plan, "exact"), evaluate_plan(q, plan, "exact")
        assert a.feasible == b.feasible and (not a.feasible or a.cost_usd == b.cost_usd)


@pytest.mark.parametrize("field, value, message", [
    ("price_per_hour", [-1.0, 1.0], "price_per_hour[0]"),
    ("batch_size", 0, "batch_size"),
    ("throughput_limit", -5, "throughput_limit"),
    ("oct_s", [[0.1, 0.2]], "oct_s"),
    ("available", [-1, None], "available[0]"),
    ("layer_names", [], "layer_names"),
    ("surprise", 1, "surprise"),
])
def test_problem_validation_names_the_field(field, value, message):
    data = {"batch_size": 8, "throughput_limit": 10.0, "num_samples": 1e3,
            "oct_s": [[0.1, 0.2], [0.3, None]], "odt_s": [[0.0, 0.0], [0.0, 0.0]],
            "alpha": [[0.9, 0.9], [0.9, 0.9]], "boundary_bytes": [10.0, 0.0],
            "network_bytes_per_s": [1e9, 1e9], "latency_s": 0.0, "price_per_hour": [1.0, 2.0],
            "available": [None, None], "type_names": ["a", "b"], "layer_names": ["x", "y"]}
    problem_from_dict(data)
    data[field] = value
    with pytest.raises(ValidationError) as info:
        problem_from_dict(data)
    assert message.split("[")[0] in str(info.value)


def test_plan_json_round_trip_and_replicas():
    plan = Plan(stages=(Stage(layers=("a", "b"), resource="t4", num_replicas=3),
                        Stage(layers=("c",), resource="cpu")), num_microbatches=4, schedule="1f1b")
    data = json.loads(json.dumps(plan.to_json_dict()))
    assert data["format_version"] == 2 and "num_replicas" not in data["stages"][1]
    assert plan_from_dict(data) == plan
    assert hash(plan_from_dict(data)) == hash(plan)
    with pytest.raises(ValidationError, match="num_replicas"):
        plan_from_dict({"stages": [{"layers": ["a"], "resource": "t4", "num_replicas": 0}]})
    with pytest.raises(ValidationError, match="format_version"):
        plan_from_dict({"format_version": 9, "stages": [{"layers": ["a"], "resource": "t4"}]})
    with pytest.raises(ValidationError, match="extra"):
        plan_from_dict({"stages": [{"layers": ["a"], "resource": "t4", "gpus": 2}]})


def test_units_by_type_sums_stages_and_mixed_replicas_in_first_seen_order():
    plan = Plan(stages=(Stage(layers=("a",), resource="t4", num_replicas=2),
                        Stage(layers=("b",), replicas=(("v100", 3), ("t4", 1))),
                        Stage(layers=("c",), resource="v100", num_replicas=1)))
    assert list(plan.units_by_type().items()) == [("t4", 3), ("v100", 4)]


def test_plan_problems_name_the_first_mismatch():
    plan = Plan(stages=(Stage(layers=("a", "c"), resource="x"),))
    issues = plan.problems(("a", "b", "c"), ("y",))
    assert any("layer #1 is 'c'" in i for i in issues)
    assert any("unknown resource type 'x'" in i for i in issues)


def test_result_json_round_trip_with_infinite_cost():
    rng = np.random.default_rng(5)
    p = random_problem(rng, 3, 2)
    for a in ([0, 0, 0], [0, 1, 1], [1, 1, 1]):
        r = evaluate_plan(p, plan_from_assignment(p.layer_names, p.type_names, a))
        data = json.loads(json.dumps(r.to_json_dict()))
        assert data["source"] == "analytic" and set(data) >= {
            "feasible", "reason", "throughput", "cost_usd", "hours", "cost_per_hour",
            "provisioning", "stages"}
        back = result_from_dict(data)
        assert back.feasible == r.feasible
        assert (math.isinf(back.cost_usd) and not r.feasible) or back.cost_usd == r.cost_usd
        assert [s.layers for s in back.stages] == [s.layers for s in r.stages]


def test_problem_from_a_scenario_carries_param_and_sparse_bytes():
    from heterps_sim.inputs.load import load_input
    p = load_input("scenarios/exec-tiny.yaml").problem
    assert p.param_bytes is not None and p.param_bytes.sum() > 0 and p.sparse_bytes.sum() > 0
    q = problem_from_dict(json.loads(json.dumps(p.to_json_dict())))
    np.testing.assert_array_equal(p.param_bytes, q.param_bytes)
    np.testing.assert_array_equal(p.sparse_bytes, q.sparse_bytes)
    data = p.to_json_dict()
    data["param_bytes"] = [1.0]
    with pytest.raises(ValidationError, match="param_bytes"):
        problem_from_dict(data)
