"""A plan over whole jobs: its expected cost and how often it meets the throughput floor when
some of its units are spot units that can be reclaimed (a market file, inputs/market.py).

    outcome = rental_episodes(problem, plan, market, seeds=50)
    outcome.cost        mean USD of a job with its 95% confidence interval
    outcome.meet        share of jobs whose throughput met the floor, 95% interval (Wilson)
    outcome.reference   the same plan on demand, same seeds (what the spot plan is held to)

Two simulators, each at its scale: episode s runs the plan in the step-level simulator at seed
s with jitter and stragglers on (the deterministic effects too, as the planner's check), which
gives the step time of that job's units; the job-level simulator (des/job.py) then runs the
whole job at that step time with the market's reclaims, checkpoints and replacements, and bills
it. A job's throughput is its samples over its run (launch excluded, as the plan's own bill
counts the launch apart); it meets the floor when that is at least the limit. The plan is
fixed: its units and microbatches as the pricing provisioned them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from heterps_sim.core.plan import Plan
from heterps_sim.core.problem import Problem
from heterps_sim.inputs.market import Market

STEP_EFFECTS_VARIABLE = ("jitter", "stragglers")
"""The step-level simulator's variability an episode draws (reclaims are the job's)."""
CONFIDENCE = 0.95


def money(x: float) -> str:
    """USD as printed: cents from 100 up, else 4 significant digits."""
    return f"{x:,.2f}" if abs(x) >= 100 else f"{x:.4g}"


@dataclass(frozen=True, slots=True)
class Interval:
    mean: float
    low: float
    high: float

    def text(self, fmt: str | None = None) -> str:
        """'mean (low to high)'; by default money: cents from 100 up, else 4 digits."""
        def one(x: float) -> str:
            return fmt.format(x) if fmt else money(x)
        return f"{one(self.mean)} ({one(self.low)} to {one(self.high)})"


@dataclass(frozen=True, slots=True, kw_only=True)
class RentalOutcome:
    market: Market
    seeds: int
    step_s: np.ndarray
    """Per episode: the step time of its units (step-level simulator, that seed)."""
    cost_usd: np.ndarray
    run_s: np.ndarray
    reclaims: np.ndarray
    lost_steps: np.ndarray
    checkpoint_every_steps: int
    """Steps between checkpoints (0: none; >= steps: the job is shorter than the interval)."""
    steps: int
    """Steps of one job."""
    throughput_limit: float
    cost: Interval
    meet: Interval
    reference: RentalOutcome | None = None
    spot_units: dict[str, int] = field(default_factory=dict)
    predicted: RentalOutcome | None = None
    """With a replayed trace: the same jobs under the Poisson model fitted to it
    (fitted_market), what a rate-only model predicts for the replay."""

    @property
    def meets_probability(self) -> bool:
        """The floor held in at least the market's share of the jobs (point estimate)."""
        return self.meet.mean >= self.market.probability

    def savings(self) -> float | None:
        """1 - mean cost / the on-demand reference's (None without one)."""
        if self.reference is None or self.reference.cost.mean <= 0:
            return None
        return 1.0 - self.cost.mean / self.reference.cost.mean

    def to_json_dict(self) -> dict:
        out = {"seeds": self.seeds, "spot_units": self.spot_units,
               "cost_usd": _interval_dict(self.cost), "meet": _interval_dict(self.meet),
               "probability": self.market.probability,
               "meets_probability": self.meets_probability,
               "throughput_limit": self.throughput_limit,
               "mean_run_hours": float(self.run_s.mean() / 3600.0),
               "mean_reclaims": float(self.reclaims.mean()),
               "mean_lost_steps": float(self.lost_steps.mean()),
               "checkpoint_every_steps": self.checkpoint_every_steps,
               "median_step_s": float(np.median(self.step_s))}
        if self.reference is not None:
            out["on_demand"] = self.reference.to_json_dict()
            out["savings"] = self.savings()
        if self.predicted is not None:
            out["predicted_by_fitted_rates"] = self.predicted.to_json_dict()
        return out


def _interval_dict(iv: Interval) -> dict:
    return {"mean": iv.mean, "low": iv.low, "high": iv.high}


def mean_interval(values: np.ndarray) -> Interval:
    """The mean with its Student-t confidence interval (a point when all values agree)."""
    from scipy import stats
    x = np.asarray(values, dtype=float)
    mean = float(x.mean())
    if len(x) < 2 or float(x.std()) == 0.0:
        return Interval(mean, mean, mean)
    half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, len(x) - 1) * stats.sem(x))
    return Interval(mean, mean - half, mean + half)


def share_interval(hits: int, n: int) -> Interval:
    """A share with its Wilson score interval."""
    from scipy import stats
    ci = stats.binomtest(hits, n).proportion_ci(confidence_level=CONFIDENCE, method="wilson")
    return Interval(hits / n, float(ci.low), float(ci.high))


def rentable(plan: Plan, result) -> Plan:
    """The plan with every stage's units: as given, else as `result` (its price) provisioned
    them (the stage model's answers leave a stage's units to the pricing)."""
    if all(st.num_replicas is not None for st in plan.stages) or result is None \
            or not getattr(result, "stages", None):
        return plan
    return plan.with_replicas([st.num_replicas for st in result.stages])


def step_times(problem: Problem, plan: Plan, seeds: int, first_seed: int = 0) -> np.ndarray:
    """Per seed, the plan's step time in the step-level simulator with jitter and stragglers
    (each unit slow with the stragglers' share as its probability) and the check's
    deterministic effects on."""
    from heterps_sim.des import simulate
    from heterps_sim.planner.check import DETERMINISTIC_EFFECTS, VerifySettings
    effects = DETERMINISTIC_EFFECTS + STEP_EFFECTS_VARIABLE
    out = []
    for seed in range(first_seed, first_seed + seeds):
        # each job is rented afresh: each of its units is slow with the stragglers' share as
        # its probability, so a job of one unit is slow as often as one of many (a fixed share
        # would give plans of up to 4 units no slow unit at all, and every larger plan one)
        options = VerifySettings(effects=effects, seed=seed).options().model_copy(
            update={"straggler_draw": "each"})
        result = simulate(problem, plan, seed=seed, options=options, record_spans=False).result
        if result.throughput <= 0 or not math.isfinite(result.throughput):
            raise ValueError(f"the plan does not run in the simulator at seed {seed}: "
                             f"{result.reason or 'no throughput'}")
        out.append(problem.batch_size / result.throughput)
    return np.array(out)


def job_specs(problem: Problem, plan: Plan, market: Market, step_s: np.ndarray, *,
              checkpoint_scale: float = 1.0) -> list:
    """One des.job.JobSpec per episode (its step time), the plan's units rented as `market`
    says; checkpoints every `checkpoint_scale` times the market's interval (its every_s, else
    Young's for the plan's reclaim rate)."""
    from heterps_sim.cost.reference import fixed_price_per_hour, plan_stages, plan_startup_s
    from heterps_sim.des.job import JobSpec, Lease
    names = list(problem.type_names)
    zone = "spot" if market.zone_outages_per_hour > 0 else ""
    leases, rate = [], 0.0
    for stage in plan.stages:
        for name, count in stage.groups:
            terms = market.spot.get(name)
            if terms is None:
                leases.append(Lease(name, int(count), float(problem.price_per_hour[names.index(name)])))
            else:
                leases.append(Lease(name, int(count), terms.price_per_hour,
                                    reclaims_per_hour=terms.reclaims_per_hour, zone=zone,
                                    availability=terms.availability))
                rate += count * (terms.reclaims_per_hour if terms.availability is None
                                 else min(terms.known().fit(int(count))[0], 1e6))
    fixed = fixed_price_per_hour(problem)
    host = _ps_host(problem)
    if host is not None and host[0] in market.spot:  # the PS's hosts on spot: a lease too
        name, shards = host
        terms = market.spot[name]
        leases.append(Lease(name, shards, terms.price_per_hour,
                            reclaims_per_hour=terms.reclaims_per_hour, zone=zone,
                            availability=terms.availability))
        rate += shards * (terms.reclaims_per_hour if terms.availability is None
                          else min(terms.known().fit(shards)[0], 1e6))
        fixed = 0.0
    rate += market.zone_outages_per_hour if zone else 0.0
    startup = plan_startup_s(problem, plan_stages(problem, plan))
    spot_starts = [float(problem.unit_costs.startup_s[names.index(n)]) for n in market.spot
                   if n in names]
    restart = (market.restart_s if market.restart_s is not None
               else max(spot_starts or [startup])) + market.restart_extra_s
    steps = math.ceil(problem.num_samples / problem.batch_size)
    every_s = market.checkpoint_interval_s(rate) * checkpoint_scale
    specs = []
    for s in step_s:
        every = 0 if not math.isfinite(every_s) else max(1, min(steps, round(every_s / s)))
        specs.append(JobSpec(
            steps=steps, step_s=np.array([s]), leases=tuple(leases), startup_s=startup,
            restart_s=restart, checkpoint_every=every, checkpoint_s=market.checkpoint_write_s,
            notice_s=market.notice_s,
            zone_outages_per_hour={zone: market.zone_outages_per_hour} if zone else {},
            granularity_s=float(problem.unit_costs.billing_granularity_s),
            fixed_per_hour=fixed))
    return specs


def _ps_host(problem: Problem) -> tuple[str, int] | None:
    """(host type, shards) of a priced parameter server (None: a free one or the paper
    model's, which bills none)."""
    from heterps_sim.cost.reference import fixed_price_per_hour
    ps = getattr(problem, "ps", None)
    if ps is None or not ps.host_type or fixed_price_per_hour(problem) <= 0.0:
        return None
    return ps.host_type, int(ps.num_shards)


def fitted_market(market: Market, plan: Plan, problem: Problem | None = None) -> Market:
    """The market with each replayed trace replaced by the Poisson model fitted to it (to its
    fit window when the market gives one) for the plan's units of that type
    (des.availability.Availability.fit): its reclaims per unit-hour, and the longest mean wait
    for capacity added to the restart. What a planner that only knows rates would predict
    for the replay."""
    from dataclasses import replace as with_
    counts = plan.units_by_type()
    host = _ps_host(problem) if problem is not None else None
    if host is not None:  # the PS's shards are units of their type too
        counts[host[0]] = counts.get(host[0], 0) + host[1]
    spot, wait = {}, 0.0
    for name, terms in market.spot.items():
        if terms.availability is None or name not in counts:
            spot[name] = terms
            continue
        rate, mean_wait = terms.known().fit(counts[name])
        spot[name] = with_(terms, reclaims_per_hour=rate, availability=None, fit_on=None)
        wait = max(wait, mean_wait)
    return with_(market, spot=spot, restart_extra_s=market.restart_extra_s + wait)


def rental_episodes(problem: Problem, plan: Plan, market: Market, *, seeds: int = 50,
                    reference: bool = True, step_s: np.ndarray | None = None,
                    checkpoint_scale: float = 1.0, first_seed: int = 0) -> RentalOutcome:
    """The plan's jobs under `market`, one per seed from `first_seed` (fresh seeds score a plan
    chosen on others); with `reference`, the same jobs on demand (the same step times: only the
    renting differs). `checkpoint_scale`: job_specs'."""
    from heterps_sim.des.job import simulate_job
    if any(s.num_replicas is None for s in plan.stages):
        raise ValueError("rental_episodes: every stage needs its units (price the plan first)")
    if seeds < 2:
        raise ValueError("rental_episodes: seeds must be >= 2 (an interval needs two jobs)")
    if plan.ps is not None:  # the plan names its PS hosts: run and bill those (as pricing)
        from heterps_sim.cost.ps_hosts import problem_for_plan
        problem = problem_for_plan(problem, plan.ps.resource, plan.ps.num_shards)
    step_s = step_times(problem, plan, seeds, first_seed) if step_s is None else step_s
    specs = job_specs(problem, plan, market, step_s, checkpoint_scale=checkpoint_scale)
    jobs = [simulate_job(spec, seed) for seed, spec in enumerate(specs, start=first_seed)]
    steps = specs[0].steps
    run = np.array([j.run_s for j in jobs])
    thr = problem.batch_size * steps / run
    hits = int((thr >= problem.throughput_limit * (1 - 1e-12)).sum())
    cost = np.array([j.cost_usd for j in jobs])
    spot_units = {n: k for n, k in plan.units_by_type().items() if n in market.spot}
    host = _ps_host(problem)
    if host is not None and host[0] in market.spot:
        spot_units[host[0]] = spot_units.get(host[0], 0) + host[1]
    return RentalOutcome(
        market=market, seeds=seeds, step_s=step_s, cost_usd=cost, run_s=run,
        reclaims=np.array([j.reclaims for j in jobs]),
        lost_steps=np.array([j.lost_steps for j in jobs]),
        checkpoint_every_steps=specs[0].checkpoint_every,
        steps=steps,
        throughput_limit=problem.throughput_limit, cost=mean_interval(cost),
        meet=share_interval(hits, seeds), spot_units=spot_units,
        reference=(rental_episodes(problem, replace(plan, ps=None), market.on_demand(),
                                   seeds=seeds, reference=False, step_s=step_s,
                                   first_seed=first_seed)
                   if reference and market.spot else None),
        predicted=(rental_episodes(problem, replace(plan, ps=None),
                                   fitted_market(market, plan, problem),
                                   seeds=seeds, reference=False, step_s=step_s,
                                   checkpoint_scale=checkpoint_scale, first_seed=first_seed)
                   if reference and any(t.availability is not None
                                        for n, t in market.spot.items() if n in spot_units)
                   else None))


__all__ = ["Interval", "RentalOutcome", "fitted_market", "job_specs", "mean_interval", "money",
           "rental_episodes", "rentable", "share_interval", "step_times"]
