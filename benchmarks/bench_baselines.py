"""The search baselines at equal evaluation budgets: gap to the exact optimum.

Problems (all seeded):
  L=8 .. L=64   heterps_sim.testing.random_problem at 8, 16, 32, 64 layers x 64 types,
                `--instances` each, throughput limits 0.5x, 2x or 8x a single unit's
                (independent log-normal times per layer x type: optima cut into many stages)
  scenarios     scenarios/ctr-dnn-64types.yaml, dlrm-64types.yaml, synthetic-64x64.yaml
                (the zoo's models on the 64 catalog types; roofline profiles)
Schedulers: random, greedy and genetic at `--budget` plan evaluations each (default 20,000);
bayesian (optuna TPE) at its own `--bayesian-budget` (default 300: TPE's cost per trial grows
with the history, ~10 ms here, so 20,000 trials would take an hour); paddle-heuristic has
no budget (one evaluation per CPU x GPU type pair). Every scheduler runs with its default
seed (0) after a warm-up (numba and optuna loaded, nothing compiled inside the timing).
Per group and scheduler: the gap (cost / exact - 1, in %; a scheduler that finds no plan
where exact does counts as an infinite gap) as median and worst over the group's problems,
the share of those problems it found a feasible plan for, the median evaluations
(`evaluate.count`, the final re-check included) and the median wall time. Problems that no
plan solves (exact finds none) are left out and counted.
Usage: python benchmarks/bench_baselines.py [--budget N] [--bayesian-budget N]
       [--instances 5] [--mode least|exact] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from heterps_sim.cost.reference import evaluate_plan
from heterps_sim.inputs.load import load_input
from heterps_sim.schedulers.base import Evaluator, NoFeasiblePlan
from heterps_sim.schedulers.baselines.bayesian import BayesianScheduler
from heterps_sim.schedulers.baselines.genetic import GeneticScheduler
from heterps_sim.schedulers.baselines.greedy import GreedyScheduler
from heterps_sim.schedulers.baselines.paddle import PaddleHeuristicScheduler
from heterps_sim.schedulers.baselines.random_search import RandomSearchScheduler
from heterps_sim.schedulers.exact.sweep import ExactScheduler
from heterps_sim.testing import random_problem

ROOT = Path(__file__).resolve().parents[1]

SCENARIOS = ("ctr-dnn-64types", "dlrm-64types", "synthetic-64x64")


def problems(instances: int):
    """(group, label, problem) rows."""
    for n_l in (8, 16, 32, 64):
        rng = np.random.default_rng(1000 + n_l)
        for i in range(instances):
            q = float(rng.choice([0.5, 2.0, 8.0]))
            yield f"L={n_l}", f"random #{i} (TL {q:g}x)", random_problem(
                rng, n_l, 64, limit_quantile=q)
    for name in SCENARIOS:
        yield "scenarios", name, load_input(ROOT / f"scenarios/{name}.yaml").problem


def schedulers(budget: int, bayesian_budget: int) -> list:
    return [RandomSearchScheduler(RandomSearchScheduler.Config(budget=budget)),
            GreedyScheduler(GreedyScheduler.Config(budget=budget)),
            GeneticScheduler(GeneticScheduler.Config(budget=budget)),
            BayesianScheduler(BayesianScheduler.Config(budget=bayesian_budget)),
            PaddleHeuristicScheduler()]


def run(scheduler, problem, mode: str) -> dict:
    evaluate = Evaluator(problem, mode)
    start = time.perf_counter()
    try:
        plan = scheduler.schedule(problem, evaluate)
    except NoFeasiblePlan:
        plan = None
    wall = time.perf_counter() - start
    cost = evaluate_plan(problem, plan, mode).cost_usd if plan is not None else math.inf
    return dict(cost=cost, evaluations=evaluate.count, wall_s=wall,
                stages=len(plan.stages) if plan is not None else 0)


def summarise(rows: list[dict]) -> dict:
    gaps = [r["gap"] for r in rows]
    return dict(problems=len(rows), median_gap_pct=100 * statistics.median(gaps),
                worst_gap_pct=100 * max(gaps),
                feasible_rate=sum(math.isfinite(r["cost"]) for r in rows) / len(rows),
                median_evaluations=statistics.median(r["evaluations"] for r in rows),
                median_wall_s=statistics.median(r["wall_s"] for r in rows))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=int, default=20_000)
    ap.add_argument("--bayesian-budget", type=int, default=300)
    ap.add_argument("--instances", type=int, default=5)
    ap.add_argument("--mode", choices=("least", "exact"), default="least")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    warm = random_problem(np.random.default_rng(0), 6, 4, limit_quantile=0.5)
    for s in schedulers(200, 20):  # numba, optuna: loaded before anything is timed
        run(s, warm, args.mode)
    records, skipped = [], []
    for group, label, problem in problems(args.instances):
        exact = run(ExactScheduler(), problem, args.mode)
        if not math.isfinite(exact["cost"]):
            skipped.append(f"{group} {label}")
            continue
        for s in schedulers(args.budget, args.bayesian_budget):
            r = run(s, problem, args.mode)
            records.append(dict(group=group, problem=label, scheduler=s.name,
                                exact_cost=exact["cost"], exact_stages=exact["stages"],
                                gap=r["cost"] / exact["cost"] - 1, **r))
    groups = list(dict.fromkeys(r["group"] for r in records))
    names = list(dict.fromkeys(r["scheduler"] for r in records))
    table = [dict(group=g, scheduler=n, **summarise(
        [r for r in records if r["group"] == g and r["scheduler"] == n]))
        for g in groups for n in names]
    if args.json:
        print(json.dumps({"budget": args.budget, "bayesian_budget": args.bayesian_budget,
                          "mode": args.mode, "skipped_infeasible": skipped, "table": table,
                          "records": records}, indent=1, default=float))
        return
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"mode {args.mode}; budget {args.budget:,} evaluations (bayesian {args.bayesian_budget:,}"
          f" trials; paddle-heuristic: one per CPU x GPU pair)")
    if skipped:
        print(f"left out (no feasible plan exists): {', '.join(skipped)}")
    print(f"{'group':10s} {'scheduler':17s} {'n':>2s} {'median gap':>11s} {'worst gap':>10s} "
          f"{'feasible':>8s} {'evals':>7s} {'wall s':>7s}")
    for row in table:
        print(f"{row['group']:10s} {row['scheduler']:17s} {row['problems']:2d} "
              f"{row['median_gap_pct']:10.1f}% {row['worst_gap_pct']:9.1f}% "
              f"{row['feasible_rate']:8.0%} {row['median_evaluations']:7.0f} "
              f"{row['median_wall_s']:7.2f}")
    print("\nper problem (gap %; exact: stages of the optimum)")
    for label in dict.fromkeys((r["group"], r["problem"]) for r in records):
        rs = [r for r in records if (r["group"], r["problem"]) == label]
        cells = "  ".join(f"{r['scheduler']} {100 * r['gap']:.1f}" for r in rs)
        print(f"{label[0]:10s} {label[1]:24s} exact {rs[0]['exact_stages']:2d} st  {cells}")


if __name__ == "__main__":
    main()
