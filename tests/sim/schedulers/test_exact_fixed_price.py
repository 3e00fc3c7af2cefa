"""The stage model's exact scheduler (schedulers/exact/sweep.py) stays exact when every plan
pays a fixed price (priced parameter-server hosts: cost.reference.fixed_price_per_hour, added
by job_cost): brute force over every plan of tiny random default-model problems, each costed by
cost.evaluate_plan, with and without availability caps. Its bounds price a plan at
(stages + fixed) x billed hours; leaving the fixed part out would only prune less, adding it
where it is not paid would cut the optimum."""

import math
from dataclasses import replace

import numpy as np
import pytest

from heterps_sim.core.ps_spec import PsSpec
from heterps_sim.cost.reference import evaluate_plan, fixed_price_per_hour
from heterps_sim.schedulers.base import Evaluator, NoFeasiblePlan
from heterps_sim.schedulers.exact.sweep import ExactScheduler
from heterps_sim.testing import random_default_problem

from .test_exact import all_plans, same_cost

SHAPES = [(2, 2), (2, 3), (3, 2), (3, 3), (4, 2)]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("mode", ["least", "exact"])
def test_exact_with_a_fixed_price_matches_brute_force(seed, mode):
    rng = np.random.default_rng(5100 + seed)
    feasible = 0
    for layers, types in SHAPES:
        p = random_default_problem(rng, layers, types, caps=bool(rng.random() < 0.4))
        # hosts costing from a fraction of a unit to many units: the optimum can move to
        # faster plans (fewer billed hours of the hosts)
        fixed = float(rng.choice([0.3, 5.0, 80.0]))
        p = replace(p, ps=PsSpec(host_type="ps-host", price_per_hour=fixed))
        assert fixed_price_per_hour(p) == fixed
        costs = [evaluate_plan(p, plan, mode).cost_usd for plan, _ in all_plans(p, False)]
        want = min(costs, default=math.inf)
        scheduler = ExactScheduler()
        try:
            plan = scheduler.schedule(p, Evaluator(p, mode))
            got = evaluate_plan(p, plan, mode).cost_usd
        except NoFeasiblePlan:
            got = math.inf
        assert same_cost(got, want), (layers, types, fixed, got, want, scheduler.notes)
        if math.isfinite(want):
            feasible += 1
            assert scheduler.notes["predicted_cost_usd"] == pytest.approx(got, rel=1e-9)
    assert feasible >= 2
