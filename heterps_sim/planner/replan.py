"""Re-plan a plan the simulator finds short: schedule again for a higher throughput floor.

The stage model the schedulers optimise sees a steady pipeline; a flushed schedule also pays
fill and drain and every stage's step-end costs (cost/flush.py), so the scheduler's optimum can
simulate well below the limit. Rather than only growing that plan's stages, run the same
scheduler again (same options, seed, mode and model: the caller's `Replan` callable) with its
floor raised by the shortfall the flushed closed form predicts:

    target_0 = limit,   target_{k+1} = target_k x limit / flushed_k

(flushed_k: the closed form of round k's plan at the simulator's microbatches; where it does
not apply, an unflushed schedule, or where it already meets the limit that the simulator
misses, the simulated throughput stands in; where no closed form applies (async), target_k is
first raised to the plan's own analytic throughput, which the stage model may put well above
it). Under the flushed pricing the search is already
exact under the closed form, so a first round is what a shortfall of the closed form needs.
Each re-planned plan keeps the units the
scheduler gave it for its raised target and is simulated against the real limit; the rounds
stop at the first plan the simulator finds meeting the limit (the targets only rise, so the
first is the cheapest found), when the scheduler finds no plan at the raised target, or after
`max_rounds`. Deterministic: the scheduler runs with the caller's seed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from heterps_sim.core.plan import Plan
from heterps_sim.core.problem import Problem
from heterps_sim.core.result import RunResult

Replan = Callable[[Problem], object]
"""The scenario's scheduler run on a problem (the checked one with a raised throughput_limit)
-> schedulers.base.ScheduleOutcome (its .plan, .result, .notes)."""
MAX_ROUNDS = 4
"""Re-planning rounds at most: the closed form is within ~0.25% of the simulator on gpipe
plans, so one or two rounds usually suffice."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplanRound:
    """One re-planning round: the scheduler at `target` samples/s, its plan simulated."""

    target: float
    """The throughput floor the scheduler ran with."""
    found: bool
    """False: the scheduler found no plan meeting `target` (`reason` says why)."""
    reason: str = ""
    units: tuple[int, ...] = ()
    analytic_throughput: float | None = None
    """The analytic model's throughput of the re-planned plan."""
    flushed_throughput: float | None = None
    simulated_throughput: float | None = None
    simulated_cost_usd: float | None = None
    meets_limit: bool = False
    """The simulator's throughput meets the real limit."""
    method: str = "raised-floor"
    """raised-floor: the scheduler at a raised target (this module); exact-flushed: the
    cheapest plan under the flushed closed form at the real limit (studies/replan_flushed.py;
    `target` is then the limit)."""
    num_microbatches: int | None = None
    """The microbatches the simulator ran the plan with (exact-flushed: the best plan's m)."""
    flushed_cost_usd: float | None = None
    """exact-flushed: the optimum's cost under the flushed closed form."""
    labels: int | None = None
    """exact-flushed: the labels its searches made (those that finished)."""
    microbatches_searched: tuple[int, ...] = ()
    """exact-flushed: the m's searched in full (the plan is the cheapest over them)..."""
    microbatches_skipped: tuple[int, ...] = ()
    """... the m's whose search passed `max_labels` labels..."""
    microbatches_not_reached: tuple[int, ...] = ()
    """... and those not searched: the search stopped after too many skipped in a row."""
    max_labels: int | None = None
    """exact-flushed: the label budget of one m's search."""
    limit: float | None = None
    """exact-flushed: the real limit (`target` is above it for the search at the limit raised
    by the simulator's shortfall)."""


@dataclass(frozen=True, slots=True)
class Replanned:
    """The rounds, and the re-planned plan closest to the limit (None when no round found
    one): `accepted` when the simulator finds it meeting the limit."""

    rounds: tuple[ReplanRound, ...]
    plan: Plan | None = None
    analytic: RunResult | None = None
    simulated: RunResult | None = None
    accepted: bool = False
    method: str = "raised-floor"
    """ReplanRound.method of the round that found `plan`."""
    proven_cheapest: bool = False
    """exact-flushed: `plan` is the cheapest under the flushed form over every m searched."""


def flushed_or_none(problem: Problem, plan: Plan, sim: RunResult,
                    effects: tuple[str, ...]) -> float | None:
    """The flushed closed form of `plan` (its units fixed) at the simulator's microbatches,
    with the check's effects; None where it does not apply (no bubbles, unflushed schedule,
    the plan did not run)."""
    from heterps_sim.cost.flush import FLUSHED, flushed_throughput
    m = sim.extra.get("num_microbatches")
    schedule = sim.extra.get("schedule", plan.schedule)
    if not sim.extra.get("simulated", True) or not m or "bubbles" not in effects \
            or schedule not in FLUSHED:
        return None
    return flushed_throughput(problem, replace(plan, schedule=schedule), int(m),
                              allreduce="allreduce" in effects,
                              transfers="transfers" in effects,
                              contention="contention" in effects, ps="ps" in effects)


def _next_target(target: float, limit: float, flushed: float | None,
                 simulated: float, analytic: float | None = None) -> float:
    """target x limit / the predicted throughput (the flushed closed form; the simulated one
    where the closed form is missing or already meets the limit the simulator misses). Where
    no closed form applies (an unflushed schedule) the floor scales from the plan's own
    analytic throughput when it is above the target: the stage model prices the plan at
    `analytic` and the simulator runs it at `simulated`, so a plan the simulator runs at the
    limit needs about analytic x limit / simulated (scaling the target alone asks again for a
    plan the model already puts above it: the same plan comes back)."""
    predicted = flushed if flushed is not None and flushed < limit else simulated
    if flushed is None and analytic is not None:
        target = max(target, analytic)
    return target * limit / max(predicted, 1e-300)


def replan_rounds(problem: Problem, plan: Plan, sim: RunResult, replan: Replan,
                  evaluate: Callable[[Plan], RunResult],
                  simulate: Callable[[Plan], RunResult], effects: tuple[str, ...],
                  job_cost: Callable[[Plan, RunResult], float],
                  max_rounds: int = MAX_ROUNDS) -> Replanned:
    """The re-planning rounds (module docstring) from the checked `plan` and its simulation
    `sim`; `simulate` runs a plan (units fixed) under the real limit, `evaluate` is the
    analytic model at the real limit."""
    limit = problem.throughput_limit
    target = _next_target(limit, limit, flushed_or_none(problem, plan, sim, effects),
                          sim.throughput, evaluate(plan).throughput)
    rounds: list[ReplanRound] = []
    best: tuple[Plan, RunResult] | None = None
    seen: dict[str, RunResult] = {}
    reached, ceiling = limit, math.inf  # the highest target with a plan, the lowest without
    for _ in range(max_rounds):
        if not math.isfinite(target):
            break
        outcome = replan(problem.with_limit(target))
        if outcome.plan is None or outcome.result is None or not outcome.result.feasible:
            why = (outcome.notes or {}).get("reason") or (
                outcome.result.reason if outcome.result is not None else "")
            rounds.append(ReplanRound(target=target, found=False, reason=str(why)))
            ceiling = min(ceiling, target)
            target = (reached + ceiling) / 2.0  # halfway back to the last target it reached
            continue
        reached = target
        fixed = outcome.plan.with_replicas([s.num_replicas for s in outcome.result.stages])
        key = repr(fixed.to_json_dict())
        new = seen.get(key)
        if new is None:
            new = seen[key] = simulate(fixed)
        flushed = flushed_or_none(problem, fixed, new, effects)
        rounds.append(ReplanRound(
            target=target, found=True, units=tuple(s.num_replicas for s in fixed.stages),
            analytic_throughput=outcome.result.throughput, flushed_throughput=flushed,
            simulated_throughput=new.throughput, simulated_cost_usd=job_cost(fixed, new),
            meets_limit=bool(new.feasible), num_microbatches=new.extra.get("num_microbatches")))
        if new.feasible:
            return Replanned(tuple(rounds), fixed, evaluate(fixed), new, accepted=True)
        if best is None or new.throughput > best[1].throughput:
            best = (fixed, new)
        nxt = _next_target(target, limit, flushed, new.throughput, outcome.result.throughput)
        if nxt >= ceiling:  # no plan up there: halfway to it
            nxt = (target + ceiling) / 2.0
        if nxt <= target * (1 + 1e-9):  # no higher floor to ask for
            break
        target = nxt
    if best is None:
        return Replanned(tuple(rounds))
    return Replanned(tuple(rounds), best[0], evaluate(best[0]), best[1])


def round_line(r: ReplanRound) -> str:
    """One raised-floor round as the commands print it (replan_flushed.any_round_line prints
    either kind)."""
    head = f"  re-planned for {r.target:,.0f} samples/s: "
    if not r.found:
        return head + ("the scheduler finds no plan that meets this target"
                       + (f" ({r.reason})" if r.reason else ""))
    flushed = (f"flushed {r.flushed_throughput:,.0f}, " if r.flushed_throughput is not None
               else "")
    units = "-".join(str(k) for k in r.units)
    return head + (f"{flushed}simulated {r.simulated_throughput:,.0f} (units {units}"
                   + (", meets the limit)" if r.meets_limit else ")"))
