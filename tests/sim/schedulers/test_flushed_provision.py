"""provision_flushed: the cheapest units and m of one plan under the flushed closed form,
against brute force over every unit count; flushed_result: the closed form's own numbers."""

import itertools
import math
from dataclasses import replace

import numpy as np
import pytest

from heterps_sim.core.plan import Plan, Stage
from heterps_sim.cost.flush import flushed_throughput
from heterps_sim.cost.reference import plan_stages
from heterps_sim.planner.pricing import flushed_result
from heterps_sim.schedulers.exact.flushed_provision import (
    applies,
    microbatch_counts,
    provision_flushed,
)
from heterps_sim.testing import random_default_problem


def _random_plan(rng, problem) -> Plan:
    L = problem.num_layers
    cuts = sorted(rng.choice(np.arange(1, L), size=int(rng.integers(0, min(3, L - 1) + 1)),
                             replace=False).tolist())
    bounds = [0, *cuts, L]
    stages = tuple(Stage(layers=tuple(problem.layer_names[a:b]),
                         resource=problem.type_names[int(rng.integers(problem.num_types))])
                   for a, b in zip(bounds, bounds[1:]))
    return Plan(stages=stages, schedule="gpipe")


def _brute(problem, plan, ms):
    """Least cost over every m and every unit count 1..max(m, memory's least) per stage (more
    units than that only add price and all-reduce time)."""
    best = math.inf
    k_lo = [min(t.k_lo, 64) for t in plan_stages(problem, plan)]
    for m in ms:
        ranges = [range(1, max(m, k) + 1) for k in k_lo]
        for ks in itertools.product(*ranges):
            p = Plan(stages=tuple(Stage(layers=s.layers, resource=s.resource, num_replicas=k)
                                  for s, k in zip(plan.stages, ks)),
                     num_microbatches=m, schedule=plan.schedule)
            r = flushed_result(problem, p)
            if r.feasible:
                best = min(best, r.cost_usd)
    return best


@pytest.mark.parametrize("seed", range(40))
def test_provision_is_the_brute_force_optimum(seed):
    rng = np.random.default_rng(seed)
    problem = random_default_problem(rng, int(rng.integers(2, 6)), int(rng.integers(2, 4)))
    plan = _random_plan(rng, problem)
    ms = [2, 3, 5]
    got = provision_flushed(problem, plan, ms)
    want = _brute(problem, plan, ms)
    if got is None:
        assert want == math.inf
        return
    assert got.cost_usd == pytest.approx(want, rel=1e-9)
    # the same cuts and types, and the closed form's numbers for the plan it returns
    assert [(s.layers, s.resource) for s in got.plan.stages] == \
        [(s.layers, s.resource) for s in plan.stages]
    result = flushed_result(problem, got.plan)
    assert result.feasible
    assert result.cost_usd == pytest.approx(got.cost_usd, rel=1e-9)
    assert result.throughput == pytest.approx(got.throughput, rel=1e-9)


def test_result_is_the_closed_form_and_judges_the_limit():
    rng = np.random.default_rng(3)
    problem = random_default_problem(rng, 4, 3)
    plan = Plan(stages=(Stage(layers=problem.layer_names[:2], resource=problem.type_names[0],
                              num_replicas=2),
                        Stage(layers=problem.layer_names[2:], resource=problem.type_names[1],
                              num_replicas=1)), num_microbatches=4)
    result = flushed_result(problem, plan)
    thr = flushed_throughput(problem, plan, 4, allreduce=True, transfers=True,
                             contention=True, ps=True)
    assert result.throughput == pytest.approx(thr)
    assert result.extra["model"] == "flushed"
    assert result.feasible == (thr >= problem.throughput_limit * (1 - 1e-12))
    late = flushed_result(replace(problem, throughput_limit=thr * 1.01), plan)
    assert not late.feasible and "as the pipeline flushes" in late.reason
    assert late.cost_usd == math.inf


def test_microbatch_counts_follow_the_plan_then_the_scenario():
    problem = random_default_problem(np.random.default_rng(0), 3, 2)
    plan = Plan(stages=(Stage(layers=problem.layer_names, resource=problem.type_names[0]),),
                num_microbatches=6)
    assert microbatch_counts(problem, plan) == [6]
    open_plan = Plan(stages=plan.stages)
    want = [problem.unit_costs.num_microbatches] if problem.unit_costs.num_microbatches > 1 \
        else list(range(2, min(64, problem.batch_size) + 1))
    assert microbatch_counts(problem, open_plan) == want
    assert applies(problem, plan)
    assert not applies(problem, Plan(stages=plan.stages, schedule="async"))
