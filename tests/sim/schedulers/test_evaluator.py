"""Evaluator: many plans at once cost what one call each costs, and every plan is counted."""

import numpy as np

from heterps_sim.core.plan import plan_from_assignment
from heterps_sim.cost.reference import evaluate_plan
from heterps_sim.schedulers.base import Evaluator
from heterps_sim.testing import random_problem


def _rows(problem, rng, n):
    runnable = np.isfinite(problem.oct_s)
    return np.array([[rng.choice(np.flatnonzero(runnable[i])) for i in range(len(runnable))]
                     for _ in range(n)])


def test_evaluate_many_equals_one_call_per_plan_and_counts_each():
    rng = np.random.default_rng(3)
    for mode in ("least", "exact"):
        problem = random_problem(rng, 7, 5, caps=True)
        rows = _rows(problem, rng, 40)
        batched = Evaluator(problem, mode)
        costs = batched.evaluate_many(rows)
        single = Evaluator(problem, mode)
        want = [single(plan_from_assignment(problem.layer_names, problem.type_names, r)).cost_usd
                for r in rows]
        np.testing.assert_allclose(costs, want, rtol=1e-9)
        assert batched.count == single.count == len(rows)


def test_another_model_is_called_once_per_plan():
    problem = random_problem(np.random.default_rng(4), 5, 3)
    seen = []

    def model(p, plan, mode):
        seen.append(plan)
        return evaluate_plan(p, plan, mode)

    evaluate = Evaluator(problem, "least", fn=model)
    rows = _rows(problem, np.random.default_rng(5), 6)
    costs = evaluate.evaluate_many(rows)
    assert len(seen) == evaluate.count == 6 and costs.shape == (6,)
    evaluate.counted(10)
    assert evaluate.count == 16
