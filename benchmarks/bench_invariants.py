"""The simulator's physics on many random cases: violations of its invariants, and the time.

    .venv/bin/python benchmarks/bench_invariants.py            # >= 10,000 cases
    .venv/bin/python benchmarks/bench_invariants.py --quick    # 300 cases
    .venv/bin/python benchmarks/bench_invariants.py --first 10000 --cases 20000   # more cases
    .venv/bin/python benchmarks/bench_invariants.py --case 1234 --case 77   # rerun some cases

Each case is a random problem, plan, schedule, m and seed (heterps_sim.des.invariants) with one
check: effects off == analytic (exact where the window spans whole periods, else 0.2%); an
effect switched on, added to a random set of others, never raises throughput; or a
perturbation (x oct, + latency, / bandwidth, x boundary bytes, a slower unit) under a random
set of effects never raises it. Exact at the same seed (tolerance 1e-9), except where the base
has noise (jitter, preemption) and what changes is not the noise itself: there only the
long-run rate is claimed (docs/concepts/simulator.md), checked as the mean over 8 paired seeds
(a rise of more than 4 standard errors breaks it). Prints the violations and the wall time.
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import replace

import numpy as np

from heterps_sim.cost.reference import evaluate_plan
from heterps_sim.des import EFFECTS
from heterps_sim.des.effects import NOISE
from heterps_sim.des.invariants import exact_window, random_case, throughput

TOL = 1e-9
SEEDS = 8
"""Seeds of the paired comparison under noise."""
Z = 4.0
"""Under noise: a rise of the seed-mean throughput by more than Z standard errors breaks it."""


def _perturbed(case, rng):
    p, f = case.problem, float(rng.uniform(1.01, 4.0))
    knob = str(rng.choice(["oct", "latency", "bandwidth", "boundary", "slow"]))
    if knob == "slow":
        g = int(rng.integers(len(case.plan.stages)))
        return replace(case, slow=((g, int(rng.integers(case.plan.stages[g].num_replicas)), f),)), \
            f"{knob} x{f:.3g}"
    return replace(case, problem={
        "oct": lambda: replace(p, oct_s=p.oct_s * f),
        "latency": lambda: replace(p, latency_s=p.latency_s * f + 1e-4),
        "bandwidth": lambda: replace(p, network_bytes_per_s=p.network_bytes_per_s / f),
        "boundary": lambda: replace(p, boundary_bytes=p.boundary_bytes * f)}[knob]()), \
        f"{knob} x{f:.3g}"


def _paired(case, worse, worse_effects, effects) -> tuple[float, float]:
    """Mean and standard error over SEEDS seeds of worse / base - 1."""
    d = np.array([throughput(replace(worse, seed=case.seed + 1000 * i), worse_effects) /
                  throughput(replace(case, seed=case.seed + 1000 * i), effects) - 1.0
                  for i in range(SEEDS)])
    return float(d.mean()), float(d.std(ddof=1) / math.sqrt(SEEDS))


def check(seed: int) -> tuple[str, str]:
    """(which invariant: 'exact' or 'noise', '' when case `seed` obeys it else what broke)."""
    rng = np.random.default_rng([seed, 1])
    case = random_case(seed)
    kind = seed % 3
    if kind == 0:
        analytic = evaluate_plan(case.problem, case.plan).throughput
        got = throughput(case, frozenset())
        ok = math.isclose(got, analytic, rel_tol=TOL if exact_window(case) else 2e-3)
        return "exact", "" if ok else f"{case}: effects off {got:.9g} vs analytic {analytic:.9g}"
    if kind == 1:
        effect = str(rng.choice(EFFECTS))
        base = frozenset(str(e) for e in rng.choice(EFFECTS, size=rng.integers(0, 4))) - {effect}
        worse, worse_effects, what = case, base | {effect}, f"+{effect} on {sorted(base)}"
        pathwise = effect in NOISE or not base & NOISE
    else:
        base = frozenset(str(e) for e in rng.choice(EFFECTS, size=rng.integers(0, 4)))
        worse, what = _perturbed(case, rng)
        worse_effects, what = base, f"{what} under {sorted(base)}"
        pathwise = not base & NOISE
    if pathwise:
        a, b = throughput(worse, worse_effects), throughput(case, base)
        return "exact", "" if a <= b * (1 + TOL) else f"{case}: {what}: {b} -> {a}"
    mean, se = _paired(case, worse, worse_effects, base)
    bad = mean > TOL and mean > Z * se
    return "noise", (f"{case}: {what}: mean {mean:+.3g} (standard error {se:.2g}) over "
                     f"{SEEDS} seeds" if bad else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="300 cases instead of 10,000")
    parser.add_argument("--cases", type=int, default=None)
    parser.add_argument("--first", type=int, default=0, help="index of the first case")
    parser.add_argument("--case", type=int, action="append", default=None, metavar="N",
                        help="check only case N (repeatable): rerun a violation fast")
    args = parser.parse_args()
    count = args.cases or (300 if args.quick else 10_000)
    indices = args.case or range(args.first, args.first + count)
    n = len(indices)
    start = time.perf_counter()
    results = [(i, *check(i)) for i in indices]
    wall = time.perf_counter() - start
    bad = [(i, kind, msg) for i, kind, msg in results if msg]
    for i, kind, msg in bad[:20]:
        print(f"violation (case {i}, {kind}):", msg)
    noisy = sum(kind == "noise" for _, kind, _ in results)
    print(f"cases {n}  violations {len(bad)}  (exact: {sum(k == 'exact' for _, k, _ in bad)} of "
          f"{n - noisy}; under noise, {SEEDS}-seed mean: {sum(k == 'noise' for _, k, _ in bad)} of "
          f"{noisy})  wall {wall:.1f} s  ({1e3 * wall / n:.1f} ms/case)")


if __name__ == "__main__":
    main()
