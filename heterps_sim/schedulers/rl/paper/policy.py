"""The LSTM policy: reads the layers in order and emits a resource type per layer (torch).

    step t:  x_t = relu(W [layer_t, mean_j E_tj, E_{t-1, a_{t-1}}])      (E_{-1,.} = 0)
             h_t = LSTM(x_t, h_{t-1})
             score_tj = <Q h_t, K E_tj> / sqrt(d) + b(E_tj) + <D h_t, dyn_tj>
             a_t ~ softmax(score_t) over the allowed types (masked ones get -1e9)

E_tj = encoder(type features of layer t on type j) (schedulers/rl/paper/features.py), so types are never indexed by
position: a policy trained on problems with M types reads problems with any M and any L (what
carries over is what the features say about a type, not its identity). dyn_tj are the dynamic
features (is j the previous layer's type; the boundary time a switch to j adds), computed here
in torch exactly as features.dynamic_features does in numpy.

Sampling runs the LSTM step by step without gradients; `log_prob` re-runs the whole sequence of
the sampled actions at once (teacher forcing: the inputs depend only on earlier actions) for
the REINFORCE gradient, which is where the time goes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from heterps_sim.schedulers.rl.paper.features import (
    NUM_DYNAMIC_FEATURES,
    NUM_LAYER_FEATURES,
    NUM_TYPE_FEATURES,
    Encoding,
    FeatureNorm,
)

MASKED = -1e9


@dataclass(frozen=True)
class ProblemTensors:
    """One problem's normalised features as tensors (built once per problem)."""

    layer: torch.Tensor
    """(L, NUM_LAYER_FEATURES)"""
    types: torch.Tensor
    """(L, M, NUM_TYPE_FEATURES)"""
    mask: torch.Tensor
    """(L, M) bool"""
    switch: torch.Tensor
    """(L,) boundary bytes into layer i over the budget (0 for i = 0)"""
    network: torch.Tensor
    """(M,) bytes/s"""
    latency: float

    @classmethod
    def build(cls, enc: Encoding, norm: FeatureNorm) -> ProblemTensors:
        layer, types = norm.apply(enc)
        return cls(torch.from_numpy(layer), torch.from_numpy(types),
                   torch.from_numpy(enc.mask.copy()),
                   torch.from_numpy(enc.switch_bytes.astype(np.float64)),
                   torch.from_numpy(enc.network.astype(np.float64)), enc.latency_over_budget)

    @property
    def num_layers(self) -> int:
        return self.layer.shape[0]


def dynamic(pt: ProblemTensors, layers: torch.Tensor, prev: torch.Tensor) -> torch.Tensor:
    """(..., M, NUM_DYNAMIC_FEATURES) for layer indices `layers` and previous types `prev`
    (same shape; -1 = no previous layer)."""
    num_m = pt.network.shape[0]
    has_prev = prev >= 0
    p = prev.clamp(min=0)
    is_prev = nn.functional.one_hot(p, num_m).to(torch.float32) * has_prev[..., None]
    bw = torch.minimum(pt.network[p][..., None], pt.network)
    seconds = pt.switch[layers][..., None] / bw + pt.latency
    switch = (torch.log10(seconds + 1e-6) / 3.0).clamp(-10, 10).to(torch.float32)
    switch = switch * (1 - is_prev) * has_prev[..., None]
    return torch.stack([is_prev, switch], dim=-1)


class LSTMPolicy(nn.Module):
    def __init__(self, hidden: int = 128, embed: int = 64):
        super().__init__()
        self.hidden, self.embed = hidden, embed
        self.type_encoder = nn.Sequential(nn.Linear(NUM_TYPE_FEATURES, embed), nn.Tanh(),
                                          nn.Linear(embed, embed), nn.Tanh())
        self.inp = nn.Linear(NUM_LAYER_FEATURES + 2 * embed, hidden)
        self.lstm = nn.LSTM(hidden, hidden, batch_first=True)
        self.query = nn.Linear(hidden, embed)
        self.key = nn.Linear(embed, embed, bias=False)
        self.type_bias = nn.Linear(embed, 1)
        self.dyn = nn.Linear(hidden, NUM_DYNAMIC_FEATURES)

    # -- pieces -----------------------------------------------------------------------------
    def _types(self, pt: ProblemTensors):
        """(E, pooled, keys, bias): type embeddings (L, M, d), their mean over allowed types
        (L, d), keys (L, M, d) and per-type biases (L, M)."""
        e = self.type_encoder(pt.types) * pt.mask[..., None]
        count = pt.mask.sum(dim=1, keepdim=True).clamp(min=1)
        return e, e.sum(dim=1) / count, self.key(e), self.type_bias(e)[..., 0]

    def _logits(self, h, keys, bias, dyn, mask):
        """h (B, [T,] H); keys (.., M, d); dyn (B, [T,] M, 2) -> masked logits (B, [T,] M)."""
        q = self.query(h)
        if q.dim() == 3:  # a whole sequence: one (B, d) x (d, M) product per layer
            score = torch.einsum("bld,lmd->blm", q, keys)
        else:
            score = q @ keys.T
        score = score / math.sqrt(self.embed) + bias
        score = score + (self.dyn(h)[..., None, :] * dyn).sum(-1)
        return score.masked_fill(~mask, MASKED)

    # -- sampling (no gradient) -------------------------------------------------------------
    @torch.no_grad()
    def sample(self, pt: ProblemTensors, batch: int, generator: torch.Generator | None = None,
               greedy: bool = False) -> np.ndarray:
        """(batch, L) int64 type indices: sampled, or the argmax at every step if greedy."""
        e, pooled, keys, bias = self._types(pt)
        num_l = pt.num_layers
        prev = torch.full((batch,), -1, dtype=torch.long)
        prev_emb = torch.zeros(batch, self.embed)
        h = c = torch.zeros(batch, self.hidden)
        lstm = self.lstm
        out = torch.empty(batch, num_l, dtype=torch.long)
        for t in range(num_l):
            x = torch.cat([pt.layer[t].expand(batch, -1), pooled[t].expand(batch, -1), prev_emb],
                          dim=-1)
            # one step of self.lstm (the cell op skips oneDNN's ~1 s set-up on first use)
            h, c = torch.lstm_cell(torch.relu(self.inp(x)), (h, c), lstm.weight_ih_l0,
                                   lstm.weight_hh_l0, lstm.bias_ih_l0, lstm.bias_hh_l0)
            dyn = dynamic(pt, torch.full_like(prev, t), prev)
            logits = self._logits(h, keys[t], bias[t], dyn, pt.mask[t])
            if greedy:
                a = logits.argmax(dim=-1)
            else:
                a = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)[:, 0]
            out[:, t] = a
            prev, prev_emb = a, e[t, a]
        return out.numpy()

    # -- the REINFORCE terms (with gradient) ------------------------------------------------
    def log_prob(self, pt: ProblemTensors, actions: np.ndarray):
        """(log pi(plan), entropy summed over the layers), each (B,), for given plans."""
        a = torch.as_tensor(actions, dtype=torch.long)
        batch, num_l = a.shape
        e, pooled, keys, bias = self._types(pt)
        prev_emb = torch.zeros(batch, num_l, self.embed)
        if num_l > 1:
            prev_emb[:, 1:] = e[torch.arange(num_l - 1)[None, :], a[:, :-1]]
        x = torch.cat([pt.layer.expand(batch, -1, -1), pooled.expand(batch, -1, -1), prev_emb],
                      dim=-1)
        h, _ = self.lstm(torch.relu(self.inp(x)))
        prev = torch.cat([torch.full((batch, 1), -1, dtype=torch.long), a[:, :-1]], dim=1)
        dyn = dynamic(pt, torch.arange(num_l).expand(batch, -1), prev)
        logits = self._logits(h, keys, bias, dyn, pt.mask)
        logp_all = torch.log_softmax(logits, dim=-1)
        logp = logp_all.gather(-1, a[..., None])[..., 0].sum(dim=1)
        entropy = -(logp_all.exp() * logp_all).sum(dim=-1).sum(dim=1)
        return logp, entropy
