"""The engine's side of the parameter server: PS ranks, and stage tables served by them.

With `--ps-shards S`, the torchrun world is the plan's W trainer ranks (layout.Layout) then S
PS ranks. A PS rank serves shard `rank - W` of every table until every trainer has closed
its client. A trainer swaps each local `nn.EmbeddingBag` of its stage for a
`PSEmbeddingBag` of the same name ("emb_0.tables.0"), so the rows, their optimizer and their
gradient sum across replicas live on the PS, and ends every step with `client.end_step`:
with staleness 0 every pull of a step sees the rows as of its start and the PS applies the
summed pushes once - the same update as single-process training. Checkpoints: the PS writes
its shards next to the trainers' DCP checkpoint (same step) and restores from it; an async
run's holds the pushes of its last D steps pending (ps/checkpoint.py).
The run's `--quantize` mode (fp16, bf16, int8) also encodes the pulled rows and the pushed
gradients on the wire (`wire_mode`); the PS keeps rows and optimizer state in float32.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from heterps_exec.ps import PSClient, PSEmbeddingBag, ShardConfig, TableSpec, serve
from heterps_exec.ps.server import STALL_TIMEOUT_S
from heterps_exec.ps.spec import QUANTIZE
from heterps_exec.runtime.layout import RunSpec

PS_DIR = "ps"
"""Sub-folder of the checkpoint directory holding the PS shards' checkpoints."""


def ps_ranks(spec: RunSpec, num_trainers: int) -> list[int]:
    return list(range(num_trainers, num_trainers + spec.ps_shards))


def wire_mode(quantize: str) -> str:
    """The PS's wire encoding for the run's `quantize`: the same mode; `auto` (a per-link rule
    for stage boundaries, quantize.choose_mode) leaves PS traffic unquantized."""
    return quantize if quantize in QUANTIZE else "none"


def serve_shard(spec: RunSpec, rank: int, num_trainers: int, group,
                steps_done: int | None) -> dict:
    """Run one PS rank until the trainers are done (resuming, like them, after `steps_done`
    steps of the checkpoint directory, when given); returns its counters."""
    shard = rank - num_trainers
    config = ShardConfig(shard=shard, num_shards=spec.ps_shards, policy=spec.ps_policy,
                         hot_fraction=spec.ps_hot_fraction, seed=spec.seed,
                         work_dir=str(Path(spec.out_dir) / "ps-live" / f"shard{shard}"))
    restore = str(Path(spec.checkpoint_dir) / PS_DIR) if spec.checkpoint_dir else None
    # a stalled client is dropped before the healthy ones give up waiting for their step
    return serve(group, list(range(num_trainers)), config, restore_dir=restore,
                 restore_step=None if steps_done is None else steps_done - 1,
                 stall_timeout_s=min(STALL_TIMEOUT_S, spec.timeout_s / 2),
                 pending_steps=pending_steps(spec))


def pending_steps(spec: RunSpec) -> int:
    """Steps a checkpoint of this run leaves pending on the PS: the async schedule's
    staleness D (its next D steps read rows without their updates), 0 for gpipe and 1f1b."""
    plan = spec.plan_obj()
    if plan.schedule != "async":
        return 0
    from heterps_sim.core.asynchrony import staleness
    return staleness([s.num_replicas for s in plan.stages], plan.num_microbatches)


def attach(module: nn.Module, spec: RunSpec, group, num_trainers: int) -> PSClient:
    """Replace the stage's local tables by PS-served ones; returns the rank's client."""
    tables = [(name, mod) for name, mod in module.named_modules()
              if isinstance(mod, nn.EmbeddingBag)]
    client = PSClient(group, ps_ranks(spec, num_trainers), [
        TableSpec(name=name, rows=mod.num_embeddings, dim=mod.embedding_dim,
                  optimizer=spec.optimizer, lr=spec.lr) for name, mod in tables],
        quantize=wire_mode(spec.quantize), timeout_s=spec.timeout_s)
    for name, mod in tables:
        parent_name, _, child = name.rpartition(".")
        parent = module.get_submodule(parent_name)
        parent._modules[child] = PSEmbeddingBag(name, mod.num_embeddings, mod.embedding_dim,
                                                client)
    return client


def checkpoint(client: PSClient, spec: RunSpec, steps_done: int) -> None:
    """The PS's part of the trainers' checkpoint after `steps_done` steps (the PS names a
    checkpoint by the last step whose pushes it holds, steps_done - 1; an async run's has the
    last D of them pending, `pending_steps`)."""
    client.checkpoint(steps_done - 1, str(Path(spec.checkpoint_dir) / PS_DIR))


@torch.no_grad()
def table_state(module: nn.Module, client: PSClient) -> dict[str, torch.Tensor]:
    """The stage's PS tables as state-dict entries ("emb_0.tables.0.weight"), pulled now.
    The client counts this read apart ("state"): the run's PS traffic figures are training's.
    (The shards' tier counters do see it: it is served like any pull.)"""
    out = {}
    with client.counted_apart("state"):
        for name, mod in module.named_modules():
            if isinstance(mod, PSEmbeddingBag):
                ids = torch.arange(mod.num_rows, dtype=torch.int64)
                out[f"{name}.weight"] = client.pull(name, ids, quantize="none").clone()
    return out
