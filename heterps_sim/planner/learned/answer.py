"""The learned spot policy's answer for one problem and market: what `heterps-sim episodes
--policy` prints and the benchmark scores.

    ans = learned_answer(problem, market, policy, seeds=20, samples=16)
    ans.alone       the policy's decision (its most likely one, the headroom by
                    ALONE_QUANTILE) and its jobs (decide.Scored)
    ans.searched    the cheapest holding the floor among that, the most likely decision and
                    `samples` decisions sampled at SEARCH_TEMPERATURE, each scored by the same
                    `seeds` jobs (the highest reward if none holds)

The jobs run on the market the planner knows (Market.known), so a held-out part of a trace stays
out of the choice.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from heterps_sim.core.problem import Problem
from heterps_sim.inputs.market import Market
from heterps_sim.planner.learned.decide import Case, Scored
from heterps_sim.planner.learned.policy import SpotPolicy, act
from heterps_sim.planner.planner import Planner


@dataclass(frozen=True, slots=True)
class LearnedAnswer:
    alone: Scored
    searched: Scored
    tried: int
    """Distinct decisions the search scored (the most likely one among them)."""
    alone_s: float
    """Wall time of the policy alone (its features' two solves, its decision and its plan's
    solve; no simulation)."""
    searched_s: float
    """Wall time of the policy and its search, the jobs included."""
    replay: object = None
    """When the market holds a part of a trace out (Market.holds_out): the search's pick
    replayed there (episodes.RentalOutcome, the same seeds and step times; its reference the
    same plan on demand); else None."""
    replay_failure: str = ""


def best_scored(scored: list[Scored]) -> Scored:
    """The cheapest that holds the floor; if none holds, the highest reward."""
    held = [s for s in scored if s.holds]
    if held:
        return min(held, key=lambda s: s.cost)
    return max(scored, key=lambda s: s.reward)


ALONE_QUANTILE = 0.85
"""The policy alone's headroom: the least whose cumulative probability reaches this (policy.
act_on's headroom_quantile), not the most likely one. Chosen as the rule of highest mean
reward on 30 validation cases (benchmarks/bench_spot_alone.py; docs/results' learned spot
policy page)."""

SEARCH_TEMPERATURE = 2.0
"""The search samples its decisions at this temperature (every logit halved): a trained policy
is sharp, and samples at its own temperature repeat its most likely decision."""


def learned_answer(problem: Problem, market: Market, policy: SpotPolicy, *, seeds: int = 20,
                   samples: int = 16, search_seed: int = 0, planner: Planner | None = None,
                   temperature: float = SEARCH_TEMPERATURE) -> LearnedAnswer | None:
    """None when no plan meets the floor even on demand on mean times."""
    start = time.perf_counter()
    c = Case(problem, market, seeds=seeds, planner=planner)
    if not c.feasible:
        return None
    with torch.no_grad():
        greedy = act(policy, c, greedy=True, headroom_quantile=ALONE_QUANTILE).decision
        c.base(greedy.spot, greedy.headroom)
        alone_s = time.perf_counter() - start
        likeliest = act(policy, c, greedy=True).decision  # (the mode's headroom)
        gen = torch.Generator().manual_seed(search_seed)
        tried = [greedy, likeliest] + [act(policy, c, generator=gen,
                                           temperature=temperature).decision
                                       for _ in range(samples)]
    scored = {d: c.score(d) for d in tried}
    pick = best_scored(list(scored.values()))
    searched_s = time.perf_counter() - start
    replay, failure = None, ""
    if market.holds_out and pick.outcome is not None:
        from heterps_sim.des.job import JobTooLong
        from heterps_sim.planner.episodes import rental_episodes
        from heterps_sim.planner.learned.decide import sub_market
        try:  # chosen on the known part; does it hold on the part it never saw?
            replay = rental_episodes(problem, pick.plan, sub_market(market, pick.decision.spot),
                                     seeds=seeds, step_s=pick.outcome.step_s,
                                     checkpoint_scale=pick.decision.checkpoint_scale)
        except JobTooLong as exc:
            failure = str(exc)
    return LearnedAnswer(scored[greedy], pick, len(scored), alone_s, searched_s, replay,
                         failure)


__all__ = ["ALONE_QUANTILE", "LearnedAnswer", "SEARCH_TEMPERATURE", "best_scored",
           "learned_answer"]
