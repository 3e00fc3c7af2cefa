"""The exact-flushed scheduler: how far it scales, and whether the simulator agrees with it.

For random default-model problems (heterps_sim.testing.random_default_problem, seed 7) of
growing size and for shipped scenarios, one exact search per microbatch count: wall time,
labels, the optimum's cost and stages; then the optimum is simulated as `schedule` checks
it (planner/check.py: deterministic effects, the plan's m, seed 0) and its closed-form
throughput is compared with the simulated one. Beside it, the stage model's exact optimum
(the `exact` scheduler) simulated the same way: how far short of the limit it falls.

Then, per scenario, the scheduler's own search over every m from 2 to --over-m
(best_over_microbatches): the cheapest m, its cost, the m's past the label budget, wall time.

Usage: python benchmarks/bench_flushed_exact.py [--sizes 8x8,12x8,16x16,24x16,32x32]
       [--scenarios nce-cpu-gpu,ctr-dnn-64types] [--m 4,16] [--max-labels 2000000]
       [--over-m 64] [--scale 48x48,64x64]

--scale: for each size, optimum at m = 8 on ten random problems (seeds 1000-1009) within
--max-labels (default here 1,000,000 for it): how many are proven, and the times.
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import numpy as np

from heterps_sim.des import simulate
from heterps_sim.des.options import DesOptions
from heterps_sim.inputs.load import load_input
from heterps_sim.planner.check import VerifySettings
from heterps_sim.schedulers.base import run_scheduler
from heterps_sim.schedulers.exact.flushed import LabelLimit, best_over_microbatches, optimum
from heterps_sim.schedulers.registry import make_scheduler
from heterps_sim.testing import random_default_problem

ROOT = Path(__file__).resolve().parents[1]


def simulated(problem, plan) -> float:
    s = VerifySettings()
    opts = DesOptions.with_effects(tuple(s.effects), num_steps=s.num_steps)
    return simulate(problem, plan, seed=s.seed, options=opts, record_spans=False).result.throughput


def stage_optimum_shortfall(problem) -> str:
    out = run_scheduler(make_scheduler("exact"), problem, "least")
    if out.plan is None:
        return "stage model: no plan"
    plan = out.plan.with_replicas([s.num_replicas for s in out.result.stages])
    sim = simulated(problem, plan)
    return (f"stage-model optimum {out.result.cost_usd:.4g} USD, {len(plan.stages)} stages, "
            f"simulated {sim / problem.throughput_limit - 1:+.1%} vs limit")


def case(name: str, problem, ms: list[int], max_labels: int) -> list[float]:
    errors = []
    print(f"{name} ({problem.num_layers} layers x {problem.num_types} types): "
          f"{stage_optimum_shortfall(problem)}")
    for m in ms:
        start = time.perf_counter()
        try:
            got = optimum(problem, m, max_labels=max_labels)
        except LabelLimit:
            print(f"  m={m:<3} past {max_labels:,} labels after {time.perf_counter() - start:.2f} s")
            continue
        wall = time.perf_counter() - start
        if got is None:
            print(f"  m={m:<3} {wall:7.2f} s  no plan meets the limit under the flushed schedule")
            continue
        sim = simulated(problem, got.plan)
        err = got.throughput / sim - 1.0
        errors.append(abs(err))
        units = "-".join(str(s.num_replicas) for s in got.plan.stages)
        print(f"  m={m:<3} {wall:7.2f} s  {got.labels:>9,} labels  {got.cost_usd:.4g} USD  "
              f"{len(got.plan.stages)} stages ({units})  closed form {got.throughput:,.0f}  "
              f"simulated {sim:,.0f}  ({err:+.2%})  vs limit {sim / problem.throughput_limit - 1:+.1%}")
    return errors


def over_microbatches(name: str, problem, top: int, max_labels: int) -> None:
    start = time.perf_counter()
    got = best_over_microbatches(problem, range(2, top + 1), max_labels=max_labels)
    wall = time.perf_counter() - start
    head = f"{name}: m = 2..{top} in {wall:.2f} s, {len(got.skipped)} m's past the labels"
    if got.best is None:
        print(f"{head}; no plan")
        return
    units = "-".join(str(s.num_replicas) for s in got.best.plan.stages)
    print(f"{head}; cheapest at m={got.best.plan.num_microbatches}: {got.best.cost_usd:.4g} USD "
          f"({units}); simulated {simulated(problem, got.best.plan):,.0f} "
          f"against the limit {problem.throughput_limit:,.0f}")


def scale(size: str, max_labels: int) -> None:
    layers, types = (int(x) for x in size.split("x"))
    times, proven = [], []
    for seed in range(1000, 1010):
        problem = random_default_problem(np.random.default_rng(seed), layers, types)
        start = time.perf_counter()
        try:
            optimum(problem, 8, max_labels=max_labels)
            done = True
        except LabelLimit:
            done = False
        times.append(time.perf_counter() - start)
        if done:
            proven.append(times[-1])
    print(f"{size}: {len(proven)} of 10 proven within {max_labels:,} labels (times "
          f"{', '.join(f'{t:.2f}' for t in sorted(proven)) or '-'} s); median of all ten "
          f"{float(np.median(times)):.2f} s, slowest {max(times):.2f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="8x8,12x8,16x16,24x16,32x32")
    ap.add_argument("--scenarios", default="nce-cpu-gpu,ctr-dnn-64types,2emb-ps-contention")
    ap.add_argument("--m", default="4,16")
    ap.add_argument("--max-labels", type=int, default=2_000_000)
    ap.add_argument("--over-m", type=int, default=64)
    ap.add_argument("--scale", default="")
    args = ap.parse_args()
    ms = [int(x) for x in args.m.split(",")]
    print(f"machine: {platform.machine()}, {platform.system()}, python {platform.python_version()}")
    optimum(random_default_problem(np.random.default_rng(1), 3, 3), 4)  # compile first
    errors = []
    for size in filter(None, args.sizes.split(",")):
        layers, types = (int(x) for x in size.split("x"))
        problem = random_default_problem(np.random.default_rng(7), layers, types)
        errors += case(f"random {size}", problem, ms, args.max_labels)
    for name in filter(None, args.scenarios.split(",")):
        problem = load_input(str(ROOT / "scenarios" / f"{name}.yaml")).problem
        errors += case(name, problem, ms, args.max_labels)
    for name in filter(None, args.scenarios.split(",")):
        problem = load_input(str(ROOT / "scenarios" / f"{name}.yaml")).problem
        over_microbatches(name, problem, args.over_m, args.max_labels)
    for size in filter(None, args.scale.split(",")):
        scale(size, args.max_labels)
    if errors:
        print(f"closed form vs simulator over {len(errors)} optima: MAPE "
              f"{100 * sum(errors) / len(errors):.2f}%, worst {100 * max(errors):.2f}%")


if __name__ == "__main__":
    main()
