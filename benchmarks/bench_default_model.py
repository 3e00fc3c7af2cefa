"""The default cost model's goals, measured: exact optimum time at 64 x 64, batch evaluator
plans/s, and every shipped scenario's optimum within its minimum batch and its memory.

  exact       ExactScheduler.schedule (the scenario's provisioning mode) at 64 layers x 64
              types: scenarios/synthetic-64x64.yaml and seeded random_default_problem
              instances; median of --repeats after a numba warm-up. Goal: <= 1 s.
  batch       cost.batch.evaluate_assignments on 200,000 random 64 x 64 assignments (both
              models, least mode); plans/s, median of --repeats. Goal: >= 1 M plans/s.
  scenarios   the exact optimum of every scenarios/*.yaml under both models: throughput, cost,
              stages, units, and - checked here from the problem's own arrays, not the model's
              code - the fewest samples any unit gets per step and the largest share of a unit's
              memory any stage uses. Goal: none below costs.min_unit_batch, none above 1.
Usage: python benchmarks/bench_default_model.py [--repeats 3] [--instances 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from heterps_sim.cost.batch import evaluate_assignments
from heterps_sim.cost.reference import evaluate_plan
from heterps_sim.inputs.load import load_input
from heterps_sim.schedulers.base import Evaluator, NoFeasiblePlan
from heterps_sim.schedulers.exact.sweep import ExactScheduler
from heterps_sim.testing import random_default_problem

ROOT = Path(__file__).resolve().parents[1]


def median_time(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def bench_exact(repeats: int, instances: int) -> None:
    print("## exact optimum, 64 x 64, default model")
    print("| problem | median s | dp passes | levels | stages | proven | cost USD |")
    print("|---|---|---|---|---|---|---|")
    rows = [("synthetic-64x64", load_input(ROOT / "scenarios/synthetic-64x64.yaml").problem)]
    rng = np.random.default_rng(64)
    rows += [(f"random_default #{i}", random_default_problem(rng, 64, 64)) for i in range(instances)]
    for label, p in rows:
        def run():
            s = ExactScheduler()
            try:
                return s, s.schedule(p, Evaluator(p, "least"))
            except NoFeasiblePlan:
                return s, None
        run()  # warm-up (numba)
        t, (s, plan) = median_time(run, repeats)
        cost = evaluate_plan(p, plan).cost_usd if plan is not None else float("inf")
        n = s.notes
        print(f"| {label} | {t:.3f} | {n.get('dp_passes')} | {n.get('thetas_tried')} | "
              f"{len(plan.stages) if plan else '-'} | {n.get('proven_optimal')} | {cost:.6g} |")


def bench_batch(repeats: int) -> None:
    print("\n## batch evaluator, 64 x 64, 200,000 plans")
    print("| model | median s | plans/s |")
    print("|---|---|---|")
    p = load_input(ROOT / "scenarios/synthetic-64x64.yaml").problem
    rows = np.random.default_rng(0).integers(0, 64, size=(200_000, 64))
    for model in ("paper", "default"):
        q = p.with_model(model)
        evaluate_assignments(q, rows[:10])
        t, _ = median_time(lambda: evaluate_assignments(q, rows), repeats)
        print(f"| {model} | {t:.3f} | {len(rows) / t:,.0f} |")


def unit_checks(p, result) -> tuple[float, float]:
    """(fewest samples per unit, largest memory share) of a provisioned plan, from the arrays."""
    c = p.unit_costs
    first, fewest, share = 0, float("inf"), 0.0
    for st in result.stages:
        last = first + len(st.layers) - 1
        j, k = p.type_index(st.resource), st.num_replicas
        fewest = min(fewest, p.batch_size / k)
        need = c.state_bytes[first:last + 1].sum() + p.batch_size / k * c.activation_bytes[first:last + 1].sum()
        share = max(share, need / (c.memory_headroom * c.memory_bytes[j]))
        first = last + 1
    return fewest, share


def bench_scenarios() -> None:
    print("\n## shipped scenarios: exact optimum under both models")
    print("| scenario | model | thr samples/s | cost USD | stages | units | fewest samples/unit (min) | memory share |")
    print("|---|---|---|---|---|---|---|---|")
    for path in sorted((ROOT / "scenarios").glob("*.yaml")):
        loaded = load_input(path)
        mode = loaded.scenario.schedule.mode
        for model in ("paper", "default"):
            p = loaded.problem.with_model(model)
            try:
                plan = ExactScheduler().schedule(p, Evaluator(p, mode))
            except NoFeasiblePlan:
                print(f"| {path.stem} | {model} | no plan | | | | | |")
                continue
            r = evaluate_plan(p, plan, mode)
            fewest, share = unit_checks(p, r)
            print(f"| {path.stem} | {model} | {r.throughput:.4g} | {r.cost_usd:.4g} | "
                  f"{len(r.stages)} | {sum(r.units_per_type.values())} | "
                  f"{fewest:.0f} ({p.unit_costs.min_unit_batch}) | {share:.3f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--instances", type=int, default=3)
    args = ap.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}\n")
    bench_exact(args.repeats, args.instances)
    bench_batch(args.repeats)
    bench_scenarios()


if __name__ == "__main__":
    main()
