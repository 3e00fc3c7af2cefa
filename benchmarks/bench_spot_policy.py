"""The learned spot policy against the exact solver's baselines on held-out random cases.

    .venv/bin/python benchmarks/bench_spot_policy.py [--policy PATH] [--cases 20] [--seeds 20]
        [--fresh 40] [--samples 16] [--workers 2]

For each held-out case (planner/learned/family.py: a random problem whose floor binds, a random
spot market, seeds the training never draws) it prints the plan each method chooses, scored by
`fresh` jobs on seeds no choice saw: the best of the exact solver's baselines (robust.market_sweep:
(a) its answer repaired in the simulator, (b) its answers at raised floors on demand and on spot
prices, and those grown unit by unit; chosen by `seeds` jobs), the policy alone (its most likely
decision, no simulation) and the policy with a small search (its most likely decision and
`samples` sampled ones, chosen by the same `seeds` jobs). Then the summary: on the cases where
both hold the floor on the fresh jobs, the geometric mean of cost / baseline's cost with a 95%
bootstrap interval over cases, and how often each method holds the floor.
"""

from __future__ import annotations

import argparse
import math
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np


def one(args_index):
    import torch
    args, index = args_index
    torch.set_num_threads(1)
    from heterps_sim.planner.learned.evaluate import evaluate_case
    from heterps_sim.planner.learned.train import SHIPPED, load_policy
    if args.policy == "untrained":  # the same network before training, for the ablation
        from heterps_sim.planner.learned.policy import SpotPolicy
        torch.manual_seed(0)
        policy = SpotPolicy().eval()
    else:
        policy = load_policy(args.policy or SHIPPED)
    return evaluate_case(policy, index, seeds=args.seeds, fresh=args.fresh,
                         samples=args.samples)


def geo_ci(ratios: np.ndarray, rng: np.random.Generator) -> tuple[float, float, float]:
    logs = np.log(ratios)
    boots = [np.exp(rng.choice(logs, len(logs)).mean()) for _ in range(4000)]
    return float(np.exp(logs.mean())), float(np.quantile(boots, 0.025)), \
        float(np.quantile(boots, 0.975))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--policy", default="", help="checkpoint (default: the shipped one; "
                    "'untrained': the network before training)")
    ap.add_argument("--cases", type=int, default=20)
    ap.add_argument("--seeds", type=int, default=20, help="jobs each choice is made on")
    ap.add_argument("--fresh", type=int, default=40, help="jobs each chosen plan is scored on")
    ap.add_argument("--samples", type=int, default=16, help="sampled decisions of the search")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    start = time.perf_counter()
    rows = []
    index = 0
    with ProcessPoolExecutor(args.workers) as pool:
        while len(rows) < args.cases:
            want = args.cases - len(rows)
            batch = list(range(index, index + want))
            index += want
            rows += [r for r in pool.map(one, [(args, i) for i in batch]) if r is not None]
    print(f"{len(rows)} held-out cases (indices up to {index - 1}), {args.seeds} jobs per "
          f"choice, {args.fresh} fresh jobs per score, {args.samples} sampled decisions; "
          f"{time.perf_counter() - start:.0f} s")
    print()
    print("| case | L x M | p | baseline: plan | USD | holds | policy alone | USD | holds | "
          "policy + search | USD | holds | search / baseline |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        ratio = r.searched.cost / r.baseline.cost if r.baseline.fresh is not None \
            and r.searched.fresh is not None else math.nan
        print(f"| {r.index} | {r.layers} x {r.types} | {r.probability:g} | {r.baseline.label} | "
              f"{r.baseline.cost:.4g} | {'yes' if r.baseline.holds else 'no'} | "
              f"{r.alone.decision.text()} | {r.alone.cost:.4g} | "
              f"{'yes' if r.alone.holds else 'no'} | {r.searched.decision.text()} | "
              f"{r.searched.cost:.4g} | {'yes' if r.searched.holds else 'no'} | {ratio:.3f} |")
    rng = np.random.default_rng(0)
    print()
    for key in ("alone", "searched"):
        both = [(getattr(r, key).cost, r.baseline.cost) for r in rows
                if getattr(r, key).holds and r.baseline.holds]
        held = sum(getattr(r, key).holds for r in rows)
        line = (f"{key}: holds the floor on fresh jobs in {held}/{len(rows)} cases "
                f"(baseline {sum(r.baseline.holds for r in rows)}/{len(rows)})")
        if both:
            ratios = np.array([a / b for a, b in both])
            g, lo, hi = geo_ci(ratios, rng)
            line += (f"; where both hold ({len(both)}): cost / baseline geometric mean {g:.3f} "
                     f"(95% bootstrap {lo:.3f} to {hi:.3f}), median {np.median(ratios):.3f}, "
                     f"cheaper by >= 5% in {(ratios <= 0.95).sum()}, dearer by >= 5% in "
                     f"{(ratios >= 1.05).sum()}")
        print(line)
    walls = {k: np.median([getattr(r, k).wall_s for r in rows])
             for k in ("baseline", "alone", "searched")}
    print(f"median wall time to choose: baseline {walls['baseline']:.1f} s, policy alone "
          f"{walls['alone']:.2f} s, policy + search {walls['searched']:.1f} s")


if __name__ == "__main__":
    main()
