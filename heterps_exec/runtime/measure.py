"""Rank measurements (the run folder's ranks.json) -> RunResult(source="exec") and a trace.

Throughput = batch size x measured steps / the slowest rank's wall time over those steps (the
first `warmup_steps` are left out). Per stage, averaged over its replicas, per measured step:
compute (forward + backward + optimizer, emulated dilation included), communication (waiting
for a boundary tensor, draining sends, the all-reduce) and idle (the rest of the step: pipeline
bubbles and waiting for a slower stage). `feasible` is the measured throughput against the
scenario's limit. StageStats fields that only the cost model defines
are filled with their measured counterparts, named in each field's comment below.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from heterps_exec.runtime.layout import RunSpec
from heterps_sim.core.result import RunResult, StageStats
from heterps_sim.core.trace import Span


class MissingMeasurements(RuntimeError):
    pass


def load_ranks(spec: RunSpec) -> list[dict]:
    path = Path(spec.out_dir) / "ranks.json"
    try:
        return json.loads(path.read_text())["ranks"]
    except (OSError, ValueError, KeyError):
        raise MissingMeasurements(f"{path}: no measurements (the run did not finish)") from None


def _per_step(parts: list[dict], key: str, field: str = "totals") -> float:
    """A replica's mean seconds per measured step in category `key` (field "totals": wall;
    "cpu_totals": its thread's CPU; runs saved before it was recorded read 0)."""
    return float(np.mean([p.get(field, {}).get(key, 0.0) / max(p["measured_steps"], 1)
                          for p in parts]))


def exec_result(spec: RunSpec, problem, parts: list[dict]) -> RunResult:
    ps_parts = [p for p in parts if p.get("role") == "ps"]
    parts = [p for p in parts if p.get("role", "trainer") == "trainer"]
    plan = spec.plan_obj()
    steps = min(p["measured_steps"] for p in parts)
    wall = max(p["wall_s"] for p in parts)
    throughput = spec.batch_size * steps / wall if wall > 0 else 0.0
    step_time = wall / steps if steps else float("inf")
    price = dict(zip(problem.type_names, problem.price_per_hour, strict=True))
    units: dict[str, int] = {}
    stages, extra_stages = [], []
    for g, stage in enumerate(plan.stages):
        mine = [p for p in parts if p["stage"] == g]
        compute = sum(_per_step(mine, k) for k in ("compute", "optimizer"))
        comm = sum(_per_step(mine, k) for k in ("transfer", "allreduce"))
        idle = max(step_time - compute - comm, 0.0)
        k = stage.num_replicas
        for name, n in stage.groups:
            units[name] = units.get(name, 0) + n
        busy = compute + comm
        stages.append(StageStats(
            layers=stage.layers, resource=stage.resource, num_replicas=k,
            oct_s=compute * k,          # measured compute per step, as if on one unit
            odt_s=comm * k,             # measured communication per step, as if on one unit
            alpha=1.0,                  # not measured: the engine splits every sample evenly
            exec_time_s=busy,           # measured busy seconds per step of one replica
            throughput=spec.batch_size / busy if busy > 0 else float("inf"),
            utilisation=compute / step_time if steps else 0.0,
            cost_per_hour=float(sum(price[name] * n for name, n in stage.groups)),
            replicas=stage.replicas,
            bubble=idle / step_time if steps else 0.0,
            comm_share=comm / busy if busy > 0 else 0.0))
        # the CPU the compute spans held (wall less it: waiting for a core, or an emulated
        # type's dilation) and all the replica's CPU per step (gloo's threads included)
        compute_cpu = sum(_per_step(mine, k, "cpu_totals") for k in ("compute", "optimizer"))
        cpu = float(np.mean([p.get("cpu_s", 0.0) / max(p["measured_steps"], 1) for p in mine]))
        extra_stages.append({"compute_s": compute, "compute_cpu_s": compute_cpu, "cpu_s": cpu,
                             "communication_s": comm, "idle_s": idle,
                             "devices": sorted({p["device"] for p in mine})})
    cost_per_hour = sum(s.cost_per_hour for s in stages)
    hours = problem.num_samples / throughput / 3600 if throughput > 0 else float("inf")
    last = [p for p in parts if p["stage"] == len(plan.stages) - 1 and p["replica"] == 0][0]
    losses = [x / spec.batch_size for x in last["losses"]]
    emulated = sorted({name for s, b in zip(plan.stages, spec.bindings, strict=True)
                       if b.emulated for name, _ in s.groups})
    feasible = throughput >= problem.throughput_limit  # the measurement against the limit
    reason = "" if feasible else (f"measured throughput {throughput:.6g} samples/s is below the "
                                  f"limit {problem.throughput_limit:.6g}")
    first = min(p["start_step"] for p in parts)
    if steps == 0:  # a restart that found every step done: weights right, nothing timed
        feasible, reason = False, not_measured(first, spec.steps)
    return RunResult(
        source="exec", feasible=feasible, reason=reason, throughput=throughput,
        step_time_s=step_time,
        cost_usd=hours * cost_per_hour, hours=hours, cost_per_hour=cost_per_hour,
        provisioning="fixed", throughput_limit=problem.throughput_limit,
        bottleneck_stage=int(np.argmax([s.exec_time_s for s in stages])),
        stages=tuple(stages), units_per_type=units,
        extra={"final_loss": losses[-1] if losses else None, "losses": losses,
               "first_step": last["start_step"], "measured_steps": steps,
               "measured": steps > 0,
               "emulated": emulated, "slowdowns": [b.slowdown for b in spec.bindings],
               "replica_slowdowns": [[b.slowdown_of(r) for r in range(s.num_replicas)]
                                     for s, b in zip(plan.stages, spec.bindings, strict=True)],
               "stages": extra_stages, "schedule": plan.schedule,
               "num_microbatches": plan.num_microbatches, "world_size": len(parts),
               "ps_shards": len(ps_parts), "quantize": spec.quantize, "share": spec.share,
               "overlap": spec.overlap,
               "share_counts": next((p["share_counts"] for p in parts
                                     if p.get("share_counts")), None),
               "quantize_modes": {str(p["rank"]): p["quantize_modes"] for p in parts
                                  if p.get("quantize_modes")} or None,
               "boundary_bytes_per_step": sum(p.get("bytes_sent", 0) for p in parts)
               / max(max(p.get("steps_run", 1) for p in parts), 1),
               "ps": _ps_summary(parts, ps_parts) if ps_parts else None,
               "cpu_cores_busy": (sum(p.get("cpu_s", 0.0) for p in parts) / wall
                                  if wall > 0 else None)})


def not_measured(first_step: int, steps: int) -> str:
    """The result's reason when its last attempt timed no step."""
    if first_step >= steps:
        return (f"throughput not measured: the run resumed from its checkpoint at step "
                f"{first_step} of {steps} (the attempt that trained had failed after its last "
                "checkpoint), so no step was left to time; the weights are the checkpoint's")
    return "throughput not measured: no step was timed"


def _ps_summary(trainers: list[dict], servers: list[dict]) -> dict:
    """Rank 0's client counters (training traffic; "client_apart": its other traffic, e.g.
    reading the tables back for the run's state) and every shard's per-table tier counters."""
    client = next((p["ps"] for p in trainers if p.get("ps")), None)
    out = {"client": client["client"] if client else {},
           "servers": [p["stats"] for p in sorted(servers, key=lambda p: p["rank"])]}
    if client and client.get("apart"):
        out["client_apart"] = client["apart"]
    return out


def exec_spans(spec: RunSpec, parts: list[dict]) -> list[Span]:
    """Every rank's measured spans on the simulator's tracks ("stage g / replica r (type)")."""
    plan = spec.plan_obj()
    spans = []
    for p in sorted(parts, key=lambda p: p["rank"]):
        if p.get("role") == "ps":
            continue
        resource = plan.stages[p["stage"]].replica_types[p["replica"]]
        track = f"stage {p['stage']} / replica {p['replica']} ({resource})"
        spans += [Span(group="stages", track=track, name=name, category=cat, start_s=s, end_s=e,
                       args={"rank": p["rank"]}) for name, cat, s, e in p["spans"]]
    return spans
