"""The default model's batch kernel (cost/batch.py) against the reference, plan for plan, over
many plans at once: several parallel blocks, plans that stop at their first unprovisionable
stage, caps, and both provisioning modes. Cost, throughput and USD per hour are the same floats
as cost.evaluate_plan's wherever the plan is feasible."""

import math

import numpy as np
import pytest

from heterps_sim.core.plan import plan_from_assignment
from heterps_sim.cost import batch as cost_batch
from heterps_sim.cost.batch import evaluate_assignments
from heterps_sim.cost.reference import evaluate_plan
from heterps_sim.testing import random_default_problem


def _stage_structured(rng, n, layers, types):
    """n plans of 1-4 stages (random plans of one type per layer are almost never feasible)."""
    rows = np.empty((n, layers), np.int64)
    for r in range(n):
        cuts = np.sort(rng.choice(np.arange(1, layers), size=min(layers - 1, rng.integers(0, 4)),
                                  replace=False)) if layers > 1 else []
        for lo, hi in zip([0, *cuts], [*cuts, layers]):
            rows[r, lo:hi] = rng.integers(types)
    return rows


@pytest.mark.parametrize("mode", ["least", "exact"])
def test_many_plans_give_the_reference_floats(mode):
    rng = np.random.default_rng(23)
    checked = 0
    for _ in range(6):
        p = random_default_problem(rng, int(rng.integers(2, 9)), int(rng.integers(2, 6)),
                                   caps=bool(rng.random() < 0.5))
        n = 2 * cost_batch.BLOCK + 37   # several blocks, the last one partial
        rows = np.concatenate([_stage_structured(rng, n // 2, p.num_layers, p.num_types),
                               rng.integers(0, p.num_types, size=(n - n // 2, p.num_layers))])
        got = evaluate_assignments(p, rows, mode)
        for r in rng.choice(n, size=60, replace=False):
            plan = plan_from_assignment(p.layer_names, p.type_names, rows[r])
            ref = evaluate_plan(p, plan, mode)
            assert got.cost_usd[r] == ref.cost_usd
            assert got.feasible[r] == ref.feasible
            if ref.feasible:
                assert got.throughput[r] == ref.throughput
                assert got.cost_per_hour[r] == ref.cost_per_hour
                checked += 1
    assert checked >= 20   # the family is not all infeasible


def test_a_plan_costs_the_same_alone_and_among_others():
    """Buffers are shared within a block: nothing of one plan leaks into the next."""
    rng = np.random.default_rng(4)
    p = random_default_problem(rng, 6, 4, caps=True)
    rows = np.concatenate([_stage_structured(rng, 700, 6, 4), rng.integers(0, 4, size=(700, 6))])
    together = evaluate_assignments(p, rows)
    for r in range(0, len(rows), 97):
        alone = evaluate_assignments(p, rows[r:r + 1])
        for field in ("cost_usd", "throughput", "cost_per_hour"):
            a, b = getattr(alone, field)[0], getattr(together, field)[r]
            assert a == b or (math.isnan(a) and math.isnan(b))
