"""Whole jobs with spot units: how fast episodes simulate, and how the job simulator's mean run
compares with Daly's expected time (planner/episodes.py, des/job.py).

    .venv/bin/python benchmarks/bench_episodes.py [--seeds 50] [--jobs 400] [--sections ...]

Prints, for the shipped DLRM market and plan: seconds per episode in the step-level simulator
and in the job-level one, and the simulated training samples per second of wall time; then,
for job-level runs at reclaim rates that matter, the mean run against Daly's formula (with its
standard error); then a recorded availability trace replayed against the Poisson model
fitted to it (what a rate-only prediction misses).
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


def replay(jobs: int) -> None:
    """The Bamboo g4dn.xlarge trace replayed against the Poisson model fitted to it."""
    from heterps_sim.des.availability import load_availability
    trace = load_availability(ROOT / "traces/spot/bamboo-g4dn-xlarge-us-east-1c-2020-11-20.csv",
                              period_s=95400.0)
    print(f"\nBamboo's g4dn.xlarge trace (us-east-1c, 2020-11-20/21) replayed from a point of its "
          f"window drawn per job ({jobs} jobs), against the Poisson model fitted to it; a job of "
          "10 h of 1 s steps, a 30 s checkpoint every 1,800 steps, a 300 s restart, a 120 s "
          "notice; T4 at the catalog's spot price (0.3462 USD/h per GPU)")
    print("  units  fit/unit-h  fit wait s   replayed USD (95%)          fitted USD (95%)        "
          "   off    replayed run h  fitted run h")
    from heterps_sim.planner.episodes import mean_interval
    for k in (1, 4, 8):
        rate, wait = trace.fit(k)
        base = dict(steps=36000, step_s=np.array([1.0]), startup_s=300.0, restart_s=300.0,
                    checkpoint_every=1800, checkpoint_s=30.0, notice_s=120.0)
        played = JobSpec(leases=(Lease("t4", k, 0.3462, availability=trace),), **base)
        fitted = JobSpec(leases=(Lease("t4", k, 0.3462, reclaims_per_hour=rate),),
                         **{**base, "restart_s": 300.0 + wait})
        a = [simulate_job(played, s) for s in range(jobs)]
        b = [simulate_job(fitted, s) for s in range(jobs)]
        ca, cb = mean_interval(np.array([o.cost_usd for o in a])), mean_interval(
            np.array([o.cost_usd for o in b]))
        print(f"  {k:5} {rate:11.4f} {wait:11.0f}   {ca.text():26} {cb.text():26} "
              f"{100 * (cb.mean / ca.mean - 1):+6.1f}%  {statistics.fmean(o.run_s for o in a) / 3600:14.2f} "
              f"{statistics.fmean(o.run_s for o in b) / 3600:13.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument("--jobs", type=int, default=400)
    ap.add_argument("--sections", default="speed,daly,replay",
                    help="comma list of speed, daly, replay")
    args = ap.parse_args()
    sections = set(args.sections.split(","))
    if "speed" in sections:
        speed(args.seeds)
    if "daly" in sections:
        daly(args.jobs)
    if "replay" in sections:
        replay(args.jobs)


if __name__ == "__main__":
    main()
