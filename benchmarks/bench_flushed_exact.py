"""certified_optimum (the exact-flushed search): time, answer, certified bound and gap per
problem, at the default work budget.

Problems: shipped scenarios (their m when they set one, else 2..64) and random default-model
problems (heterps_sim.testing.random_default_problem, seed 7, m = 2..64). Per problem: the
median wall time over --repeat runs (the answer itself is deterministic: the budget counts
work, not time), the best plan's cost and m, the certified lower bound, proven or the gap,
the work spent. --one-type SCENARIO: the planner's baseline sweep, certified_optimum with
types=(j,) for every type j (total time, how many proven, the best one-type plan).
--slow-family N: N random problems 12x12..32x32 (the slow test's family): how many proven
within the budget, the largest gap, the median and slowest time.

Usage: python benchmarks/bench_flushed_exact.py [--scenarios synthetic-64x64,...]
       [--random 64x64,256x64] [--repeat 3] [--max-work N] [--one-type synthetic-64x64]
       [--slow-family 50 [--against 1000000000]] [--compare]
--compare: each problem twice in the same run, with the Lagrangian bounds off (the prefix
tables and the searches alone: the solver before them) and on.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from heterps_sim.inputs.load import load_input
from heterps_sim.schedulers.exact.certified import certified_optimum
from heterps_sim.testing import random_default_problem

ROOT = Path(__file__).resolve().parents[1]
SLOW_SIZES = [(12, 12), (16, 16), (20, 12), (24, 16), (32, 32)]


def random_problem(size: str, seed: int = 7):
    layers, types = (int(x) for x in size.split("x"))
    p = random_default_problem(np.random.default_rng(seed), layers, types)
    return replace(p, costs=replace(p.unit_costs, num_microbatches=1))


def timed(problem, repeat: int, **kw):
    """(answer, median seconds) over `repeat` runs."""
    times, got = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        got = certified_optimum(problem, **kw)
        times.append(time.perf_counter() - start)
    return got, float(np.median(times))


def line(name: str, problem, got, wall: float) -> str:
    size = f"{problem.num_layers}x{problem.num_types}"
    if got.best is None:
        answer = "no plan" + (" (proven)" if got.proven else "")
    else:
        answer = f"{got.best.cost_usd:,.4f} USD at m={got.best.plan.num_microbatches}"
    proof = "proven" if got.proven else (f"gap <= {100 * got.gap:.1f}%" if np.isfinite(got.gap)
                                         else "no bound on the gap")
    return (f"| {name} | {size} | {wall:.2f} | {answer} | {got.lower_bound_usd:,.4f} | {proof} "
            f"| {got.work / 1e6:.1f} |")


def one_type_sweep(name: str, max_work: int | None) -> None:
    problem = load_input(str(ROOT / "scenarios" / f"{name}.yaml")).problem
    start = time.perf_counter()
    proven, best, gaps, work = 0, None, [], 0
    for j in range(problem.num_types):
        got = certified_optimum(problem, types=(j,), max_work=max_work)
        proven += got.proven
        work += got.work
        if not got.proven and np.isfinite(got.gap):
            gaps.append(got.gap)
        if got.best is not None and (best is None or got.best.cost_usd < best[0]):
            best = (got.best.cost_usd, problem.type_names[j], got.best.plan.num_microbatches)
    wall = time.perf_counter() - start
    budget = "the default" if max_work is None else format(max_work, ",")
    print(f"\none-type sweep on {name} ({problem.num_types} types, max_work {budget} each): "
          f"{wall:.1f} s, {proven} of {problem.num_types} proven, work {work / 1e6:.1f} M"
          + (f", largest gap {100 * max(gaps):.1f}%" if gaps else "")
          + (f"; best {best[0]:,.4f} USD on {best[1]} at m={best[2]}" if best else
             "; no one-type plan"))


def slow_family(count: int, max_work: int | None, against: int = 0) -> None:
    """The slow test's family at the budget; `against` > 0: each problem left open solved
    again with that budget, its answer beside the default's (the optimum when proven)."""
    times, proven, gaps, rows = [], 0, [], []
    for n in range(count):
        layers, types = SLOW_SIZES[n % len(SLOW_SIZES)]
        rng = np.random.default_rng(9000 + n)
        p = random_default_problem(rng, layers, types, caps=bool(rng.random() < 0.3))
        p = replace(p, costs=replace(p.unit_costs, num_microbatches=1))
        start = time.perf_counter()
        got = certified_optimum(p, max_work=max_work)
        times.append(time.perf_counter() - start)
        proven += got.proven
        if not got.proven:
            gaps.append(got.gap)
            if against:
                rows.append((9000 + n, f"{layers}x{types}", got,
                             certified_optimum(p, max_work=against)))
    print(f"\n{count} random problems 12x12..32x32 (seeds 9000..): {proven} proven; "
          f"time median {np.median(times):.2f} s, slowest {max(times):.1f} s"
          + (f"; unproven gaps: {', '.join(f'{100 * g:.1f}%' for g in sorted(gaps))}"
             if gaps else ""))
    if rows:
        print(f"\nthe problems left open, again at {against:,} work units:\n"
              "| seed | size | answer, gap | again: answer, proof | the answer against it |\n"
              "|---|---|---|---|---|")
        for seed, size, got, big in rows:
            def usd(x):
                return "no plan" if x.best is None else f"{x.best.cost_usd:,.4f} USD"
            if got.best is None or big.best is None:
                versus = "same" if got.best is big.best else "none found / found"
            else:
                versus = f"{100 * (got.best.cost_usd / big.best.cost_usd - 1):+.1f}%"
            proof = "proven" if big.proven else f"gap {100 * big.gap:.1f}%"
            print(f"| {seed} | {size} | {usd(got)}, {100 * got.gap:.1f}% | {usd(big)}, "
                  f"{proof} | {versus} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", default="synthetic-64x64,synthetic-256x64,dlrm-64types,"
                                           "ctr-dnn-64types")
    ap.add_argument("--random", default="16x16,32x32,64x64,256x64")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--max-work", type=int, default=None,
                    help="work units per search (default: the planner's, by layers x types)")
    ap.add_argument("--one-type", default="")
    ap.add_argument("--slow-family", type=int, default=0)
    ap.add_argument("--against", type=int, default=0,
                    help="with --slow-family: solve each problem left open again with this "
                         "budget (the slow test's: 1000000000) and print both answers")
    ap.add_argument("--compare", action="store_true")
    args = ap.parse_args()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    budget = ("the default (by layers x types)" if args.max_work is None
              else format(args.max_work, ","))
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.system()}, "
          f"python {platform.python_version()}, load average {load:.1f}; "
          f"max_work {budget}")
    certified_optimum(random_problem("3x3"), microbatches=(2, 3))  # compile first
    print("\n| problem | layers x types | s (median) | answer | lower bound USD | proof | "
          "work (M) |\n|---|---|---|---|---|---|---|")
    variants = [(" (no Lagrange)", False), ("", True)] if args.compare else [("", True)]
    problems = [(name, load_input(str(ROOT / "scenarios" / f"{name}.yaml")).problem)
                for name in filter(None, args.scenarios.split(","))]
    problems += [(f"random {size}", random_problem(size))
                 for size in filter(None, args.random.split(","))]
    for name, problem in problems:
        for suffix, lagrange in variants:
            got, wall = timed(problem, args.repeat, max_work=args.max_work, lagrange=lagrange)
            print(line(name + suffix, problem, got, wall), flush=True)
    if args.one_type:
        one_type_sweep(args.one_type, args.max_work)
    if args.slow_family:
        slow_family(args.slow_family, args.max_work, args.against)


if __name__ == "__main__":
    main()
