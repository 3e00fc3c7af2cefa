"""Imitation before reinforcement: the policy first learns the decision a search in the
simulator finds best for each training case, then (optionally) REINFORCE refines it.

    label = search_label(case_seed, jobs=10)      # the best decision a search finds (Rollout)
    imitate(policy, labels, epochs=30)            # cross-entropy on those decisions

REINFORCE from scratch with a few sampled decisions per case learns one decision for every
case (the best on average: all spot, one headroom); the labels say, case by case, which
decision the simulated jobs prefer. The search, for one case: every spot set among none, all
the market offers, all but one of them and (up to 4 offered) each alone, at every headroom (HEADROOMS), checkpoints at
Young's interval, no units added; then, from the cheapest holding the floor (the highest reward
when none holds), each other checkpoint interval, then one unit more in each stage in turn,
each kept when it is cheaper and still holds (or holds where it did not). The same jobs score
every decision (common random numbers). A search, not a proof: the label is the best found.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from heterps_sim.planner.learned.decide import CHECKPOINT_SCALES, HEADROOMS, Case, Decision
from heterps_sim.planner.learned.family import case
from heterps_sim.planner.learned.policy import Rollout, SpotPolicy, act_on, inputs_of


def _better(a, b) -> bool:
    """Scored a is better than b as the search ranks them (answer.best_scored: holds the floor
    where b does not, else cheaper, else a higher reward); a tie keeps b."""
    from heterps_sim.planner.learned.answer import best_scored
    return best_scored([b, a]) is a


def spot_sets(offered) -> list[frozenset]:
    offered = sorted(offered)
    sets = [frozenset(), frozenset(offered)]
    if len(offered) > 1:
        sets += [frozenset(offered) - {t} for t in offered]
    if 2 < len(offered) <= 4:  # singletons too where they are few
        sets += [frozenset({t}) for t in offered]
    return list(dict.fromkeys(sets))


def grid_search(c: Case):
    """The best decision (decide.Scored) a search in the simulator finds for case `c`: every
    spot set of spot_sets at every headroom, then each checkpoint interval for the best, then
    a unit more in each stage of its plan while that improves, all scored by `c`'s jobs (the
    imitation's labels, and the upper reference of what a policy over these choices can do)."""
    best = None
    for spot in spot_sets(c.market.spot):
        for h in HEADROOMS:
            s = c.score(Decision(spot, h, 1.0))
            if best is None or _better(s, best):
                best = s
    d = best.decision
    for scale in CHECKPOINT_SCALES:
        s = c.score(Decision(d.spot, d.headroom, scale))
        if _better(s, best):
            best = s
    d = best.decision
    base = c.base(d.spot, d.headroom)
    if base.plan is not None:
        extra = [0] * len(base.plan.stages)
        for g in range(len(extra)):
            trial = list(extra)
            trial[g] += 1
            s = c.score(Decision(d.spot, d.headroom, d.checkpoint_scale, tuple(trial)))
            if _better(s, best):
                best, extra = s, trial
    return best


def search_label(case_seed: int, jobs: int = 10):
    """The best decision the search finds for training case `case_seed`, as a policy.Rollout
    of one decision (None: no plan on demand, or its plan does not run)."""
    problem, market = case(case_seed)
    c = Case(problem, market, seeds=jobs)
    if not c.feasible or not math.isfinite(c.reference):
        return None
    best = grid_search(c)
    base = c.base(best.decision.spot, best.decision.headroom)
    d = best.decision
    if base.plan is not None and len(d.extra) < len(base.plan.stages):
        d = Decision(d.spot, d.headroom, d.checkpoint_scale,
                     tuple(d.extra) + (0,) * (len(base.plan.stages) - len(d.extra)))
    inp = inputs_of(c)
    stages = inp.stages(d.spot, d.headroom)
    return Rollout(case_seed, inp.types.numpy(), inp.case.numpy(), inp.offered.numpy(),
                   inp.names, {(d.spot, d.headroom): None if stages is None else stages.numpy()},
                   [d], [best.reward], [best.holds], c.jobs, c.jobs * problem.num_samples)


def imitate(policy: SpotPolicy, labels: list, *, epochs: int = 30, lr: float = 3e-3,
            batch: int = 16, seed: int = 0, log=None) -> float:
    """Cross-entropy on the labels' decisions (teacher forcing through the solver's plan:
    the stage features recorded for the label). Returns the last epoch's mean loss."""
    opt = torch.optim.Adam(policy.parameters(), lr=lr)
    rng = np.random.default_rng(seed)
    inputs = [r.inputs() for r in labels]
    last = math.nan
    policy.train()
    for epoch in range(epochs):
        order = rng.permutation(len(labels))
        total = 0.0
        for at in range(0, len(order), batch):
            idx = order[at:at + batch]
            loss = -torch.stack([act_on(policy, inputs[i], given=labels[i].decisions[0]).log_prob
                                 for i in idx]).mean()
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
            opt.step()
            total += float(loss.detach()) * len(idx)
        last = total / max(len(labels), 1)
        if log is not None:
            log({"epoch": epoch + 1, "loss": last})
    policy.eval()
    return last


__all__ = ["imitate", "search_label", "spot_sets"]
