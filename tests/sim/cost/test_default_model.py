"""The default cost model (cost/dominant.py) against closed forms, linear scans and itself.

Closed forms: a one-stage plan whose step time, throughput and bill are written out by hand.
Scans: least_units / fastest_units / most_units_within against trying every k. Identity: the
numba kernels (cost/batch.py) give the reference's floats exactly, plan for plan.
"""

import math
from dataclasses import replace

import numpy as np
import pytest

from heterps_sim.core.plan import Plan, Stage, plan_from_assignment
from heterps_sim.core.problem import problem_from_dict
from heterps_sim.core.unit_costs import default_costs
from heterps_sim.cost import dominant, dominant_numba
from heterps_sim.cost.batch import evaluate_assignments
from heterps_sim.cost.reference import evaluate_plan
from heterps_sim.testing import chain_problem, random_default_problem, random_problem


def one_stage(k: int | None, **costs):
    """One layer, oct 0.1 s per batch of 64, alpha 0.9, 40 MB of dense parameters, 10 GB/s."""
    p = chain_problem([0.1], alpha=0.9, latency_s=1e-4, network=1e10, batch_size=64,
                      limit=100.0, param_bytes=4e7)
    c = default_costs(("gpu",), 1, 1, overrides=dict(
        memory_bytes=np.array([costs.pop("memory", math.inf)]),
        state_bytes=np.array([1.6e8]), activation_bytes=np.array([1e6])))
    c = replace(c, **costs)
    p = replace(p, cost_model="default", costs=c, num_samples=6.4e5)
    plan = Plan(stages=(Stage(layers=("l0",), resource="t", num_replicas=k),))
    return p, plan


def test_step_time_closed_form():
    p, plan = one_stage(4)
    r = evaluate_plan(p, plan)
    F = 1e-3 + 2e-4                               # gpu step + one layer
    AR = 3 / 4 * 2 * 4e7 / 1e10 + 3 * 2 * 1e-4    # ring: 2(k-1)/k bytes / bw + 2(k-1) lat
    et = 0.1 * (0.1 + 0.9 / 4) + F + AR
    assert r.stages[0].exec_time_s == pytest.approx(et, rel=1e-12)
    assert r.throughput == pytest.approx(64 / et, rel=1e-12)
    run_s = 6.4e5 / r.throughput
    billed_h = math.ceil((300 + run_s) / 60) * 60 / 3600   # startup, whole minutes
    assert r.cost_usd == pytest.approx(4 * 2.0 * billed_h, rel=1e-12)


def test_paper_model_has_none_of_it():
    p, plan = one_stage(4)
    r = evaluate_plan(p.with_model("paper"), plan)
    assert r.stages[0].exec_time_s == pytest.approx(0.1 * (0.1 + 0.9 / 4), rel=1e-15)
    assert r.cost_usd == pytest.approx(6.4e5 / r.throughput / 3600 * 8.0, rel=1e-15)


def test_more_units_can_be_slower_and_provisioning_searches():
    """The all-reduce makes ET(k) rise past its minimum; least units is the first k that
    meets the level, not a closed-form ceil."""
    p, _ = one_stage(None)
    ets = [evaluate_plan(p, one_stage(k)[1]).stages[0].exec_time_s for k in range(1, 200)]
    k_best = int(np.argmin(ets)) + 1
    assert 1 < k_best < 199 and ets[-1] > ets[k_best - 1]
    limit = 64 / ets[k_best - 1] * 0.999
    r = evaluate_plan(p.with_limit(limit), Plan(stages=(Stage(layers=("l0",), resource="t"),)))
    k = r.stages[0].num_replicas
    assert r.feasible and 64 / ets[k - 1] >= limit and all(64 / e < limit for e in ets[:k - 1])
    too_fast = evaluate_plan(p.with_limit(64 / ets[k_best - 1] * 1.001),
                             Plan(stages=(Stage(layers=("l0",), resource="t"),)))
    assert not too_fast.feasible and "cannot reach" in too_fast.reason


def test_memory_is_a_hard_limit():
    # 1.6e8 state + 64 x 1e6 / k activations within 0.9 x 2e8 = 1.8e8: k >= 4
    p, plan = one_stage(3, memory=2e8)
    r = evaluate_plan(p, plan)
    assert not r.feasible and "at least 4 units" in r.reason
    assert evaluate_plan(p, one_stage(4, memory=2e8)[1]).feasible
    free = evaluate_plan(p, Plan(stages=(Stage(layers=("l0",), resource="t"),)))
    assert free.stages[0].num_replicas >= 4


def test_minimum_batch_per_unit():
    p, plan = one_stage(9, min_unit_batch=8)   # 64 // 8 = 8 units at most
    r = evaluate_plan(p, plan)
    assert not r.feasible and "minimum batch per unit (8 samples; at most 8 units)" in r.reason
    p, _ = one_stage(None, memory=2e8, min_unit_batch=32)   # memory needs 4, batch allows 2
    r = evaluate_plan(p, Plan(stages=(Stage(layers=("l0",), resource="t"),)))
    assert not r.feasible and "at most 2" in r.reason


def test_parameter_server_caps_throughput():
    p = random_problem(np.random.default_rng(3), 3, 2)
    p = replace(p, cost_model="default", sparse_bytes=np.array([1e6, 0.0, 0.0]))
    cap = 4 / (1 / 12.5e9 + 0.9 / 50e9 + 0.09 / 10e9 + 0.01 / 1e9) / 2e6  # DEFAULT_PS
    plan = plan_from_assignment(p.layer_names, p.type_names, [0, 0, 0])
    r = evaluate_plan(p.with_limit(cap * 1.01), plan)
    assert not r.feasible and "parameter server" in r.reason
    r = evaluate_plan(p.with_limit(cap * 0.5), plan, "exact")
    assert r.throughput <= cap * (1 + 1e-12)


def test_startup_of_the_slowest_type_bills_every_unit():
    p = random_problem(np.random.default_rng(4), 2, 2, unrunnable=0.0)
    p = replace(p, cost_model="default", num_samples=1e3)   # type 0 cpu (120 s), 1 gpu (300 s)
    both = evaluate_plan(p, plan_from_assignment(p.layer_names, p.type_names, [0, 1]))
    if both.feasible:
        run_s = p.num_samples / both.throughput
        assert both.cost_usd == pytest.approx(
            both.cost_per_hour * math.ceil((300 + run_s) / 60) * 60 / 3600, rel=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_unit_search_matches_a_scan(seed):
    rng = np.random.default_rng(seed)
    for _ in range(400):
        par, ser, al = rng.lognormal(-3, 1), rng.lognormal(-6, 1) * (rng.random() < .5), rng.uniform(.5, .99)
        f, r, q = rng.lognormal(-7, 1), rng.lognormal(-5, 2) * (rng.random() < .8), rng.choice([0, 1e-4, 2e-3])
        target = rng.uniform(0.3, 3) * dominant.step_time(par, ser, al, f, r, q, int(rng.integers(1, 50)))
        lo, hi = int(rng.integers(1, 4)), int(rng.integers(4, 300))
        ks = range(lo, hi + 1)
        et = {k: dominant.step_time(par, ser, al, f, r, q, k) for k in ks}
        want = next((k for k in ks if et[k] <= target * (1 + dominant.TARGET_TOLERANCE)), -1)
        args = (par, ser, al, f, r, q)
        assert dominant.least_units(*args, target, lo, hi) == want
        assert dominant_numba.least_units(*args, target, lo, hi) == want
        assert dominant.fastest_units(*args, lo, hi) == min(ks, key=lambda k: (et[k], k))
        budget = target * rng.uniform(1, 100)
        assert dominant.most_units_within(*args, budget, lo, hi) == max(
            (k for k in ks if k * et[k] <= budget), default=-1)


@pytest.mark.parametrize("mode", ["least", "exact"])
def test_batch_kernel_gives_the_reference_floats(mode):
    rng = np.random.default_rng(11)
    for _ in range(40):
        p = random_default_problem(rng, int(rng.integers(1, 7)), int(rng.integers(1, 5)),
                                   caps=bool(rng.random() < 0.5))
        rows = rng.integers(0, p.num_types, size=(15, p.num_layers))
        batch = evaluate_assignments(p, rows, mode)
        for row, cost in zip(rows, batch.cost_usd):
            ref = evaluate_plan(p, plan_from_assignment(p.layer_names, p.type_names, row), mode)
            assert cost == ref.cost_usd


def test_problem_json_keeps_the_model():
    p = random_default_problem(np.random.default_rng(5), 3, 2)
    q = problem_from_dict(p.to_json_dict())
    assert q.cost_model == "default" and np.array_equal(q.costs.memory_bytes, p.costs.memory_bytes)
    plan = plan_from_assignment(p.layer_names, p.type_names, [0, 1, 0])
    assert evaluate_plan(q, plan).cost_usd == evaluate_plan(p, plan).cost_usd
    d = p.to_json_dict()
    del d["cost_model"], d["costs"]
    assert problem_from_dict(d).cost_model == "default"   # a file's default is the default


def test_malformed_costs_in_a_problem_file_are_bad_input():
    from pydantic import ValidationError

    d = random_default_problem(np.random.default_rng(6), 3, 2).to_json_dict()
    d["costs"]["min_unit_batch"] = 0
    with pytest.raises(ValidationError, match="costs.min_unit_batch"):
        problem_from_dict(d)
    d = random_default_problem(np.random.default_rng(6), 3, 2).to_json_dict()
    del d["costs"]["startup_s"]
    with pytest.raises(ValidationError, match="costs: missing or malformed field"):
        problem_from_dict(d)
