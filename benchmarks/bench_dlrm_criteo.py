"""Does mixing hardware pay for MLPerf DLRM on AWS once the parameter server is priced?

scenarios/dlrm-criteo1tb-aws.yaml, solved per PS choice (cost/ps_hosts.ps_choices: host type
x shards), the cheapest kept, under the default model's stage model (the `exact` scheduler,
least provisioning; `homogeneous`, `cpu-only`, `gpu-only` are the optima restricted to one
stage type, to CPU stage types, to GPU stage types, under the same pricing). Then what flips
the answer:

    choices    every PS choice: the optimum and the restricted optima on it
    shards     every shard count from n_lo to 4 n_lo for each host type, against the ladder
               ps_choices offers (is a count off the ladder ever cheaper?)
    gpu-price  every GPU type's price x f
    tables     table rows x s (what the PS hosts must hold; the traffic per sample is the same)
    gpu-hosts  the tables on GPUs instead (ps.hosts += a100-40gb-sxm, h100-80gb-sxm: their
               HBM holds the rows, their NIC serves them; billed apart from the stage GPUs)
    limit      the throughput floor x f
    answer     the chosen plan provisioned as gpipe runs it (flushed closed form)

Run (2-core VM, about two minutes):

    .venv/bin/python benchmarks/bench_dlrm_criteo.py [--json out.json] [--only choices,...]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

from heterps_sim.cost import ps_hosts
from heterps_sim.inputs.load import load_input
from heterps_sim.schedulers.base import run_scheduler
from heterps_sim.schedulers.registry import make_scheduler

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "dlrm-criteo1tb-aws.yaml"
BASELINES = ("homogeneous", "cpu-only", "gpu-only")


def solve(problem, scheduler: str = "exact"):
    """(cost USD, units per type, plan) of a scheduler's plan under the stage model."""
    got = run_scheduler(make_scheduler(scheduler), problem, "least")
    if got.result is None or not got.result.feasible:
        return math.inf, {}, None
    return got.result.cost_usd, dict(got.result.units_per_type), got.plan


def per_choice(problem, baselines=BASELINES) -> list[dict]:
    rows = []
    for c in ps_hosts.ps_choices(problem):
        q = ps_hosts.with_ps(problem, c)
        cost, units, _ = solve(q)
        row = {"ps": c.label, "ps_usd_h": c.price_per_hour, "ps_GB_s": c.aggregate_bytes_per_s / 1e9,
               "best_usd": cost, "best_units": units}
        for b in baselines:
            row[f"{b}_usd"] = solve(q, b)[0]
        rows.append(row)
    return rows


def best(rows: list[dict], key: str = "best_usd") -> dict:
    return min(rows, key=lambda r: r[key])


def summary(problem, label: str) -> dict:
    """The cheapest plan over the PS choices, beside the restricted optima (each at its own
    cheapest choice)."""
    rows = per_choice(problem)
    top = best(rows)
    out = {"case": label, "ps": top["ps"], "ps_usd_h": top["ps_usd_h"], "best_usd": top["best_usd"],
           "best_units": top["best_units"]}
    for b in BASELINES:
        r = best(rows, f"{b}_usd")
        out[f"{b}_usd"] = r[f"{b}_usd"]
    out["mixing_saves_pct"] = 100 * (1 - out["best_usd"] / out["homogeneous_usd"]) \
        if math.isfinite(out["homogeneous_usd"]) else math.nan
    return out


def scaled_prices(problem, factor: float, kind: str = "gpu"):
    price = np.array([p * (factor if k == kind else 1.0)
                      for p, k in zip(problem.price_per_hour, problem.type_kinds)])
    return ps_hosts.replace_ps(dataclasses.replace(problem, price_per_hour=price), problem.ps)


def with_spec(problem, **update):
    return ps_hosts.replace_ps(problem, problem.ps.model_copy(update=update))


def shard_check(problem) -> list[dict]:
    """Per host type: the ladder's best against every count n_lo..4 n_lo."""
    out = []
    spec = problem.ps
    for host in spec.hosts:
        j = problem.type_index(host)
        rungs = ps_hosts._ladder(problem, spec, j)
        if not rungs:
            continue
        costs = {}
        for n in range(rungs[0], 4 * rungs[0] + 1):
            q = ps_hosts.with_ps(problem, ps_hosts._choice(problem, spec, j, n))
            costs[n] = solve(q)[0]
        n_all = min(costs, key=costs.get)
        n_lad = min((n for n in rungs if n in costs), key=costs.get)
        out.append({"host": host, "n_lo": rungs[0], "ladder_best_n": n_lad,
                    "ladder_best_usd": costs[n_lad], "every_n_best_n": n_all,
                    "every_n_best_usd": costs[n_all], "counts_tried": len(costs)})
    return out


def answer(problem) -> list[dict]:
    """Per PS choice: exact's plan and the best one-type plan (stage model) provisioned as
    gpipe runs them (their cuts and types, the cheapest units and m under the flushed closed
    form: the planner's Pricing)."""
    from heterps_sim.planner import Pricing
    rows = []
    for choice in ps_hosts.ps_choices(problem):
        q = ps_hosts.with_ps(problem, choice)
        row = {"ps": choice.label}
        for name in ("exact", "homogeneous"):
            got = run_scheduler(make_scheduler(name), q, "least")
            plan, result = Pricing.of(q).price(q, got.plan.with_replicas(None))
            row[name] = {"stage_model_usd": got.result.cost_usd,
                         "flushed_usd": result.cost_usd if result.feasible else math.inf,
                         "m": plan.num_microbatches,
                         "stages": [f"{s.num_replicas}x{s.resource}" for s in plan.stages]}
        rows.append(row)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path)
    ap.add_argument("--only", default="choices,shards,gpu-price,tables,gpu-hosts,limit,answer")
    args = ap.parse_args(argv)
    parts = set(args.only.split(","))
    base = load_input(SCENARIO).problem
    report: dict = {"scenario": str(SCENARIO.name)}
    start = time.perf_counter()
    if "choices" in parts:
        report["choices"] = per_choice(base)
    if "shards" in parts:
        report["shards"] = shard_check(base)
    if "gpu-price" in parts:
        report["gpu_price"] = [summary(scaled_prices(base, f), f"GPU price x{f}")
                               for f in (0.25, 0.5, 0.56, 0.75, 1.0, 1.5)]
    if "tables" in parts:
        report["tables"] = [summary(with_spec(base, table_bytes=base.ps.table_bytes * s),
                                    f"tables x{s}") for s in (1, 4, 16, 64)]
    if "gpu-hosts" in parts:
        hosts = (*base.ps.hosts, "a100-40gb-sxm", "h100-80gb-sxm")
        report["gpu_hosts"] = [summary(with_spec(base, hosts=hosts), "r7i/r6i + GPU hosts"),
                               summary(with_spec(base, hosts=("a100-40gb-sxm", "h100-80gb-sxm")),
                                       "GPU hosts only")]
    if "limit" in parts:
        report["limit"] = [summary(base.with_limit(base.throughput_limit * f), f"limit x{f}")
                           for f in (0.25, 0.5, 1.0, 2.0)]
    if "answer" in parts:
        report["answer"] = answer(base)
    report["wall_s"] = time.perf_counter() - start
    text = json.dumps(report, indent=1, default=float)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
