"""`rl --set reward=des` against the analytic optimum, both judged by the simulator.

Per scenario and set of simulator effects:
  exact        the analytic optimum (the exact DP), provisioned as the analytic model does
  rl           `rl` with the analytic reward (the default): a control, to show that a gain
               comes from the DES reward and not from rl's plan merely being another one
  rl des       `rl` with reward=des (its analytic cost: least provisioning of its plan): PPO and the decode rank plans by the DES (search seeds
               SEARCH_SEEDS), a fixed number of PPO updates so the run repeats
Every plan is then judged by the same des_reward.DesJudge on HELD_OUT seeds (never searched
on): provisioned as the analytic model does, re-provisioned while the DES misses the limit,
its DES cost the mean over the seeds. margin = exact's DES cost / rl des's - 1 (> 0: rl wins);
"in-sample" is the same on the search seeds.
Usage: python benchmarks/bench_rl_des.py [--updates 10] [--scenarios a,b] [--effects "x;y"]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import torch

from heterps_sim.cost.reference import evaluate_plan
from heterps_sim.inputs.load import load_input
from heterps_sim.schedulers.base import run_scheduler
from heterps_sim.schedulers.registry import make_scheduler
from heterps_sim.schedulers.rl.stagewise.des_reward import DesJudge
from heterps_sim.schedulers.rl.stagewise.imitation import plan_assignment as assignment_of

SCENARIOS = ("2emb-ps-contention", "matchnet-mixed-clouds", "nce-cpu-gpu")
EFFECTS = ("contention", "stragglers", "ps", "contention,stragglers,ps")
SEARCH_SEEDS = [0, 1]
HELD_OUT = (10, 11, 12, 13, 14)


def judge_plan(judge: DesJudge, problem, outcome) -> tuple[float, bool]:
    if outcome.plan is None:
        return float("inf"), False
    v = judge(assignment_of(problem, outcome.plan))
    return (v.cost if v.feasible else float("inf")), v.feasible


def row(name: str, effects: str, updates: int) -> dict:
    problem = load_input(f"scenarios/{name}.yaml").problem
    exact = run_scheduler(make_scheduler("exact"), problem, "least")
    control = run_scheduler(make_scheduler("rl", updates=updates, train_seconds=600),
                            problem, "least")
    start = time.perf_counter()
    des = run_scheduler(make_scheduler("rl", reward="des", effects=effects, updates=updates,
                                       train_seconds=600, des_seeds=SEARCH_SEEDS),
                        problem, "least")
    wall = time.perf_counter() - start
    held = DesJudge(problem, "least", effects=effects, seeds=HELD_OUT)
    search = DesJudge(problem, "least", effects=effects, seeds=tuple(SEARCH_SEEDS))
    e_cost, _ = judge_plan(held, problem, exact)
    c_cost, _ = judge_plan(held, problem, control)
    d_cost, _ = judge_plan(held, problem, des)
    e_in, _ = judge_plan(search, problem, exact)
    d_in, _ = judge_plan(search, problem, des)
    return {"scenario": name, "effects": effects, "exact_analytic": exact.result.cost_usd,
            "exact_des": e_cost, "rl_des_of_analytic_rl": c_cost, "rl_des": d_cost,
            "rl_des_analytic": (evaluate_plan(problem, des.plan.with_replicas(None)).cost_usd
                                if des.plan else float("inf")),
            "margin_pct": 100.0 * (e_cost / d_cost - 1.0),
            "in_sample_pct": 100.0 * (e_in / d_in - 1.0), "wall_s": wall,
            "stages": f"{len(exact.plan.stages)} -> {len(des.plan.stages) if des.plan else '-'}"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--updates", type=int, default=10, help="PPO updates of both rl runs")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--effects", default=";".join(EFFECTS), help="effect sets, ';'-separated")
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(f"# {platform.node()} {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; "
          f"search seeds {SEARCH_SEEDS}, judged on seeds {list(HELD_OUT)}; DES costs in USD")
    head = ("scenario", "effects", "exact analytic", "exact DES", "rl DES", "rl-des DES",
            "rl-des analytic", "margin %", "in-sample %", "stages", "wall s")
    print(" | ".join(head))
    for name in args.scenarios.split(","):
        for effects in args.effects.split(";"):
            r = row(name, effects, args.updates)
            print(" | ".join([r["scenario"], r["effects"], f"{r['exact_analytic']:.4g}",
                              f"{r['exact_des']:.4g}", f"{r['rl_des_of_analytic_rl']:.4g}",
                              f"{r['rl_des']:.4g}", f"{r['rl_des_analytic']:.4g}",
                              f"{r['margin_pct']:+.1f}", f"{r['in_sample_pct']:+.1f}",
                              r["stages"], f"{r['wall_s']:.1f}"]), flush=True)
    print(f"# load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
