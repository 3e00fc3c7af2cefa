"""The program every torchrun rank runs: `python -m heterps_exec.runtime.worker RUNSPEC.json`.

A rank finds its (stage, replica) from its global rank (layout.Layout), joins the process
group under a key prefix of its own restart attempt (over gloo a re-rendezvous after
`--max-restarts` fails otherwise), builds only its stage's layers, resumes from the latest
checkpoint if there is one, walks its actions step by step (runtime.StageRunner), and at the
end sends its measurements (and, if asked, its stage's weights) to rank 0, which writes
`result.json` / `state.pt` into the run folder for the launcher.
"""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from heterps_exec.checkpoint import dcp as checkpoint
from heterps_exec.data.readers import open_stream
from heterps_exec.hps import quantize
from heterps_exec.hps import speed as sharing
from heterps_exec.model.partition import boundary_after, stage_model
from heterps_exec.model.spec_graph import graph_for
from heterps_exec.runtime.async_steps import PSSteps, make_versions, run_async
from heterps_exec.runtime.layout import Layout, RunSpec
from heterps_exec.runtime.stage import StageContext, StageRunner
from heterps_exec.runtime.timeline import Recorder
from heterps_sim.core.lanes import STEP, B, F


def init_distributed(spec: RunSpec, rank: int, world: int, backend: str) -> None:
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    timeout = timedelta(seconds=spec.timeout_s)
    agent_store = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                          world_size=world, is_master=(rank == 0 and not agent_store),
                          timeout=timeout)
    dist.init_process_group(backend, store=dist.PrefixStore(f"heterps/attempt{attempt}", store),
                            rank=rank, world_size=world, timeout=timeout)


def make_optimizer(spec: RunSpec, module: torch.nn.Module) -> torch.optim.Optimizer:
    params = list(module.parameters())
    if not params:  # a stage of parameter-free layers still steps through the same code
        params = [torch.nn.Parameter(torch.zeros(1), requires_grad=False)]
    if spec.optimizer == "sgd":
        return torch.optim.SGD(params, lr=spec.lr)
    if spec.optimizer == "adagrad":
        return torch.optim.Adagrad(params, lr=spec.lr)
    raise ValueError(f"unknown optimizer {spec.optimizer!r}")


@dataclass
class Groups:
    """Every process group of the run, created by every rank in the same order."""

    stages: list
    """Per stage: its replicas' group (None with one replica)."""
    trainers: object
    """All trainer ranks: start barrier, checkpoints (PS ranks are busy serving)."""
    ps: object | None
    """PS ranks + trainers (gloo), or None without a parameter server."""


def make_groups(spec: RunSpec, layout: Layout) -> Groups:
    stages = [dist.new_group(layout.ranks(g)) if k > 1 else None
              for g, k in enumerate(layout.replicas)]
    trainers = dist.new_group(list(range(layout.world_size)))
    ps = (dist.new_group(list(range(layout.world_size + spec.ps_shards)), backend="gloo")
          if spec.ps_shards else None)
    return Groups(stages, trainers, ps)


def build_context(spec: RunSpec, rank: int, layout: Layout, groups: Groups
                  ) -> tuple[StageContext, torch.nn.Module]:
    plan = spec.plan_obj()
    stage, replica = layout.role(rank)
    binding = spec.bindings[stage]
    device = torch.device(binding.device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    wire = quantize.parse_choice(spec.quantize)[0]  # "auto:0.02" -> "auto" (the runner's)
    if spec.user_model:  # a user's PyTorch module, cut from its captured graph
        from heterps_exec.model.user_model import user_stage
        module, cut_in, cut_out = user_stage(spec, plan, stage, device, wire)
    else:
        graph = graph_for(spec)
        module = stage_model(graph, plan.stages[stage].layers, seed=spec.seed, device=device)
        cut_in = (boundary_after(graph, plan.stages[stage - 1].layers[-1], wire)
                  if stage else None)
        cut_out = (boundary_after(graph, plan.stages[stage].layers[-1], wire)
                   if stage < layout.num_stages - 1 else None)
    ctx = StageContext(
        spec=spec, layout=layout, rank=rank, stage=stage, replica=replica, device=device,
        comm_device=device if dist.get_backend() == "nccl" else torch.device("cpu"),
        group=groups.stages[stage],
        in_boundary=cut_in, out_boundary=cut_out,
        slowdown=binding.slowdown_of(replica) * _replica_slowdown(spec, stage, replica),
        recorder=Recorder(keep_spans=spec.trace))
    return ctx, module


def _replica_slowdown(spec: RunSpec, stage: int, replica: int) -> float:
    """An emulated slow unit (--slow-replica): extra dilation of one replica's compute."""
    return math.prod(f for g, r, f in spec.slow_replicas if (g, r) == (stage, replica))


def _steps(ctx: StageContext, spec: RunSpec) -> list[list]:
    """This replica's (code, mu) actions, grouped by step."""
    plan = spec.plan_obj()
    per_step: list[list] = [[] for _ in range(spec.steps)]
    step = 0
    for code, mu in ctx.layout.actions(plan.schedule, ctx.stage, ctx.replica,
                                       plan.num_microbatches, spec.steps):
        if code == STEP:
            step = mu + 1
        else:
            per_step[step].append((code, mu))
    return per_step


def _maybe_fail(spec: RunSpec, rank: int, step: int) -> None:
    if spec.fault and spec.fault["rank"] == rank and spec.fault["step"] == step and \
            os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0":
        if spec.fault.get("mode", "kill") == "hang":
            time.sleep(10 * spec.timeout_s)  # peers must give up after timeout_s
        os.kill(os.getpid(), signal.SIGKILL)  # an abrupt failure, as in a lost machine


def train(spec: RunSpec, rank: int, layout: Layout, groups: Groups,
          resume: int | None = None) -> dict:
    """This trainer rank's whole run; `resume`: the checkpoint step every rank starts from
    (checkpoint.agreed_step), None for a fresh start."""
    ctx, module = build_context(spec, rank, layout, groups)
    client = None
    if groups.ps is not None:
        from heterps_exec.ps import bridge as ps_bridge
        client = ps_bridge.attach(module, spec, groups.ps, layout.world_size)
    optimizer = make_optimizer(spec, module)
    start = 0 if resume is None else resume
    runner = StageRunner(ctx, module, optimizer)
    if spec.plan["schedule"] == "async":
        runner.versions = make_versions(spec, ctx, module, optimizer, resume, groups.trainers,
                                        runner.running)
    elif resume is not None:
        checkpoint.load(spec.checkpoint_dir, resume, module, optimizer, group=groups.trainers)
    per_step = _steps(ctx, spec) if runner.versions is None else []
    share = (sharing.StageSharing(layout, spec.plan["num_microbatches"], groups.trainers)
             if spec.share == "speed" else None)
    stream = None
    if ctx.stage == 0:
        stream = open_stream(spec)
        stream.prefetch(start, spec.steps)
    dist.barrier(group=groups.trainers)
    ctx.recorder.restart_clock()
    losses, step_ends, measure_from = [], [], None
    if runner.versions is not None:  # async: continuous streams between checkpoints
        if client is not None and runner.embeddings:
            runner.ps_steps = PSSteps(client, runner.versions.d, start)
        elif client is not None:  # no table here: nothing of this rank's for the PS to await
            client.close()
            client = None
        run = run_async(spec, ctx, runner, stream, start, module, optimizer, groups,
                        fail=lambda step: _maybe_fail(spec, rank, step))
        losses, step_ends, measure_from = run.losses, run.step_ends, run.measure_from
    for step in range(start, spec.steps if runner.versions is None else start):
        _maybe_fail(spec, rank, step)
        if step == start + spec.warmup_steps or (measure_from is None and step == spec.steps - 1):
            measure_from = ctx.recorder.now()
            ctx.recorder.measuring = True
        batch = stream.next_batch()[1] if stream is not None else None
        actions = per_step[step]
        if share is not None:
            runner.assignments = share.assignments()
            actions = sharing.step_actions(spec.plan["schedule"], ctx.stage, layout.num_stages,
                                           ctx.replica, runner.assignments[ctx.stage], step)[:-1]
        runner.step = step
        runner.post_receives(actions)
        runner.begin_step()
        for code, mu in actions:
            if code == F:
                runner.forward(mu, batch)
            elif code == B:
                runner.backward(mu)
        seconds = runner.seconds_per_microbatch()
        losses.append(runner.end_step())
        if share is not None:
            share.exchange(rank, seconds)
        if client is not None:
            with ctx.recorder.span("ps step", "ps"):
                client.end_step(step)
        step_ends.append(ctx.recorder.now())
        if spec.checkpoint_dir and spec.checkpoint_every and (step + 1) % spec.checkpoint_every == 0:
            checkpoint.save(spec.checkpoint_dir, step + 1, module, optimizer, rank=rank,
                            group=groups.trainers, before_commit=(
                                (lambda s=step + 1: ps_bridge.checkpoint(client, spec, s))
                                if client is not None and rank == 0 else None))
    _maybe_fail(spec, rank, spec.steps)  # a fault "at step STEPS": after the last checkpoint
    cpu = ctx.recorder.cpu_s()
    wall = step_ends[-1] - (measure_from or 0.0) if step_ends else 0.0
    measured = sum(1 for t in step_ends if measure_from is not None and t > measure_from)
    state = None
    if spec.save_state and ctx.replica == 0:
        state = {k: v.detach().cpu() for k, v in module.state_dict().items()}
        if client is not None:
            state.update(ps_bridge.table_state(module, client))
    ps_stats = None
    if client is not None:
        ps_stats = client.stats() if rank == 0 else None
        client.close()
    return {
        "role": "trainer", "rank": rank, "stage": ctx.stage, "replica": ctx.replica,
        "device": str(ctx.device), "start_step": start, "losses": losses,
        "measured_steps": measured, "wall_s": wall, "cpu_s": cpu,
        "totals": dict(ctx.recorder.totals), "cpu_totals": dict(ctx.recorder.cpu_totals),
        "spans": ctx.recorder.spans, "state": state, "ps": ps_stats,
        "bytes_sent": runner.bytes_sent, "most_sends_pending": runner.most_sends,
        "steps_run": spec.steps - start,
        "share_counts": share.history if share is not None else None,
        "quantize_modes": runner.auto.summary() if runner.auto is not None else None,
        "data": stream.stats() if stream is not None and ctx.replica == 0 else None,
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    spec = RunSpec.load(argv[0])
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.set_num_threads(spec.threads_per_rank)
    backend = "nccl" if all(b.device.startswith("cuda") for b in spec.bindings) else "gloo"
    init_distributed(spec, rank, world, backend)
    layout = spec.layout()
    try:
        groups = make_groups(spec, layout)
        restore = checkpoint.agreed_step(spec.checkpoint_dir, rank)  # read once, by rank 0
        if rank < layout.world_size:
            part = train(spec, rank, layout, groups, restore)
        else:
            from heterps_exec.ps import bridge as ps_bridge
            part = {"role": "ps", "rank": rank,
                    "stats": ps_bridge.serve_shard(spec, rank, layout.world_size, groups.ps,
                                                   restore)}
        parts = [None] * world if rank == 0 else None
        dist.gather_object(part, parts, dst=0)
        if rank == 0:
            write_outputs(spec, parts)
        dist.barrier()
    finally:
        dist.destroy_process_group()
    return 0


def write_outputs(spec: RunSpec, parts: list[dict]) -> None:
    out = Path(spec.out_dir)
    state = {}
    for p in parts:
        state.update(p.pop("state", None) or {})
    from heterps_sim.core.outputs import atomic_write, write_via  # whole or absent, fsynced
    if spec.save_state:
        write_via(out / "state.pt", lambda tmp: save_state(state, tmp))
    atomic_write(out / "ranks.json", json.dumps({"finished_at": time.time(), "ranks": parts}) + "\n")


def save_state(state: dict, path) -> None:
    """torch.save `state` to `path` byte for byte the same for the same tensors: given a file
    name, torch.save names the zip's records after it (a temporary name here, different every
    run); given an open file, it names them "archive/" always."""
    with open(path, "wb") as fh:
        torch.save(state, fh)


if __name__ == "__main__":
    sys.exit(main())
