"""Weight stashing for the async schedule: the versions a stage replica's in-flight steps read.

heterps_sim.core.asynchrony fixes the rule: step t's microbatches run forward AND backward at
W(max(0, t - D)), and step t's summed gradient updates the live weights W(t) into W(t + 1).

    versions = Versions(module, optimizer, d, group, comm_device)
    params = versions.params_for(step)     # {name: leaf}; forwards call the module with these
    ... backwards accumulate into those leaves' .grad ...
    versions.end_step(step, loss)          # launch the stage all-reduce of step's gradient
    versions.finish()                      # apply every pending update (run / segment end)

A step's leaves are detached aliases of its version (no copy); their .grad holds that step's
gradient alone, whichever version it shares with another step (W(0) serves steps 0..D). The
optimizer steps the module's own parameters, so its state and the saved weights are the
ordinary ones. Updates apply in step order, lazily: update t is waited for (its all-reduce
over the stage's replicas runs meanwhile) only when a forward needs W(t + 1), or at the end.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

import torch
import torch.distributed as dist

from heterps_exec.model.swap import parameter_slots, swapped
from heterps_sim.core.asynchrony import version_of


@dataclass
class _Pending:
    """An ended step's update, not applied yet: with replicas, the all-reduce in flight over
    the flat gradients + the loss (+ the BatchNorm terms); with one, its own gradients."""

    work: object = None
    flat: torch.Tensor | None = None
    forwards: int = 0
    """This replica's forwards of the step (BatchNorm's num_batches_tracked)."""
    grads: list | None = None
    loss: float = 0.0


class Versions:
    def __init__(self, module: torch.nn.Module, optimizer: torch.optim.Optimizer, d: int,
                 group, comm_device: torch.device, *, start: int = 0,
                 stash: dict[int, dict[str, torch.Tensor]] | None = None,
                 running=None, recorder=None) -> None:
        self.module, self.optimizer, self.d = module, optimizer, d
        self.recorder = recorder
        """The rank's timeline (runtime/timeline.Recorder): the wait for an update's
        all-reduce and the optimizer step are spans of their own, as in the flushed loop, so
        a trace and the measured compute read the same under either schedule. None: untimed."""
        self.running = running
        """A replicated stage's BatchNorm running statistics (model/batchnorm.RunningStats):
        each step's terms travel in its gradient all-reduce and are set in step order."""
        self.group, self.comm_device = group, comm_device
        self.named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        self._slots = parameter_slots(module, {id(p): n for n, p in self.named})
        """Every (owner, attribute) a parameter sits at, tied ones included: a forward swaps
        a version's leaves in there (model/swap.py)."""
        self.applied = start
        """Updates applied to the live weights: they are W(applied)."""
        self.stash: dict[int, dict[str, torch.Tensor]] = dict(stash or {})
        """Versions older than the live one that a later step still reads (checkpointed)."""
        self.leaves: dict[int, dict[str, torch.Tensor]] = {}
        self.pending: dict[int, _Pending] = {}
        """Ended steps whose update is not applied yet."""
        self.next_step = start
        """The first step whose leaves this replica has not made (steps start in order)."""
        self.losses: dict[int, float] = {}
        """Each ended step's summed loss over the stage's replicas (applied steps only)."""

    # -- forwards ------------------------------------------------------------------------
    def params_for(self, step: int) -> dict[str, torch.Tensor]:
        """Leaves of the version step `step` reads, created at its first forward here."""
        if step not in self.leaves:
            v = version_of(step, self.d)
            while self.applied < v:  # W(v) needs update v - 1 (waits for its all-reduce)
                self._apply(self.applied)
            # A copy even of the live weights: they move on in place while this step's
            # backwards still need what its forwards read.
            source = (self.stash[v] if v < self.applied else
                      {n: p.detach().clone() for n, p in self.named})
            self.leaves[step] = {n: t.detach().requires_grad_() for n, t in source.items()}
            self.next_step = max(self.next_step, step + 1)
            if v == self.applied and self._read_later(v):
                self.stash[v] = source
            self._prune()
        return self.leaves[step]

    @contextmanager
    def reading(self, params: dict[str, torch.Tensor]):
        """The module computes with `params` (a step's leaves) inside, with its own
        parameters again after (the optimizer and the checkpoints see only those)."""
        with swapped(self._slots, params):
            yield

    def _readers(self, v: int) -> range:
        """The steps that read W(v): W(0) serves steps 0..D, W(v) step v + D."""
        return range(0, self.d + 1) if v == 0 else range(v + self.d, v + self.d + 1)

    def _read_later(self, v: int) -> bool:
        return self._readers(v)[-1] >= self.next_step

    def _prune(self) -> None:
        for v in [v for v in self.stash if not self._read_later(v)]:
            del self.stash[v]

    # -- step ends -----------------------------------------------------------------------
    def end_step(self, step: int, loss: float) -> None:
        """This replica's part of step `step` is done: start summing its gradient."""
        leaves = self.leaves.pop(step, None)
        grads = [leaves[n].grad if leaves is not None and leaves[n].grad is not None
                 else torch.zeros_like(p) for n, p in self.named]
        if self.group is None:  # one replica: the leaves' gradients are the update's
            self.pending[step] = _Pending(grads=grads, loss=loss)
        else:
            parts = [g.reshape(-1).to(self.comm_device, torch.float32) for g in grads]
            parts.append(torch.tensor([loss], dtype=torch.float32, device=self.comm_device))
            forwards = 0
            if self.running is not None:  # the step's BatchNorm terms ride along
                norms, forwards = self.running.take(step, self.comm_device)
                parts.append(norms)
            flat = torch.cat(parts)
            self.pending[step] = _Pending(
                work=dist.all_reduce(flat, group=self.group, async_op=True), flat=flat,
                forwards=forwards)
        if self.d == 0 or self.group is None:
            # nothing to overlap with, or the next forward needs it now: apply in order
            while self.applied in self.pending:
                self._apply(self.applied)

    def _span(self, name: str, category: str):
        return nullcontext() if self.recorder is None else self.recorder.span(name, category)

    def _apply(self, step: int) -> None:
        got = self.pending.pop(step)
        if got.work is not None:
            with self._span("allreduce", "allreduce"):
                got.work.wait()
        if step not in self.stash and self._read_later(step):
            # a later step reads W(step): keep it before it moves on
            self.stash[step] = {n: p.detach().clone() for n, p in self.named}
        if got.flat is None:  # one replica: its own gradients
            for (_, p), g in zip(self.named, got.grads, strict=True):
                p.grad = g
            loss = got.loss
        else:
            offset = 0
            for _, p in self.named:
                n = p.numel()
                p.grad = got.flat[offset:offset + n].reshape(p.shape).to(p.device, p.dtype)
                offset += n
            loss = float(got.flat[offset])
            if self.running is not None:
                self.running.apply(got.flat[offset + 1:], got.forwards)
        self.losses[step] = loss
        with self._span("optimizer", "optimizer"), torch.no_grad():
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.applied = step + 1

    def finish(self) -> None:
        """Apply every pending update (the end of the run or of a checkpointed segment)."""
        while self.pending:
            self._apply(min(self.pending))
        if self.leaves:
            raise RuntimeError(f"steps {sorted(self.leaves)} ended without their step end")

    def close_segment(self, step: int) -> None:
        """Steps before `step` are over (finish() done): forget what only they read."""
        self.next_step = max(self.next_step, step)
        self._prune()

    def saved_stash(self) -> dict[int, dict[str, torch.Tensor]]:
        """After close_segment: the versions older than the live one that later steps read.
        A checkpoint holds them; `stash=` gives them back on resume."""
        return {v: dict(t) for v, t in self.stash.items()}


def stash_versions(step: int, d: int) -> list[int]:
    """The versions older than W(step) that steps from `step` on read (what a checkpoint at
    `step` must hold besides the live weights)."""
    return sorted({version_of(s, d) for s in range(step, step + d + 1)} - {step})
