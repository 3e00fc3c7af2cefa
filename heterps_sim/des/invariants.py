"""Random simulator cases and the physics every one must obey (tests and the benchmark).

    case = random_case(seed)            a random problem (heterps_sim.testing.random_problem,
                                        plus dense and embedding bytes), a random runnable plan
                                        with fixed replicas, a schedule, m and a seed
    throughput(case, effects)           the simulated throughput with those effects on
    exact_window(case)                  whether effects-off is measured over whole periods
                                        (then it equals the analytic model to rounding)

The invariants (tests/sim/des/test_physics_properties.py, benchmarks/bench_invariants.py):
effects off == analytic; an effect switched on (alone or added to others) never raises the
throughput for the same seed; more work, latency or boundary bytes, less bandwidth, a slower
unit never raise it either.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from heterps_sim.core.lanes import default_microbatches, num_lanes
from heterps_sim.core.plan import Plan, plan_from_assignment
from heterps_sim.core.problem import Problem
from heterps_sim.des.options import DesOptions
from heterps_sim.des.simulator import simulate
from heterps_sim.des.window import MAX_PERIOD_STEPS, period_steps
from heterps_sim.testing import random_problem

RANDOM_EFFECTS = frozenset({"jitter", "stragglers", "preemption"})
"""Effects that draw from the seed (compared at the same seed)."""
NUM_STEPS = 6


@dataclass(frozen=True)
class Case:
    problem: Problem
    plan: Plan
    schedule: str
    num_microbatches: int
    seed: int
    slow: tuple[tuple[int, int, float], ...] = ()
    """Known slow replicas (stage, replica, factor)."""

    def __repr__(self) -> str:
        ks = [s.num_replicas for s in self.plan.stages]
        layers = [len(s.layers) for s in self.plan.stages]
        return (f"Case(seed={self.seed}, layers/stage={layers}, replicas={ks}, "
                f"schedule={self.schedule}, m={self.num_microbatches}, slow={self.slow})")


def random_case(seed: int, max_layers: int = 5, max_types: int = 3,
                max_replicas: int = 4, max_microbatches: int = 8) -> Case:
    rng = np.random.default_rng(seed)
    problem = random_problem(rng, int(rng.integers(1, max_layers + 1)),
                             int(rng.integers(1, max_types + 1)))
    L = problem.num_layers
    dense = rng.lognormal(16, 2, size=L) * (rng.random(L) < 0.8)
    sparse = rng.lognormal(7, 1.5, size=L) * (rng.random(L) < 0.4)
    problem = replace(problem, param_bytes=dense, sparse_bytes=sparse)
    runnable = problem.runnable
    assignment = [int(rng.choice(np.flatnonzero(runnable[i]))) for i in range(L)]
    plan = plan_from_assignment(problem.layer_names, problem.type_names, assignment)
    stages = tuple(replace(s, num_replicas=int(rng.integers(1, max_replicas + 1)))
                   for s in plan.stages)
    schedule = str(rng.choice(["gpipe", "1f1b", "async"]))
    m = int(rng.integers(1, max_microbatches + 1))
    return Case(problem, Plan(stages=stages, num_microbatches=m, schedule=schedule), schedule, m,
                int(rng.integers(0, 1000)))


def options(case: Case, effects: frozenset[str]) -> DesOptions:
    return DesOptions(schedule=case.schedule, num_microbatches=case.num_microbatches,
                      num_steps=NUM_STEPS, effects=effects, slow_replicas=case.slow,
                      preemption_rate_per_hour=3600.0, restart_delay_s=0.01)


def throughput(case: Case, effects: frozenset[str]) -> float:
    run = simulate(case.problem, case.plan, seed=case.seed, options=options(case, effects),
                   record_spans=False)
    return run.result.throughput


def exact_window(case: Case) -> bool:
    """Effects off: is the measured window whole routing periods (des/window.py)?"""
    ks = [s.num_replicas for s in case.plan.stages]
    m = case.num_microbatches or default_microbatches(ks, len(ks), case.problem.batch_size)
    return period_steps(ks, m, num_lanes(ks, False)) <= MAX_PERIOD_STEPS


__all__ = ["RANDOM_EFFECTS", "Case", "exact_window", "options", "random_case", "throughput"]
