"""Small hand-built problems and plans for the simulator tests (Problem built directly, so
alpha = 1 and zero transfer costs are allowed)."""

from __future__ import annotations

import numpy as np

from heterps_sim.core.plan import Plan, Stage
from heterps_sim.core.problem import Problem


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


def run_key(run) -> tuple:
    """Everything a run computed, apart from how (SimPy events, batched or not)."""
    r = run.result
    extra = {k: v for k, v in r.extra.items() if k not in ("events", "batched")}
    spans = sorted((s.group, s.track, s.name, s.start_s, s.end_s) for s in run.spans)
    return (r.throughput, r.step_time_s, r.cost_usd, r.stages, extra, spans)
