"""BatchNorm in a replicated stage: the scenario's `model.batchnorm` rule.

    model:
      batchnorm: exact | broadcast | sync        # default exact

A stage on k replicas runs microbatch mu on replica mu mod k. What its BatchNorms compute:

    exact      model/batchnorm.py: each microbatch normalised by its own statistics; the
               running statistics summed over the replicas to single-process training's
               (m updates per step, in order), whatever the layout. The default.
    broadcast  DistributedDataParallel's broadcast_buffers: at each step start every
               replica takes replica 0's buffers (BroadcastBuffers, DDP's own coalesced
               broadcast), so the saved statistics are replica 0's chain: its own
               microbatches only (num_batches_tracked counts its forwards).
    sync       torch.nn.SyncBatchNorm's: round j's k microbatches (j*k .. j*k+k-1, one per
               replica, each replica's j-th forward) are normalised by the round's statistics,
               forward and backward; the running statistics take one update per round.

        step of m = 4 on k = 2:    replica 0: F0 F2     replica 1: F1 F3   (k | m)
        exact       4 updates: s0, s1, s2, s3          (one process's)
        broadcast   2 updates: s0, s2                  (replica 0's)
        sync        2 updates: s(0+1), s(2+3)          (the rounds')

A stage with one replica runs plain BatchNorm under every rule. runtime/reference.py's
oracle computes each rule in one process (runtime/reference_norms.py).

sync does its arithmetic here (SyncNorm): torch's own SyncBatchNorm function calls
batch_norm_stats & co., which have CUDA kernels only, and the engine's stages run on CPUs
over gloo. Its statistics are sums all-reduced by a differentiable all-reduce (_GroupSum,
torch.distributed.nn's), so autograd gives the backward (the gradients of the round's mean and variance
all-reduced, as SyncBatchNorm's backward does). The collectives of a round's forward and
backward match up because the replicas of a stage walk the same action sequence, shifted
by their replica index (same_rounds); under 1f1b some replica counts give a stage's replicas
different warm-ups, and sync refuses those plans.

Refused (`refusal`, one line at launch): broadcast and sync under async (its steps overlap,
so there is no step start to broadcast at, and a round's forwards would wait on each other
across the stream) and with --share speed (the routing follows measured timings: no oracle
could know replica 0's microbatches, and a round needs one microbatch per replica); sync
when k does not divide m (a round would be short) or when the replicas' walks differ.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from heterps_exec.model.batchnorm import training_norm_nodes

BUCKET_BYTES = 250 * 1024 * 1024
"""DDP's broadcast bucket (its broadcast_bucket_size)."""


def rule_of(spec) -> str:
    """The run's rule (zoo and YAML models have no BatchNorm: exact)."""
    return (spec.user_model or {}).get("section", {}).get("batchnorm", "exact")


def refusal(rule: str, norm_stages: dict[str, int], plan, share: str) -> str:
    """"" when the plan can run `rule`; else one line saying why not. `norm_stages`: the
    stage of each BatchNorm (owner module -> stage, user_model.run_entry)."""
    if rule == "exact":
        return ""
    replicated = sorted({g for g in norm_stages.values() if plan.stages[g].num_replicas > 1})
    if not replicated:
        return ""  # one replica per BatchNorm stage: plain BatchNorm under every rule
    if plan.schedule == "async":
        return (f"model.batchnorm: {rule} runs under gpipe or 1f1b (async steps overlap: no "
                "step start to share buffers at, no round of forwards side by side); use "
                "exact, or a flushed schedule")
    if share == "speed":
        return (f"model.batchnorm: {rule} needs the equal split (--share speed routes by "
                "measured timings, so replica 0's microbatches and the rounds are not known "
                "ahead); use exact, or --share equal")
    if rule == "sync":
        m = plan.num_microbatches
        for g in replicated:
            k = plan.stages[g].num_replicas
            if m % k:
                return (f"model.batchnorm: sync needs each replicated stage's num_replicas to "
                        f"divide num_microbatches (a round runs one microbatch per replica); "
                        f"stage {g} has {k} replicas, num_microbatches is {m}")
            if not same_rounds(plan, g):
                replicas = [s.num_replicas for s in plan.stages]
                return (f"model.batchnorm: sync needs the replicas of stage {g} to run their "
                        f"rounds in one order; under {plan.schedule} with replicas {replicas} "
                        "their warm-ups differ, so their statistics' collectives would pair up "
                        "wrongly; use gpipe, other replica counts, or exact")
    return ""


def same_rounds(plan, g: int) -> bool:
    """Whether every replica of stage g walks the same sequence of (forward or backward,
    round): the n-th collective of each is then the same round's (sync's precondition)."""
    from heterps_exec.runtime.layout import Layout
    from heterps_sim.core.lanes import STEP
    layout = Layout(tuple(s.num_replicas for s in plan.stages))
    k = layout.replicas[g]
    walks = [[(code, mu // k if code != STEP else mu)
              for code, mu in layout.actions(plan.schedule, g, r, plan.num_microbatches, 1)]
             for r in range(k)]
    return all(w == walks[0] for w in walks)


class BroadcastBuffers:
    """A replicated stage's BatchNorm buffers, replaced by replica 0's at each step start."""

    def __init__(self, buffers: list[torch.Tensor], group) -> None:
        self.buffers, self.group = buffers, group

    @classmethod
    def of(cls, module: nn.Module, group) -> BroadcastBuffers | None:
        """The stage's running statistics and counts (None: no training BatchNorm)."""
        segment = module.__dict__.get("segment")
        if segment is None:
            return None
        named = dict(module.named_buffers())
        buffers = []
        for _, owner in training_norm_nodes(segment.gm):
            prefix = f"{owner}." if owner else ""
            buffers += [named[prefix + b] for b in ("running_mean", "running_var",
                                                    "num_batches_tracked") if prefix + b in named]
        return cls(buffers, group) if buffers else None

    def __call__(self) -> None:
        """DDP's _default_broadcast_coalesced: the group's rank 0 is authoritative."""
        with torch.no_grad():
            dist._broadcast_coalesced(self.group, [b.data for b in self.buffers],
                                      BUCKET_BYTES, 0)


class _GroupSum(torch.autograd.Function):
    """The sum over the group's ranks (every rank gets it); backward: the gradients summed
    likewise (torch.distributed.nn's all_reduce, whose module is deprecated)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group) -> torch.Tensor:
        ctx.group = group
        out = x.clone()
        dist.all_reduce(out, group=group)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        grad = grad.clone()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class SyncNorm:
    """The captured graph's aten.batch_norm under sync: statistics over the replicas'
    microbatches of the round (a callable fx target, one per stage)."""

    __name__ = "sync_batch_norm"

    def __init__(self, group) -> None:
        self.group = group

    def __call__(self, x, weight, bias, running_mean, running_var, training, momentum, eps,
                 cudnn_enabled=False):
        if not training:
            return torch.batch_norm(x, weight, bias, running_mean, running_var, False,
                                    momentum, eps, cudnn_enabled)
        dims = [0, *range(2, x.dim())]
        shape = [1, -1] + [1] * (x.dim() - 2)
        n = x.numel() // x.size(1)
        sums = _GroupSum.apply(torch.cat([x.sum(dims), x.new_tensor([float(n)])]), self.group)
        count = float(sums[-1].detach())
        mean = sums[:-1] / count
        centred = x - mean.reshape(shape)
        var = _GroupSum.apply((centred * centred).sum(dims), self.group) / count
        y = centred * torch.rsqrt(var + eps).reshape(shape)
        if weight is not None:
            y = y * weight.reshape(shape)
        if bias is not None:
            y = y + bias.reshape(shape)
        if running_mean is not None:
            with torch.no_grad():  # through .data: earlier microbatches' graphs saved them
                a = momentum
                running_mean.data.mul_(1 - a).add_(mean.detach(), alpha=a)
                running_var.data.mul_(1 - a).add_(var.detach() * (count / max(count - 1, 1)),
                                                  alpha=a)
        return y


def use_sync_batch_norm(module: nn.Module, group) -> int:
    """Make the stage's training BatchNorms normalise over the round (SyncNorm); returns
    how many."""
    segment = module.__dict__.get("segment")
    if segment is None:
        return 0
    nodes = [n for n, _ in training_norm_nodes(segment.gm)]
    for n in nodes:
        momentum = n.args[6]
        if not isinstance(momentum, float):
            raise ValueError("model.batchnorm: sync needs a BatchNorm momentum (momentum=None, "
                             "a cumulative average, is not supported)")
        n.target = SyncNorm(group)
    if nodes:
        segment.gm.recompile()
    return len(nodes)
