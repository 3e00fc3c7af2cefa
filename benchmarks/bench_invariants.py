"""The simulator's physics on many random cases: violations of its invariants, and the time.

    .venv/bin/python benchmarks/bench_invariants.py            # >= 10,000 cases
    .venv/bin/python benchmarks/bench_invariants.py --quick    # 300 cases

Each case is a random problem, plan, schedule, m and seed (heterps_sim.des.invariants) with one
check: effects off == analytic (exact where the window spans whole periods, else 0.2%); an
effect switched on, added to a random set of others, never raises throughput; or a
perturbation (x oct, + latency, / bandwidth, x boundary bytes, a slower unit) under a random
set of the deterministic effects never raises it. Prints the violations and the wall time.
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import replace

import numpy as np

from heterps_sim.cost.reference import evaluate_plan
from heterps_sim.des import EFFECTS
from heterps_sim.des.invariants import exact_window, random_case, throughput

TOL = 1e-9
STEADY = sorted(set(EFFECTS) - {"preemption", "jitter"})


def check(seed: int) -> str:
    """'' when case `seed` obeys its check, else what broke."""
    rng = np.random.default_rng([seed, 1])
    case = random_case(seed)
    kind = seed % 3
    if kind == 0:
        analytic = evaluate_plan(case.problem, case.plan).throughput
        got = throughput(case, frozenset())
        ok = math.isclose(got, analytic, rel_tol=TOL if exact_window(case) else 2e-3)
        return "" if ok else f"{case}: effects off {got:.9g} vs analytic {analytic:.9g}"
    if kind == 1:
        effect = str(rng.choice(EFFECTS))
        base = frozenset(str(e) for e in rng.choice(EFFECTS, size=rng.integers(0, 4))) - {effect}
        on, off = throughput(case, base | {effect}), throughput(case, base)
        return "" if on <= off * (1 + TOL) else f"{case}: +{effect} on {sorted(base)}: {off} -> {on}"
    effects = frozenset(str(e) for e in rng.choice(STEADY, size=rng.integers(0, 4)))
    p, f = case.problem, float(rng.uniform(1.01, 4.0))
    knob = str(rng.choice(["oct", "latency", "bandwidth", "boundary", "slow"]))
    if knob == "slow":
        g = int(rng.integers(len(case.plan.stages)))
        worse = replace(case, slow=((g, int(rng.integers(case.plan.stages[g].num_replicas)), f),))
    else:
        worse = replace(case, problem={
            "oct": lambda: replace(p, oct_s=p.oct_s * f),
            "latency": lambda: replace(p, latency_s=p.latency_s * f + 1e-4),
            "bandwidth": lambda: replace(p, network_bytes_per_s=p.network_bytes_per_s / f),
            "boundary": lambda: replace(p, boundary_bytes=p.boundary_bytes * f)}[knob]())
    a, b = throughput(worse, effects), throughput(case, effects)
    return "" if a <= b * (1 + TOL) else f"{case}: {knob} x{f:.3g} under {sorted(effects)}: {b} -> {a}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="300 cases instead of 10,000")
    parser.add_argument("--cases", type=int, default=None)
    args = parser.parse_args()
    n = args.cases or (300 if args.quick else 10_000)
    start = time.perf_counter()
    bad = [msg for msg in map(check, range(n)) if msg]
    wall = time.perf_counter() - start
    for msg in bad[:10]:
        print("violation:", msg)
    print(f"cases {n}  violations {len(bad)}  wall {wall:.1f} s  ({1e3 * wall / n:.1f} ms/case)")


if __name__ == "__main__":
    main()
