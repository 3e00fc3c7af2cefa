"""heterps_exec.ps: a tiered parameter server for sparse embedding rows.

PS ranks each own a shard of every table (row id % num_shards == shard). Per shard and table:
a hot tier (bounded RAM slots; policy lru, lfu with admission, or paddle = "demote after
unseen for n passes"), a warm RAM tier (LRU) and a disk tier (numpy memmap for fixed-size
tables, RocksDB via rocksdict for unbounded ones). The sparse optimizer (SGD, Adagrad) runs on
the PS with its state stored in the row. Rows are created on first pull from
`heterps_exec.model.rows.initial_rows(table, ids, dim, seed)`, the same numbers local tables use.

How the engine uses it (every rank of the torch.distributed world):
```
ps_group = dist.new_group(ps_ranks + trainer_ranks)          # collective: all ranks call it
# serve() and PSClient() are collective over ps_group too (the PS ranks' addresses are
# exchanged there; then each client opens a TCP stream to each PS rank, transport.py)
# on a PS rank:
serve(ps_group, trainer_ranks, ShardConfig(shard=i, num_shards=len(ps_ranks), policy="lfu",
      seed=seed, work_dir=run_dir / "ps-live"), restore_dir=ckpt_dir_or_None) -> dict
# on a trainer rank:
client = PSClient(ps_group, ps_ranks, [TableSpec(name="emb_0.tables.0", rows=1000, dim=16,
                  optimizer="adagrad", lr=0.01, initial_accumulator=0.0)])
emb = PSEmbeddingBag("emb_0.tables.0", 1000, 16, client)   # replaces nn.EmbeddingBag(sum)
emb.prefetch(next_ids)          # optional: the next microbatch's rows travel meanwhile
out = emb(ids)                  # ids LongTensor[B, bag] -> [B, dim]; backward pushes grads
client.end_step(step)           # after the dense optimizer step: applies the PS step
client.checkpoint(step, dir)    # with the trainer's checkpoint (any/all trainer ranks)
client.stats()                  # {"client": {table: pulls, rows/s, p50/p99}, "servers": [...]}
client.close()                  # the PS ranks return once every client has closed
```
Lower level: `client.pull(table, ids) -> FloatTensor[len(ids), dim]`, `client.push(table, ids,
grads)`, `client.prefetch(table, ids).wait()` (several may be in flight);
`PSClient(..., quantize="int8")` (or per call, `quantize=`) encodes pulled rows and pushed
gradients on the wire (fp16, bf16, int8 with per-row scales); the PS stores float32. Step semantics (server.py): with staleness 0
(default) pulls in step t see the rows as of the start of step t and pushes of all clients are
summed and applied once when every client has ended step t; with staleness s the PS applies
pushes on arrival and lets no client run more than s steps ahead.

Simulator side (heterps_sim.tiers.replay): `replay_hit_rates(ids, policy, hot_rows, ...)` runs
the shard's tier code on an id stream (no data), `belady_hit_rate(ids, hot_rows)` is the
offline optimum, and `ps_options(...)` builds the simulator's `PsOptions` from them.

Modules: spec (TableSpec, ShardConfig), store, shard, checkpoint, protocol (frames),
transport (a client's TCP stream to each PS rank; addresses exchanged over the PS group),
streams (a PS rank's side of them: bounded reads, its own stall timeouts), server, client,
embedding, local (spawn a PS world on one machine), bench, cli, bridge (the engine's side:
PS ranks and stage tables in a run); the tier
logic (policies, kernels, tiers, replay) lives in heterps_sim.tiers, torch-free, shared with the
simulator.
"""

from heterps_exec.ps.spec import POLICIES, PSRequestError, ShardConfig, TableSpec

__all__ = ["POLICIES", "PSRequestError", "ShardConfig", "TableSpec", "PSClient", "serve",
           "PSEmbeddingBag", "PSError"]


def __getattr__(name):  # torch-importing parts load on first use
    if name == "PSClient":
        from heterps_exec.ps.client import PSClient
        return PSClient
    if name == "serve":
        from heterps_exec.ps.server import serve
        return serve
    if name == "PSEmbeddingBag":
        from heterps_exec.ps.embedding import PSEmbeddingBag
        return PSEmbeddingBag
    if name == "PSError":
        from heterps_exec.ps.protocol import PSError
        return PSError
    raise AttributeError(name)
