"""What the commands answer on every shipped scenario (the planner's answer): the stage
model's exact cuts provisioned as they run, against the plan the commands print, and the time.

    python benchmarks/bench_answer.py [--scenarios a,b,...]

Prints a markdown table: the exact scheduler's plan provisioned as it runs (cost, feasible),
the answer (cost, m, units, proven or the gap), and the wall time of the planner. Costs are
deterministic; times are this machine's.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from heterps_sim.inputs.load import load_input
from heterps_sim.planner import Planner, Pricing
from heterps_sim.schedulers.base import run_scheduler
from heterps_sim.schedulers.registry import make_scheduler

ROOT = Path(__file__).resolve().parents[1]
SKIP = {"dlrm-impossible"}  # no plan by design


def _usd(outcome) -> str:
    r = outcome.result
    if r is None:
        return "no plan"
    return f"{r.cost_usd:,.4g}" if r.feasible else "misses the limit"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", default=None, help="comma-separated names (default: all)")
    args = ap.parse_args()
    names = (args.scenarios.split(",") if args.scenarios else
             sorted(p.stem for p in (ROOT / "scenarios").glob("*.yaml") if p.stem not in SKIP))
    print("| scenario | exact's cuts as they run, USD | answer USD | m | units | proof | s |")
    print("|---|---|---|---|---|---|---|")
    for name in names:
        problem = load_input(ROOT / "scenarios" / f"{name}.yaml").problem
        own = run_scheduler(make_scheduler("exact"), problem, "least")
        if own.plan is not None:  # the stage model's cuts and types, priced as they run
            _, own.result = Pricing.of(problem).price(problem, own.plan.with_replicas(None))
        start = time.perf_counter()
        answer = Planner().plan(problem)
        wall = time.perf_counter() - start
        plan = answer.plan
        units = "-".join(str(s.num_replicas) for s in plan.stages) if plan else "-"
        source = answer.optimality()
        print(f"| {name} | {_usd(own)} | {_usd(answer)} | "
              f"{plan.num_microbatches if plan else '-'} | {units} | {source} | {wall:.2f} |",
              flush=True)


if __name__ == "__main__":
    main()
