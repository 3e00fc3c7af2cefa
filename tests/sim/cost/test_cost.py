"""The reference cost model against hand computations, and the batch path against it."""

import math

import numpy as np
import pytest

from heterps_sim.core.plan import Plan, Stage, plan_from_assignment
from heterps_sim.core.problem import Problem
from heterps_sim.cost.batch import evaluate_assignments
from heterps_sim.cost.reference import PlanError, evaluate_plan
from heterps_sim.testing import random_problem


def two_layer(limit=1000.0, available=(None, None), odt_parallel=True) -> Problem:
    return Problem(
        batch_size=100, throughput_limit=limit, num_samples=3.6e6,
        oct_s=np.array([[0.1, 0.02], [0.5, 0.05]]), odt_s=np.array([[0.01, 0.03], [0.0, 0.0]]),
        alpha=np.array([[0.9, 0.8], [0.9, 0.5]]), odt_parallel=odt_parallel,
        boundary_bytes=np.array([1e6, 0.0]), network_bytes_per_s=np.array([1e9, 2e9]),
        latency_s=1e-4, price_per_hour=np.array([1.0, 3.0]), available=available,
        type_names=("cpu", "gpu"), layer_names=("emb", "fc"), type_kinds=("cpu", "gpu"))


def test_hand_computed_two_stage_plan_least():
    p = two_layer()
    r = evaluate_plan(p, plan_from_assignment(p.layer_names, p.type_names, [0, 1]), "least")
    # stage 0: emb on cpu, next gpu: ODT = 0.01 + 1e6 / min(1e9, 2e9) + 1e-4 = 0.0111
    p0, a0 = 0.1 + 0.0111, 0.9
    d0 = 100 / 1000 - (1 - a0) * p0                       # B/TL - (1-a)P - S
    k0 = math.ceil(a0 * p0 / d0 - 1e-9)                   # = 2
    # stage 1: fc on gpu, last: P = 0.05, alpha 0.5 -> one unit gives 100/0.05 = 2000 >= 1000
    k1 = 1
    et0 = p0 * ((1 - a0) + a0 / k0)
    thr = min(100 / et0, 100 / 0.05)
    hours = 3.6e6 / thr / 3600
    assert (k0, k1) == (2, 1)
    assert r.feasible and r.reason == ""
    assert r.throughput == pytest.approx(thr, rel=1e-12)
    assert r.hours == pytest.approx(hours, rel=1e-12)
    assert r.cost_usd == pytest.approx(hours * (1.0 * 2 + 3.0 * 1), rel=1e-12)
    assert r.units_per_type == {"cpu": 2, "gpu": 1}
    assert r.bottleneck_stage == 0


def test_exact_mode_buys_a_faster_bottleneck_when_it_is_cheaper():
    p = two_layer()
    plan = plan_from_assignment(p.layer_names, p.type_names, [0, 1])
    least, exact = evaluate_plan(p, plan, "least"), evaluate_plan(p, plan, "exact")
    # One more cpu unit lifts stage 0 to the gpu stage's 2000 samples/s: fewer hours overall.
    assert exact.units_per_type == {"cpu": 3, "gpu": 1}
    assert exact.throughput == pytest.approx(2000.0)
    assert exact.cost_usd == pytest.approx(3.6e6 / 2000 / 3600 * 6.0)
    assert exact.cost_usd < least.cost_usd


def test_serial_transfer_adds_to_every_unit():
    p = two_layer(odt_parallel=False)
    r = evaluate_plan(p, Plan(stages=(Stage(layers=("emb", "fc"), resource="cpu", num_replicas=4),)))
    et = 0.6 * ((1 - (0.9 * 0.1 + 0.9 * 0.5) / 0.6) + (0.9 * 0.1 + 0.9 * 0.5) / 0.6 / 4) + 0.01
    assert r.provisioning == "fixed"
    assert r.throughput == pytest.approx(100 / et, rel=1e-12)


def test_infeasible_results_say_why():
    p = two_layer(limit=1e6)
    r = evaluate_plan(p, plan_from_assignment(p.layer_names, p.type_names, [1, 1]))
    assert not r.feasible and math.isinf(r.cost_usd)
    assert "cannot reach" in r.reason and "stage 0" in r.reason and "gpu" in r.reason
    capped = two_layer(limit=1000.0, available=(1, None))
    r = evaluate_plan(capped, plan_from_assignment(p.layer_names, p.type_names, [0, 1]))
    assert not r.feasible and "type cpu: plan needs 2 units, 1 available" in r.reason
    fixed = Plan(stages=(Stage(layers=("emb",), resource="cpu", num_replicas=1),
                         Stage(layers=("fc",), resource="gpu", num_replicas=1)))
    r = evaluate_plan(p.with_limit(1000.0), fixed)
    assert not r.feasible and "below the limit" in r.reason and r.throughput > 0


def test_unrunnable_layer_is_named():
    p = two_layer()
    p.oct_s[1, 0] = np.nan
    r = evaluate_plan(p, plan_from_assignment(p.layer_names, p.type_names, [0, 0]))
    assert not r.feasible and "layer fc cannot run on cpu" in r.reason


@pytest.mark.parametrize("layers", [("fc", "emb"), ("emb",), ("emb", "fc", "x")])
def test_plan_must_cover_layers_in_order(layers):
    p = two_layer()
    stages = tuple(Stage(layers=(n,), resource="cpu") for n in layers)
    with pytest.raises(PlanError, match="stages"):
        evaluate_plan(p, Plan(stages=stages))


def test_unknown_type_is_a_plan_error():
    with pytest.raises(PlanError, match="unknown resource type 'tpu'"):
        evaluate_plan(two_layer(), Plan(stages=(Stage(layers=("emb", "fc"), resource="tpu"),)))


def test_cost_never_falls_as_the_limit_rises_for_a_fixed_plan():
    p = two_layer()
    plan = plan_from_assignment(p.layer_names, p.type_names, [0, 1])
    costs = [evaluate_plan(p.with_limit(tl), plan, "exact").cost_usd for tl in np.geomspace(10, 3000, 40)]
    assert all(b >= a * (1 - 1e-12) for a, b in zip(costs, costs[1:]))


@pytest.mark.parametrize("mode", ["least", "exact"])
def test_batch_path_equals_reference(mode):
    rng = np.random.default_rng(7)
    checked = feasible = 0
    for t in range(120):
        p = random_problem(rng, int(rng.integers(1, 8)), int(rng.integers(1, 5)), caps=bool(t % 2))
        A = rng.integers(0, p.num_types, size=(12, p.num_layers))
        batch = evaluate_assignments(p, A, mode)
        for a, c, thr in zip(A, batch.cost_usd, batch.throughput):
            ref = evaluate_plan(p, plan_from_assignment(p.layer_names, p.type_names, a), mode)
            assert ref.feasible == bool(np.isfinite(c))
            if ref.feasible:
                feasible += 1
                assert c == pytest.approx(ref.cost_usd, rel=1e-12)
                assert thr == pytest.approx(ref.throughput, rel=1e-12)
            checked += 1
    assert feasible > checked // 5  # the comparison covered many feasible plans


def test_batch_rejects_bad_shapes():
    p = two_layer()
    with pytest.raises(ValueError, match="shape"):
        evaluate_assignments(p, np.zeros((3, 5), int))
    with pytest.raises(ValueError, match="type indices"):
        evaluate_assignments(p, np.full((3, 2), 7))
