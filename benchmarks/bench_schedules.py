"""Synchronous against asynchronous, after the simulator: each schedule's answer on every
shipped scenario, and what the simulator's check makes of it.

For each scenario and each schedule (gpipe, 1f1b, async) the planner answers under that
schedule's own pricing (the flushed closed form for gpipe and 1f1b, the steady-pipeline stage
model with the stashed weights for async); the check then runs the answer in the simulator
with the deterministic effects and, where it is short, repairs it as `heterps-sim simulate`
does (re-planned at raised floors, then re-provisioned). Prints per scenario the analytic
cost, whether the simulator confirms it, the cost of the plan to run after the check (the
simulated cost of the confirmed, re-planned or re-provisioned plan), and which schedule is
cheapest before and after the simulator: what `--pipeline auto` keeps is the cheapest analytic
answer, so a row where the two differ is one where auto's choice would change under the
simulator.

    .venv/bin/python benchmarks/bench_schedules.py [--scenarios a,b,...]
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

from heterps_sim.inputs.load import load_input
from heterps_sim.planner import Planner
from heterps_sim.planner.pricing import SCHEDULES

ROOT = Path(__file__).resolve().parents[1]
SKIP = ("synthetic-64x64", "synthetic-256x64", "dlrm-impossible")
"""The synthetic scenarios' flushed searches take minutes at their default budget; the
impossible one has no plan under any schedule."""


def schedule_row(problem, schedule: str) -> dict:
    planner = Planner(schedule=schedule)
    answer = planner.plan(problem)
    if not answer.feasible:
        return {"feasible": False}
    check = planner.check(answer, repair=True)
    final = check.extra.get("final_simulated_cost_usd", math.inf)
    return {"feasible": True, "usd": answer.cost_usd, "proven": answer.proven,
            "status": check.status, "final_usd": final if check.meets_limit else math.inf,
            "stages": len(answer.plan.stages),
            "types": sorted({s.resource for s in answer.plan.stages})}


def cheapest(row: dict, key: str) -> str:
    costs = {s: r[key] for s, r in row.items() if r.get("feasible") and math.isfinite(r[key])}
    if not costs:
        return "-"
    best = min(costs.values())
    return next(s for s in SCHEDULES if s in costs and costs[s] <= best * (1 + 1e-9))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", help="comma list (default: every shipped scenario but the "
                                        "synthetic and impossible ones)")
    args = ap.parse_args()
    names = (args.scenarios.split(",") if args.scenarios else
             sorted(p.stem for p in (ROOT / "scenarios").glob("*.yaml") if p.stem not in SKIP))
    print(f"{'scenario':24} {'schedule':8} {'USD':>10} {'simulator':>13} {'after it USD':>13}  "
          f"stages types")
    t0 = time.perf_counter()
    changed = 0
    for name in names:
        problem = load_input(str(ROOT / "scenarios" / f"{name}.yaml")).problem
        row = {s: schedule_row(problem, s) for s in SCHEDULES}
        for s, r in row.items():
            if not r["feasible"]:
                print(f"{name:24} {s:8} {'no plan':>10}")
                continue
            after = f"{r['final_usd']:.6g}" if math.isfinite(r["final_usd"]) else "none"
            print(f"{name:24} {s:8} {r['usd']:10.6g} {r['status']:>13} {after:>13}  "
                  f"{r['stages']:6} {', '.join(r['types'])}")
        before, after = cheapest(row, "usd"), cheapest(row, "final_usd")
        changed += before != after
        print(f"{'':24} cheapest: {before} by the model, {after} after the simulator"
              + ("  <- differs" if before != after else ""))
    print(f"\n{len(names)} scenarios, {changed} where the simulator changes the cheapest "
          f"schedule ({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
