"""The shipped `rl` checkpoint on default-model problems, reading its features from the
problem's own model (what the scheduler does) or from the paper model's view of the same
problem (what it read before): the plan it decodes, costed by the default model, over the
exact optimum's cost.

The checkpoint was pre-trained on random paper-model problems (schedulers/rl/stagewise/
imitation.py); its features keep their definitions (least units meeting the limit, the stage's
rate and throughput, ...), only their values now come from the problem's model. Decode only
(updates=0) and no polish, so the ratio is the policy's own choice.
With --compare OLD.pt: instead, the shipped checkpoint against OLD (both decode only, their
own-model features) on 20 random paper-model and 20 random default-model problems.
Usage: python benchmarks/bench_model_steering.py [--problems 8] [--seed 77] [--compare OLD.pt]
"""

from __future__ import annotations

import argparse
import os
import platform

import numpy as np

import heterps_sim.schedulers.rl.stagewise.train as train
from heterps_sim.schedulers.base import run_scheduler
from heterps_sim.schedulers.registry import make_scheduler
from heterps_sim.testing import random_default_problem, random_problem

DECODE_ONLY = dict(updates=0, polish_starts=0, polish_levels=False, polish_window=0,
                   untrained_starts=False, polish_splits=False)


def ratio(problem, best: float, checkpoint: str = "shipped") -> float:
    out = run_scheduler(make_scheduler("rl", checkpoint=checkpoint, **DECODE_ONLY), problem)
    return out.result.cost_usd / best if out.result is not None and out.result.feasible \
        else float("inf")


def summary(r) -> str:
    r = np.array(r)
    ok = np.isfinite(r)
    return (f"{ok.sum()}/{len(r)} feasible, geometric mean {np.exp(np.log(r[ok]).mean()):.4f}, "
            f"optimal {int(np.sum(r <= 1 + 1e-9))}")


def compare(old: str) -> None:
    """The shipped checkpoint against `old` on both models' random problems."""
    print("| problems | checkpoint | cost / exact optimum |")
    print("|---|---|---|")
    for family in ("paper", "default"):
        rng = np.random.default_rng(9090 if family == "paper" else 5)
        got: dict[str, list] = {"shipped": [], old: []}
        while len(got["shipped"]) < 20:
            n_l, n_m = int(rng.choice([8, 16, 24])), int(rng.choice([8, 16, 32]))
            p = random_problem(rng, n_l, n_m, limit_quantile=float(rng.choice([0.5, 2.0, 8.0]))) \
                if family == "paper" else random_default_problem(rng, n_l, n_m)
            exact = run_scheduler(make_scheduler("exact"), p)
            if exact.result is None:
                continue
            for checkpoint in got:
                got[checkpoint].append(ratio(p, exact.result.cost_usd, checkpoint))
        for checkpoint, r in got.items():
            print(f"| random {family}-model | {checkpoint} | {summary(r)} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=int, default=8)
    ap.add_argument("--seed", type=int, default=77)
    ap.add_argument("--compare", default=None)
    args = ap.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores\n")
    if args.compare:
        compare(args.compare)
        return
    rng = np.random.default_rng(args.seed)
    own_encode = train.encode_segments  # the scheduler encodes through train.make_task()

    def paper_view(problem, *a, **k):
        return own_encode(problem.with_model("paper"), *a, **k)

    print("| problem | layers x types | own model / optimum | paper view / optimum |")
    print("|---|---|---|---|")
    own, paper = [], []
    for i in range(args.problems):
        p = random_default_problem(rng, int(rng.choice([8, 16, 24])), int(rng.choice([8, 16])))
        exact = run_scheduler(make_scheduler("exact"), p)
        if exact.result is None:
            continue
        own.append(ratio(p, exact.result.cost_usd))
        train.encode_segments = paper_view
        try:
            paper.append(ratio(p, exact.result.cost_usd))
        finally:
            train.encode_segments = own_encode
        print(f"| #{i} | {p.num_layers} x {p.num_types} | {own[-1]:.4f} | {paper[-1]:.4f} |")

    print(f"\nown model: {summary(own)}; paper view: {summary(paper)}")


if __name__ == "__main__":
    main()
