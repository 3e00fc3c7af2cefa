"""What the planner answers on every shipped scenario, with its proof and its baselines.

For each scenario with a plan: the answer (USD, proven or the certified gap, stages, types,
m, PS hosts), the best one-type plan and the best one-stage plan under the same pricing, what
mixing types and pipelining each save, the simulator's check (deterministic effects, and the
headroom its default jitter asks for), and the wall time of each part, measured in this run.

    .venv/bin/python benchmarks/bench_planner.py [--scenarios a,b] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

from heterps_sim.inputs.load import load_input
from heterps_sim.planner import Planner
from heterps_sim.planner.baseline import one_type_baselines

ROOT = Path(__file__).resolve().parents[1]


def scenario_row(path: Path) -> dict:
    problem = load_input(str(path)).problem
    planner = Planner()
    start = time.perf_counter()
    answer = planner.plan(problem)
    plan_s = time.perf_counter() - start
    row = {"scenario": path.stem, "layers": problem.num_layers, "types": problem.num_types,
           "plan_s": plan_s, "feasible": answer.feasible, "proven": answer.proven,
           "gap": answer.gap}
    if not answer.feasible:
        return {**row, "reason": answer.notes.get("reason", "")}
    start = time.perf_counter()
    base = one_type_baselines(answer.problem, answer.pricing)
    row["baselines_s"] = time.perf_counter() - start
    start = time.perf_counter()
    check = planner.check(answer)
    row["check_s"] = time.perf_counter() - start
    stages = answer.result.stages
    one_type = base.one_type.cost_usd if base.one_type else math.inf
    one_stage = base.one_stage.cost_usd if base.one_stage else math.inf
    return {**row, "usd": answer.cost_usd, "stages": len(stages),
            "distinct_types": len({s.resource for s in stages}),
            "plan": " + ".join(f"{s.resource} x{s.num_replicas}" for s in stages),
            "m": answer.plan.num_microbatches,
            "ps": answer.notes.get("ps", ""),
            "one_type_usd": one_type, "one_type_proven": bool(base.one_type and
                                                               base.one_type.proven),
            "one_stage_usd": one_stage,
            "mixing_saves_pct": 100 * (1 - answer.cost_usd / one_type),
            "pipelining_saves_pct": 100 * (1 - one_type / one_stage),
            "simulated_vs_limit_pct": 100 * (check.simulated.throughput
                                             / problem.throughput_limit - 1),
            "check_status": check.status,
            "jitter_margin_pct": 100 * check.extra.get("jitter_margin", math.nan)}


def _cell(x) -> str:
    if isinstance(x, float):
        return "-" if not math.isfinite(x) else f"{x:,.4g}"
    return str(x)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenarios", help="comma list of scenario names (default: every one)")
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args()
    names = args.scenarios.split(",") if args.scenarios else None
    paths = sorted(p for p in (ROOT / "scenarios").glob("*.yaml")
                   if names is None or p.stem in names)
    rows = []
    for path in paths:
        row = scenario_row(path)
        rows.append(row)
        print(" | ".join(f"{k}={_cell(v)}" for k, v in row.items()), flush=True)
    planned = [r for r in rows if r["feasible"]]
    mixed = [r for r in planned if r["distinct_types"] > 1]
    print(f"\n{len(planned)} scenarios with a plan; {len(mixed)} answer with more than one "
          f"type; {sum(r['stages'] > 1 for r in planned)} with more than one stage; "
          f"{sum(r['proven'] for r in planned)} proven optimal")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
