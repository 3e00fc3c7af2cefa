"""Plans for a noisy, reclaimable world from the exact solver on mean times: the baselines a
learned scheduler has to beat, each scored by the same simulated jobs (planner/episodes.py).

    on_means = repaired_on_means(problem, market, planner)     # the planner's answer,
                                                               # repaired in the simulator
    sweep = headroom_sweep(problem, market, planner)           # the answer at floors raised
    sweep.best                                                 # by each headroom; the
                                                               # cheapest that holds the floor
                                                               # as often as the market asks

Both plan on mean times (the deterministic closed form and the check's deterministic effects);
the jobs they are scored by draw jitter, stragglers and reclaims, seed by seed, the same seeds
for every plan (common random numbers: two plans' difference is not the draws').
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from heterps_sim.core.problem import Problem
from heterps_sim.inputs.market import Market
from heterps_sim.planner.episodes import RentalOutcome, rental_episodes
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
    plan = answer.check.final_plan if answer.check is not None else answer.plan
    cost = (answer.check.extra.get("final_simulated_cost_usd", answer.cost_usd)
            if answer.check is not None else answer.cost_usd)
    return Candidate("on means, repaired", 0.0, plan, cost,
                     rental_episodes(problem, plan, market, seeds=seeds, reference=False))


def headroom_sweep(problem: Problem, market: Market, planner: Planner, *,
                   headrooms=HEADROOMS, seeds: int = 50) -> Sweep:
    """The planner's answer at floors raised by each headroom, each scored by the jobs at the
    problem's own floor."""
    out = []
    for h in headrooms:
        raised = replace(problem, throughput_limit=problem.throughput_limit * (1.0 + h))
        answer = planner.plan(raised)
        plan = answer.plan if answer.feasible else None
        outcome = (rental_episodes(problem, plan, market, seeds=seeds, reference=False)
                   if plan is not None else None)
        out.append(Candidate(f"headroom {100 * h:.0f}%", h, plan,
                             answer.cost_usd if plan is not None else float("nan"), outcome))
    return Sweep(tuple(out))


__all__ = ["HEADROOMS", "Candidate", "Sweep", "headroom_sweep", "repaired_on_means"]
