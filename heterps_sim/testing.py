"""Seeded problems and plans for tests, benchmarks and imitation learning (numpy only).

random_problem(rng, layers, types, caps=, unrunnable=, odt_parallel=, limit_quantile=): the
random family the oracle tests (brute force, reference vs batched evaluators) and the
benchmarks draw from, and the one the `rl` scheduler pre-trains on
(heterps_sim.schedulers.rl.stagewise.imitation), so tests and training share one family:
log-normal compute and transfer times per layer x type, ~10% of pairs unrunnable, Amdahl
fractions 0.5-0.99, random boundary bytes, networks, prices and latencies, a throughput limit
relative to what one unit reaches, availability caps on request.

chain_problem / chain_plan: small hand-built chains (one layer per stage, one type) whose
simulated times have closed forms. The Problem is built directly, so alpha = 1 and zero
transfer costs are allowed.
"""

from __future__ import annotations

import numpy as np

from heterps_sim.core.plan import Plan, Stage
from heterps_sim.core.problem import Problem


def random_problem(rng: np.random.Generator, num_layers: int, num_types: int, *,
                   caps: bool = False, unrunnable: float = 0.1,
                   odt_parallel: bool | None = None,
                   limit_quantile: float | None = None) -> Problem:
    """One problem of the family (see the module docstring); ~`unrunnable` of the (layer,
    type) entries are null."""
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


def chain_problem(stage_seconds, *, alpha=1.0, odt=0.0, boundary_bytes=0.0, latency_s=0.0,
                  network=1e9, batch_size=64, limit=1.0, param_bytes=None,
                  sparse_bytes=None) -> Problem:
    """One layer per entry of `stage_seconds` (oct_s on the single type "t")."""
    n = len(stage_seconds)
    return Problem(
        batch_size=batch_size, throughput_limit=limit, num_samples=1e6,
        oct_s=np.array(stage_seconds, dtype=float).reshape(n, 1), odt_s=np.full((n, 1), odt),
        alpha=np.full((n, 1), alpha), odt_parallel=True,
        boundary_bytes=np.full(n, float(boundary_bytes)), network_bytes_per_s=np.array([network]),
        latency_s=latency_s, price_per_hour=np.array([2.0]), available=(None,),
        type_names=("t",), layer_names=tuple(f"l{i}" for i in range(n)),
        param_bytes=None if param_bytes is None else np.full(n, float(param_bytes)),
        sparse_bytes=None if sparse_bytes is None else np.array(sparse_bytes, dtype=float))


def chain_plan(problem: Problem, replicas, *, microbatches: int = 1,
               schedule: str = "gpipe") -> Plan:
    """One stage per layer with the given replica counts."""
    return Plan(stages=tuple(Stage(layers=(name,), resource="t", num_replicas=k)
                             for name, k in zip(problem.layer_names, replicas)),
                num_microbatches=microbatches, schedule=schedule)


def random_default_problem(rng: np.random.Generator, num_layers: int, num_types: int, *,
                           caps: bool = False) -> Problem:
    """random_problem under the default cost model, with every term of it in play: dense
    parameters (all-reduce), embedding bytes (the PS cap), memory that forces several units
    on some stages, a minimum batch per unit, microbatches, and short jobs whose startup and
    billing granularity matter."""
    from dataclasses import replace

    from heterps_sim.core.unit_costs import default_costs

    p = random_problem(rng, num_layers, num_types, caps=caps)
    L, M = num_layers, num_types
    state = rng.uniform(0, 4e6, size=L)
    costs = default_costs(p.type_kinds, M, L, overrides=dict(
        memory_bytes=rng.uniform(2e6, 4e7, size=M), state_bytes=state,
        activation_bytes=rng.uniform(0, 2e4, size=L)))
    costs = replace(costs, min_unit_batch=int(rng.choice([1, 2, 8])),
                    num_microbatches=int(rng.integers(1, 5)),
                    billing_granularity_s=float(rng.choice([0.0, 60.0, 3600.0])))
    sparse = rng.lognormal(8, 1, size=L) * (rng.random(L) < 0.3)
    return replace(p, cost_model="default", costs=costs, param_bytes=state / 4.0,
                   sparse_bytes=sparse, num_samples=float(rng.choice([1e4, 1e6, 1e8])))
