"""The default cost model's goals, measured: exact optimum time at 64 x 64, batch evaluator
plans/s, and every shipped scenario's optimum within its minimum batch and its memory.

  exact       ExactScheduler.schedule (least provisioning) at 64 layers x 64 types:
              scenarios/synthetic-64x64.yaml and seeded random_default_problem instances, and
              the same problems under the paper model; median wall (and CPU) seconds of
              --repeats after a numba warm-up. Goal: <= 1 s.
  batch       cost.batch.evaluate_assignments on 200,000 64 x 64 assignments, uniform random
              types per layer and the searches' own samples (1-16 stages), both models, least
              mode; plans/s, median of --repeats. Goal: >= 1 M plans/s.
  scenarios   the exact optimum of every scenarios/*.yaml under both models: throughput, cost,
              stages, units, and - checked here from the problem's own arrays, not the model's
              code - the fewest samples any unit gets per step and the largest share of a unit's
              memory any stage uses. Goal: none below costs.min_unit_batch, none above 1.
Usage: python benchmarks/bench_default_model.py [--repeats 3] [--instances 3]
       [--parts exact batch scenarios]
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
from heterps_sim.schedulers.search.space import SearchSpace
from heterps_sim.testing import random_default_problem

ROOT = Path(__file__).resolve().parents[1]


def median_time(fn, repeats: int) -> tuple[float, float, object]:
    """(median wall seconds, median CPU seconds of this process, the last result)."""
    walls, cpus, out = [], [], None
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        cpus.append(time.process_time() - c)
        walls.append(time.perf_counter() - w)
    return statistics.median(walls), statistics.median(cpus), out


def bench_exact(repeats: int, instances: int) -> None:
    print("## exact optimum, 64 x 64 (least provisioning; the paper model on the same problem)")
    print("| problem | N samples | granule s | default median s (CPU s) | paper median s | "
          "default / paper | dp passes | levels | stages | proven | cost USD |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    rows = [("synthetic-64x64", load_input(ROOT / "scenarios/synthetic-64x64.yaml").problem)]
    rng = np.random.default_rng(64)
    rows += [(f"random_default #{i}", random_default_problem(rng, 64, 64)) for i in range(instances)]
    for label, p in rows:
        def run(q=p):
            s = ExactScheduler()
            try:
                return s, s.schedule(q, Evaluator(q, "least"))
            except NoFeasiblePlan:
                return s, None
        paper = p.with_model("paper")
        run(), run(paper)  # warm-up (numba)
        t, cpu, (s, plan) = median_time(run, repeats)
        t_paper, _, _ = median_time(lambda q=paper: run(q), repeats)
        cost = evaluate_plan(p, plan).cost_usd if plan is not None else float("inf")
        n = s.notes
        print(f"| {label} | {p.num_samples:.0e} | {p.unit_costs.billing_granularity_s:g} | "
              f"{t:.3f} ({cpu:.3f}) | {t_paper:.3f} | {t / t_paper:.2f} | {n.get('dp_passes')} | "
              f"{n.get('thetas_tried')} | {len(plan.stages) if plan else '-'} | "
              f"{n.get('proven_optimal')} | {cost:.6g} |")


def bench_batch(repeats: int) -> None:
    print("\n## batch evaluator, 64 x 64, 200,000 plans (least provisioning)")
    print("| plans | model | median s | plans/s | default / paper | feasible |")
    print("|---|---|---|---|---|---|")
    p = load_input(ROOT / "scenarios/synthetic-64x64.yaml").problem
    sets = {"uniform random types": np.random.default_rng(0).integers(0, 64, size=(200_000, 64)),
            "search samples (1-16 stages)": SearchSpace(p).sample(np.random.default_rng(0),
                                                                  200_000, 16)}
    for label, rows in sets.items():
        rates = {}
        for model in ("paper", "default"):
            q = p.with_model(model)
            evaluate_assignments(q, rows[:10])
            t, _, out = median_time(lambda q=q, rows=rows: evaluate_assignments(q, rows), repeats)
            rates[model] = len(rows) / t
            ratio = f"{rates['default'] / rates['paper']:.2f}" if model == "default" else ""
            print(f"| {label} | {model} | {t:.3f} | {rates[model]:,.0f} | {ratio} | "
                  f"{out.feasible.mean():.3f} |")


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
    ap.add_argument("--parts", nargs="+", choices=("exact", "batch", "scenarios"),
                    default=["exact", "batch", "scenarios"])
    args = ap.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}\n")
    if "exact" in args.parts:
        bench_exact(args.repeats, args.instances)
    if "batch" in args.parts:
        bench_batch(args.repeats)
    if "scenarios" in args.parts:
        bench_scenarios()


if __name__ == "__main__":
    main()
