"""Will a run fit this machine? Asked before any rank starts; `--no-capacity-check` skips it.

    need = run_estimate(model, plan, batch_size=256, table_scale=1.0, ps_shards=0,
                        ps_hot_fraction=0.05, optimizer="sgd")
    problem = capacity_problem(need, nnodes=1)     # None, or one line saying what does not fit

Without it, seven replicas of a model with multi-GB tables were launched on a 2-core host and
the kernel killed them minutes in. Two questions, each a stated rule:

- memory: the ranks this node runs, together, against the memory the machine can give now
  (MemAvailable, core.limits.available_memory_bytes). Per trainer rank: PARAM_COPIES copies
  of its stage's parameters (its tables too, unless the PS holds them), its microbatches'
  activations ACTIVATION_COPIES times, and PROCESS_BYTES for Python, torch and gloo; per PS
  rank its shard's RAM tiers (hot + warm rows, and their optimizer state). The copies are
  measured, not derived: weights, the dense gradient an EmbeddingBag's backward makes, the
  optimizer's state and temporaries, the all-reduce's and the state hand-off's buffers put a
  rank's peak at 6.8-9.3x its parameters (2emb at table scale 0.02 and 0.08, SGD, this 2-core
  VM; docs/results/2026-11-27-bad-input.md). The estimate is a planning figure, not a bound.
- cores: ranks on this node at most RANKS_PER_CORE per core. Each rank runs one torch thread;
  three to a core still finishes (the tests run five on two cores), more only waits.

A rank bound to a GPU (`cuda:N`) keeps its parameters and activations there: they are
checked against that device's free memory (torch.cuda.mem_get_info), and only the process
(with its CUDA context) against the host's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from heterps_sim.core.limits import available_memory_bytes, cpu_cores, gib

PARAM_COPIES = {"sgd": 8.0, "adagrad": 9.0}
"""A trainer rank's peak memory per byte of its parameters (measured; see the docstring)."""
ACTIVATION_COPIES = 3.0
"""Each activation byte of a microbatch in flight: the output, what backward saves, its gradient."""
PROCESS_BYTES = 350 * 2**20
"""One rank's Python, torch and gloo before any parameter (measured: 300-330 MiB here)."""
CUDA_CONTEXT_BYTES = 600 * 2**20
"""A CUDA context, on the device and again in the host process (torch's own figure is
300-600 MiB per process depending on the GPU and libraries; the larger is the planning one)."""
LAUNCHER_PROCESSES = 2
"""heterps-exec itself and torchrun, each about PROCESS_BYTES."""
PS_WARM_FRACTION = 0.20
"""The PS shard's warm RAM tier (heterps_exec.ps.spec.ShardConfig.warm_fraction)."""
RANKS_PER_CORE = 3
"""Most ranks per core this check admits."""
FLOAT = 4


@dataclass(frozen=True, slots=True)
class RankNeed:
    label: str
    """"stage 0 replica 1" or "PS shard 0"."""
    params_bytes: float
    """Parameters the rank holds (tables included when they are local)."""
    total_bytes: float
    """Its estimated peak in host memory (the process; copies and activations too on a CPU)."""
    device: str = "cpu"
    """Where its parameters live: "cpu" or "cuda:N"."""
    device_bytes: float = 0.0
    """Its estimated peak on that GPU (0 on a CPU)."""


def _stage_bytes(layers, table_scale: float, ps_shards: int) -> tuple[float, float, float]:
    """(dense parameter bytes, local table bytes, activation bytes per sample) of `layers`."""
    dense = sum(float(la.param_bytes) for la in layers)
    tables = sum(float(la.table_rows) * la.table_dim * FLOAT * table_scale for la in layers)
    per_sample = sum(float(la.input_bytes) + float(la.output_bytes) for la in layers)
    return dense, (0.0 if ps_shards else tables), per_sample


def run_estimate(model, plan, *, batch_size: int, table_scale: float, ps_shards: int,
                 ps_hot_fraction: float, optimizer: str,
                 devices: list[str] | None = None) -> list[RankNeed]:
    """Every rank's estimated peak memory: the plan's trainer ranks, then the PS ranks.
    `model` is the scenario's ModelSpec (its layers' parameter, table and activation sizes);
    `devices`: each stage's device (default: every stage on the CPU)."""
    by_name = {la.name: la for la in model.layers}
    copies = PARAM_COPIES.get(optimizer, max(PARAM_COPIES.values()))
    out, all_tables = [], 0.0
    for g, stage in enumerate(plan.stages):
        layers = [by_name[n] for n in stage.layers if n in by_name]
        dense, tables, per_sample = _stage_bytes(layers, table_scale, ps_shards)
        all_tables += sum(float(la.table_rows) * la.table_dim * FLOAT * table_scale
                          for la in layers)
        k = stage.num_replicas or 1
        # gpipe keeps a step's microbatches alive until their backward: a replica's share of
        # the batch at once (1f1b fewer; the larger figure is the planning one)
        activations = math.ceil(batch_size / k) * per_sample * ACTIVATION_COPIES
        held = copies * (dense + tables) + activations
        device = devices[g] if devices else "cpu"
        if device.startswith("cuda"):
            host, on_device = PROCESS_BYTES + CUDA_CONTEXT_BYTES, held + CUDA_CONTEXT_BYTES
        else:
            host, on_device = held + PROCESS_BYTES, 0.0
        out += [RankNeed(f"stage {g} replica {r}", dense + tables, host, device, on_device)
                for r in range(k)]
    if ps_shards:
        # each shard: its share of every table's hot and warm rows, with one optimizer value
        # per float (Adagrad's accumulator; SGD keeps none, counted anyway as the tiers' slack)
        held = all_tables / ps_shards * min(ps_hot_fraction + PS_WARM_FRACTION, 1.0) * 2
        out += [RankNeed(f"PS shard {s}", held / 2, held + PROCESS_BYTES)
                for s in range(ps_shards)]
    return out


def _free_on(device: str) -> float:
    """Free bytes on CUDA device `device` now."""
    import torch
    return float(torch.cuda.mem_get_info(torch.device(device))[0])


def capacity_problem(ranks: list[RankNeed], *, nnodes: int = 1, available: float | None = None,
                     cores: int | None = None, device_free=_free_on) -> str | None:
    """One line saying what does not fit this node, or None. With several nodes the ranks
    split evenly (torchrun's --nproc-per-node); this node is assumed to get the largest.
    `device_free(device)`: free bytes on a GPU (asked only when a rank is bound to one)."""
    available = available_memory_bytes() if available is None else available
    cores = cpu_cores() if cores is None else cores
    for device in sorted({r.device for r in ranks if r.device != "cpu"}):
        mine = [r for r in ranks if r.device == device]
        need, free = sum(r.device_bytes for r in mine), device_free(device)
        if need > free:
            top = max(mine, key=lambda r: r.device_bytes)
            return (f"the run's {len(mine)} rank(s) on {device} need about {gib(need)} of its "
                    f"memory, more than the {gib(free)} free now (largest: {top.label}, "
                    f"{gib(top.device_bytes)} for {gib(top.params_bytes)} of parameters); give "
                    "fewer replicas, a smaller --table-scale or --ps-shards, or pass "
                    "--no-capacity-check to run anyway")
    here = math.ceil(len(ranks) / max(nnodes, 1))
    heaviest = sorted(ranks, key=lambda r: r.total_bytes, reverse=True)[:here]
    need = sum(r.total_bytes for r in heaviest) + LAUNCHER_PROCESSES * PROCESS_BYTES
    if need > available:
        top = heaviest[0]
        return (f"the run's {here} rank(s) on this machine need about {gib(need)} of memory, "
                f"more than the {gib(available)} available now (largest: {top.label}, "
                f"{gib(top.total_bytes)} for {gib(top.params_bytes)} of parameters); give "
                "fewer replicas, a smaller --table-scale or --ps-shards, or pass "
                "--no-capacity-check to run anyway")
    if here > RANKS_PER_CORE * cores:
        return (f"the run's {here} rank(s) on this machine are more than {RANKS_PER_CORE} per "
                f"core on its {cores} core(s) (at most {RANKS_PER_CORE * cores}); give fewer "
                "replicas, or pass --no-capacity-check to run anyway")
    return None
