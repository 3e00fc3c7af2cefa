"""Wall time of the exact scheduler (both provisioning modes) at 64 and 256 layers x 64 types.

Problems (all seeded):
  synthetic   scenarios/synthetic-{64,256}x64.yaml: the zoo's synthetic CTR-like chain on the
              64 catalog types (roofline profile, 18 distinct network bandwidths)
  random      heterps_sim.testing.random_problem: independent log-normal times per layer x type,
              4 bandwidths, limits from 0.5x to 20x a single unit's throughput (--instances)
  capped      the same 64 x 64 shapes with availability caps: random caps (factories, ~60% of
              types capped at 1-11 units), and synthetic with the uncapped optimum's types
              capped at half the units it used (so the caps bind)
Each row: the median wall time of `ExactScheduler.schedule` over the repeats (after a numba
warm-up, so no compilation is timed), DP passes and levels (thetas) of the last run, stages of
the plan, whether it is proven optimal, and the cost checked with cost.evaluate_plan. Goal:
64 x 64 in <= 1 s per schedule.
Usage: python benchmarks/bench_exact.py [--repeats 3] [--instances 3] [--skip-256]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from heterps_sim.cost.reference import evaluate_plan
from heterps_sim.inputs.load import load_input
from heterps_sim.schedulers.base import Evaluator
from heterps_sim.schedulers.exact.sweep import ExactScheduler
from heterps_sim.testing import random_problem

ROOT = Path(__file__).resolve().parents[1]


def problems(instances: int, skip_256: bool):
    """(group, label, problem) rows to time."""
    sizes = (64,) if skip_256 else (64, 256)
    for n_l in sizes:
        yield f"{n_l}x64", "synthetic", load_input(ROOT / f"scenarios/synthetic-{n_l}x64.yaml").problem
        rng = np.random.default_rng(n_l)
        for i in range(instances):
            q = float(rng.choice([0.5, 2.0, 8.0, 20.0]))
            yield f"{n_l}x64", f"random #{i} (TL {q:g}x)", random_problem(
                rng, n_l, 64, limit_quantile=q)
    rng = np.random.default_rng(7)
    for i in range(instances):
        q = float(rng.choice([0.5, 2.0, 8.0, 20.0]))
        yield "64x64 caps", f"random #{i} (TL {q:g}x)", random_problem(
            rng, 64, 64, caps=True, limit_quantile=q)
    yield "64x64 caps", "synthetic, best types halved", _halve_best_types(
        load_input(ROOT / "scenarios/synthetic-64x64.yaml").problem)


def _halve_best_types(problem):
    plan = ExactScheduler().schedule(problem, Evaluator(problem, "exact"))
    used = evaluate_plan(problem, plan, "exact").units_per_type
    caps = list(problem.available)
    for name, units in used.items():
        caps[problem.type_index(name)] = max(1, units // 2)
    return dataclasses.replace(problem, available=tuple(caps))


def run(problem, mode: str, repeats: int) -> dict:
    times = []
    for _ in range(repeats):
        scheduler = ExactScheduler()
        start = time.perf_counter()
        plan = scheduler.schedule(problem, Evaluator(problem, mode))
        times.append(time.perf_counter() - start)
    result = evaluate_plan(problem, plan, mode)
    predicted = scheduler.notes["predicted_cost_usd"]
    assert abs(result.cost_usd - predicted) <= 1e-9 * predicted, (result.cost_usd, predicted)
    return dict(wall=statistics.median(times), notes=scheduler.notes, stages=len(plan.stages),
                cost=result.cost_usd)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--instances", type=int, default=3)
    ap.add_argument("--skip-256", action="store_true")
    args = ap.parse_args()
    warm = random_problem(np.random.default_rng(0), 6, 4, caps=True)
    for mode in ("least", "exact"):  # numba warm-up (compiles or loads the cache)
        run(warm, mode, 1)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"median of {args.repeats} runs after a warm-up")
    print(f"{'problem':11s} {'instance':30s} {'mode':5s} {'wall s':>7s} {'passes':>6s} "
          f"{'levels':>6s} {'labels':>7s} {'stages':>6s} {'proven':>6s} {'cost $':>11s}")
    for group, label, problem in problems(args.instances, args.skip_256):
        for mode in ("least", "exact"):
            r = run(problem, mode, args.repeats)
            n = r["notes"]
            print(f"{group:11s} {label:30s} {mode:5s} {r['wall']:7.3f} {n['dp_passes']:6d} "
                  f"{n['thetas_tried']:6d} {n['labels']:7d} {r['stages']:6d} "
                  f"{str(n['proven_optimal']):>6s} {r['cost']:11.5g}")


if __name__ == "__main__":
    main()
