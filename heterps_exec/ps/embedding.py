"""PSEmbeddingBag: nn.EmbeddingBag(mode="sum") whose rows live on the parameter server.

forward(ids[B, bag]) pulls the distinct rows of the batch (or takes them from a `prefetch`
issued earlier), sums each bag with `F.embedding_bag`, and threads the pulled rows through
`_PushOnBackward`, an autograd.Function that is the identity forward and, in backward, pushes
the rows' gradients to the PS. The module owns no torch parameter: the optimizer step of these
rows happens on the PS at `client.end_step(step)`, so the engine's dense optimizer and
all-reduce never see them. Given the same weights it computes exactly what
`nn.EmbeddingBag(num_rows, dim, mode="sum")` computes, forward and backward.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class _PushOnBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, rows, client, table, ids):
        ctx.client, ctx.table, ctx.ids = client, table, ids
        return rows.view_as(rows)

    @staticmethod
    def backward(ctx, grad):
        ctx.client.push(ctx.table, ctx.ids, grad)
        return None, None, None, None


class PSEmbeddingBag(nn.Module):
    """Sum-pooled bags of rows of PS table `table` (num_rows x dim), through `client`."""

    def __init__(self, table: str, num_rows: int | None, dim: int, client):
        super().__init__()
        self.table, self.num_rows, self.dim, self.client = table, num_rows, dim, client
        self._prefetched: tuple[torch.Tensor, object] | None = None

    def extra_repr(self) -> str:
        return f"table={self.table!r}, num_rows={self.num_rows}, dim={self.dim}, mode='sum'"

    def prefetch(self, ids: torch.Tensor) -> None:
        """Start pulling the rows for a later forward(ids) (the next microbatch)."""
        self._prefetched = (ids, self.client.prefetch(self.table, ids))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if ids.dim() != 2:
            raise ValueError(f"{self.table}: ids must be [batch, bag], got shape {tuple(ids.shape)}")
        handle = None
        if self._prefetched is not None:
            pre_ids, pre_handle = self._prefetched
            self._prefetched = None
            if pre_ids is ids or (pre_ids.shape == ids.shape and torch.equal(pre_ids, ids)):
                handle = pre_handle
            else:
                pre_handle.wait()  # consume it: every reply must be received
        if handle is None:
            handle = self.client.prefetch(self.table, ids)
        handle.wait()
        rows = handle.rows
        if torch.is_grad_enabled():
            rows = _PushOnBackward.apply(rows.requires_grad_(), self.client, self.table,
                                         handle.uniq)
        bags = torch.from_numpy(handle.inverse).view(ids.shape)
        return F.embedding_bag(bags, rows, mode="sum")
