"""The learned spot policy: two LSTMs and the exact solver between them (torch).

    policy = SpotPolicy()
    step = act(policy, case, generator=g)          # sample a decision (training, search)
    step = act(policy, case, greedy=True)          # its most likely decision
    step.decision, step.log_prob, step.entropy

1. A bidirectional LSTM reads the types in order of on-demand price (features.type_features):
   each type's output scores renting it on spot (Bernoulli), their mean with the case's
   features scores the headroom (HEADROOMS) and the checkpoint interval (CHECKPOINT_SCALES).
2. The exact solver plans on the chosen spot prices at the raised floor (decide.Case.base).
3. A second bidirectional LSTM reads that plan's stages (features.stage_features) and scores the
   units to add to each (EXTRA_UNITS).
A decision's log-probability is the sum over the three heads, so REINFORCE trains both LSTMs
through the solver without differentiating it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from heterps_sim.planner.learned.decide import (
    CHECKPOINT_SCALES,
    EXTRA_UNITS,
    HEADROOMS,
    Case,
    Decision,
)
from heterps_sim.planner.learned.features import (
    CASE_FEATURES,
    STAGE_FEATURES,
    TYPE_FEATURES,
    case_features,
    stage_features,
    tensor,
    type_features,
    type_order,
)


class SpotPolicy(nn.Module):
    def __init__(self, hidden: int = 32):
        super().__init__()
        self.hidden = hidden
        self.type_in = nn.Linear(TYPE_FEATURES + CASE_FEATURES, hidden)
        self.type_lstm = nn.LSTM(hidden, hidden, batch_first=True, bidirectional=True)
        self.spot = nn.Linear(2 * hidden, 1)
        self.choice = nn.Sequential(nn.Linear(2 * hidden + CASE_FEATURES, hidden), nn.Tanh(),
                                    nn.Linear(hidden, len(HEADROOMS) + len(CHECKPOINT_SCALES)))
        self.stage_in = nn.Linear(STAGE_FEATURES + CASE_FEATURES, hidden)
        self.stage_lstm = nn.LSTM(hidden, hidden, batch_first=True, bidirectional=True)
        self.extra = nn.Linear(2 * hidden, len(EXTRA_UNITS))
        with torch.no_grad():  # start near the exact solver's answer: no units added, Young's
            self.extra.bias.copy_(torch.tensor([2.0] + [0.0] * (len(EXTRA_UNITS) - 1)))
            bias = self.choice[-1].bias
            bias.zero_()
            bias[len(HEADROOMS) + CHECKPOINT_SCALES.index(1.0)] = 1.0

    def first(self, types: torch.Tensor, case: torch.Tensor):
        """(spot logits (M,), headroom logits, checkpoint logits) for the types in order."""
        x = torch.cat([types, case.expand(types.shape[0], -1)], dim=-1)
        out, _ = self.type_lstm(torch.tanh(self.type_in(x))[None])
        out = out[0]
        spot = self.spot(out)[:, 0]
        both = self.choice(torch.cat([out.mean(0), case]))
        return spot, both[:len(HEADROOMS)], both[len(HEADROOMS):]

    def second(self, stages: torch.Tensor, case: torch.Tensor) -> torch.Tensor:
        """(stages, EXTRA_UNITS) logits."""
        x = torch.cat([stages, case.expand(stages.shape[0], -1)], dim=-1)
        out, _ = self.stage_lstm(torch.tanh(self.stage_in(x))[None])
        return self.extra(out[0])


@dataclass
class Step:
    decision: Decision
    log_prob: torch.Tensor
    entropy: torch.Tensor
    stages: torch.Tensor | None = None
    """The stage features the second LSTM read (None: no plan for the first choices)."""


@dataclass
class Inputs:
    """What the policy reads of a case: its type and case features, which types the market
    offers on spot, the type names in the order read, and `stages(spot, headroom)`, the stage
    features of the plan the planner answers for a first decision (None: no plan)."""

    types: torch.Tensor
    case: torch.Tensor
    offered: torch.Tensor
    names: tuple
    stages: Callable


@dataclass
class Rollout:
    """One case's sampled decisions and their rewards, as a worker returns them: what the
    policy read (so the learner replays the decisions' log-probabilities without the case)."""

    case_seed: int
    types: np.ndarray
    case: np.ndarray
    offered: np.ndarray
    names: tuple
    stages: dict
    """(spot types, headroom) -> the stage features read for it (None: no plan)."""
    decisions: list
    rewards: list
    holds: list
    jobs: int
    simulated_samples: float

    def inputs(self) -> Inputs:
        def stages(spot, headroom):
            x = self.stages[(frozenset(spot), headroom)]
            return None if x is None else torch.from_numpy(x)
        return Inputs(torch.from_numpy(self.types), torch.from_numpy(self.case),
                      torch.from_numpy(self.offered), self.names, stages)


def inputs_of(case: Case) -> Inputs:
    """The policy's inputs for a live case, from the exact answers on mean times on demand and
    all on spot (its solves cached on the case)."""
    cached = getattr(case, "_inputs", None)
    if cached is None:
        problem, market = case.problem, case.market
        od = case.base(frozenset(), 0.0).plan
        sp = case.base(frozenset(market.spot), 0.0).plan
        types = type_features(problem, market,
                              od.units_by_type() if od is not None else {},
                              sp.units_by_type() if sp is not None else {})
        order = type_order(problem)

        def stages(spot, headroom):
            base = case.base(spot, headroom)
            if base.plan is None:
                return None
            return tensor(stage_features(problem, types, base.plan, base.stage_share, spot,
                                         headroom))
        cached = Inputs(tensor(types), tensor(case_features(problem, market)),
                        torch.tensor([problem.type_names[j] in market.spot for j in order]),
                        tuple(problem.type_names[j] for j in order), stages)
        case._inputs = cached
    return cached


def _pick(dist, greedy: bool, generator, quantile: float | None = None):
    if greedy:
        if isinstance(dist, torch.distributions.Bernoulli):
            return (dist.probs > 0.5).float()
        if quantile is not None:  # an ordinal choice: the least whose cumulative share >= q
            reached = torch.cumsum(dist.probs, -1) >= quantile - 1e-9
            return reached.float().argmax(-1)
        return dist.probs.argmax(-1)
    if isinstance(dist, torch.distributions.Bernoulli):
        return (torch.rand(dist.probs.shape, generator=generator) < dist.probs).float()
    return torch.multinomial(dist.probs, 1, generator=generator).squeeze(-1)


def act(policy: SpotPolicy, case: Case, *, greedy: bool = False,
        generator: torch.Generator | None = None, given: Decision | None = None,
        temperature: float = 1.0, headroom_quantile: float | None = None) -> Step:
    """One decision for `case`: sampled, the most likely one with `greedy`, or `given` (its
    log-probability under the policy: what a gradient step on a known decision needs)."""
    return act_on(policy, inputs_of(case), greedy=greedy, generator=generator, given=given,
                  temperature=temperature, headroom_quantile=headroom_quantile)


def act_on(policy: SpotPolicy, inp: Inputs, *, greedy: bool = False,
           generator: torch.Generator | None = None, given: Decision | None = None,
           temperature: float = 1.0, headroom_quantile: float | None = None) -> Step:
    """act on a case's inputs (a rollout's, replayed in another process, needs no case);
    `temperature` divides every logit (above 1: a search's samples spread wider than
    training's). `headroom_quantile` (with greedy): the headroom is the least whose
    cumulative probability reaches it, not the most likely one (headrooms are ordered, and a
    step too low misses the floor where a step too high only costs more)."""
    spot_logit, head_logit, ckpt_logit = (x / temperature
                                          for x in policy.first(inp.types, inp.case))
    # a type the market does not offer on spot is never put there (its logit is ignored)
    spot_logit = torch.where(inp.offered, spot_logit, torch.full_like(spot_logit, -30.0))
    d_spot = torch.distributions.Bernoulli(logits=spot_logit)
    d_head = torch.distributions.Categorical(logits=head_logit)
    d_ckpt = torch.distributions.Categorical(logits=ckpt_logit)
    if given is None:
        spot_pick = _pick(d_spot, greedy, generator)
        head_pick = _pick(d_head, greedy, generator, headroom_quantile)
        ckpt_pick = _pick(d_ckpt, greedy, generator)
    else:
        spot_pick = torch.tensor([float(n in given.spot) for n in inp.names])
        head_pick = torch.tensor(HEADROOMS.index(given.headroom))
        ckpt_pick = torch.tensor(CHECKPOINT_SCALES.index(given.checkpoint_scale))
    spot = frozenset(n for n, s in zip(inp.names, spot_pick.tolist()) if s > 0)
    headroom = HEADROOMS[int(head_pick)]
    log_prob = ((d_spot.log_prob(spot_pick) * inp.offered).sum() + d_head.log_prob(head_pick)
                + d_ckpt.log_prob(ckpt_pick))
    entropy = (d_spot.entropy() * inp.offered).sum() + d_head.entropy() + d_ckpt.entropy()
    extra: tuple = ()
    stages = inp.stages(spot, headroom)
    if stages is not None:
        d_extra = torch.distributions.Categorical(
            logits=policy.second(stages, inp.case) / temperature)
        if given is None:
            extra_pick = _pick(d_extra, greedy, generator)
        else:
            n = stages.shape[0]
            extra_pick = torch.tensor([EXTRA_UNITS.index(e) for e in
                                       (tuple(given.extra) + (0,) * n)[:n]])
        extra = tuple(EXTRA_UNITS[int(i)] for i in extra_pick.tolist())
        log_prob = log_prob + d_extra.log_prob(extra_pick).sum()
        entropy = entropy + d_extra.entropy().sum()
    return Step(Decision(spot, headroom, CHECKPOINT_SCALES[int(ckpt_pick)], extra),
                log_prob, entropy, stages)


__all__ = ["Inputs", "Rollout", "SpotPolicy", "Step", "act", "act_on", "inputs_of"]
