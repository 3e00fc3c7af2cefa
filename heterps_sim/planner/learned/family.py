"""Random problems with random spot markets: what the learned spot policy trains and is
evaluated on (seeded; training and held-out problems come from disjoint seeds).

    problem, market = random_case(np.random.default_rng(seed))

A problem is testing.random_default_problem (every term of the default cost model in play) with
its floor raised until it binds (binding_limit) and its job sized to last 1 to 24 hours at the
floor, so that reclaims happen within a job. A market
offers each type on spot with probability 3/4, at 25-75% of its on-demand price, reclaimed at a
rate drawn per type over three decades (1e-3 to 0.3 per unit-hour: a quiet GPU pool to a busy
one), sometimes with zone outages; checkpoints take 5 s to 5 min to write. Rates that differ by
type are the case the exact solver's families (all spot or none) do not cover.
"""

from __future__ import annotations

import math

import numpy as np

from heterps_sim.core.problem import Problem
from heterps_sim.inputs.market import Market, SpotType

LAYERS = (3, 4, 6, 8)
TYPES = (2, 3, 4, 6)
PROBABILITIES = (0.8, 0.9, 0.95)
TRAIN_SEEDS = 0
"""Training problems are drawn from seeds 0, 1, 2, ...; held-out ones from HELD_OUT_SEEDS on."""
HELD_OUT_SEEDS = 1_000_000
VALIDATION_SEEDS = 999_000
"""Cases a decoding choice is tuned on (answer.ALONE_QUANTILE): the training family, never
trained on (training stops before these seeds) and never held out."""


def random_market(rng: np.random.Generator, problem: Problem) -> Market:
    """A spot market over `problem`'s types (see the module docstring)."""
    spot = {}
    for j, name in enumerate(problem.type_names):
        if rng.random() < 0.75:
            ratio = float(rng.uniform(0.25, 0.75))
            rate = float(math.exp(rng.uniform(math.log(1e-3), math.log(0.3))))
            spot[name] = SpotType(float(problem.price_per_hour[j]) * ratio, rate, "random")
    zone = float(math.exp(rng.uniform(math.log(1e-3), math.log(0.05)))) \
        if rng.random() < 0.2 else 0.0
    return Market(spot=spot, zone_outages_per_hour=zone,
                  notice_s=float(rng.choice([30.0, 120.0])),
                  restart_s=None if rng.random() < 0.5 else float(rng.uniform(60.0, 900.0)),
                  checkpoint_write_s=float(math.exp(rng.uniform(math.log(5.0), math.log(300.0)))),
                  probability=float(rng.choice(PROBABILITIES)), source="random market")


ROOM = 1.7
"""A case's floor leaves room for the largest headroom the policy plans at (1 + 0.7): some plan
meets ROOM x the floor on mean times, so a plan that holds the floor under noise exists."""


def binding_limit(problem: Problem, rng: np.random.Generator, rounds: int = 3) -> Problem:
    """`problem` with a floor that binds and leaves room (None when no floor does). The cost
    to train N samples favours the most cost-efficient plan however fast it is, so a floor
    below that plan's throughput never binds and noise cannot make a plan miss it. While the
    answer runs more than 5% above the floor, the floor is raised to 1.02-1.6x the answer's
    throughput; a floor is kept only when some plan meets ROOM x it (else it is halved, up to
    8 times)."""
    from dataclasses import replace

    from heterps_sim.planner.planner import Planner

    def at(limit: float) -> Problem:
        return replace(problem, throughput_limit=limit)

    def roomy(limit: float) -> bool:
        return Planner().plan(at(limit * ROOM)).feasible

    limit = problem.throughput_limit
    for _ in range(8):
        if roomy(limit):
            break
        limit /= 2.0
    else:
        return None
    answer = Planner().plan(at(limit))
    for _ in range(rounds):
        if answer.result.throughput <= limit * 1.05:
            break
        raised = answer.result.throughput * float(rng.uniform(1.02, 1.6))
        if not roomy(raised):
            break
        limit, answer = raised, Planner().plan(at(raised))
    return at(limit)


def random_case(rng: np.random.Generator) -> tuple[Problem, Market]:
    """One problem and its market (the floor binds; the job lasts 1-24 h at the floor)."""
    from dataclasses import replace

    from heterps_sim.testing import random_default_problem
    p = random_default_problem(rng, int(rng.choice(LAYERS)), int(rng.choice(TYPES)))
    bound = binding_limit(p, rng)
    p = bound if bound is not None else p  # no room: a case the planner answers "no plan"
    hours = float(math.exp(rng.uniform(0.0, math.log(24.0))))
    # whole steps: the jobs run ceil(samples / batch) steps
    samples = max(1, round(p.throughput_limit * hours * 3600.0 / p.batch_size)) * p.batch_size
    p = replace(p, num_samples=float(samples))
    return p, random_market(rng, p)


def case(seed: int) -> tuple[Problem, Market]:
    """The case of one seed (training: small seeds; held out: HELD_OUT_SEEDS + i)."""
    return random_case(np.random.default_rng([seed, 0x5907]))


__all__ = ["HELD_OUT_SEEDS", "VALIDATION_SEEDS", "binding_limit", "case", "random_case",
           "random_market"]
