"""What the simulator's check adds to `heterps-sim simulate` on the 64-type scenarios.

Per scenario: the exact scheduler's plan (least provisioning, the shipped scenario as it is),
then planner.check.verify_plan with re-provisioning, as `simulate` runs it (--verify des):
the deterministic effects on, the plan's schedule and microbatches, seed 0. Each row: the
median wall time of the scheduler, of one simulation of its plan (what `schedule` adds) and
of the whole check (what `simulate` adds), the check's share of scheduler + check, its simulations, status, and the analytic vs simulated throughput. Goal: the check adds
<= 2 s to simulate on a 64-type scenario.
Usage: python benchmarks/bench_verify.py [--repeats 3] [--scenarios dlrm-64types,...]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path

from heterps_sim.cost import evaluate_plan
from heterps_sim.inputs.load import load_input
from heterps_sim.planner.check import verify_plan
from heterps_sim.schedulers.base import run_scheduler
from heterps_sim.schedulers.registry import make_scheduler

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ("dlrm-64types", "ctr-dnn-64types", "synthetic-64x64")


def bench(name: str, repeats: int) -> dict:
    problem = load_input(str(ROOT / "scenarios" / f"{name}.yaml")).problem
    sched, first_s, check_s, check = [], [], [], None
    for _ in range(repeats):
        t = time.perf_counter()
        outcome = run_scheduler(make_scheduler("exact"), problem, "least")
        sched.append(time.perf_counter() - t)
        if outcome.plan is None:
            return {"scenario": name, "status": "no plan", "note": outcome.notes.get("reason")}
        def evaluate(plan):
            return evaluate_plan(problem, plan, "least")
        t = time.perf_counter()
        verify_plan(problem, outcome.plan, outcome.result, evaluate)  # `schedule`: one run
        first_s.append(time.perf_counter() - t)
        t = time.perf_counter()
        check = verify_plan(problem, outcome.plan, outcome.result, evaluate, reprovision=True)
        check_s.append(time.perf_counter() - t)
    s, c = statistics.median(sched), statistics.median(check_s)
    return {"scenario": name, "schedule_s": s, "first_s": statistics.median(first_s),
            "check_s": c, "check_share": c / (s + c),
            "simulations": check.simulations, "status": check.status,
            "analytic": check.analytic.throughput, "simulated": check.simulated.throughput,
            "final": check.final_simulated.throughput,
            "units": "-".join(str(x.num_replicas) for x in check.final_simulated.stages),
            "microbatches": check.simulated.extra.get("num_microbatches")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    args = ap.parse_args()
    print(f"# {platform.node()} {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; medians of {args.repeats}")
    print(f"{'scenario':18} {'schedule s':>10} {'1 sim s':>8} {'check s':>8} {'share':>6} {'sims':>4} "
          f"{'status':>13} {'m':>4} {'analytic/s':>13} {'simulated/s':>13} {'final/s':>13}  units")
    for name in args.scenarios.split(","):
        r = bench(name.strip(), args.repeats)
        if "check_s" not in r:
            print(f"{r['scenario']:18} {r['status']}: {r['note']}")
            continue
        print(f"{r['scenario']:18} {r['schedule_s']:>10.3f} {r['first_s']:>8.3f} "
              f"{r['check_s']:>8.3f} "
              f"{r['check_share']:>6.2f} {r['simulations']:>4} {r['status']:>13} "
              f"{r['microbatches']:>4} {r['analytic']:>13,.0f} {r['simulated']:>13,.0f} "
              f"{r['final']:>13,.0f}  {r['units']}")


if __name__ == "__main__":
    main()
