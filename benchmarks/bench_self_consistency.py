"""Self-consistency: the default analytic model against its own simulator at the exact optimum.

Cases: the exact optimum (least provisioning) of every shipped scenario that has one, and of
random default-model problems (heterps_sim.testing.random_default_problem, seeded) of up to
64 layers x 64 types. Each optimum is simulated as `schedule` checks it (planner/check.py:
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

Then (--classes N, default 30 each; 0 skips) the classes the optima leave out
(studies/consistency_classes.py: seeded random plans with a mixed-speed stage, a PS that paces
the step, heavy boundary messages under contention, uneven small m), the flushed closed form
against the simulator as the check runs them; per class and per tag (multi-stage, mixed-type,
ps-bound, for the optima too): cases, MAPE, worst error and sign (how many over / under), and
the MAPE the best closed form could reach while the exact search's bound holds ("reachable",
studies/consistency_classes.py: where the simulator runs faster than the bound's relaxation
allows any closed form to read).

Usage: python benchmarks/bench_self_consistency.py [--random 100] [--quick] [--no-attribution]
       [--objective answer|flushed|stage] [--classes 30] [--classes-only]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np

from heterps_sim.inputs.load import load_input
from heterps_sim.studies import consistency_classes as classes
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


TAGS = ("multi-stage", "mixed-type", "ps-bound")


def tag_groups(cases: list) -> list[tuple[str, list]]:
    """The optima by tag, and the rest (none of the tags)."""
    out = [(f"tag {t}", [c for c in cases if t in c.tags]) for t in TAGS]
    return out + [("untagged", [c for c in cases if not c.tags])]


def signs(errors) -> str:
    over = sum(e > 1e-9 for e in errors)
    under = sum(e < -1e-9 for e in errors)
    return f"over {over} under {under}"


def class_study(count: int) -> None:
    """The classes the optima leave out: per class and per tag, the flushed closed form
    against the simulator (model / simulated - 1)."""
    rows = []
    for kind in classes.CLASSES:
        start = time.perf_counter()
        got = [classes.check_case(c) for c in classes.class_cases(kind, count)]
        rows += got
        worst = max(got, key=lambda r: abs(r.error))
        print(f"class {kind:11} {len(got)} cases in {time.perf_counter() - start:.1f} s; worst "
              f"seed {worst.seed} (S={worst.stages}, units {worst.units}, m={worst.microbatches}"
              f", {worst.schedule}) {100 * worst.error:+.1f}%", flush=True)
    for name, s in classes.summary(rows).items():
        print(f"{name:18} flushed  cases {s['cases']:4}  MAPE {s['mape_pct']:6.2f}%  median "
              f"{s['median_pct']:6.2f}%  worst {s['worst_pct']:+6.1f}% (seed {s['worst_seed']})  "
              f"over {s['over']} under {s['under']}  mean {s['mean_signed_pct']:+.2f}%  "
              f"reachable {s['reachable_mape_pct']:.2f}%")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--random", type=int, default=100, help="random problems (default 100)")
    ap.add_argument("--max-layers", type=int, default=64)
    ap.add_argument("--max-types", type=int, default=64)
    ap.add_argument("--scenarios", default="", help="comma list (default: every shipped one)")
    ap.add_argument("--quick", action="store_true",
                    help="4 scenarios and 12 random problems up to 12 x 8")
    ap.add_argument("--no-attribution", action="store_true")
    ap.add_argument("--classes", type=int, default=30,
                    help="cases per class the optima leave out (default 30; 0: none)")
    ap.add_argument("--classes-only", action="store_true",
                    help="only the classes (no scenario or random optima)")
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
    if args.classes_only:
        class_study(args.classes)
        print(f"wall {time.perf_counter() - start:.1f} s")
        return
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
    for label, group in tag_groups(cases):
        if group:
            s = summary(group)["flushed"]
            print(f"{label:18} flushed  cases {len(group):4}  MAPE {s['mape_pct']:6.2f}%  "
                  f"worst {s['worst'].name} {s['worst_pct']:+.1f}%  "
                  f"{signs([c.flushed_error for c in group])}")
    if args.classes:
        class_study(args.classes)
    print(f"wall {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
