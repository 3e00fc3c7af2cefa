"""Batched runs (replicas run ahead without a SimPy timeout per operation) give exactly the
timeline of the unbatched reference path, for every effect set that allows batching."""

import numpy as np
import pytest

from heterps_sim.core.plan import plan_from_assignment
from heterps_sim.des import DesOptions, simulate
from heterps_sim.inputs.load import load_input
from heterps_sim.schedulers.base import run_scheduler
from heterps_sim.schedulers.registry import make_scheduler
from heterps_sim.testing import random_problem
from tests.sim.des.des_cases import run_key

BATCHABLE = ["none", "bubbles", "allreduce", "transfers", "jitter", "stragglers", "preemption",
             "bubbles,allreduce,transfers,jitter,stragglers,preemption"]
VARIED = {"preemption_rate_per_hour": 2e4, "restart_delay_s": 0.002, "straggler_fraction": 0.3}


def both(problem, plan, options, seed=3):
    fast = simulate(problem, plan, seed=seed, options=options)
    slow = simulate(problem, plan, seed=seed, options=options.model_copy(update={"batch": False}))
    return fast, slow


@pytest.fixture(scope="module", params=["nce-cpu-gpu", "synthetic-256x64", "dlrm-64types"])
def scenario(request):
    if request.param != "synthetic-256x64":  # the exact plans as shipped (tests/sim/des/data)
        from tests.sim.des.test_physics_regressions import shipped
        return shipped(request.param)
    problem = load_input(f"scenarios/{request.param}.yaml").problem.with_model("paper")
    return problem, run_scheduler(make_scheduler("exact"), problem).plan


@pytest.mark.parametrize("effects", BATCHABLE)
@pytest.mark.parametrize("schedule", ["gpipe", "async"])
def test_batched_equals_unbatched_on_scenarios(scenario, effects, schedule):
    problem, plan = scenario
    fast, slow = both(problem, plan, DesOptions(effects=effects, schedule=schedule, num_steps=3,
                                                **VARIED))
    assert fast.result.extra["batched"] and not slow.result.extra["batched"]
    assert run_key(fast) == run_key(slow)
    assert fast.events < slow.events


def test_batched_equals_unbatched_on_random_plans():
    for seed in range(12):
        rng = np.random.default_rng(100 + seed)
        problem = random_problem(rng, int(rng.integers(2, 7)), 3, unrunnable=0.0)
        plan = plan_from_assignment(problem.layer_names, problem.type_names,
                                    rng.integers(0, 3, problem.num_layers))
        plan = plan.with_replicas([int(rng.integers(1, 5)) for _ in plan.stages])
        effects = BATCHABLE[seed % len(BATCHABLE)]
        fast, slow = both(problem, plan, DesOptions(effects=effects, num_steps=3,
                                                    num_microbatches=int(rng.integers(1, 9)),
                                                    schedule="1f1b", **VARIED), seed=seed)
        assert run_key(fast) == run_key(slow), (seed, effects)


@pytest.mark.parametrize("effects", ["contention", "ps"])
def test_shared_resources_always_run_unbatched(scenario, effects):
    problem, plan = scenario
    run = simulate(problem, plan, options=DesOptions(effects=effects, num_steps=2),
                   record_spans=False)
    assert run.result.extra["batched"] is False
