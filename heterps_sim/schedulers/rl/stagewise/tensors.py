"""One problem's candidate stages as compact tensors, and the lookahead's regret (torch).

Only valid candidates are kept: at start layer s, candidate slot c (0 <= c < C, C = the most
valid candidates any start has) is flat candidate `cand[s, c]` = w * M + j of schedulers/rl/stagewise/segments.py
(layers s..s+w on type j); slots past a start's count are padding (`present` false). On
random problems ~15% of the W x M candidates are valid (long runs hit unrunnable pairs), so
every per-decision tensor is (rows, C) rather than (rows, W * M).

The regret is what the relaxed lookahead (segments.lookahead) thinks a candidate costs: with
the plan's earlier stages summing to rate `paid` and the slowest at throughput `slowest`, the
plan through candidate c is estimated at min over levels theta of
(paid + ahead(theta, c)) / min(slowest, throughput(c), theta), and regret = log10(estimate /
the row's least estimate), in [0, 6]. The policy subtracts a learned multiple of it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from heterps_sim.schedulers.rl.stagewise.segments import BASE, SegmentEncoding


@dataclass(frozen=True)
class SegmentTensors:
    features: torch.Tensor
    """(L, C, F), 0 on padding"""
    present: torch.Tensor
    """(L, C) bool: a valid candidate (not padding)"""
    ok: torch.Tensor
    """(L, C) bool: it meets TL alone within its cap (segments.SegmentEncoding.ok)"""
    cand: torch.Tensor
    """(L, C) int64 flat candidate w * M + j (0 on padding)"""
    rate: torch.Tensor
    """(L, C) its rate alone at TL, in the lookahead's unit (inf where not ok)"""
    throughput: torch.Tensor
    """(L, C) its throughput at those units over TL"""
    ahead: torch.Tensor
    """(LEVELS, L, C) rate + the relaxed cost to go after it, per level TL x BASE^l"""
    num_layers: int
    num_types: int

    @classmethod
    def build(cls, enc: SegmentEncoding) -> SegmentTensors:
        num_l, num_m = enc.num_layers, enc.num_types
        valid = enc.valid.reshape(num_l, -1)
        counts = valid.sum(axis=1)
        width = max(1, int(counts.max()))
        present = np.arange(width)[None, :] < counts[:, None]
        cand = np.zeros((num_l, width), np.int64)
        cand[present] = np.nonzero(valid)[1]  # row-major: each start's candidates in order
        rows = np.arange(num_l)[:, None]

        def pick(x, fill):
            flat = x.reshape(num_l, valid.shape[1], *x.shape[3:])
            return np.where(present.reshape(present.shape + (1,) * (flat.ndim - 2)),
                            flat[rows, cand], fill)

        ahead = enc.rate[None] + enc.rest[..., None]
        ahead = np.stack([pick(a, np.inf) for a in ahead])
        return cls(torch.from_numpy(pick(enc.features, 0.0).astype(np.float32)),
                   torch.from_numpy(present), torch.from_numpy(pick(enc.ok, False)),
                   torch.from_numpy(cand),
                   torch.from_numpy(pick(enc.rate, np.inf).astype(np.float32)),
                   torch.from_numpy(pick(enc.throughput, 0.0).astype(np.float32)),
                   torch.from_numpy(ahead.astype(np.float32)), num_l, num_m)

    # -- what a decision may choose ---------------------------------------------------------
    def allowed(self, starts: torch.Tensor, prev: torch.Tensor) -> torch.Tensor:
        """(N, C): `ok` candidates of a type other than `prev` (-1: none); where none is, any
        valid one of another type; where none is, any valid one."""
        other = (self.cand[starts] % self.num_types) != prev[:, None]
        valid = self.present[starts]
        mask = self.ok[starts] & other
        mask = torch.where(mask.any(dim=1, keepdim=True), mask, valid & other)
        return torch.where(mask.any(dim=1, keepdim=True), mask, valid)

    def step(self, starts: torch.Tensor, slots: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """(next start, type, rate, throughput) of decisions (starts, slots); where starts < 0:
        (-1, -1, 0, inf)."""
        used = starts >= 0
        s, c = starts.clamp(min=0), slots.clamp(min=0)
        flat = self.cand[s, c]
        return (torch.where(used, s + flat // self.num_types + 1, -1),
                torch.where(used, flat % self.num_types, -1),
                torch.where(used, self.rate[s, c], 0.0),
                torch.where(used, self.throughput[s, c], float("inf")))

    @torch.no_grad()
    def regret(self, starts: torch.Tensor, paid: torch.Tensor, slowest: torch.Tensor):
        """(N, C) the lookahead's regret (module docstring) for rows at `starts`."""
        reach = torch.minimum(slowest[:, None], self.throughput[starts])
        est = None
        for level in range(self.ahead.shape[0]):
            cost = (self.ahead[level][starts] + paid[:, None]) / reach.clamp(max=BASE ** level)
            est = cost if est is None else torch.minimum(est, cost)
        out = torch.log10(est / est.min(dim=1, keepdim=True).values)
        return torch.nan_to_num(out, nan=0.0, posinf=6.0).clamp(0.0, 6.0)

    # -- decisions <-> plans ----------------------------------------------------------------
    def assignments(self, starts: np.ndarray, slots: np.ndarray) -> np.ndarray:
        """(B, L) type per layer from decision sequences (B, T) (-1 padding)."""
        out = np.zeros((starts.shape[0], self.num_layers), np.int64)
        cand = self.cand.numpy()
        for r, t in zip(*np.nonzero(starts >= 0)):
            s = starts[r, t]
            flat = cand[s, slots[r, t]]
            out[r, s:s + flat // self.num_types + 1] = flat % self.num_types
        return out

    def decisions(self, segments: list[tuple[int, int, int]]) -> tuple[np.ndarray, np.ndarray]:
        """(starts, slots), each (1, T), of a plan given as [(start, w, type)] stages; a
        ValueError when a stage is not one of the candidates (a stage too long, or one that
        cannot run)."""
        cand = self.cand.numpy()
        starts, slots = [], []
        for s, w, j in segments:
            row = cand[s, :int(self.present[s].sum())]
            c = int(np.searchsorted(row, w * self.num_types + j))
            if c >= len(row) or row[c] != w * self.num_types + j:
                raise ValueError(f"stage ({s}, {w}, {j}) is not a candidate")
            starts.append(s)
            slots.append(c)
        return np.array([starts]), np.array([slots])
