"""Analytic evaluations per second: the batch path (numba, both cores) vs the reference.

Plans are type assignments on scenarios/synthetic-64x64.yaml (64 layers x 64 types):
"random" draws a runnable type per layer (~60 stages per plan); "few-stage" cuts the chain
into 2-8 stages. The reference evaluator (cost.evaluate_plan, one plan at a time) is the
baseline measured in the same run. Goal: >= 1,000,000 plans/s (least provisioning).
Usage: python benchmarks/bench_cost_model.py [--plans N] [--scenario PATH]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

from heterps_sim.core.plan import plan_from_assignment
from heterps_sim.cost.batch import evaluate_assignments
from heterps_sim.cost.reference import evaluate_plan
from heterps_sim.inputs.load import load_input


def random_plans(problem, rng, n):
    runnable = problem.runnable
    choices = [np.flatnonzero(runnable[i]) for i in range(problem.num_layers)]
    return np.stack([rng.choice(c, size=n) for c in choices], axis=1)


def few_stage_plans(problem, rng, n):
    out = np.empty((n, problem.num_layers), np.int64)
    runnable = problem.runnable
    for row in out:
        cuts = np.sort(rng.choice(np.arange(1, problem.num_layers), rng.integers(1, 8), replace=False))
        for a, b in zip(np.r_[0, cuts], np.r_[cuts, problem.num_layers]):
            ok = np.flatnonzero(runnable[a:b].all(axis=0))
            row[a:b] = rng.choice(ok) if ok.size else rng.integers(problem.num_types)
    return out


def rate(fn, n, repeats=3):
    best = min(_timed(fn) for _ in range(repeats))
    return n / best


def _timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plans", type=int, default=400_000)
    ap.add_argument("--scenario", default="scenarios/synthetic-64x64.yaml")
    args = ap.parse_args()
    problem = load_input(args.scenario).problem
    rng = np.random.default_rng(0)
    evaluate_assignments(problem, random_plans(problem, rng, 8), "exact")  # numba warm-up
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"problem {problem.num_layers} layers x {problem.num_types} types")
    print(f"{'plans':10s} {'mode':6s} {'batch plans/s':>14s} {'reference plans/s':>18s} "
          f"{'speed-up':>9s} {'feasible':>9s}")
    for label, make in (("random", random_plans), ("few-stage", few_stage_plans)):
        plans = make(problem, rng, args.plans)
        for mode in ("least", "exact"):
            n = args.plans if mode == "least" else args.plans // 20
            batch_rate = rate(lambda p=plans[:n], m=mode: evaluate_assignments(problem, p, m), n)
            feasible = evaluate_assignments(problem, plans[:n], mode).feasible.mean()
            m = 200
            built = [plan_from_assignment(problem.layer_names, problem.type_names, a) for a in plans[:m]]
            ref_rate = rate(lambda b=built, md=mode: [evaluate_plan(problem, p, md) for p in b], m, repeats=1)
            print(f"{label:10s} {mode:6s} {batch_rate:14,.0f} {ref_rate:18,.0f} "
                  f"{batch_rate / ref_rate:8.0f}x {feasible:9.2f}")


if __name__ == "__main__":
    main()
