"""The learned spot policy against the exact solver's baselines, on cases it never trained on.

    row = evaluate_case(policy, index, seeds=20, fresh=30)

For held-out case `index` (family.case(HELD_OUT_SEEDS + index)):
- the baselines: robust.market_sweep, every plan the exact solver on mean times gives (its
  answer repaired in the simulator (a); its answers at raised floors on demand and on spot
  prices, and those grown unit by unit (b)), the cheapest holding the floor chosen by `seeds`
  jobs;
- the policy alone: its most likely decision (no search, no simulation);
- the policy with a small search: its most likely decision and `samples` sampled ones, the
  cheapest holding the floor chosen by the same `seeds` jobs.
Each chosen plan is then scored by `fresh` jobs on other seeds (from FRESH_SEED): a choice made
on some jobs is not scored on them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from heterps_sim.planner.episodes import RentalOutcome, rental_episodes
from heterps_sim.planner.learned.decide import Case, Decision, Scored, sub_market
from heterps_sim.planner.learned.family import HELD_OUT_SEEDS, case
from heterps_sim.planner.learned.policy import SpotPolicy, act
from heterps_sim.planner.planner import Planner

FRESH_SEED = 10_000


@dataclass(frozen=True, slots=True)
class Pick:
    """One method's chosen plan, its decision (None for the baselines) and its fresh jobs."""

    label: str
    decision: Decision | None
    plan: object
    fresh: RentalOutcome | None
    wall_s: float
    """Wall time to choose it (the planner's solves and the jobs it simulated)."""

    @property
    def cost(self) -> float:
        return self.fresh.cost.mean if self.fresh is not None else math.inf

    @property
    def holds(self) -> bool:
        return self.fresh is not None and self.fresh.meets_probability


@dataclass(frozen=True, slots=True)
class CaseRow:
    index: int
    layers: int
    types: int
    probability: float
    baseline: Pick
    alone: Pick
    searched: Pick


def _fresh(problem, plan, market, d: Decision | None, fresh: int) -> RentalOutcome | None:
    from heterps_sim.des.job import JobTooLong
    if plan is None:
        return None
    m = market if d is None else sub_market(market, d.spot)
    try:
        return rental_episodes(problem, plan, m, seeds=fresh, reference=False,
                               first_seed=FRESH_SEED,
                               checkpoint_scale=1.0 if d is None else d.checkpoint_scale)
    except (ValueError, JobTooLong):
        return None


def best_scored(scored: list[Scored]) -> Scored:
    """The cheapest that holds the floor; if none holds, the highest reward."""
    held = [s for s in scored if s.holds]
    if held:
        return min(held, key=lambda s: s.cost)
    return max(scored, key=lambda s: s.reward)


def evaluate_case(policy: SpotPolicy, index: int, *, seeds: int = 20, fresh: int = 30,
                  samples: int = 16, search_seed: int = 0) -> CaseRow | None:
    """One held-out case (None when no plan meets its floor even on demand on mean times)."""
    import time

    from heterps_sim.planner.robust import market_sweep
    problem, market = case(HELD_OUT_SEEDS + index)
    t0 = time.perf_counter()
    c = Case(problem, market, seeds=seeds)
    if not c.feasible:
        return None
    with torch.no_grad():
        greedy = act(policy, c, greedy=True).decision
        t_alone = time.perf_counter() - t0
        gen = torch.Generator().manual_seed(search_seed)
        tried = [greedy] + [act(policy, c, generator=gen).decision for _ in range(samples)]
    pick = best_scored([c.score(d) for d in tried])
    t_search = time.perf_counter() - t0
    alone_plan = c.score(greedy).plan
    t1 = time.perf_counter()
    sweep, _ = market_sweep(problem, market, Planner(), seeds=seeds)
    best = sweep.best
    t_base = time.perf_counter() - t1
    base_plan = best.plan if best is not None else None
    return CaseRow(
        index=index, layers=len(problem.layer_names), types=len(problem.type_names),
        probability=market.probability,
        baseline=Pick(best.label if best is not None else "none holds", None, base_plan,
                      _fresh(problem, base_plan, market, None, fresh), t_base),
        alone=Pick("policy alone", greedy, alone_plan,
                   _fresh(problem, alone_plan, market, greedy, fresh), t_alone),
        searched=Pick("policy + search", pick.decision, pick.plan,
                      _fresh(problem, pick.plan, market, pick.decision, fresh), t_search))


__all__ = ["CaseRow", "FRESH_SEED", "Pick", "best_scored", "evaluate_case"]
