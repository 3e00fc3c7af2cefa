"""Simulator speed: SimPy events per second and wall time of one large plan.

The plan: scenarios/synthetic-64x64.yaml (64 layers x 64 resource types) cut into 16 stages of
4 consecutive layers; each stage on the runnable type with the least cost per sample when
provisioned alone at the throughput limit (least provisioning, as simulate() does). 256
microbatches, 1 step, 1f1b with the `bubbles` effect (a flushed step: exactly 16 x 256 forwards
and as many backwards, no cool-down). Goals: >= 500,000 events/s, <= 1 s.

Measured three ways, best of --repeat (20) runs each:
    reference   DesOptions(batch=False): one SimPy timeout per operation (events/s is judged here)
    batched     the default: replicas run ahead through operations whose inputs are known
    spans       the reference path with trace spans built (record_spans=True)

    python benchmarks/des_speed.py [--json] [--repeat 20] [--effects bubbles|none|all|LIST]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

from heterps_sim.core.plan import Plan, Stage
from heterps_sim.cost.reference import stage_terms
from heterps_sim.des import DesOptions, simulate
from heterps_sim.inputs.load import load_input

ROOT = Path(__file__).resolve().parents[1]
NUM_STAGES, MICROBATCHES = 16, 256


def benchmark_plan(problem, num_stages: int = NUM_STAGES) -> Plan:
    per = problem.num_layers // num_stages
    stages = []
    for g in range(num_stages):
        first, last = g * per, (g + 1) * per - 1 if g < num_stages - 1 else problem.num_layers - 1
        best, best_j = math.inf, 0
        for j in range(problem.num_types):
            if not problem.runnable[first:last + 1, j].all():
                continue
            t = stage_terms(problem, first, last, j, -1)
            k = t.least_units(problem.batch_size, problem.throughput_limit)
            if k is not None and problem.price_per_hour[j] * k < best:
                best, best_j = problem.price_per_hour[j] * k, j
        stages.append(Stage(layers=problem.layer_names[first:last + 1],
                            resource=problem.type_names[best_j]))
    return Plan(stages=tuple(stages), num_microbatches=MICROBATCHES, schedule="1f1b")


def timed(problem, plan, options: DesOptions, spans: bool, repeat: int):
    best, run = math.inf, None
    for _ in range(repeat):
        start = time.perf_counter()
        run = simulate(problem, plan, options=options, record_spans=spans)
        best = min(best, time.perf_counter() - start)
    return best, run


def _same(a, b) -> bool:
    """Equal results, apart from how they were computed (events, batched)."""
    strip = {"events", "batched"}
    return (a.stages == b.stages and a.throughput == b.throughput and
            {k: v for k, v in a.extra.items() if k not in strip} ==
            {k: v for k, v in b.extra.items() if k not in strip})


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--repeat", type=int, default=20, help="best of this many runs")
    ap.add_argument("--effects", default="bubbles", help="effects on (default: bubbles)")
    args = ap.parse_args(argv)
    problem = load_input(ROOT / "scenarios" / "synthetic-64x64.yaml").problem
    plan = benchmark_plan(problem)
    base = DesOptions(num_steps=1, warmup_steps=0, effects=args.effects)
    ref_s, ref = timed(problem, plan, base.model_copy(update={"batch": False}), False, args.repeat)
    bat_s, bat = timed(problem, plan, base, False, args.repeat)
    span_s, _ = timed(problem, plan, base.model_copy(update={"batch": False}), True, args.repeat)
    out = {"events_per_s": ref.events / ref_s, "wall_s": ref_s, "events": ref.events,
           "stages": len(plan.stages), "microbatches": MICROBATCHES,
           "replicas": sum(s.num_replicas for s in ref.result.stages),
           "operations": 2 * len(plan.stages) * MICROBATCHES,
           "batched_wall_s": bat_s, "batched_events": bat.events, "spans_wall_s": span_s,
           "effects": sorted(base.effects), "same_result": _same(ref.result, bat.result)}
    if args.json:
        print(json.dumps(out))
    else:
        print(f"plan: {out['stages']} stages ({out['replicas']} replicas), {MICROBATCHES} "
              f"microbatches x 1 step, 1f1b, effects {', '.join(out['effects']) or 'none'}")
        print(f"reference  {ref_s:.3f} s  {ref.events:,} events  {out['events_per_s']:,.0f} events/s")
        print(f"batched    {bat_s:.3f} s  {bat.events:,} events  (same result: {out['same_result']})")
        print(f"with spans {span_s:.3f} s")
    return out


if __name__ == "__main__":
    main()
