"""Random training problems for the `rl` policy's pre-training, each with its exact optimum.

`random_problem` is also the tests' oracle factory (heterps_sim/testing.py re-exports it):
log-normal compute and transfer times per layer x type, ~10% of pairs unrunnable, Amdahl
fractions 0.5-0.99, random boundary bytes, networks, prices and latencies, a throughput limit
relative to what one unit reaches. Training draws it over many sizes (4-64 layers x 4-64 types), limits (0.1x-30x one unit) and
with availability caps on a fifth of them. The benchmark's held-out problems come from the
factory itself with other seeds, so no benchmark problem is ever trained on.
"""

from __future__ import annotations

import numpy as np

from heterps_sim.core.plan import Plan
from heterps_sim.core.problem import Problem
from heterps_sim.schedulers.base import Evaluator, NoFeasiblePlan

SIZES = (4, 6, 8, 12, 16, 24, 32, 48, 64)
TYPE_COUNTS = (4, 8, 16, 32, 64, 64, 64)


def random_problem(rng: np.random.Generator, num_layers: int, num_types: int, *,
                   caps: bool = False, unrunnable: float = 0.1,
                   odt_parallel: bool | None = None,
                   limit_quantile: float | None = None) -> Problem:
    """One problem of the family (see the module docstring); ~`unrunnable` of the (layer,
    type) entries are null. The tests' oracle problems come from here too (tests/factories)."""
    L, M = num_layers, num_types
    batch = int(rng.choice([32, 128, 512]))
    oct_s = rng.lognormal(-4.0, 1.2, size=(L, M))
    odt_s = rng.lognormal(-5.0, 1.5, size=(L, M)) * (rng.random((L, M)) < 0.7)
    alpha = rng.uniform(0.5, 0.99, size=(L, M))
    mask = rng.random((L, M)) < unrunnable
    mask[np.arange(L), rng.integers(0, M, size=L)] = False  # every layer runs somewhere
    for a in (oct_s, odt_s, alpha):
        a[mask] = np.nan
    single = batch / np.nanmax(oct_s + odt_s)
    q = (float(np.exp(rng.uniform(np.log(0.1), np.log(30.0)))) if limit_quantile is None
         else limit_quantile)
    available = tuple(int(rng.integers(1, 12)) if caps and rng.random() < 0.6 else None
                      for _ in range(M))
    return Problem(
        name="random", batch_size=batch, throughput_limit=float(single * q),
        num_samples=float(rng.integers(1, 100) * 1e6), oct_s=oct_s, odt_s=odt_s, alpha=alpha,
        odt_parallel=bool(rng.random() < 0.7) if odt_parallel is None else odt_parallel,
        boundary_bytes=rng.lognormal(13, 2, size=L) * (np.arange(L) < L - 1),
        network_bytes_per_s=rng.choice([1.25e9, 3.1e9, 12.5e9, 50e9], size=M),
        latency_s=float(rng.choice([0.0, 5e-5, 1e-3])),
        price_per_hour=rng.uniform(0.1, 10.0, size=M), available=available,
        type_names=tuple(f"t{j}" for j in range(M)), layer_names=tuple(f"l{i}" for i in range(L)),
        type_kinds=tuple("cpu" if j % 2 == 0 else "gpu" for j in range(M)))


def exact_assignment(problem: Problem, mode: str = "least") -> np.ndarray | None:
    """The exact optimum as a type index per layer (None when no plan is feasible)."""
    from heterps_sim.schedulers.exact.sweep import ExactScheduler

    try:
        plan = ExactScheduler().schedule(problem, Evaluator(problem, mode))
    except NoFeasiblePlan:
        return None
    return plan_assignment(problem, plan)


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
        p = random_problem(rng, n_l, n_m, caps=rng.random() < 0.2, limit_quantile=q)
        best = exact_assignment(p, mode)
        if best is not None:
            found += 1
            yield p, best
