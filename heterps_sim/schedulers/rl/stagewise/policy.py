"""The improved `rl` policy: an LSTM that builds a plan one stage at a time (torch).

    decision t (at layer s_t, previous stage type p_t):
        x_t   = relu(W [features of the candidate chosen at t-1, is_first])
        h_t   = LSTM(x_t, h_{t-1})
        score(c) = <Q h_t, E(c)> / sqrt(d) + b(c) - softplus(u . h_t) * 20 * regret_t(c)
        c ~ softmax(score) over the allowed candidates c = (w, j); s_{t+1} = s_t + w + 1
E and b come from one small MLP over each candidate stage's features (schedulers/rl/stagewise/segments.py), computed
once per problem, so the policy reads any L and M (types are never indexed by position).
regret_t is the relaxed lookahead's estimate of how much dearer the plan gets through c than
through the best candidate (schedulers/rl/stagewise/tensors.py); it depends on the stages chosen so far, so the
LSTM learns how far to trust it. Allowed: SegmentTensors.allowed.

Scores of rows at different s are products with different E[s]: rows are grouped by s (one
(n, d) x (d, C) product per distinct s), which keeps memory at (rows, C) floats.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from heterps_sim.schedulers.rl.stagewise.segments import NUM_FEATURES
from heterps_sim.schedulers.rl.stagewise.tensors import SegmentTensors

MASKED = -1e9


class SegmentPolicy(nn.Module):
    def __init__(self, hidden: int = 64, embed: int = 16, encoder: int = 32):
        super().__init__()
        self.hidden, self.embed, self.encoder = hidden, embed, encoder
        self.cand = nn.Sequential(nn.Linear(NUM_FEATURES, encoder), nn.Tanh(),
                                  nn.Linear(encoder, encoder), nn.Tanh(),
                                  nn.Linear(encoder, embed + 1))
        self.inp = nn.Linear(NUM_FEATURES + 1, hidden)
        self.lstm = nn.LSTM(hidden, hidden, batch_first=True)
        self.query = nn.Linear(hidden, embed)
        self.look = nn.Linear(hidden, 1)
        """how much the relaxed lookahead's regret costs in score (SegmentTensors.regret)"""
        nn.init.constant_(self.look.bias, 1.0)

    def table(self, pt: SegmentTensors):
        """(E, b): per start layer, the candidate embeddings (C, d) and biases (C,)."""
        out = self.cand(pt.features)
        return out[..., :-1].unbind(0), out[..., -1].unbind(0)

    def _input(self, pt: SegmentTensors, starts: torch.Tensor, slots: torch.Tensor):
        """LSTM input for rows whose previous decision was (starts, slots); -1: first."""
        first = starts < 0
        feats = pt.features[starts.clamp(min=0), slots.clamp(min=0)] * (~first)[..., None]
        return torch.relu(self.inp(torch.cat([feats, first[..., None].float()], dim=-1)))

    def logits(self, pt: SegmentTensors, table, h, starts, prev, regret) -> torch.Tensor:
        """(N, C) masked scores for rows with hidden h (N, H) at `starts` after `prev`, given
        the lookahead's regret of every candidate (SegmentTensors.regret)."""
        emb, bias = table  # tuples of L tensors (unbind: one backward op, not one per use)
        q = self.query(h) / math.sqrt(self.embed)
        order = torch.argsort(starts, stable=True)
        groups = torch.unique_consecutive(starts[order], return_counts=True)
        parts, lo = [], 0
        for s, n in zip(groups[0].tolist(), groups[1].tolist()):
            rows = order[lo:lo + n]
            parts.append(q[rows] @ emb[s].T + bias[s])
            lo += n
        if not parts:
            return torch.empty(0, pt.present.shape[1])
        out = torch.cat(parts)[torch.argsort(order)]
        weight = nn.functional.softplus(self.look(h)) * 20.0
        out = out - weight * regret
        return out.masked_fill(~pt.allowed(starts, prev), MASKED)

    @torch.no_grad()
    def sample(self, pt: SegmentTensors, batch: int, generator: torch.Generator | None = None,
               greedy: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(assignments (B, L), starts (B, T), slots (B, T)); unused steps are -1."""
        table = self.table(pt)
        num_l = pt.num_layers
        s = torch.zeros(batch, dtype=torch.long)
        prev = torch.full((batch,), -1, dtype=torch.long)
        last_s = torch.full((batch,), -1, dtype=torch.long)
        last_a = torch.full((batch,), -1, dtype=torch.long)
        paid = torch.zeros(batch)
        slowest = torch.full((batch,), float("inf"))
        h = c = torch.zeros(batch, self.hidden)
        lstm = self.lstm
        starts, actions = [], []
        while bool((s < num_l).any()):
            active = s < num_l
            h, c = torch.lstm_cell(self._input(pt, last_s, last_a), (h, c), lstm.weight_ih_l0,
                                   lstm.weight_hh_l0, lstm.bias_ih_l0, lstm.bias_hh_l0)
            rows = torch.nonzero(active)[:, 0]
            regret = pt.regret(s[rows], paid[rows], slowest[rows])
            logit = self.logits(pt, table, h[rows], s[rows], prev[rows], regret)
            if greedy:
                a = logit.argmax(dim=1)
            else:
                # inverse CDF (torch.multinomial spent ~40 ms per call on 256 x 4096 here)
                cdf = torch.cumsum(torch.softmax(logit, dim=1), dim=1)
                u = torch.rand(len(rows), 1, generator=generator) * cdf[:, -1:]
                a = torch.searchsorted(cdf, u)[:, 0].clamp(max=cdf.shape[1] - 1)
            step_s = torch.full((batch,), -1, dtype=torch.long)
            step_a = torch.full((batch,), -1, dtype=torch.long)
            step_s[rows], step_a[rows] = s[rows], a
            nxt, typ, rate, thr = pt.step(step_s, step_a)
            paid, slowest = paid + rate, torch.minimum(slowest, thr)
            starts.append(step_s)
            actions.append(step_a)
            last_s, last_a = torch.where(active, step_s, last_s), torch.where(active, step_a, last_a)
            prev, s = torch.where(active, typ, prev), torch.where(active, nxt, s)
        starts, actions = torch.stack(starts, 1).numpy(), torch.stack(actions, 1).numpy()
        return pt.assignments(starts, actions), starts, actions

    @staticmethod
    def regret(pt: SegmentTensors, starts: np.ndarray, actions: np.ndarray) -> torch.Tensor:
        """The lookahead regret (SegmentTensors.regret) at every decision of the sequences."""
        st = torch.as_tensor(starts, dtype=torch.long)
        ac = torch.as_tensor(actions, dtype=torch.long)
        pad = torch.full((st.shape[0], 1), -1, dtype=torch.long)
        _, _, rate, thr = pt.step(torch.cat([pad, st[:, :-1]], 1), torch.cat([pad, ac[:, :-1]], 1))
        used = st >= 0
        paid = torch.cumsum(rate, dim=1)[used]
        slowest = torch.cummin(thr, dim=1).values[used]
        return pt.regret(st[used], paid, slowest)

    def log_prob(self, pt: SegmentTensors, starts: np.ndarray, actions: np.ndarray,
                 regret: torch.Tensor | None = None):
        """Per decision: (row of each decision, log pi, entropy), for given decision sequences
        (B, T) with -1 padding; teacher forcing (the inputs depend only on earlier decisions).
        `regret`: self.regret(pt, starts, actions), if already computed."""
        st = torch.as_tensor(starts, dtype=torch.long)
        ac = torch.as_tensor(actions, dtype=torch.long)
        batch = st.shape[0]
        pad = torch.full((batch, 1), -1, dtype=torch.long)
        prev_s, prev_a = torch.cat([pad, st[:, :-1]], 1), torch.cat([pad, ac[:, :-1]], 1)
        h, _ = self.lstm(self._input(pt, prev_s, prev_a))
        used = st >= 0
        rows = torch.nonzero(used)[:, 0]
        prev = pt.step(prev_s, prev_a)[1][used]
        if regret is None:
            regret = self.regret(pt, starts, actions)
        logit = self.logits(pt, self.table(pt), h[used], st[used], prev, regret)
        logp_all = torch.log_softmax(logit, dim=1)
        logp = logp_all.gather(1, ac[used][:, None])[:, 0]
        p = logp_all.exp()
        entropy = -(p * torch.where(p > 0, logp_all, torch.zeros_like(logp_all))).sum(1)
        return rows, logp, entropy
