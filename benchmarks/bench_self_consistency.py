"""Self-consistency: the default analytic model against its own simulator at the exact optimum.

Cases: the exact optimum (least provisioning) of every shipped scenario that has one, and of
random default-model problems (heterps_sim.testing.random_default_problem, seeded) of up to
64 layers x 64 types. Each optimum is simulated as `schedule` checks it (studies/verify.py:
the deterministic effects on, the plan's schedule and microbatches, seed 0) and, for the
attribution, with no effect and with the effects switched on one after another
(studies/self_consistency.py).
Prints every case, then the MAPE and the worst case of two analytic predictions against the
simulator (model / simulated - 1): the stage model (what the exact scheduler optimises,
cost/reference.py) and the closed form of the plan's flushed schedule (cost/flush.py), and the
mean attribution per effect. Goal: MAPE <= 5%.

With --objective answer (default) the plan and its analytic prediction are what the commands
print (schedulers/as_it_runs.plan_as_it_runs: exact's cuts provisioned as they run, or the
flushed search's plan when cheaper or the only one meeting the limit); --objective flushed
measures exact's cuts provisioned as they run alone, --objective stage the stage model's units
and prediction.

Usage: python benchmarks/bench_self_consistency.py [--random 100] [--quick] [--no-attribution]
       [--objective answer|flushed|stage]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np

from heterps_sim.inputs.load import load_input
from heterps_sim.studies.self_consistency import DETERMINISTIC_EFFECTS, consistency_case, summary
from heterps_sim.testing import random_default_problem

ROOT = Path(__file__).resolve().parents[1]
OBJECTIVE = "answer"
PARTS = ("none", *DETERMINISTIC_EFFECTS)


def scenario_cases(names: list[str], attribute: bool) -> list:
    out = []
    for name in names:
        problem = load_input(str(ROOT / "scenarios" / f"{name}.yaml")).problem
        case = consistency_case(name, problem, attribute=attribute, objective=OBJECTIVE)
        if case is None:
            print(f"{name:28} no feasible plan (skipped)")
            continue
        show(case)
        out.append(case)
    return out


def random_cases(count: int, max_layers: int, max_types: int, attribute: bool) -> list:
    out, seed = [], 0
    while len(out) < count and seed < 20 * count:
        rng = np.random.default_rng(seed)
        layers = int(rng.integers(2, max_layers + 1))
        types = int(rng.integers(2, max_types + 1))
        problem = random_default_problem(rng, layers, types)
        case = consistency_case(f"random-{seed}", problem, attribute=attribute,
                                objective=OBJECTIVE)
        seed += 1
        if case is not None:
            show(case)
            out.append(case)
    return out


def show(c) -> None:
    parts = " ".join(f"{100 * c.parts.get(k, 0.0):+7.1f}" for k in PARTS) if c.parts else ""
    print(f"{c.name:28} {c.layers:>3}x{c.types:<3} S={c.stages:<3} units={c.units:<4} "
          f"m={c.microbatches:<4} simulated {c.simulated:>13,.0f} "
          f"{OBJECTIVE:>7} {c.analytic:>13,.0f} "
          f"{100 * c.error:+7.1f}% flushed {c.flushed:>13,.0f} {100 * c.flushed_error:+6.1f}%  "
          f"{parts}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--random", type=int, default=100, help="random problems (default 100)")
    ap.add_argument("--max-layers", type=int, default=64)
    ap.add_argument("--max-types", type=int, default=64)
    ap.add_argument("--scenarios", default="", help="comma list (default: every shipped one)")
    ap.add_argument("--quick", action="store_true",
                    help="4 scenarios and 12 random problems up to 12 x 8")
    ap.add_argument("--no-attribution", action="store_true")
    ap.add_argument("--objective", choices=["answer", "flushed", "stage"], default="answer",
                    help="answer (default): the plan and prediction the commands print; "
                    "flushed: exact's cuts provisioned as they run; stage: the stage model's "
                    "units and prediction")
    args = ap.parse_args()
    global OBJECTIVE
    OBJECTIVE = args.objective
    names = ([n.strip() for n in args.scenarios.split(",") if n.strip()]
             or sorted(p.stem for p in (ROOT / "scenarios").glob("*.yaml")))
    if args.quick:
        names = names if args.scenarios else ["ctr-dnn-64types", "dlrm-64types", "exec-tiny",
                                              "nce-cpu-gpu"]
        args.random, args.max_layers, args.max_types = 12, 12, 8
    attribute = not args.no_attribution
    print(f"# {platform.node()} {platform.machine()}, {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f}; effects {','.join(DETERMINISTIC_EFFECTS)}")
    if attribute:
        print(f"# columns after the error: attribution in % ({' '.join(PARTS)})")
    start = time.perf_counter()
    cases = scenario_cases(names, attribute)
    scen = len(cases)
    cases += random_cases(args.random, args.max_layers, args.max_types, attribute)
    for label, group in (("scenarios", cases[:scen]), ("random", cases[scen:]), ("all", cases)):
        if not group:
            continue
        s = summary(group)
        for model in ("analytic", "flushed"):
            r, w = s[model], s[model]["worst"]
            name = ("printed" if OBJECTIVE != "stage" else "stage model") \
                if model == "analytic" else "flushed"
            got = w.analytic if model == "analytic" else w.flushed
            print(f"{label:10} {name:12} cases {s['cases']:4}  MAPE {r['mape_pct']:6.2f}%  median "
                  f"{r['median_pct']:6.2f}%  within 5%: {r['within_5pct']}/{s['cases']}  worst "
                  f"{w.name} {r['worst_pct']:+.1f}% ({got:,.0f} vs simulated {w.simulated:,.0f})")
        if attribute:
            print(f"{'':10} mean attribution % (simulated vs stage model): " + "  ".join(
                f"{k} {v:+.1f}" for k, v in s["attribution_pct"].items()))
    print(f"wall {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
