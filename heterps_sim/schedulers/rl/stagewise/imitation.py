"""Random training problems for the `rl` policy's pre-training, each with its exact optimum.

The problems come from heterps_sim.testing.random_problem, the tests' oracle factory too:
log-normal compute and transfer times per layer x type, ~10% of pairs unrunnable, Amdahl
fractions 0.5-0.99, random boundary bytes, networks, prices and latencies, a throughput limit
relative to what one unit reaches. Training draws it over many sizes (4-64 layers x 4-64 types), limits (0.1x-30x one unit) and
with availability caps on a fifth of them; half of them are drawn under the default cost model
(heterps_sim.testing.random_default_problem). The benchmark's held-out problems come from the
factory itself with other seeds, so no benchmark problem is ever trained on.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from heterps_sim.core.plan import Plan
from heterps_sim.core.problem import Problem
from heterps_sim.schedulers.base import Evaluator, NoFeasiblePlan
from heterps_sim.testing import random_default_problem, random_problem

SIZES = (4, 6, 8, 12, 16, 24, 32, 48, 64)
TYPE_COUNTS = (4, 8, 16, 32, 64, 64, 64)
DEFAULT_SHARE = 0.5
"""Share of the problems drawn under the default cost model (testing.random_default_problem:
all-reduce, fixed costs, memory, minimum batch, PS, startup and billing in play), so the policy
learns from the features as both models compute them (cost/provision.py)."""


def exact_assignment(problem: Problem, mode: str = "least") -> np.ndarray | None:
    """The exact optimum as a type index per layer (None when no plan is feasible)."""
    from heterps_sim.schedulers.exact.sweep import ExactScheduler

    try:
        plan = ExactScheduler().schedule(problem, Evaluator(problem, mode))
    except NoFeasiblePlan:
        return None
    return plan_assignment(problem, plan)


def completion(problem: Problem, prefix: list[tuple[int, int, int]],
               mode: str = "least") -> list[tuple[int, int, int]] | None:
    """The stages [(start, w, type)] of the exact optimum among the plans that begin with the
    stages `prefix` (the rest of the model after them; its first stage of another type than
    the prefix's last, as the policy's next decision must be): what DAgger labels a state the
    policy reached by itself with. None when no such plan is feasible. Every other type is made
    unrunnable on the prefix's layers, and the last prefix type on the next layer, so the
    exact solver's optimum of that problem is this one (its plans are the original's)."""
    from heterps_sim.schedulers.rl.stagewise.segments import assignment_to_segments
    oct_s = problem.oct_s.copy()
    end = 0
    for s, w, j in prefix:
        others = np.ones(problem.num_types, bool)
        others[j] = False
        oct_s[s:s + w + 1, others] = np.nan
        end = s + w + 1
    if end >= problem.num_layers:
        return None
    oct_s[end, prefix[-1][2]] = np.nan
    best = exact_assignment(dataclasses.replace(problem, oct_s=oct_s), mode)
    if best is None:
        return None
    segs = assignment_to_segments(best)
    assert segs[:len(prefix)] == list(prefix), "the forced prefix was not kept"
    return segs[len(prefix):]


def plan_assignment(problem: Problem, plan: Plan) -> np.ndarray:
    return np.array([problem.type_index(st.resource) for st in plan.stages
                     for _ in st.layers], np.int64)


def solved_problems(seed: int, count: int, mode: str = "least", sizes=SIZES):
    """Yield (problem, optimal assignment) for `count` random problems with a feasible plan,
    layer counts drawn from `sizes`."""
    rng = np.random.default_rng(seed)
    found = 0
    while found < count:
        n_l, n_m = int(rng.choice(sizes)), int(rng.choice(TYPE_COUNTS))
        q = float(rng.choice([0.5, 2.0, 8.0, 20.0])) if rng.random() < 0.5 else None
        if rng.random() < DEFAULT_SHARE:
            p = random_default_problem(rng, n_l, n_m, caps=rng.random() < 0.2)
        else:
            p = random_problem(rng, n_l, n_m, caps=rng.random() < 0.2, limit_quantile=q)
        best = exact_assignment(p, mode)
        if best is not None:
            found += 1
            yield p, best
