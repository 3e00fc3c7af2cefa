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


def _startup_heavy(rng: np.random.Generator, layers: int, types: int):
    """A default-model problem where the startup and the billing granule decide the bill: a
    startup class per type (0 to 900 s, so up to `types` sweeps, each bounded by the ones
    before it), jobs from a few seconds to hours, granules of none, 1 s, 60 s or an hour."""
    p = random_default_problem(rng, layers, types, caps=bool(rng.random() < 0.3))
    costs = dataclasses.replace(
        p.unit_costs, startup_s=rng.choice([0.0, 30.0, 120.0, 300.0, 900.0], size=types),
        billing_granularity_s=float(rng.choice([0.0, 1.0, 60.0, 3600.0])))
    return dataclasses.replace(p, costs=costs,
                               num_samples=float(rng.choice([1e3, 1e5, 1e7, 1e9])))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("mode", ["least", "exact"])
def test_startup_and_billing_bounds_keep_the_optimum(seed, mode):
    """The sweep's bounds that count the startup and whole billing granules (a plan of f USD
    per hour costs at least f x billed(startup + N / Thr)), and each startup class bounded by
    the cheapest plan of the classes before it, never cut the brute-force optimum."""
    rng = np.random.default_rng(2000 + seed)
    feasible = 0
    for n in range(10):
        layers, types = SHAPES[n % len(SHAPES)]
        p = _startup_heavy(rng, layers, types)
        want = min((evaluate_plan(p, plan, mode).cost_usd for plan, _ in all_plans(p, False)),
                   default=math.inf)
        scheduler = ExactScheduler()
        try:
            got = evaluate_plan(p, scheduler.schedule(p, Evaluator(p, mode)), mode).cost_usd
        except NoFeasiblePlan:
            got = math.inf
        assert same_cost(got, want), (n, got, want, scheduler.notes)
        feasible += math.isfinite(want)
    assert feasible >= 3
