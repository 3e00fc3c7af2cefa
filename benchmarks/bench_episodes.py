"""Whole jobs with spot units: how fast episodes simulate, and how the job simulator's mean run
compares with Daly's expected time (planner/episodes.py, des/job.py).

    .venv/bin/python benchmarks/bench_episodes.py [--seeds 50] [--jobs 400]

Prints, for the shipped DLRM market and plan: seconds per episode in the step-level simulator
and in the job-level one, and the simulated training samples per second of wall time; then,
for job-level runs at reclaim rates that matter, the mean run against Daly's formula (with its
standard error), and the mean cost of spot against on demand.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from pathlib import Path

import numpy as np

from heterps_sim.des.job import JobSpec, Lease, expected_run_s, simulate_job
from heterps_sim.inputs.load import load_input, load_plan
from heterps_sim.inputs.market import load_market
from heterps_sim.planner import Pricing
from heterps_sim.planner.episodes import job_specs, rental_episodes, step_times

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "scenarios/dlrm-criteo1tb-aws.yaml"
MARKET = ROOT / "scenarios/markets/dlrm-criteo1tb-aws-spot.yaml"
PLAN = ROOT / "scenarios/plans/dlrm-criteo1tb-aws.json"


def speed(seeds: int) -> None:
    problem = load_input(SCENARIO).problem
    plan, _ = Pricing.of(problem).price(problem, load_plan(PLAN))
    market = load_market(MARKET, list(problem.type_names))
    from heterps_sim.cost.ps_hosts import problem_for_plan
    priced = problem_for_plan(problem, plan.ps.resource, plan.ps.num_shards)
    t0 = time.perf_counter()
    steps = step_times(priced, plan, seeds)
    t1 = time.perf_counter()
    out = rental_episodes(problem, plan, market, seeds=seeds, step_s=steps)
    t2 = time.perf_counter()
    specs = job_specs(priced, plan, market, steps)
    samples = specs[0].steps * problem.batch_size * 2 * seeds  # spot and on demand
    print(f"DLRM (dlrm-criteo1tb-aws, shipped plan and market), {seeds} jobs")
    print(f"  step-level simulator: {1e3 * (t1 - t0) / seeds:7.1f} ms per job")
    print(f"  job-level simulator:  {1e3 * (t2 - t1) / (2 * seeds):7.2f} ms per job "
          f"(spot and on demand): {samples / (t2 - t1):.3g} simulated samples per second")
    print(f"  spot {out.cost.text()} USD, on demand {out.reference.cost.text()} USD, "
          f"savings {100 * out.savings():.1f}%, floor held in {100 * out.meet.mean:.0f}% / "
          f"{100 * out.reference.meet.mean:.0f}% of the jobs")


def daly(jobs: int) -> None:
    print(f"\njob-level mean run against Daly's expected time ({jobs} jobs each; 1,000 steps "
          "of 10 s, a checkpoint of 30 s every 100 steps)")
    print("   units  rate/unit-h  restart s    Daly s     mean s   std err   (mean-Daly)/se")
    for units, rate, restart in ((4, 0.1, 300.0), (4, 0.5, 300.0), (4, 0.5, 1800.0),
                                 (16, 0.25, 600.0)):
        spec = JobSpec(steps=1000, step_s=np.array([10.0]), startup_s=0.0, restart_s=restart,
                       checkpoint_every=100, checkpoint_s=30.0,
                       leases=(Lease("gpu", units, 1.0, reclaims_per_hour=rate),))
        t = time.perf_counter()
        runs = [simulate_job(spec, s).run_s for s in range(jobs)]
        wall = time.perf_counter() - t
        mean, se = statistics.fmean(runs), statistics.stdev(runs) / math.sqrt(jobs)
        want = expected_run_s(spec)
        print(f"  {units:6} {rate:12g} {restart:10g} {want:9.0f} {mean:10.0f} {se:9.1f} "
              f"{(mean - want) / se:+16.2f}   ({1e3 * wall / jobs:.2f} ms per job)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument("--jobs", type=int, default=400)
    args = ap.parse_args()
    speed(args.seeds)
    daly(args.jobs)


if __name__ == "__main__":
    main()
