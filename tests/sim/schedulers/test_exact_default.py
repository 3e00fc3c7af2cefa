"""The exact scheduler stays exact under the default cost model: brute force over every plan
of tiny random problems (cost.evaluate_plan on each), with and without availability caps.

Under the default model a stage's time is not monotone in its units (the all-reduce grows with
k), memory sets a floor on units, the minimum batch a ceiling, the PS caps the plan, and the
bill depends on the slowest-starting type in the plan; the sweep handles each (see
schedulers/exact/sweep.py) and must still find the brute-force optimum.
"""

import dataclasses
import math

import numpy as np
import pytest

from heterps_sim.cost.reference import evaluate_plan
from heterps_sim.schedulers.base import Evaluator, NoFeasiblePlan
from heterps_sim.schedulers.exact.sweep import ExactScheduler
from heterps_sim.testing import random_default_problem

from .test_exact import all_plans, same_cost

SHAPES = [(1, 3), (2, 2), (2, 4), (3, 2), (3, 3), (4, 2), (4, 3), (5, 2)]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("mode", ["least", "exact"])
def test_exact_matches_brute_force(seed, mode):
    rng = np.random.default_rng(1000 + seed)
    feasible = 0
    for n in range(8):
        layers, types = SHAPES[n]
        p = random_default_problem(rng, layers, types, caps=bool(rng.random() < 0.4))
        want = min((evaluate_plan(p, plan, mode).cost_usd for plan, _ in all_plans(p, False)),
                   default=math.inf)
        scheduler = ExactScheduler()
        try:
            plan = scheduler.schedule(p, Evaluator(p, mode))
            got = evaluate_plan(p, plan, mode).cost_usd
        except NoFeasiblePlan:
            got = math.inf
        assert same_cost(got, want), (n, got, want, scheduler.notes)
        assert math.isinf(got) or scheduler.notes["predicted_cost_usd"] == pytest.approx(got, rel=1e-9)
        feasible += math.isfinite(want)
    assert feasible >= 2  # the family is not all infeasible


def test_a_limit_past_the_parameter_server_has_no_plan():
    rng = np.random.default_rng(5)
    p = random_default_problem(rng, 3, 2)
    p = p.with_limit(1e12)  # far past any PS capacity once a layer pulls embedding rows
    p = dataclasses.replace(p, sparse_bytes=np.array([4096.0, 0.0, 0.0]))
    with pytest.raises(NoFeasiblePlan, match="parameter server"):
        ExactScheduler().schedule(p, Evaluator(p, "least"))
