"""Plans for a noisy, reclaimable world from the exact solver on mean times: the baselines a
learned scheduler has to beat, each scored by the same simulated jobs (planner/episodes.py).

    on_means = repaired_on_means(problem, market, planner)     # the planner's answer,
                                                               # repaired in the simulator
    sweep = headroom_sweep(problem, market, planner)           # the answer at floors raised
    sweep.best                                                 # by each headroom; the
                                                               # cheapest that holds the floor
                                                               # as often as the market asks
    spot = headroom_sweep(problem, market, planner,            # the same, planned on spot
                          plan_on=spot_priced(problem, market))  # prices (planner/spot.py)

All plan on mean times (the deterministic closed form and the check's deterministic effects);
the jobs they are scored by draw jitter, stragglers and reclaims, seed by seed, the same seeds
for every plan (common random numbers: two plans' difference is not the draws').
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from heterps_sim.core.problem import Problem
from heterps_sim.inputs.market import Market
from heterps_sim.planner.episodes import RentalOutcome, rentable, rental_episodes
from heterps_sim.planner.planner import Planner

HEADROOMS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.6)
"""Raised floors the sweep plans at: limit x (1 + h)."""


@dataclass(frozen=True, slots=True)
class Candidate:
    label: str
    headroom: float
    plan: object
    """core.plan.Plan (None: no plan meets the raised floor)."""
    planned_cost_usd: float
    """The planner's cost of the plan on mean times (at the raised floor's plan)."""
    outcome: RentalOutcome | None

    @property
    def holds(self) -> bool:
        return self.outcome is not None and self.outcome.meets_probability


@dataclass(frozen=True, slots=True)
class Sweep:
    candidates: tuple[Candidate, ...]

    @property
    def best(self) -> Candidate | None:
        """The cheapest candidate (mean job cost) that holds the floor often enough; None when
        none does."""
        held = [c for c in self.candidates if c.holds]
        return min(held, key=lambda c: c.outcome.cost.mean) if held else None


def repaired_on_means(problem: Problem, market: Market, planner: Planner, *,
                      seeds: int = 50) -> Candidate:
    """The planner's answer on mean times, repaired where the deterministic simulator finds it
    short (the check's final plan), scored by the jobs."""
    answer = planner.plan(problem, repair=True)
    if not answer.feasible:
        return Candidate("on means, repaired", 0.0, None, float("nan"), None)
    plan = (answer.check.final_plan if answer.check is not None else
            rentable(answer.plan, answer.result))
    cost = (answer.check.extra.get("final_simulated_cost_usd", answer.cost_usd)
            if answer.check is not None else answer.cost_usd)
    return Candidate("on means, repaired", 0.0, plan, cost,
                     rental_episodes(problem, plan, market, seeds=seeds, reference=False))


def headroom_sweep(problem: Problem, market: Market, planner: Planner, *,
                   headrooms=HEADROOMS, seeds: int = 50, plan_on: Problem | None = None,
                   label: str = "headroom") -> Sweep:
    """The planner's answer at floors raised by each headroom, each scored by the jobs at the
    problem's own floor. `plan_on`: the problem the planner sees instead (the same layers,
    types and floor at other prices: planner.spot.spot_priced); the jobs rent the plan as
    `market` says either way."""
    seen = problem if plan_on is None else plan_on
    out = []
    for h in headrooms:
        raised = replace(seen, throughput_limit=seen.throughput_limit * (1.0 + h))
        answer = planner.plan(raised)
        plan = rentable(answer.plan, answer.result) if answer.feasible else None
        outcome = (rental_episodes(problem, plan, market, seeds=seeds, reference=False)
                   if plan is not None else None)
        out.append(Candidate(f"{label} {100 * h:.0f}%", h, plan,
                             answer.cost_usd if plan is not None else float("nan"), outcome))
    return Sweep(tuple(out))


MAX_ADDED_UNITS = 32
"""unit_repair adds at most this many units (each addition simulates one job set per stage)."""


CHECKPOINT_SCALES = (0.25, 0.5, 1.0, 2.0, 4.0)
"""Checkpoint intervals checkpoint_sweep tries, as multiples of the market's (Young's)."""


@dataclass(frozen=True, slots=True)
class CheckpointChoice:
    scale: float
    outcome: RentalOutcome


def checkpoint_sweep(problem: Problem, plan, market: Market, *, scales=CHECKPOINT_SCALES,
                     seeds: int = 50) -> tuple[CheckpointChoice, ...]:
    """The plan's jobs with checkpoints every `scale` times the market's interval, for each
    scale: the same seeds and step times (one step-level simulation per seed for all), so
    only the interval differs. Young's interval minimises the expected time only to first
    order (short checkpoints, rare reclaims, a restart free of lost work); the jobs say what
    it costs with the restart, the notice and the billing granule in."""
    probe = rental_episodes(problem, plan, market, seeds=seeds, reference=False)
    return tuple(CheckpointChoice(f, probe if f == 1.0 else rental_episodes(
        problem, plan, market, seeds=seeds, reference=False, step_s=probe.step_s,
        checkpoint_scale=f)) for f in scales)


def best_checkpoint(choices) -> CheckpointChoice | None:
    """The cheapest interval (mean job cost) among those holding the floor as often as the
    market asks; None when none does."""
    held = [c for c in choices if c.outcome.meets_probability]
    return min(held, key=lambda c: c.outcome.cost.mean) if held else None


def floor_quantile(problem: Problem, outcome: RentalOutcome) -> float:
    """The throughput (samples/s over the run) that the market's share of the jobs reach: the
    floor holds as often as the market asks when this is at least the limit."""
    import numpy as np
    thr = problem.batch_size * outcome.steps / outcome.run_s
    return float(np.quantile(thr, 1.0 - outcome.market.probability, method="lower"))


def shortfall(problem: Problem, outcome: RentalOutcome) -> float:
    """How far below the floor the jobs end, on average (samples/s; 0 when every job holds)."""
    import numpy as np
    thr = problem.batch_size * outcome.steps / outcome.run_s
    return float(np.maximum(0.0, problem.throughput_limit - thr).mean())


def with_unit_added(plan, g: int):
    """The plan with one more unit in stage g (of a mixed stage, of its first type)."""
    stage = plan.stages[g]
    if stage.replicas:
        (name, n), *rest = stage.replicas
        stage = replace(stage, replicas=((name, n + 1), *rest),
                        num_replicas=stage.num_replicas + 1)
    else:
        stage = replace(stage, num_replicas=stage.num_replicas + 1)
    return replace(plan, stages=tuple(stage if i == g else s
                                      for i, s in enumerate(plan.stages)))


def growth_moves(plan, problem: Problem | None = None) -> list:
    """The plans one unit larger than `plan`: one more unit in each stage, then one more
    parameter-server host when the plan names its hosts; with `problem`, only those within
    each type's available units (stages and hosts together)."""
    moves = [with_unit_added(plan, g) for g in range(len(plan.stages))]
    if plan.ps is not None:
        moves.append(replace(plan, ps=replace(plan.ps, num_shards=plan.ps.num_shards + 1)))
    if problem is None:
        return moves
    return [m for m in moves if within_caps(m, problem)]


def within_caps(plan, problem: Problem) -> bool:
    """The plan's units of each type (stages and parameter-server hosts together) are within
    the type's available units."""
    names = list(problem.type_names)
    used = plan.units_by_type()
    if plan.ps is not None:
        used[plan.ps.resource] = used.get(plan.ps.resource, 0) + plan.ps.num_shards
    return all(problem.available[names.index(n)] is None
               or k <= problem.available[names.index(n)] for n, k in used.items())


def unit_repair(problem: Problem, start: Candidate, market: Market, *, seeds: int = 50,
                max_added: int = MAX_ADDED_UNITS, label: str | None = None,
                plan_on: Problem | None = None) -> Candidate:
    """Units added one at a time where the jobs say they pay, until the floor holds as often as
    the market asks: each round simulates the plan with one more unit in each stage, and with
    one more parameter-server host when the plan names its hosts (the same seeds), within the
    available units of `plan_on` (its caps), and keeps the one that cuts the jobs' shortfall
    (shortfall: how far below the floor the jobs end, on average) the most per USD its jobs
    cost more on average. The shortfall, not the throughput the market's share of jobs reach,
    because that job can be one whose slow unit sits in another stage than the unit's: a unit
    in each of two stages may be needed before it moves, and each still cuts the shortfall.
    Stops when the floor holds, when no added unit cuts the shortfall, or after `max_added`
    units. A search in the simulator, not a proof. The candidate's planned cost is the final
    plan's on mean times, priced on `plan_on` (the problem the start was planned on; default
    `problem`)."""
    if start.plan is None or start.outcome is None:
        return start
    plan, outcome = start.plan, start.outcome
    short = shortfall(problem, outcome)
    added = 0
    while not outcome.meets_probability and added < max_added:
        best = None
        for trial in growth_moves(plan, problem if plan_on is None else plan_on):
            try:
                o = rental_episodes(problem, trial, market, seeds=seeds, reference=False)
            except ValueError:  # one unit more is one too many (the minimum batch per unit)
                continue
            gain = short - shortfall(problem, o)
            if gain <= 0.0:
                continue
            score = gain / max(o.cost.mean - outcome.cost.mean, 1e-9)
            if best is None or score > best[0]:
                best = (score, trial, o)
        if best is None:
            break
        _, plan, outcome = best
        short = shortfall(problem, outcome)
        added += 1
    planned = start.planned_cost_usd
    if added:
        from heterps_sim.planner.pricing import Pricing
        seen = problem if plan_on is None else plan_on
        planned = Pricing.of(seen, schedule=plan.schedule).price(seen, plan)[1].cost_usd
    return Candidate(label or f"{start.label} +{added} units", start.headroom, plan,
                     planned, outcome)


@dataclass(frozen=True, slots=True)
class HeldOutRow:
    """One plan chosen among on the part of each trace the planner knows (its fit window),
    replayed on the part held out."""

    candidate: Candidate
    """Its outcome: its jobs on the known part (what the choice saw, its prediction)."""
    replay: RentalOutcome | None
    """The same plan's jobs (same seeds and step times) on the held-out part; its reference
    is the same plan on demand, its `predicted` the Poisson rates fitted to the known part.
    None when a job does not finish there (`failure` says why)."""
    failure: str = ""

    @property
    def predicted_off(self) -> float:
        """Its jobs on the known part against its replay: mean cost / the replay's - 1
        (negative: the prediction was low)."""
        return self.candidate.outcome.cost.mean / self.replay.cost.mean - 1.0

    @property
    def throughput_lost(self) -> float:
        """1 - the replay's mean throughput over the same plan's on demand (waits for
        capacity, restarts, lost work; the step times are the same)."""
        return 1.0 - float(self.replay.reference.run_s.mean()) / float(self.replay.run_s.mean())

    @property
    def cheaper(self) -> float:
        """How many times cheaper the replay is than the same plan on demand."""
        return self.replay.reference.cost.mean / self.replay.cost.mean


@dataclass(frozen=True, slots=True)
class HeldOut:
    """What choosing plans by simulated jobs is worth on data the choice never saw."""

    rows: tuple[HeldOutRow, ...]
    """The sweep's best first (when one holds the floor), then every other distinct plan
    that rents a type whose trace holds a part out."""
    chosen: HeldOutRow | None
    """The sweep's best (None: no plan held the floor on the known part)."""
    on_demand: Candidate | None
    """The cheapest of the sweep's plans that holds the floor rented all on demand (its
    outcome: those jobs on demand, the same seeds and step times); None when none does."""


def held_out(problem: Problem, market: Market, sweep: Sweep, *, seeds: int = 50) -> HeldOut:
    """The sweep's plans, chosen by their jobs on `market.known()`, replayed on `market`: the
    best, and every other plan renting a type whose trace holds a part out."""
    held = {n for n, t in market.spot.items() if t.fit_on is not None}
    from heterps_sim.des.job import JobTooLong
    best, rows, seen = sweep.best, [], set()
    for c in ([best] if best is not None else []) + list(sweep.candidates):
        if c.plan is None or c.outcome is None:
            continue
        key = repr(c.plan.to_json_dict())
        if key in seen or (c is not best and not c.plan.units_by_type().keys() & held):
            continue
        seen.add(key)
        try:  # a plan chosen on a calm window may not finish on a harsh one: say so
            rows.append(HeldOutRow(c, rental_episodes(problem, c.plan, market, seeds=seeds,
                                                      step_s=c.outcome.step_s)))
        except JobTooLong as exc:
            rows.append(HeldOutRow(c, None, str(exc)))
    on_demand = []
    for c in sweep.candidates:
        if c.plan is None or c.outcome is None:
            continue
        o = rental_episodes(problem, c.plan, market.on_demand(), seeds=seeds, reference=False,
                            step_s=c.outcome.step_s)
        if o.meets_probability:
            on_demand.append(Candidate(c.label, c.headroom, c.plan, c.planned_cost_usd, o))
    return HeldOut(tuple(rows), rows[0] if rows and best is not None else None,
                   min(on_demand, key=lambda c: c.outcome.cost.mean) if on_demand else None)


def _beyond_trace(sweep: Sweep, market: Market, names: set) -> bool:
    """Some plan of `sweep` rents more units of a traced type than its known trace always
    held (so planning within the trace would answer otherwise)."""
    return any(n > market.lowest_units(name)
               for c in sweep.candidates if c.plan is not None
               for name, n in c.plan.units_by_type().items()
               if name in names and market.lowest_units(name) is not None)


def market_sweep(problem: Problem, market: Market, planner: Planner, *,
                 headrooms=HEADROOMS, seeds: int = 50) -> tuple[Sweep, HeldOut | None]:
    """The baselines on mean times and the plans grown from them, each scored by the same jobs:
    the planner's answer repaired; its answer at each raised floor on on-demand prices, then
    on spot prices (planner/spot.py), then, when one of those rents more units of a type than
    its known trace always held, on spot prices within that (`within trace`); then, from the
    repaired answer and each spot family's plan at the lowest headroom (when they miss the
    floor), units added where the jobs say they pay (unit_repair).

    Every plan is chosen by its jobs on the market the planner knows (Market.known: each trace
    on its fit window). When the market holds a part of a trace out, the plans are then
    replayed on that part (held_out); otherwise the second value is None."""
    from heterps_sim.planner.spot import spot_priced
    known = market.known()
    repaired = repaired_on_means(problem, known, planner, seeds=seeds)
    raised = headroom_sweep(problem, known, planner, headrooms=headrooms, seeds=seeds)
    families: list[Sweep] = []
    starts = [(repaired, None)]
    if market.spot:
        names = set(problem.type_names)
        on_spot = spot_priced(problem, market)
        families.append(headroom_sweep(problem, known, planner, headrooms=headrooms,
                                       seeds=seeds, plan_on=on_spot, label="spot prices"))
        starts.append((families[-1].candidates[0], on_spot))
        if _beyond_trace(families[-1], market, names):
            within = spot_priced(problem, market, within_trace=True)
            families.append(headroom_sweep(problem, known, planner, headrooms=headrooms,
                                           seeds=seeds, plan_on=within, label="within trace"))
            starts.append((families[-1].candidates[0], within))
    grown = [unit_repair(problem, c, known, seeds=seeds, plan_on=on) for c, on in starts
             if c.plan is not None and not c.holds]
    sweep = Sweep((repaired, *raised.candidates, *(c for f in families for c in f.candidates),
                   *grown))
    return sweep, (held_out(problem, market, sweep, seeds=seeds) if market.holds_out else None)


__all__ = ["CHECKPOINT_SCALES", "HEADROOMS", "MAX_ADDED_UNITS", "Candidate", "CheckpointChoice",
           "best_checkpoint", "checkpoint_sweep", "Sweep", "floor_quantile",
           "growth_moves", "HeldOut", "HeldOutRow", "held_out", "headroom_sweep", "market_sweep",
           "repaired_on_means", "shortfall", "unit_repair", "with_unit_added", "within_caps"]
