"""Is a scenario's limit reachable as its pipeline flushes? The measurements behind the 64-type
scenarios' batch sizes and limits (docs/results/2026-11-25-scenario-limits.md).

For each scenario, at its shipped batch and limit and at the ones it had before:

  stage optimum   the `exact` scheduler's plan (the stage model's optimum, least
                  provisioning): its analytic throughput and cost, and the simulator's
                  throughput of it as `schedule` checks it (deterministic effects, the plan's
                  microbatches, seed 0; planner/check.py's settings)
  grown           the most the flushed closed form (cost/flush.py, the same effects) gives
                  that plan's stages when units are added greedily (a quarter more to the stage
                  that gains most, up to --growth x its units) at m = 16 .. 128: whether
                  buying more closes the gap
  one stage       the most the flushed closed form gives every layer on one stage of one
                  type, k <= 32 units, m <= 16, over every type
  flushed plan    the cheapest plan the exact-flushed search finds (m = 4, 8, 16), restricted
                  to --types and to stage ends every --ends-every layers on 64-layer or
                  longer models (a plan, not proven the optimum, there), simulated like the
                  stage optimum; with the fewest samples any unit gets per step and the
                  largest share of a unit's memory a stage uses (the shipped scenarios' goal:
                  none below costs.min_unit_batch, none above 1)

Usage: python benchmarks/bench_scenario_limits.py [--scenarios dlrm-64types,...]
       [--growth 4] [--types mi100,mi210,...] [--ends-every 8] [--max-labels 2000000]
"""

from __future__ import annotations

import argparse
import platform
import time
from dataclasses import replace
from pathlib import Path

from heterps_sim.core.files import read_mapping
from heterps_sim.core.plan import Plan, Stage
from heterps_sim.cost.flush import flushed_throughput
from heterps_sim.des import simulate
from heterps_sim.des.options import DesOptions
from heterps_sim.inputs.scenario import parse_scenario, scenario_problem
from heterps_sim.planner.check import VerifySettings
from heterps_sim.schedulers.base import run_scheduler
from heterps_sim.schedulers.exact.flushed import LabelLimit, optimum
from heterps_sim.schedulers.registry import make_scheduler

ROOT = Path(__file__).resolve().parents[1]
FORMER = {"dlrm-64types": {"batch_size": 8192},
          "synthetic-256x64": {"throughput_limit": 600000}}
"""Each changed scenario's workload before its limit or batch was made reachable."""
GPUS = "mi100,mi210,mi300x,mi325x,epyc-genoa-192vcpu"


def problem_of(name: str, workload: dict):
    path = ROOT / "scenarios" / f"{name}.yaml"
    data = read_mapping(path)
    data["workload"].update(workload)
    return scenario_problem(parse_scenario(data, str(path)), path)


def simulated(problem, plan: Plan) -> float:
    s = VerifySettings()
    opts = DesOptions.with_effects(tuple(s.effects), num_steps=s.num_steps)
    return simulate(problem, plan, seed=s.seed, options=opts, record_spans=False).result.throughput


def flushed(problem, plan: Plan, m: int) -> float:
    return flushed_throughput(problem, replace(plan, num_microbatches=m), m, allreduce=True,
                              transfers=True, contention=True, ps=True)


def grown(problem, plan: Plan, m: int, growth: int) -> tuple[float, list[int]]:
    ks = [s.num_replicas for s in plan.stages]
    most, best = sum(ks) * growth, flushed(problem, plan, m)
    while sum(ks) < most:
        tries = []
        for g in range(len(ks)):
            k2 = ks[:g] + [ks[g] + max(1, ks[g] // 4)] + ks[g + 1:]
            if not runs(problem, plan.with_replicas(k2)):
                continue
            tries.append((flushed(problem, plan.with_replicas(k2), m), k2))
        thr, k2 = max(tries, key=lambda t: t[0], default=(0.0, ks))
        if thr <= best * (1 + 1e-4):
            break
        best, ks = thr, k2
    return best, ks


def one_stage(problem) -> tuple[float, str]:
    best, what = 0.0, "-"
    for name in problem.type_names:
        for k in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32):
            for m in (1, 2, 4, 8, 16):
                plan = Plan(stages=(Stage(layers=tuple(problem.layer_names), resource=name,
                                          num_replicas=k),), num_microbatches=m)
                if not runs(problem, plan):
                    continue
                thr = flushed(problem, plan, m)
                if thr > best:
                    best, what = thr, f"{name} x{k}, m={m}"
    return best, what


def unit_checks(problem, plan: Plan) -> tuple[float, float]:
    """(fewest samples per unit, largest memory share), from the problem's arrays."""
    c, first = problem.unit_costs, 0
    fewest, share = float("inf"), 0.0
    for st in plan.stages:
        last = first + len(st.layers) - 1
        j, k = problem.type_index(st.resource), st.num_replicas
        fewest = min(fewest, problem.batch_size / k)
        need = (c.state_bytes[first:last + 1].sum()
                + problem.batch_size / k * c.activation_bytes[first:last + 1].sum())
        share = max(share, need / (c.memory_headroom * c.memory_bytes[j]))
        first = last + 1
    return fewest, share


def runs(problem, plan: Plan) -> bool:
    """Every unit gets at least the minimum batch and fits its memory."""
    fewest, share = unit_checks(problem, plan)
    return fewest >= problem.unit_costs.min_unit_batch and share <= 1.0


def units(plan: Plan) -> str:
    return " | ".join(f"{s.resource} x{s.num_replicas} ({len(s.layers)})" for s in plan.stages)


def report(name: str, problem, args) -> None:
    limit = problem.throughput_limit
    print(f"\n## {name}: batch {problem.batch_size:,}, limit {limit:,.0f} samples/s")
    out = run_scheduler(make_scheduler("exact"), problem, "least")
    if out.plan is None:
        print("stage optimum: no plan")
        return
    plan = out.plan.with_replicas([s.num_replicas for s in out.result.stages])
    sim = simulated(problem, plan)
    print(f"stage optimum  {out.result.cost_usd:.4g} USD, analytic {out.result.throughput:,.0f}, "
          f"simulated {sim:,.0f} ({sim / limit - 1:+.1%} vs limit); {units(plan)}")
    for m in (16, 32, 64, 128):
        thr, ks = grown(problem, plan, m, args.growth)
        print(f"grown          m={m:<3} flushed {thr:,.0f} ({thr / limit - 1:+.1%}) with units "
              f"{'-'.join(map(str, ks))}")
    thr, what = one_stage(problem)
    print(f"one stage      flushed {thr:,.0f} ({thr / limit - 1:+.1%}): {what}")
    types = None if args.types == "all" else tuple(problem.type_index(t)
                                                   for t in args.types.split(","))
    ends = None
    if problem.num_layers >= 64 and args.ends_every:
        ends = frozenset(range(args.ends_every - 1, problem.num_layers, args.ends_every))
    found = []
    for m in (4, 8, 16):
        start = time.perf_counter()
        try:
            got = optimum(problem, m, types=types if ends else None, ends=ends,
                          max_labels=args.max_labels)
        except LabelLimit:
            print(f"flushed plan   m={m:<2} past {args.max_labels:,} labels")
            continue
        wall = time.perf_counter() - start
        if got is None:
            print(f"flushed plan   m={m:<2} none meets the limit ({wall:.1f} s)")
            continue
        found.append((got.cost_usd, m, got))
        sim = simulated(problem, got.plan)
        fewest, share = unit_checks(problem, got.plan)
        print(f"flushed plan   m={m:<2} {got.cost_usd:.4g} USD, closed form {got.throughput:,.0f}, "
              f"simulated {sim:,.0f} ({sim / limit - 1:+.1%}); {units(got.plan)}; "
              f"fewest samples/unit {fewest:,.0f} (min {problem.unit_costs.min_unit_batch}), "
              f"memory share {share:.3f}; {wall:.1f} s")
    restricted = "exact over every plan" if ends is None else (
        f"restricted to {args.types}, stage ends every {args.ends_every} layers")
    if found:
        cost, m, _ = min(found, key=lambda f: f[0])
        print(f"cheapest flushed plan: {cost:.4g} USD at m={m} ({restricted})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", default="dlrm-64types,synthetic-64x64,synthetic-256x64")
    ap.add_argument("--growth", type=int, default=4)
    ap.add_argument("--types", default=GPUS)
    ap.add_argument("--ends-every", type=int, default=8)
    ap.add_argument("--max-labels", type=int, default=2_000_000)
    ap.add_argument("--former", action="store_true",
                    help="also measure each scenario at its former batch and limit")
    args = ap.parse_args()
    print(f"# {platform.machine()}, Python {platform.python_version()}")
    for name in args.scenarios.split(","):
        if args.former and name in FORMER:
            report(f"{name} (former)", problem_of(name, FORMER[name]), args)
        report(name, problem_of(name, {}), args)


if __name__ == "__main__":
    main()
