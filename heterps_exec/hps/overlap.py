"""Overlap the stage all-reduce with the last backward of the step (`--overlap on`).

A replica's gradients are final once its last microbatch's backward has accumulated into
them; layers finish in reverse order, so the first buckets can travel while earlier layers
still compute. `GradReducer` does what DDP's reducer does - fixed buckets of parameters in
reverse order, a post-accumulate-grad hook per parameter, an asynchronous all-reduce per
bucket - but only on the backward it is armed for: DDP arms itself at the last forward,
while a pipeline stage runs other microbatches' backwards after its last forward (1F1B,
GPipe), which DDP would all-reduce too early. Buckets launch strictly in index order, so every
replica issues the same collectives in the same order even when one ran no microbatch this
step (its buckets all launch in `finish`). Gradients are summed (no averaging): each
microbatch's loss is already divided by the global batch size.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

BUCKET_BYTES = 1 << 20
"""About 1 MiB of gradients per all-reduce (DDP's first bucket is 1 MiB too)."""


class GradReducer:
    def __init__(self, params: list[torch.nn.Parameter], group, comm_device: torch.device,
                 bucket_bytes: int = BUCKET_BYTES) -> None:
        self.group, self.comm_device = group, comm_device
        self.buckets: list[list[torch.nn.Parameter]] = [[]]
        size = 0
        for p in reversed(params):
            if size >= bucket_bytes:
                self.buckets.append([])
                size = 0
            self.buckets[-1].append(p)
            size += p.numel() * p.element_size()
        self.bucket_of = {id(p): b for b, ps in enumerate(self.buckets) for p in ps}
        self.armed = False
        self.ready: list[int] = [0] * len(self.buckets)
        self.next = 0
        self.pending: list[tuple[int, torch.Tensor, object]] = []
        for p in params:
            p.register_post_accumulate_grad_hook(self._on_grad)

    def arm(self) -> None:
        """The next backward is this replica's last of the step."""
        self.armed = True

    def _on_grad(self, p: torch.nn.Parameter) -> None:
        if not self.armed:
            return
        b = self.bucket_of[id(p)]
        self.ready[b] += 1
        while self.next < len(self.buckets) and self.ready[self.next] == len(self.buckets[self.next]):
            self._launch(self.next)
            self.next += 1

    def _launch(self, b: int) -> None:
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.buckets[b]]
        flat = torch.cat([g.reshape(-1).to(self.comm_device, torch.float32) for g in grads])
        self.pending.append((b, flat, dist.all_reduce(flat, group=self.group, async_op=True)))

    def finish(self) -> None:
        """Launch what is left (in order), wait for every bucket, write the sums back."""
        while self.next < len(self.buckets):
            self._launch(self.next)
            self.next += 1
        for b, flat, work in self.pending:
            work.wait()
            offset = 0
            for p in self.buckets[b]:
                n = p.numel()
                p.grad = flat[offset:offset + n].reshape(p.shape).to(p.device, p.dtype)
                offset += n
        self.pending.clear()
        self.ready = [0] * len(self.buckets)
        self.next = 0
        self.armed = False
