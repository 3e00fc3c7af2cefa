"""Dropout masks seeded per (seed, step, microbatch, layer): the same mask whichever rank runs it.

    seed_graph(stage_gm)                        # a stage's aten.dropout nodes -> seeded_dropout
    with microbatch(seed, step, mu):            # the engine, around one microbatch's forward
        stage(env)
    with microbatch(seed, step, mu), EagerDropout():   # the oracle, around the eager module
        model(env)

A captured model's dropout draws from the global generator of whichever rank runs it, so a
pipelined or replicated run cannot equal one process. Here each dropout call takes its mask
from a fresh `torch.Generator` seeded by the run's seed, the step, the microbatch's index in
the step (0..m-1) and the layer: the call's ordinal among the model's dropout calls
(`tag_dropouts` numbers the captured graph's aten.dropout nodes in order, which is the order
the eager forward calls F.dropout). Replicas of a stage draw different masks for different
microbatches; a rank never touches the global generator. A model with no dropout does no RNG
work at all (no node is rewritten). Outside `microbatch` (profiling, scoring) the call is
torch's own dropout.

Knowingly left out: other random ops (F.dropout1d/2d/3d, alpha dropout, torch.bernoulli or
torch.rand in forward, attention's internal dropout_p) still draw from the rank's generator.
"""

from __future__ import annotations

import hashlib
import struct
from contextlib import contextmanager

import torch
from torch import fx
from torch.nn import functional as nnf
from torch.overrides import TorchFunctionMode

DROPOUT_OPS = (torch.ops.aten.dropout.default,)
LAYER = "heterps_dropout"
"""node.meta key: the dropout call's ordinal in the captured graph."""

_current: list = [None]
"""(seed, step, microbatch) of the forward running now, or None."""


@contextmanager
def microbatch(seed: int, step: int, mu: int):
    """Dropout inside draws the masks of microbatch `mu` (0..m-1) of step `step`."""
    before, _current[0] = _current[0], (seed, step, mu)
    try:
        yield
    finally:
        _current[0] = before


def mask_seed(seed: int, step: int, mu: int, layer: int) -> int:
    """The generator seed of one dropout call (a hash: nearby keys give unrelated masks)."""
    digest = hashlib.blake2b(struct.pack("<4q", seed, step, mu, layer), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def seeded_dropout(x: torch.Tensor, p: float, train: bool, layer: int) -> torch.Tensor:
    """F.dropout(x, p, train) with the mask of (the current microbatch, `layer`)."""
    if not train or p == 0:
        return x
    if _current[0] is None:
        return torch.dropout(x, p, train)
    if p == 1:
        return x * 0
    gen = torch.Generator(device=x.device).manual_seed(mask_seed(*_current[0], layer))
    mask = torch.empty_like(x).bernoulli_(1 - p, generator=gen).div_(1 - p)
    return x * mask


def tag_dropouts(gm: fx.GraphModule) -> int:
    """Number the captured graph's dropout nodes in order (node.meta); returns how many."""
    count = 0
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target in DROPOUT_OPS:
            n.meta[LAYER] = count
            count += 1
    return count


def seed_graph(gm: fx.GraphModule) -> int:
    """Make the tagged dropout nodes of a stage's graph call seeded_dropout; returns how many."""
    count = 0
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target in DROPOUT_OPS and LAYER in n.meta:
            x, p, train = (list(n.args) + [None] * 3)[:3]
            n.target = seeded_dropout
            n.args, n.kwargs = (x, p, train, n.meta[LAYER]), {}
            count += 1
    if count:
        gm.recompile()
    return count


class EagerDropout(TorchFunctionMode):
    """The eager module's F.dropout calls, numbered in call order from 0 at entry, as
    seeded_dropout: the oracle's masks are the engine's."""

    def __enter__(self):
        self.count = 0
        return super().__enter__()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is nnf.dropout or func is torch.dropout:
            x, *rest = args
            p = rest[0] if rest else kwargs.get("p", 0.5)
            train = rest[1] if len(rest) > 1 else kwargs.get("training", kwargs.get("train", True))
            self.count += 1
            return seeded_dropout(x, p, train, self.count - 1)
        return func(*args, **kwargs)
