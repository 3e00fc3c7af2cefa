"""Torch modules for the zoo's graph ops (heterps_sim.inputs.graph.Node.op), one class each.

Every op module keeps the node's `consumes` / `produces` tensor names and maps a dict of
per-sample tensors to the tensors it makes. All tensors are 2-D, [batch, width]: float32
features and activations, int64 ids ([batch, ids per sample]) and labels ([batch, 1], int64
for a class index). A loss returns the SUM of per-sample losses under the key LOSS; the
runtime divides by the global batch size, so microbatches and replicas add up to the mean.

Embedding tables are reached only through `table(ids [B, n]) -> [B, dim]` (sum-pooled rows),
the contract of `nn.EmbeddingBag(mode="sum")`; that is the seam where the parameter server's
`PSEmbeddingBag` replaces the local table without the op noticing.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812 - torch's own convention
from torch import nn

from heterps_sim.inputs.graph import Node

LOSS = "__loss_sum__"
"""Env key of a loss node's output: the sum of per-sample losses of the (micro)batch."""
HINGE_MARGIN = 0.1
"""matchnet's pairwise hinge margin (PaddleRec multiview-simnet)."""
CROSS_HASH = (1_000_003, 2_654_435_761)
"""Multipliers of the wide part's pairwise-cross hash (our choice; any fixed pair works)."""


class Op(nn.Module):
    """Base: remembers the node's tensor names."""

    def __init__(self, node: Node) -> None:
        super().__init__()
        self.consumes, self.produces = list(node.consumes), list(node.produces)

    def run(self, env: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        outs = self(*[env[t] for t in self.consumes])
        if isinstance(outs, torch.Tensor):
            outs = (outs,)
        return dict(zip(self.produces or [LOSS], outs, strict=True))


class InputOp(Op):
    """Reads the raw sample: the batch already holds the raw tensors, so nothing to compute."""

    def run(self, env):
        return {}


class LinearOp(nn.Linear):
    """nn.Linear (+ activation), applied `count` times per sample with shared weights; with a
    loss label it also takes sigmoid + BCE (a one-layer model's fused loss)."""

    def __init__(self, node: Node) -> None:
        a = node.attrs
        super().__init__(a["in_features"], a["out_features"])
        self.consumes, self.produces = list(node.consumes), list(node.produces)
        self.count, self.activation, self.loss = a["count"], a["activation"], a.get("loss")

    run = Op.run

    def forward(self, *xs: torch.Tensor):
        if self.loss:
            *xs, label = xs
        x = torch.cat(xs, 1) if len(xs) > 1 else xs[0]
        y = super().forward(x.reshape(-1, self.in_features)).reshape(x.shape[0], -1)
        if self.activation == "relu":
            y = torch.relu(y)
        elif self.activation == "tanh":
            y = torch.tanh(y)
        elif self.activation is not None:
            raise ValueError(f"unknown activation {self.activation!r}")
        if self.loss:
            return F.binary_cross_entropy_with_logits(y.reshape(-1), label.reshape(-1).float(),
                                                      reduction="sum")
        return y


class EmbeddingOp(Op):
    """Sparse lookups: one table per ids tensor (or one shared table), pooled per the node."""

    def __init__(self, node: Node, rows: tuple[int, ...]) -> None:
        super().__init__(node)
        a = node.attrs
        self.dim, self.pooling, self.bags = a["dim"], a["pooling"], a["bags"]
        self.shared = len(rows) == 1
        self.crosses = node.lookups_per_sample > 0 and len(rows) == len(self.consumes) + 1
        self.tables = nn.ModuleList(nn.EmbeddingBag(r, self.dim, mode="sum")
                                    for r in rows)

    def _table(self, slot: int):
        return self.tables[0 if self.shared else slot]

    def prefetch(self, env: dict[str, torch.Tensor]) -> None:
        """Start fetching the rows a later forward on `env` will read, where the tables can
        (parameter-server tables; a shared table fetches for its first ids tensor only)."""
        started = set()
        for j, name in enumerate(self.consumes):
            table = self._table(j)
            if name in env and hasattr(table, "prefetch") and id(table) not in started:
                started.add(id(table))
                ids = env[name]
                table.prefetch(ids.reshape(-1, 1) if self.pooling == "none" else ids)

    def forward(self, *ids: torch.Tensor):
        if self.pooling == "none":  # every id its own vector
            return torch.cat([self._table(j)(x.reshape(-1, 1)).reshape(x.shape[0], -1)
                              for j, x in enumerate(ids)], 1)
        pooled = [self._table(j)(x) for j, x in enumerate(ids)]
        if self.pooling == "mean":
            pooled = [p / x.shape[1] for p, x in zip(pooled, ids, strict=True)]
        if len(self.produces) > 1:  # one output tensor per ids tensor
            return tuple(pooled)
        if self.bags == len(ids):
            return torch.cat(pooled, 1)
        if self.bags != 1:
            raise ValueError(f"embedding with {self.bags} bags over {len(ids)} ids tensors")
        total = torch.stack(pooled).sum(0)
        if self.crosses:
            total = total + self.tables[-1](self._cross_ids(ids))
        return total

    def _cross_ids(self, ids) -> torch.Tensor:
        """Hashed pairwise crosses of the slots' first ids (Wide & Deep's wide part)."""
        first = torch.cat([x[:, :1] for x in ids], 1)
        a, b = torch.triu_indices(len(ids), len(ids), offset=1, device=first.device)
        h = (first[:, a] * CROSS_HASH[0] + first[:, b]) * CROSS_HASH[1]
        return torch.remainder(h, self.tables[-1].num_embeddings)


class ConcatOp(Op):
    def forward(self, *xs):
        return torch.cat(xs, 1)


class DotInteractionOp(Op):
    """DLRM: pairwise dot products of the dense vector and the embeddings (i < j, no
    self-interaction), concatenated after the dense vector."""

    def __init__(self, node: Node) -> None:
        super().__init__(node)
        self.dim, f = node.attrs["dim"], node.attrs["num_vectors"]
        li, lj = torch.tril_indices(f, f, offset=-1)
        self.register_buffer("li", li, persistent=False)
        self.register_buffer("lj", lj, persistent=False)

    def forward(self, dense, *embs):
        t = torch.cat([dense, *embs], 1).reshape(dense.shape[0], -1, self.dim)
        z = torch.bmm(t, t.transpose(1, 2))
        return torch.cat([dense, z[:, self.li, self.lj]], 1)


class ScoresOp(Op):
    """One score per key vector against the query: dot or cosine, plus an optional bias."""

    def __init__(self, node: Node) -> None:
        super().__init__(node)
        self.op, self.dim = node.attrs["op"], node.attrs["dim"]

    def forward(self, query, keys, bias=None):
        k = keys.reshape(keys.shape[0], -1, self.dim)
        q = query.unsqueeze(1)
        s = (k * q).sum(-1) if self.op == "dot" else F.cosine_similarity(k, q, dim=-1)
        return s if bias is None else s + bias


class AddOp(Op):
    def forward(self, *xs):
        return torch.stack(xs).sum(0)


class LossOp(Op):
    """Summed per-sample loss: bce (with a label, or positives-first when there is none, as
    in negative sampling), softmax_ce (int64 class label), hinge (pairwise, pos then neg)."""

    def __init__(self, node: Node) -> None:
        super().__init__(node)
        self.loss = node.attrs["loss"]

    def forward(self, logits, label=None):
        if self.loss == "softmax_ce":
            return F.cross_entropy(logits, label.reshape(-1).long(), reduction="sum")
        if self.loss == "hinge":
            return torch.relu(HINGE_MARGIN - logits[:, 0] + logits[:, 1:].sum(1)).sum()
        if self.loss != "bce":
            raise ValueError(f"unknown loss {self.loss!r}")
        if label is None:  # first logit is the true pair, the rest are sampled negatives
            target = torch.zeros_like(logits)
            target[:, 0] = 1.0
        else:
            target = label.reshape(logits.shape).float()
        return F.binary_cross_entropy_with_logits(logits, target, reduction="sum")


def build_op(node: Node, rows: tuple[int, ...]) -> nn.Module:
    """The module for one node; `rows` are its (possibly scaled) table sizes. Parameters land
    on torch's current default device (model/build.py builds under `with torch.device(...)`)."""
    simple = {"input": InputOp, "concat": ConcatOp, "add": AddOp, "loss": LossOp,
              "dot_interaction": DotInteractionOp, "scores": ScoresOp}
    if node.op == "linear":
        return LinearOp(node)
    if node.op == "embedding":
        return EmbeddingOp(node, rows)
    if node.op in simple:
        return simple[node.op](node)
    raise ValueError(f"layer {node.name!r}: no torch module for op {node.op!r}")
