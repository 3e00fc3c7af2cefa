"""Baseline for bench_exec.py: the same 2-stage tiny-ctr split on torch's stock pipelining.

Run by bench_exec.py under torchrun (2 ranks): hand-built `PipelineStage`s + `Schedule1F1B` / `ScheduleGPipe` (the plan's schedule)
over exactly the layers, microbatches and batches heterps' engine runs, so the two step
times differ only by the runtime. Prints one JSON line (rank 0): seconds per step.
    torchrun --standalone --nproc-per-node 2 benchmarks/exec_stock_pipeline.py SPEC.json STEPS
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

from heterps_exec.data import BatchStream
from heterps_exec.model.partition import stage_model
from heterps_exec.model.spec_graph import graph_for
from heterps_exec.runtime.layout import RunSpec


class First(torch.nn.Module):
    """Stage 0 as tensors in, tensor out: (dense, ids [B, 8]) -> the concat activation."""

    def __init__(self, part, last_layer: str, id_names: list[str]) -> None:
        super().__init__()
        self.part, self.last, self.id_names = part, last_layer, id_names

    def forward(self, dense, ids):
        env = {"dense": dense, **{n: ids[:, k:k + 1] for k, n in enumerate(self.id_names)}}
        out, _ = self.part(env)
        return out[self.last]


class Last(torch.nn.Module):
    """Stage 1 up to the logit (the stock schedule applies the loss itself)."""

    def __init__(self, part, first_input: str) -> None:
        super().__init__()
        self.part, self.first_input = part, first_input

    def forward(self, x):
        env = {self.first_input: x}
        for name, layer in self.part.named_children():
            if name != "loss":
                env.update(layer.run(env))
        return env[list(env)[-1]]


def main() -> None:
    spec, steps = RunSpec.load(sys.argv[1]), int(sys.argv[2])
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    plan = spec.plan_obj()
    graph = graph_for(spec)
    layers = plan.stages[rank].layers
    part = stage_model(graph, layers, seed=spec.seed)
    id_names = [t for t, _ in graph.raw if t.startswith("ids_")]
    module = First(part, layers[-1], id_names) if rank == 0 else Last(part, plan.stages[0].layers[-1])
    stage = PipelineStage(module, rank, 2, torch.device("cpu"))
    batch_size = spec.batch_size

    def loss_fn(logit, target):
        return torch.nn.functional.binary_cross_entropy_with_logits(
            logit.reshape(-1), target.reshape(-1), reduction="sum") / batch_size

    kind = {"1f1b": Schedule1F1B, "gpipe": ScheduleGPipe}[plan.schedule]
    schedule = kind(stage, plan.num_microbatches, loss_fn=loss_fn, scale_grads=False)
    optimizer = torch.optim.SGD(module.parameters(), lr=spec.lr)
    stream = BatchStream(spec.data_dir, batch_size=batch_size, seed=spec.seed)
    times = []
    for step in range(steps):
        b = stream.batch(step)
        dist.barrier()
        t0 = time.perf_counter()
        if rank == 0:
            ids = torch.from_numpy(__import__("numpy").concatenate([b[n] for n in id_names], 1))
            schedule.step(torch.from_numpy(b["dense"]), ids)
        else:
            schedule.step(target=torch.from_numpy(b["label"]))
        optimizer.step()
        optimizer.zero_grad()
        dist.barrier()
        times.append(time.perf_counter() - t0)
    if rank == 0:
        warm = max(1, steps // 5)
        print(json.dumps({"step_s": sum(times[warm:]) / len(times[warm:])}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
