"""Whole jobs with spot units: how fast episodes simulate, and how the job simulator's mean run
compares with Daly's expected time (planner/episodes.py, des/job.py).

    .venv/bin/python benchmarks/bench_episodes.py [--seeds 50] [--jobs 400] [--sections ...]

Prints, for the shipped DLRM market and plan: seconds per episode in the step-level simulator
and in the job-level one, and the simulated training samples per second of wall time; then,
for job-level runs at reclaim rates that matter, the mean run against Daly's formula (with its
standard error); then a recorded availability trace replayed against the Poisson model
fitted to it (what a rate-only prediction misses), and the same on a held-out half of the
trace; then the DLRM plans planned on on-demand and on spot prices at raised floors, scored
by the same jobs.
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


BAMBOO = ROOT / "traces/spot/bamboo-g4dn-xlarge-us-east-1c-2020-11-20.csv"
T4_SPOT = 0.3462  # USD/h per GPU, the catalog's spot price of g4dn.xlarge
T4_ON_DEMAND = 0.526  # the catalog's on-demand price
OOBLECK_P3 = ROOT / "traces/spot/oobleck-p3-trace.csv"
V100_SPOT = 0.527563  # USD/h per GPU, the catalog's spot price of v100-16gb-sxm2 (p3.16xlarge / 8)
V100_ON_DEMAND = 3.06  # the catalog's on-demand price
TRACE_JOB = dict(steps=36000, step_s=np.array([1.0]), startup_s=300.0, restart_s=300.0,
                 checkpoint_every=1800, checkpoint_s=30.0, notice_s=120.0)
"""10 h of 1 s steps, a 30 s checkpoint every 1,800 steps, a 300 s restart, a 120 s notice."""


def replay_and_fit(k: int, replayed, fitted_on, jobs: int, name: str = "t4",
                   price: float = T4_SPOT):
    """(rate, wait, replayed jobs, jobs under the Poisson model fitted on `fitted_on`; [] when
    the fit has no rate) for k units of `name` at `price` USD/h each (default: T4s)."""
    rate, wait = fitted_on.fit(k)
    played = JobSpec(leases=(Lease(name, k, price, availability=replayed),), **TRACE_JOB)
    a = [simulate_job(played, s) for s in range(jobs)]
    if not math.isfinite(rate):
        return rate, wait, a, []
    fitted = JobSpec(leases=(Lease(name, k, price, reclaims_per_hour=rate),),
                     **{**TRACE_JOB, "restart_s": TRACE_JOB["restart_s"]
                        + (wait if math.isfinite(wait) else 0.0)})
    return rate, wait, a, [simulate_job(fitted, s) for s in range(jobs)]


def replay(jobs: int) -> None:
    """The Bamboo g4dn.xlarge trace replayed against the Poisson model fitted to it."""
    from heterps_sim.des.availability import load_availability
    from heterps_sim.planner.episodes import mean_interval
    trace = load_availability(BAMBOO, period_s=95400.0)
    print(f"\nBamboo's g4dn.xlarge trace (us-east-1c, 2020-11-20/21) replayed from a point of its "
          f"window drawn per job ({jobs} jobs), against the Poisson model fitted to it; a job of "
          "10 h of 1 s steps, a 30 s checkpoint every 1,800 steps, a 300 s restart, a 120 s "
          f"notice; T4 at the catalog's spot price ({T4_SPOT} USD/h per GPU)")
    print("  units  fit/unit-h  fit wait s   replayed USD (95%)          fitted USD (95%)        "
          "   off    replayed run h  fitted run h")
    for k in (1, 4, 8):
        rate, wait, a, b = replay_and_fit(k, trace, trace, jobs)
        ca = mean_interval(np.array([o.cost_usd for o in a]))
        cb = mean_interval(np.array([o.cost_usd for o in b]))
        print(f"  {k:5} {rate:11.4f} {wait:11.0f}   {ca.text():26} {cb.text():26} "
              f"{100 * (cb.mean / ca.mean - 1):+6.1f}%  "
              f"{statistics.fmean(o.run_s for o in a) / 3600:14.2f} "
              f"{statistics.fmean(o.run_s for o in b) / 3600:13.2f}")


def heldout(jobs: int) -> None:
    """The Bamboo trace cut in two: a Poisson model fitted on the first half predicts the
    replay of the second (held out), and the spot job is held to the same job on demand."""
    from heterps_sim.des.availability import load_availability
    whole = load_availability(BAMBOO, period_s=95400.0)
    print("\nthe same trace cut in two", end="")
    held_out_table(whole, jobs, "t4", T4_SPOT, T4_ON_DEMAND, (1, 4, 8), label="T4")


def p3_heldout(jobs: int) -> None:
    """Oobleck's EC2 P3 trace cut in two, as `heldout` cuts Bamboo's: V100s, whose spot
    discount is deep (5.8x in the catalog), at fleet sizes around the trace's."""
    from heterps_sim.des.availability import load_availability
    whole = load_availability(OOBLECK_P3)
    print(f"\nOobleck's EC2 P3 trace ({whole.period_s / 3600:.2f} h, {min(whole.units)} to "
          f"{max(whole.units)} instances held) cut in two", end="")
    held_out_table(whole, jobs, "v100-16gb-sxm2", V100_SPOT, V100_ON_DEMAND,
                   (1, 4, 8, 10, 11, 12, 13, 14, 16, 20), label="V100",
                   job=" (a 30 s checkpoint every 1,800 steps, a 300 s restart, a 120 s notice)")


def held_out_table(whole, jobs: int, name: str, spot: float, on_demand: float, ks, *,
                   label: str, job: str = " as above") -> None:
    """Rates fitted on the trace's first half predict the replay of its second; each spot job
    is held to the same job on demand (`job`: how the printout describes TRACE_JOB)."""
    from heterps_sim.planner.episodes import mean_interval
    half = whole.period_s / 2
    fit_on, held = whole.window(0.0, half), whole.window(half, whole.period_s)
    print(f": rates fitted on its first {half / 3600:.2f} h, the "
          f"jobs replayed on the last {half / 3600:.2f} h ({jobs} jobs); a job of 10 h of 1 s "
          f"steps{job}, {label} at {spot} USD/h spot against {on_demand} on demand")
    print("  units  fit/unit-h  fit wait s   held-out replay USD (95%)   predicted USD (95%)     "
          "  off   on demand USD  cheaper  run h (replay)  throughput loss")
    for k in ks:
        rate, wait, a, b = replay_and_fit(k, held, fit_on, jobs, name, spot)
        ref = simulate_job(JobSpec(leases=(Lease(name, k, on_demand),), **TRACE_JOB), 0)
        ca = mean_interval(np.array([o.cost_usd for o in a]))
        cb = (mean_interval(np.array([o.cost_usd for o in b])).text() if b else "no fit")
        off = (f"{100 * (statistics.fmean(o.cost_usd for o in b) / ca.mean - 1):+6.1f}%"
               if b else "   -  ")
        run = statistics.fmean(o.run_s for o in a)
        print(f"  {k:5} {rate:11.4f} {wait:11.0f}   {ca.text():27} {cb:24} {off}  "
              f"{ref.cost_usd:13.4g}  {ref.cost_usd / ca.mean:6.2f}x {run / 3600:15.2f} "
              f"{100 * (1 - ref.run_s / run):15.1f}%")


def spotplan(seeds: int) -> None:
    """DLRM with every type that has a spot price on spot, its PS hosts too: the planner's
    answers planned on on-demand prices against those planned on spot prices, at raised
    floors, each scored by the same jobs; and each beside its plan rented on demand."""
    from argparse import Namespace

    from heterps_sim.cli.common import make_planner, pipeline_setting, schedule_settings
    from heterps_sim.planner.robust import headroom_sweep, unit_repair
    from heterps_sim.planner.spot import spot_priced
    loaded = load_input(SCENARIO)
    problem = loaded.problem
    market = load_market(ROOT / "scenarios/markets/dlrm-criteo1tb-aws-all-spot.yaml",
                         list(problem.type_names))
    name, mode, seed, options = schedule_settings(  # the commands' planner
        Namespace(scheduler=None, mode=None, seed=None, set=None), loaded)
    planner = make_planner(name, mode, seed, options, pipeline_setting(None, loaded))
    heads = (0.0, 0.2, 0.4, 0.6, 0.8)
    t0 = time.perf_counter()
    fams = [("on-demand prices", headroom_sweep(problem, market, planner, headrooms=heads,
                                                seeds=seeds)),
            ("spot prices", headroom_sweep(problem, market, planner, headrooms=heads,
                                           seeds=seeds, plan_on=spot_priced(problem, market)))]
    wall = time.perf_counter() - t0
    print(f"\nDLRM (dlrm-criteo1tb-aws) with every type that has a spot price on spot, the PS "
          f"hosts included (dlrm-criteo1tb-aws-all-spot.yaml), {seeds} jobs per plan, the "
          f"floor in {100 * market.probability:.0f}% of them ({wall:.0f} s)")
    print(f"  {'planned on':18} {'plan':>16} {'planned USD':>12} {'jobs on spot USD (95%)':>28} "
          f"{'floor held':>10} {'on demand USD':>20} {'held':>10}  spot units")
    on_demand = []  # (cost, label) of each plan whose jobs hold the floor all on demand
    best = {}
    for fam, sweep in fams:
        start = sweep.candidates[0]
        grown = unit_repair(problem, start, market, seeds=seeds,
                            plan_on=None if fam.startswith("on-demand") else spot_priced(
                                problem, market))
        for c in (*sweep.candidates, grown):
            if c.plan is None:
                print(f"  {fam:18} {c.label:>16} {'no plan':>12}")
                continue
            o = rental_episodes(problem, c.plan, market, seeds=seeds)
            ref = o.reference
            if ref.meets_probability:
                on_demand.append((ref.cost.mean, f"{fam}, {c.label}"))
            if o.meets_probability and (fam not in best or o.cost.mean < best[fam][0]):
                best[fam] = (o.cost.mean, c.label, o)
            units = ", ".join(f"{n} x{k}" for n, k in sorted(o.spot_units.items()))
            print(f"  {fam:18} {c.label:>16} {c.planned_cost_usd:12.2f} "
                  f"{o.cost.text():>28} {100 * o.meet.mean:9.0f}% {ref.cost.mean:20.2f} "
                  f"{100 * ref.meet.mean:9.0f}%  {units}")
    for fam, (cost, label, o) in best.items():
        print(f"  cheapest holding the floor on spot, planned on {fam}: {label}, {cost:.2f} USD, "
              f"{o.reclaims.mean():.3f} reclaims a job, mean run {o.run_s.mean() / 3600:.3f} h")
    if on_demand:
        cost, label = min(on_demand)
        print(f"  cheapest holding the floor all on demand: {label}, {cost:.2f} USD")
        if best:
            spot_cost = min(b[0] for b in best.values())
            print(f"  spot-aware against all on demand: {cost / spot_cost:.2f}x cheaper")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument("--jobs", type=int, default=400)
    ap.add_argument("--sections", default="speed,daly,replay,heldout,p3heldout,spotplan",
                    help="comma list of speed, daly, replay, heldout, p3heldout, spotplan")
    args = ap.parse_args()
    sections = set(args.sections.split(","))
    if "speed" in sections:
        speed(args.seeds)
    if "daly" in sections:
        daly(args.jobs)
    if "replay" in sections:
        replay(args.jobs)
    if "heldout" in sections:
        heldout(args.jobs)
    if "p3heldout" in sections:
        p3_heldout(args.jobs)
    if "spotplan" in sections:
        spotplan(args.seeds)


if __name__ == "__main__":
    main()
