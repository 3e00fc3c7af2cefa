"""rl-paper (the paper's LSTM + REINFORCE) against the exact optimum: gap after S seconds.

Problems (all seeded):
  random L x 64   heterps_sim.testing.random_problem at L in {8, 16, 32, 64} layers x 64 types,
                  limits 0.5x-20x a single unit's throughput (--instances per size; instances
                  without a feasible plan are skipped)
  scenarios       scenarios/{ctr-dnn-64types, dlrm-64types, synthetic-64x64}.yaml
Per problem: rl-paper trained from scratch for --seconds of wall time (train_seconds; the
number of updates depends on the machine), its plan's cost against the exact optimum (least
provisioning): gap % = 100 (cost / optimum - 1), "infeas" when it found no feasible plan; the
best homogeneous plan's gap for scale; updates/s. Zero-shot: one policy trained for --seconds
on 8 other random problems (L in {8, 16, 32, 64} x 64 types), then held-out problems (new
random ones and the scenarios) decoded with no training: its greedy plan, the best of that and
64 sampled plans (the scheduler's decode), and after --finetune seconds of fine-tuning.
Usage: python benchmarks/bench_rl.py [--seconds 20] [--instances 3] [--finetune 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from heterps_sim.inputs.load import load_input
from heterps_sim.schedulers.base import Evaluator, NoFeasiblePlan, run_scheduler
from heterps_sim.schedulers.baselines.single_type import HomogeneousScheduler
from heterps_sim.schedulers.exact.sweep import ExactScheduler
from heterps_sim.schedulers.rl.paper.scheduler import RLPaperScheduler
from heterps_sim.schedulers.rl.paper.train import (
    Args,
    make_task,
    new_policy,
    save_checkpoint,
    train,
)
from heterps_sim.testing import random_problem

ROOT = Path(__file__).resolve().parents[1]

SIZES = (8, 16, 32, 64)
SCENARIOS = ("ctr-dnn-64types", "dlrm-64types", "synthetic-64x64")


def optimum(problem) -> float | None:
    try:
        plan = ExactScheduler().schedule(problem, Evaluator(problem))
    except NoFeasiblePlan:
        return None
    return Evaluator(problem)(plan).cost_usd


def random_problems(seed: int, count: int, sizes=SIZES):
    """(group, label, problem, optimum) for `count` feasible random problems per size."""
    rng = np.random.default_rng(seed)
    for n_l in sizes:
        found = 0
        while found < count:
            q = float(rng.choice([0.5, 2.0, 8.0, 20.0]))
            p = random_problem(rng, n_l, 64, limit_quantile=q)
            best = optimum(p)
            if best is not None:
                found += 1
                yield f"random {n_l}x64", f"#{found} TL {q:g}x", p, best


def scenario_problems():
    for name in SCENARIOS:
        p = load_input(ROOT / "scenarios" / f"{name}.yaml").problem
        yield "scenario", name, p, optimum(p)


def gap(cost: float | None, best: float) -> float:
    return math.inf if cost is None or not math.isfinite(cost) else 100.0 * (cost / best - 1)


def run_rl(problem, best: float, **options) -> dict:
    outcome = run_scheduler(RLPaperScheduler(RLPaperScheduler.Config(**options)), problem)
    cost = outcome.result.cost_usd if outcome.result else None
    notes = outcome.notes
    return dict(gap=gap(cost, best), greedy_gap=gap(notes.get("greedy_cost_usd"), best),
                updates=notes.get("updates", 0),
                updates_per_s=notes.get("updates_per_s", 0.0), wall_s=outcome.wall_s)


def homogeneous_gap(problem, best: float) -> float:
    outcome = run_scheduler(HomogeneousScheduler(), problem)
    return gap(outcome.result.cost_usd if outcome.result else None, best)


def fmt(x: float) -> str:
    return "infeas" if not math.isfinite(x) else f"{x:.1f}"


def from_scratch(args) -> list[dict]:
    rows = []
    problems = list(random_problems(0, args.instances)) + list(scenario_problems())
    print(f"\n== from scratch: {args.seconds:g} s of training per problem ==")
    print(f"{'group':14s} {'instance':18s} {'L':>3s} {'gap %':>8s} {'homog %':>8s} "
          f"{'updates':>7s} {'upd/s':>6s}")
    for group, label, p, best in problems:
        r = run_rl(p, best, train_seconds=args.seconds, seed=0)
        row = dict(group=group, instance=label, layers=p.num_layers,
                   homogeneous_gap=homogeneous_gap(p, best), **r)
        rows.append(row)
        print(f"{group:14s} {label:18s} {p.num_layers:3d} {fmt(row['gap']):>8s} "
              f"{fmt(row['homogeneous_gap']):>8s} {row['updates']:7d} "
              f"{row['updates_per_s']:6.1f}", flush=True)
    return rows


def zero_shot(args) -> list[dict]:
    train_set = [p for _, _, p, _ in random_problems(100, 2)]
    targs = Args(seconds=args.seconds, progress=False, seed=0)
    policy, norm = new_policy(targs, train_set)
    stats = train(policy, [make_task(p, norm, "least") for p in train_set], targs, norm)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = str(Path(tmp) / "zero-shot.pt")
        save_checkpoint(ckpt, policy, norm, targs)
        print(f"\n== zero-shot: one policy trained {stats['wall_s']:.0f} s ({stats['updates']} "
              f"updates) on {len(train_set)} random problems; held-out problems decoded ==")
        print(f"{'group':14s} {'instance':18s} {'L':>3s} {'greedy %':>9s} {'best/64 %':>9s} "
              f"{'+' + format(args.finetune, 'g') + ' s tune %':>12s}")
        held_out = list(random_problems(200, 1)) + list(scenario_problems())
        for group, label, p, best in held_out:
            r0 = run_rl(p, best, checkpoint=ckpt, updates=0)
            r1 = run_rl(p, best, checkpoint=ckpt, train_seconds=args.finetune)
            rows.append(dict(group=group, instance=label, layers=p.num_layers,
                             greedy_gap=r0["greedy_gap"], zero_shot_gap=r0["gap"],
                             finetuned_gap=r1["gap"], finetune_updates=r1["updates"]))
            print(f"{group:14s} {label:18s} {p.num_layers:3d} {fmt(r0['greedy_gap']):>9s} "
                  f"{fmt(r0['gap']):>9s} {fmt(r1['gap']):>12s}", flush=True)
    return rows


def summary(scratch: list[dict], zshot: list[dict]) -> dict:
    def med(xs):
        return statistics.median(xs) if xs else math.nan

    out = {}
    for group in [f"random {n}x64" for n in SIZES] + ["scenario"]:
        rows = [r for r in scratch if r["group"] == group]
        out[group] = dict(median_gap=med([r["gap"] for r in rows]),
                          worst_gap=max((r["gap"] for r in rows), default=math.nan),
                          median_updates_per_s=med([r["updates_per_s"] for r in rows]))
    out["zero-shot"] = dict(median_greedy_gap=med([r["greedy_gap"] for r in zshot]),
                            median_gap=med([r["zero_shot_gap"] for r in zshot]),
                            median_finetuned_gap=med([r["finetuned_gap"] for r in zshot]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--instances", type=int, default=3)
    ap.add_argument("--finetune", type=float, default=5.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    warm = random_problem(np.random.default_rng(0), 4, 3)
    run_rl(warm, optimum(warm) or 1.0, updates=1)  # numba / torch warm-up
    start = time.perf_counter()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"torch {torch.__version__} on 1 thread; rl-paper: hidden 128, lr 3e-3, 64 plans per "
          "update, entropy 0.01, moving-average baseline, log-ratio reward")
    scratch = from_scratch(args)
    zshot = zero_shot(args)
    summ = summary(scratch, zshot)
    print(f"\n== summary (gap % to the exact optimum; {time.perf_counter() - start:.0f} s) ==")
    for group, s in summ.items():
        print(f"{group:16s} " + "  ".join(f"{k} {fmt(v) if 'gap' in k else f'{v:.1f}'}"
                                          for k, v in s.items()))
    if args.json:
        print(json.dumps(_finite({"from_scratch": scratch, "zero_shot": zshot,
                                  "summary": summ})))


def _finite(x):
    """inf / nan -> None, so the JSON is standard."""
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_finite(v) for v in x]
    return None if isinstance(x, float) and not math.isfinite(x) else x


if __name__ == "__main__":
    main()
