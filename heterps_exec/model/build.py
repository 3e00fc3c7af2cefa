"""Torch modules for zoo models: one child module per layer, named exactly `Layer.name`.

    graph = heterps_sim.inputs.zoo.model_graph("tiny-ctr")
    model = build_model(graph, seed=0)          # GraphModel; list(model.named_children())
    env, loss_sum = model(batch)                #   are the ModelSpec's layers, in order

The model is the zoo's DAG run as a chain: `env` maps tensor names to [batch, width] tensors,
each layer reads what it consumes and adds what it produces (model/ops.py). Parameter names are
"<layer>.weight", "<layer>.bias", "<layer>.tables.<j>.weight", so a checkpoint taken under one
pipeline cut loads under any other (model/partition.py keeps them). Initialisation is deterministic:
dense layers from torch's default init seeded per layer (`layer_seed`), embedding rows from
`rows.initial_rows(...)` (the parameter server draws the same ones).

Tables can be scaled (`table_scale`) so big zoo models train on small machines; FLOPs and
parameter shapes of dense layers do not change.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import replace

import torch
from torch import nn

from heterps_exec.model.ops import LOSS, build_op
from heterps_exec.model.rows import initial_rows
from heterps_sim.inputs.graph import ModelGraph

MIN_SCALED_ROWS = 16
"""A scaled table keeps at least this many rows (Zipf ids need room to repeat and miss)."""


def scale_tables(graph: ModelGraph, factor: float) -> ModelGraph:
    """The same graph with every table's rows multiplied by `factor` (rounded up)."""
    if not 0 < factor <= 1:
        raise ValueError(f"table scale must lie in (0, 1], got {factor}")
    if factor == 1:
        return graph
    nodes = []
    for n in graph.nodes:
        if n.op == "embedding":
            tables = tuple(max(MIN_SCALED_ROWS, math.ceil(r * factor)) for r in n.attrs["tables"])
            n = replace(n, table_rows=sum(tables), attrs={**n.attrs, "tables": tables})
        nodes.append(n)
    return replace(graph, nodes=tuple(nodes))


def table_name(layer: str, j: int) -> str:
    """The table's name on the parameter server == its local parameter's module path."""
    return f"{layer}.tables.{j}"


def layer_seed(seed: int, layer: str) -> int:
    """Each layer draws its initial weights from its own seed, so a pipeline stage can build
    just its layers and still get the numbers the whole model would have."""
    return (int(seed) & 0xFFFFFFFF) << 32 | zlib.crc32(layer.encode())


class GraphModel(nn.Module):
    """The layers of a model graph (all, or the named subset) as children named by layer."""

    def __init__(self, graph: ModelGraph, layers: Sequence[str] | None = None, *,
                 seed: int = 0) -> None:
        super().__init__()
        self.graph = graph
        keep = None if layers is None else set(layers)
        for node in graph.nodes:
            if keep is None or node.name in keep:
                torch.manual_seed(layer_seed(seed, node.name))
                self.add_module(node.name, build_op(node, node.attrs.get("tables", ())))

    def forward(self, env: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], torch.Tensor | None]:
        """Run every layer held; returns the grown env and the loss sum (None before the loss)."""
        env = dict(env)
        for layer in self.children():
            env.update(layer.run(env))
        return env, env.pop(LOSS, None)


def build_model(graph: ModelGraph, *, seed: int = 0, device: str | torch.device = "cpu",
                layers: Sequence[str] | None = None) -> GraphModel:
    """The model (or only `layers`), deterministically initialised; on "meta": shapes only."""
    device = torch.device(device)
    if layers is not None:
        unknown = set(layers) - {n.name for n in graph.nodes}
        if unknown:
            raise ValueError(f"model {graph.name!r} has no layers {sorted(unknown)}")
    with torch.random.fork_rng(devices=[]), torch.device(device):
        model = GraphModel(graph, layers, seed=seed)
    if device.type != "meta":
        init_tables(model, seed)
    return model


@torch.no_grad()
def init_tables(model: nn.Module, seed: int) -> None:
    """Set every local embedding table to its deterministic initial rows."""
    for name, mod in model.named_modules():
        if isinstance(mod, nn.EmbeddingBag):
            rows = initial_rows(name, range(mod.num_embeddings), mod.embedding_dim, seed)
            mod.weight.copy_(torch.from_numpy(rows))
