"""`rl` (stage-level LSTM, imitation + PPO, sampling + polish) against the exact optimum.

Problems (all seeded, none trained on: the shipped checkpoint saw heterps_sim/schedulers/rl/stagewise/imitation.py's seeds only):
  random L x 64   heterps_sim.testing.random_problem at L in {8, 16, 32, 64} x 64 types, limits
                  0.5x-20x one unit (bench_rl.random_problems, seed 200: rl-paper's held-out set)
  scenarios       every shipped scenario with 64 types
Sections:
  ablation  what each ingredient buys, per problem (gap % to the optimum, least provisioning):
            untrained policy + PPO + samples + polish (no imitation); imitation checkpoint
            greedy; + samples; + polish (the zero-shot decode); + PPO fine-tune (`rl` default)
  baselines rl (default config) against every budgeted baseline given the same wall time:
            each one's evaluation rate is measured on a small budget first, then it gets
            rate x rl's wall time evaluations (bayesian at most BAYES_CAP); rl-paper gets
            train_seconds = that time
  heldout   (--heldout N) N + 2 random 64 x 64 problems (random_problems(300, N, sizes=(64,))
            and the 2 of seed 200): what the polish's compound moves buy (heterps_sim/schedulers/search/level_moves.py,
            heterps_sim/schedulers/search/window_moves.py), the same polish from an untrained policy's plans, and both
            decodes polished (untrained_starts, the default)
  alone     (--alone N) the policy alone, no PPO, no polish, no untrained starts: its greedy
            decode and greedy + 256 samples, on the same N + 2 held-out 64 x 64 problems,
            for each checkpoint of --checkpoints (the issue's "policy alone" targets)
Usage: python benchmarks/bench_rl_improved.py [--instances 3] [--finetune 10] [--json]
       [--no-baselines] (the ablation only: a short run) [--heldout 6] (that section only)
       [--alone 18 --checkpoints shipped,other.pt] (that section only)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch

from heterps_sim.inputs.load import load_input
from heterps_sim.schedulers.base import run_scheduler
from heterps_sim.schedulers.registry import make_scheduler

ROOT = Path(__file__).resolve().parents[1]
from bench_rl import _finite, fmt, gap, optimum, random_problems  # noqa: E402

SCENARIOS = ("ctr-dnn-64types", "dlrm-64types", "synthetic-64x64", "synthetic-256x64")
BASELINES = ("random", "greedy", "genetic", "bayesian")
BAYES_CAP = 400
"""Most TPE trials (its own time per trial grows; 400 took about rl's wall time here)."""


def variants(finetune: float) -> dict[str, dict]:
    decode = dict(updates=0)
    return {
        "no imitation: untrained + PPO + samples + polish": dict(checkpoint="none",
                                                                 train_seconds=finetune),
        "imitation: greedy": dict(decode, decode_samples=0, polish_starts=0),
        "+ 256 samples": dict(decode, polish_starts=0),
        "+ polish (zero-shot)": dict(decode),
        f"+ PPO {finetune:g} s (rl default)": dict(train_seconds=finetune),
    }


def _fmt(x: float) -> str:
    return "-" if x != x else fmt(x)  # nan: not run (--no-baselines)


def run(name: str, problem, best: float, **options) -> dict:
    outcome = run_scheduler(make_scheduler(name, **options), problem)
    cost = outcome.result.cost_usd if outcome.result else None
    return dict(gap=gap(cost, best), wall_s=outcome.wall_s, evaluations=outcome.evaluations,
                notes=outcome.notes)


def problems(instances: int):
    yield from random_problems(200, instances)
    for name in SCENARIOS:
        p = load_input(ROOT / "scenarios" / f"{name}.yaml").problem
        yield "scenario", name, p, optimum(p)


def equal_time(problem, best: float, seconds: float) -> dict:
    out = {}
    for name in BASELINES:
        probe = 200 if name == "bayesian" else 2000
        r = run(name, problem, best, budget=probe)
        rate = r["evaluations"] / max(r["wall_s"], 1e-3)
        budget = max(probe, int(rate * seconds))
        if name == "bayesian":  # TPE's cost per trial grows with the trials: capped
            budget = min(budget, BAYES_CAP)
        out[name] = run(name, problem, best, budget=budget)["gap"]
    out["rl-paper"] = run("rl-paper", problem, best, train_seconds=seconds)["gap"]
    return out


def heldout_variants(finetune: float) -> dict[str, dict]:
    decode = dict(updates=0, untrained_starts=False)
    return {
        "one-move + split polish (zero-shot)": dict(decode, polish_levels=False,
                                                     polish_window=0),
        "+ level moves": dict(decode, polish_window=0),
        "+ window moves": dict(decode),
        f"+ PPO {finetune:g} s": dict(decode, updates=None, train_seconds=finetune),
        "untrained policy, no PPO, same polish": dict(decode, checkpoint="none"),
        "zero-shot rl (+ untrained starts)": dict(updates=0),
        f"rl default (+ PPO {finetune:g} s)": dict(train_seconds=finetune),
    }


def heldout_problems(count: int) -> list:
    """The 64 x 64 held-out problems: seed 200's two and `count` of seed 300."""
    problems = [x for x in random_problems(200, 2) if x[0] == "random 64x64"]
    return problems + list(random_problems(300, count, sizes=(64,)))


def alone(count: int, checkpoints: list[str]) -> None:
    """The policy alone per checkpoint on the held-out 64 x 64 problems: gap % and decode
    wall time per problem, then median (worst) and the slowest decode."""
    decodes = {"greedy": dict(decode_samples=0), "greedy + 256 samples": {}}
    cells = {(c, d): [] for c in checkpoints for d in decodes}
    print("gap % (decode s) per checkpoint and decode: "
          + " | ".join(f"{c}: {d}" for c, d in cells))
    for _, label, p, best in heldout_problems(count):
        line = []
        for c, d in cells:
            r = run("rl", p, best, checkpoint=c, updates=0, polish_starts=0,
                    untrained_starts=False, **decodes[d])
            cells[(c, d)].append((r["gap"], r["wall_s"]))
            line.append(f"{fmt(r['gap']):>6s} ({r['wall_s']:4.2f})")
        print(f"{label:14s} " + "  ".join(line), flush=True)
    for (c, d), got in cells.items():
        gaps = [g for g, _ in got]
        print(f"{c}: {d:22s} median {fmt(statistics.median(gaps))}  worst {fmt(max(gaps))}  "
              f"optimal in {sum(g <= 1e-9 for g in gaps)}/{len(gaps)}  slowest decode "
              f"{max(w for _, w in got):.2f} s")


def heldout(count: int, finetune: float) -> None:
    """Gap % and wall time per 64 x 64 held-out problem and variant; median (worst)."""
    problems = heldout_problems(count)
    names = heldout_variants(finetune)
    gaps: dict[str, list[float]] = {n: [] for n in names}
    print("gap % (wall s) per variant: " + " | ".join(names))
    for _, label, p, best in problems:
        cells = []
        for n, options in names.items():
            r = run("rl", p, best, **options)
            gaps[n].append(r["gap"])
            cells.append(f"{fmt(r['gap']):>6s} ({r['wall_s']:5.1f})")
        print(f"{label:14s} " + "  ".join(cells), flush=True)
    for n, g in gaps.items():
        print(f"{n:40s} median {fmt(statistics.median(g))}  worst {fmt(max(g))}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", type=int, default=3)
    ap.add_argument("--finetune", type=float, default=10.0)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-baselines", action="store_true", help="skip the equal-time section")
    ap.add_argument("--heldout", type=int, default=0,
                    help="run only the 64 x 64 held-out section on this many + 2 problems")
    ap.add_argument("--alone", type=int, default=0,
                    help="run only the policy-alone section on this many + 2 problems")
    ap.add_argument("--checkpoints", default="shipped",
                    help="comma list of checkpoints for --alone ('shipped' or a path)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    warm = next(random_problems(1, 1, sizes=(8,)))
    run("rl", warm[2], warm[3], updates=1)  # numba / torch warm-up
    if args.heldout:
        return heldout(args.heldout, args.finetune)
    if args.alone:
        return alone(args.alone, args.checkpoints.split(","))
    names = variants(args.finetune)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores "
          f"(shared), torch {torch.__version__} on 1 thread; gap % to the exact optimum")
    print(f"{'group':12s} {'instance':16s} " + " ".join(f"{n[:14]:>14s}" for n in names)
          + "  rl wall s | equal-time: " + " ".join(f"{b:>8s}" for b in BASELINES)
          + "  rl-paper")
    rows, start = [], time.perf_counter()
    for group, label, p, best in problems(args.instances):
        if best is None:
            continue
        row = dict(group=group, instance=label, layers=p.num_layers)
        for vname, options in names.items():
            row[vname] = run("rl", p, best, **options)
        full = row[list(names)[-1]]
        row["equal_time"] = ({b: float("nan") for b in (*BASELINES, "rl-paper")}
                             if args.no_baselines else equal_time(p, best, full["wall_s"]))
        rows.append(row)
        print(f"{group:12s} {label:16s} " + " ".join(f"{fmt(row[n]['gap']):>14s}" for n in names)
              + f"  {full['wall_s']:9.1f} |             "
              + " ".join(f"{_fmt(row['equal_time'][b]):>8s}" for b in BASELINES)
              + f"  {_fmt(row['equal_time']['rl-paper']):>8s}", flush=True)
    summary = summarise(rows, list(names))
    print(f"\n== summary: median (worst) gap %, {time.perf_counter() - start:.0f} s ==")
    for group, cols in summary.items():
        print(f"{group:14s} " + "  ".join(f"{k}: {v[0]} ({v[1]})" for k, v in cols.items()))
    if args.json:
        print(json.dumps(_finite({"rows": rows, "summary": summary}), default=str))


def summarise(rows: list[dict], names: list[str]) -> dict:
    out = {}
    for group in dict.fromkeys(r["group"] for r in rows):
        sel = [r for r in rows if r["group"] == group]
        cols = {}
        for n in names:
            gaps = [r[n]["gap"] for r in sel]
            cols[n] = (fmt(statistics.median(gaps)), fmt(max(gaps)))
        for b in (*BASELINES, "rl-paper"):
            gaps = [r["equal_time"][b] for r in sel]
            cols[b] = (_fmt(statistics.median(gaps)), _fmt(max(gaps)))
        out[group] = cols
    return out


if __name__ == "__main__":
    main()
