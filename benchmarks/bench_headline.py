"""The paper's headline, honestly, on the shipped scenarios: heterogeneous vs single-type.

HeterPS reported 312.3% lower cost (the baseline pays ~4.1x) and 14.5x higher throughput than
state-of-the-art placements. Here, per scenario with a feasible optimum:
  cost ratio        = best single-type plan's cost / exact optimum's cost (same limit);
  throughput ratio  = our throughput / the best single-type throughput bought with the same
                      money per hour (for each type, as many units as our $/hour pays for).
Usage: python benchmarks/bench_headline.py [--mode least|exact] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from heterps_sim.cost import stage_terms
from heterps_sim.inputs import load_input
from heterps_sim.schedulers.base import run_scheduler
from heterps_sim.schedulers.registry import make_scheduler

SCENARIOS = sorted(Path(__file__).resolve().parents[1].joinpath("scenarios").glob("*.yaml"))


def single_type_throughput_at(problem, per_hour: float) -> tuple[float, str]:
    """Best throughput of a one-stage plan costing at most `per_hour` USD/h."""
    best, name = 0.0, ""
    for j, type_name in enumerate(problem.type_names):
        if not problem.runnable[:, j].all():
            continue
        k = int(per_hour // problem.price_per_hour[j])
        cap = problem.available[j]
        k = min(k, cap) if cap is not None else k
        if k < 1:
            continue
        thr = problem.batch_size / stage_terms(problem, 0, problem.num_layers - 1, j, -1).exec_time(k)
        if thr > best:
            best, name = thr, f"{type_name} x{k}"
    return best, name


def headline(path, mode: str) -> dict | None:
    problem = load_input(path).problem
    ours = run_scheduler(make_scheduler("exact"), problem, mode).result
    if ours is None or not ours.feasible:
        return None
    single = run_scheduler(make_scheduler("homogeneous"), problem, mode).result
    single_cost = single.cost_usd if single is not None and single.feasible else math.inf
    thr, bought = single_type_throughput_at(problem, ours.cost_per_hour)
    return {"scenario": path.stem, "ours_usd": ours.cost_usd, "single_type_usd": single_cost,
            "cost_ratio": single_cost / ours.cost_usd,
            "pct_less": 100.0 * (single_cost / ours.cost_usd - 1.0),
            "ours_samples_per_s": ours.throughput, "same_money_single_type": bought,
            "throughput_ratio": ours.throughput / thr if thr > 0 else math.inf}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=["least", "exact"], default="least")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = [r for r in (headline(p, args.mode) for p in SCENARIOS) if r is not None]
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'scenario':24s} {'ours $':>10s} {'1-type $':>10s} {'cost x':>8s} {'% less':>8s} "
          f"{'thr x @ same $/h':>17s}  single type bought")
    for r in rows:
        print(f"{r['scenario']:24s} {r['ours_usd']:10.4g} {r['single_type_usd']:10.4g} "
              f"{r['cost_ratio']:8.2f} {r['pct_less']:8.1f} {r['throughput_ratio']:17.2f}  "
              f"{r['same_money_single_type']}")


if __name__ == "__main__":
    main()
