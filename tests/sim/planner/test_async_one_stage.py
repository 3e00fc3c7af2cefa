"""An async plan of staleness 0 (one stage, at least as many microbatches as units) trains
synchronously, as the engine runs it (runtime/versions.py: step t waits for update t - 1):
the simulator runs it as the flushed 1F1B plan, the pricing prices it as it flushes, and the
stage model's optimum stays a certified bound below every plan's price."""

import math
from dataclasses import replace

import numpy as np
import pytest

from heterps_sim.core.plan import Plan, Stage
from heterps_sim.cost.reference import evaluate_plan
from heterps_sim.des import DesOptions, simulate
from heterps_sim.inputs.load import load_input
from heterps_sim.planner import Planner, Pricing
from heterps_sim.planner.pricing import flushed_result, with_stashed_weights
from heterps_sim.testing import random_default_problem

EFFECTS = "bubbles,allreduce,transfers,contention,ps"


@pytest.fixture(scope="module")
def matchnet():
    """matchnet-mixed-clouds at 95,000 samples/s: the stage model's async optimum is one
    stage of 9 units."""
    problem = load_input("scenarios/matchnet-mixed-clouds.yaml").problem
    return replace(problem, throughput_limit=95000.0)


def _one_stage(problem, units: int, m: int, schedule: str) -> Plan:
    return Plan(stages=(Stage(layers=tuple(problem.layer_names),
                              resource="xeon-sapphirerapids-88vcpu-gcp", num_replicas=units),),
                num_microbatches=m, schedule=schedule)


def test_the_simulator_runs_a_synchronous_async_plan_as_the_flushed_1f1b_plan(matchnet):
    opts = DesOptions.with_effects(EFFECTS)
    thr = {s: simulate(matchnet, _one_stage(matchnet, 9, 9, s), options=opts).result.throughput
           for s in ("1f1b", "async")}
    assert thr["async"] == pytest.approx(thr["1f1b"], rel=1e-12)
    # with fewer microbatches than units, steps do overlap across the replicas (staleness
    # > 0): the continuous stream, faster than the flushed plan
    few = {s: simulate(matchnet, _one_stage(matchnet, 9, 3, s), options=opts).result.throughput
           for s in ("1f1b", "async")}
    assert few["async"] > few["1f1b"] * 1.05


def test_a_synchronous_async_plan_is_priced_as_it_flushes(matchnet):
    plan = _one_stage(matchnet, 9, 9, "async")
    got, result = Pricing.of(matchnet, schedule="async").price(matchnet, plan)
    want = flushed_result(with_stashed_weights(matchnet, 0), replace(plan, schedule="1f1b"))
    assert got.schedule == "async" and result.extra["synchronous"]
    assert result.throughput == pytest.approx(want.throughput, rel=1e-12)
    # the stage model, which lets steps overlap, read it 34% faster: above the limit
    stage = evaluate_plan(with_stashed_weights(matchnet, 0), plan, "least")
    assert stage.throughput > matchnet.throughput_limit > result.throughput
    assert not result.feasible


def test_plans_of_two_stages_are_searched_apart_when_the_optimum_was_one_stage(matchnet):
    # the stage model's optimum (one stage of 9 units) flushes short of the limit; the answer
    # is the optimum over plans of two stages or more (the one-stage plans all miss it)
    answer = Planner(pricing=Pricing.of(matchnet, schedule="async")).plan(matchnet)
    assert "one_stage_apart" in answer.notes
    assert answer.feasible and answer.proven and len(answer.plan.stages) >= 2
    assert answer.result.throughput >= matchnet.throughput_limit
    one = Plan(stages=(Stage(layers=tuple(matchnet.layer_names),
                             resource="xeon-sapphirerapids-88vcpu-gcp"),), schedule="async")
    assert not Pricing.of(matchnet, schedule="async").price(matchnet, one)[1].feasible


def test_with_caps_the_answer_keeps_the_stage_models_optimum_as_its_bound(matchnet):
    # the sweep's cap search may answer one stage, so nothing is searched apart: the
    # re-priced answer claims no proof and keeps the stage model's optimum as its bound
    capped = replace(matchnet, available=tuple(10_000 for _ in matchnet.available))
    answer = Planner(pricing=Pricing.of(capped, schedule="async")).plan(capped)
    assert "one_stage_apart" not in answer.notes
    assert not answer.feasible and not answer.proven
    assert "staleness 0" in answer.notes["not_proven"]


def test_no_synchronous_plan_is_priced_below_the_stage_model():
    """What the certified bound of an answer repriced this way rests on: a one-stage plan's
    price as it flushes is never below the stage model's (which the search minimised)."""
    checked = 0
    for seed in range(60):
        rng = np.random.default_rng(seed)
        p = random_default_problem(rng, int(rng.integers(2, 6)), int(rng.integers(1, 4)),
                                   caps=seed % 3 == 0)
        pricing = Pricing.of(p, schedule="async")
        for t in p.type_names:
            plan = Plan(stages=(Stage(layers=tuple(p.layer_names), resource=t),),
                        schedule="async")
            stage = evaluate_plan(with_stashed_weights(p, 1), plan, "least")
            _, priced = pricing.price(p, plan)
            if priced.feasible:
                assert stage.feasible and priced.cost_usd >= stage.cost_usd * (1 - 1e-9)
                checked += priced.extra.get("synchronous", False)
            assert math.isinf(priced.cost_usd) or priced.feasible
    assert checked >= 20
