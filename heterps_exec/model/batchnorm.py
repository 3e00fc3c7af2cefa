"""BatchNorm running statistics of a replicated stage: as one process running the microbatches.

    stats = RunningStats.of(stage_module, m)    # None: no training BatchNorm in the stage
    with stats.microbatch(mu):                   # around each forward (mu's index: mu mod m)
        stage(env)
    stats.sync(group, comm_device)               # at the step end, with the gradients

    # async (no flush: a replica runs step t + 1's forwards before step t ends): the terms
    # are kept per step and travel in that step's gradient all-reduce (runtime/versions.py)
    with stats.microbatch(mu, step):
        ...
    flat, forwards = stats.take(step, comm_device)   # summed over the replicas, then
    stats.apply(flat, forwards)                      # in step order

One process trains a step microbatch by microbatch (runtime/reference.py): BatchNorm
normalises each microbatch with that microbatch's statistics, and its running statistics
take m updates in microbatch order, r <- (1 - a) r + a s_i (a: the momentum). The update is
linear, so after the step

    r' = (1 - a)^m r + sum_i (1 - a)^(m - 1 - i) a s_i

and each replica can compute its own microbatches' terms whatever their order: the forward
runs with the running buffers zeroed (training mode normalises with batch statistics, so the
output is the same) and leaves a s_i in them; the buffers are put back and the weighted terms
summed. At the step end the replicas all-reduce their sums and every replica sets r' (and
num_batches_tracked += m): the running statistics are single-process training's on every
replica, so the saved state (replica 0's) holds them, whatever the layout, schedule order or
speed-aware sharing. A stage with one replica needs none of this (its forwards run in order).

This is the `exact` rule, the default of the scenario's model.batchnorm. DDP's rule
(replica 0's buffers at each step: `broadcast`) keeps only replica 0's microbatches, so its
saved statistics depend on the layout; SyncBatchNorm's (`sync`) normalises over several
microbatches. Both are offered as options (model/norm_rules.py).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

BATCH_NORM_OPS = (torch.ops.aten.batch_norm.default,)


def training_norm_nodes(gm):
    """(node, owner module path) of each BatchNorm of a captured graph that trains with
    running statistics (in graph order)."""
    for n in gm.graph.nodes:
        if n.op != "call_function" or n.target not in BATCH_NORM_OPS:
            continue
        mean, training = n.args[3], n.args[5]
        if training and mean is not None:
            yield n, mean.target.rpartition(".")[0]


@dataclass
class _Norm:
    mean: torch.Tensor
    var: torch.Tensor
    momentum: float
    count: torch.Tensor | None
    """num_batches_tracked (None when the module has none)."""


class RunningStats:
    def __init__(self, norms: list[_Norm], m: int) -> None:
        self.norms, self.m = norms, m
        self.sums: dict[int, list[torch.Tensor]] = {}
        """Per step: this replica's weighted terms, mean and var of each norm in turn."""
        self.forwards: dict[int, int] = {}
        """Per step: this replica's forwards (each added one to num_batches_tracked)."""

    @classmethod
    def of(cls, module: nn.Module, m: int) -> RunningStats | None:
        """The training BatchNorms of a user stage's graph (None if it has none)."""
        segment = module.__dict__.get("segment")
        if segment is None:
            return None
        norms = []
        for n, owner in training_norm_nodes(segment.gm):
            _, _, _, mean, var, _, momentum, *_ = n.args
            if not isinstance(momentum, float):
                raise ValueError(f"BatchNorm at {owner!r} has "
                                 "momentum=None (a cumulative average): a replicated stage "
                                 "cannot sum its running statistics; set a momentum")
            count = f"{owner}.num_batches_tracked" if owner else "num_batches_tracked"
            buffers = dict(module.named_buffers())
            norms.append(_Norm(buffers[mean.target], buffers[var.target], momentum,
                               buffers.get(count)))
        return cls(norms, m) if norms else None

    @contextmanager
    def microbatch(self, mu: int, step: int = 0):
        """Run one forward with the running buffers zeroed; add its weighted term to
        `step`'s (the flushed schedules keep one step's terms at a time: step 0)."""
        # through .data: autograd saved the buffers for this and earlier microbatches'
        # backwards and would refuse a version bump (BatchNorm's own update makes none)
        kept = [(t.data, t.clone()) for n in self.norms for t in (n.mean, n.var)]
        for t, _ in kept:
            t.zero_()
        yield
        if step not in self.sums:
            self.sums[step] = [torch.zeros_like(t) for t, _ in kept]
        sums = self.sums[step]
        j = 0
        for n in self.norms:
            weight = (1 - n.momentum) ** (self.m - 1 - mu % self.m)
            for t in (n.mean, n.var):
                sums[j].add_(t, alpha=weight)
                j += 1
        for t, before in kept:
            t.copy_(before)
        self.forwards[step] = self.forwards.get(step, 0) + 1

    def take(self, step: int, comm_device: torch.device) -> tuple[torch.Tensor, int]:
        """(`step`'s terms as one flat float32 tensor, to be summed over the replicas; this
        replica's forwards of it), forgotten here (zeros for a step it ran no forward of)."""
        sums = self.sums.pop(step, None)
        if sums is None:
            sums = [torch.zeros_like(t) for n in self.norms for t in (n.mean, n.var)]
        flat = torch.cat([x.reshape(-1).to(comm_device, torch.float32) for x in sums])
        return flat, self.forwards.pop(step, 0)

    def size(self) -> int:
        """take()'s length."""
        return sum(2 * n.mean.numel() for n in self.norms)

    def apply(self, summed: torch.Tensor, forwards: int) -> None:
        """Set the statistics to one step's end from the replicas' summed terms (steps in
        order); `forwards`: this replica's forwards of that step."""
        offset = 0
        with torch.no_grad():
            for n in self.norms:
                decay = (1 - n.momentum) ** self.m
                for t in (n.mean, n.var):
                    k = t.numel()
                    # through .data, as microbatch(): under async a later step's forwards
                    # have saved the buffers for their backwards (training mode reads the
                    # batch's statistics there, never these)
                    t.data.mul_(decay).add_(summed[offset:offset + k].reshape(t.shape).to(t))
                    offset += k
                if n.count is not None:  # each forward added one; one process adds m
                    n.count.add_(self.m - forwards)

    def sync(self, group, comm_device: torch.device) -> None:
        """Sum the replicas' terms and set every replica's statistics to the step's."""
        flat, forwards = self.take(0, comm_device)
        dist.all_reduce(flat, group=group)
        self.apply(flat, forwards)
