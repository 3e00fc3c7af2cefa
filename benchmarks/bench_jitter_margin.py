"""What the default jitter costs the shipped scenarios' answers, and jitter_margin beside it.

Per scenario: the answer's deterministic simulated throughput (the check's effects: bubbles,
all-reduce, transfers, contention, ps), the same plan with jitter on (DesOptions' default
jitter_cv) over --seeds seeds, the median, least and most cost of the jitter
(deterministic / jittered - 1: the headroom the plan needs), and
heterps_sim.des.margin.jitter_margin(problem, plan).

The plans: --plans FILE, a JSON object {scenario name: plan JSON} (e.g. saved answers), or
else the planner's answer for every shipped scenario (heterps_sim.planner.Planner).

Usage: python benchmarks/bench_jitter_margin.py [--seeds 7] [--steps 8] [--plans FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

from heterps_sim.core.plan import plan_from_dict
from heterps_sim.des import DesOptions, simulate
from heterps_sim.des.margin import DETERMINISTIC, jitter_margin
from heterps_sim.inputs.load import load_input

ROOT = Path(__file__).resolve().parents[1]


def answers(path: str) -> dict:
    """{scenario: (problem, plan with its units)} from the file or from the planner."""
    out = {}
    if path:
        for name, data in json.loads(Path(path).read_text()).items():
            out[name] = (load_input(str(ROOT / "scenarios" / f"{name}.yaml")).problem,
                         plan_from_dict(data))
        return out
    from heterps_sim.planner import Planner
    for scenario in sorted((ROOT / "scenarios").glob("*.yaml")):
        problem = load_input(str(scenario)).problem
        got = Planner().plan(problem)
        if got.plan is not None and got.result is not None and got.result.feasible:
            out[scenario.stem] = (problem, got.plan.with_replicas(
                [s.num_replicas for s in got.result.stages]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=7)
    ap.add_argument("--steps", type=int, default=8, help="simulated steps (default 8)")
    ap.add_argument("--plans", default="", help="JSON {scenario: plan}; default: the planner's")
    args = ap.parse_args()
    print(f"# {platform.node()} {platform.machine()}, {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f}; jitter_cv {DesOptions().jitter_cv}, "
          f"{args.seeds} seeds, {args.steps} steps")
    print(f"{'scenario':24} {'units':>22} {'m':>3} {'deterministic':>14} {'median':>7} "
          f"{'least':>6} {'most':>6} {'margin':>7}")
    start = time.perf_counter()
    for name, (problem, plan) in answers(args.plans).items():
        det = simulate(problem, plan, options=DesOptions.with_effects(
            DETERMINISTIC, num_steps=args.steps), record_spans=False).result.throughput
        noisy = DesOptions.with_effects(DETERMINISTIC + ("jitter",), num_steps=args.steps)
        cost = det / np.array([simulate(problem, plan, seed=s, options=noisy,
                                        record_spans=False).result.throughput
                               for s in range(args.seeds)]) - 1.0
        units = "-".join(str(s.num_replicas) for s in plan.stages)
        print(f"{name:24} {units:>22} {plan.num_microbatches:>3} {det:>14,.0f} "
              f"{100 * np.median(cost):>6.1f}% {100 * cost.min():>5.1f}% "
              f"{100 * cost.max():>5.1f}% {100 * jitter_margin(problem, plan):>6.1f}%",
              flush=True)
    print(f"wall {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
