"""How the learned spot policy alone picks its headroom, tuned on validation cases.

    .venv/bin/python benchmarks/bench_spot_alone.py [--policy shipped] [--cases 30]
        [--seeds 20] [--quantiles mode,0.5,...,h0.7] [--workers 2]

(`h0.5` in --quantiles: headroom 50% whatever the policy says, its other choices kept: the
ablation of the learned headroom.)

The policy gives a distribution over ordered headrooms (0% to 70%). Its most likely headroom
("mode") is what a cross-entropy fit makes likeliest, but a step too low misses the floor
where a step too high only costs more. Rule q takes the least headroom whose cumulative
probability reaches q. For each rule, on `cases` validation cases (planner/learned/family.py:
the training family, seeds the training never draws and the held-out evaluation never uses),
the policy alone's decision is scored by the same `seeds` jobs (the training reward: -ln(cost
/ the on-demand answer's) less a penalty when the jobs miss the floor more often than the
market allows). Printed per rule: the mean reward, the cases whose jobs hold the floor, and
the geometric mean cost over the on-demand answer's on the cases every rule holds. The rule of
highest mean reward is the one answer.ALONE_QUANTILE ships; the held-out cases then judge it
(bench_spot_policy.py).
"""

from __future__ import annotations

import argparse
import math
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np


def _rules(text: str) -> tuple:
    return tuple(None if x == "mode" else ("fixed", float(x[1:])) if x.startswith("h")
                 else float(x) for x in text.split(","))


def _name(rule) -> str:
    if rule is None:
        return "mode"
    return f"h = {rule[1]:g}" if isinstance(rule, tuple) else f"q = {rule:g}"


def one(job):
    import torch
    torch.set_num_threads(1)
    from heterps_sim.planner.learned.evaluate import alone_by_rule
    from heterps_sim.planner.learned.train import SHIPPED, load_policy
    policy_name, index, rules, seeds = job
    policy = load_policy(SHIPPED if policy_name == "shipped" else policy_name)
    return index, alone_by_rule(policy, index, rules, seeds=seeds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--policy", default="shipped")
    ap.add_argument("--cases", type=int, default=30)
    ap.add_argument("--seeds", type=int, default=20, help="jobs each decision is scored by")
    ap.add_argument("--quantiles", default="mode,0.5,0.6,0.7,0.8,0.85,0.9,0.95,h0.35,h0.5,h0.7")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    rules = _rules(args.quantiles)
    start = time.perf_counter()
    found: dict[int, dict] = {}
    index = 0
    with ProcessPoolExecutor(args.workers) as pool:
        while len(found) < args.cases:
            batch = range(index, index + args.cases - len(found))
            index += len(batch)
            jobs = [(args.policy, i, rules, args.seeds) for i in batch]
            for i, got in pool.map(one, jobs):
                if got is not None:
                    found[i] = got
    print(f"{len(found)} validation cases (indices {min(found)} to {max(found)}), "
          f"{args.seeds} jobs per decision, {time.perf_counter() - start:.0f} s")
    every = [i for i in found if all(found[i][q].holds for q in rules)]
    print(f"{'rule':>9} {'mean reward':>12} {'holds':>8} {'cost / on demand':>17} "
          f"{'mean headroom':>14}")
    for q in rules:
        scored = [found[i][q] for i in found]
        reward = float(np.mean([s.reward for s in scored]))
        holds = sum(s.holds for s in scored)
        ratio = (math.exp(float(np.mean([-found[i][q].reward for i in every])))
                 if every else math.nan)  # reward = -ln(cost / ref) where the jobs hold
        head = float(np.mean([s.decision.headroom for s in scored]))
        print(f"{_name(q):>9} {reward:>12.3f} {holds:>5}/{len(scored):<2} {ratio:>17.3f} "
              f"{100 * head:>13.1f}%")
    best = max(rules, key=lambda q: np.mean([found[i][q].reward for i in found]))
    print(f"highest mean reward: {_name(best)} (cost / on demand over the {len(every)} cases "
          "every rule holds)")


if __name__ == "__main__":
    main()
