"""Profile: seconds per layer x resource type for one batch, by roofline or measured trace.

For ONE unit of type j and one batch of B samples:
    compute  = B * (fwd + bwd FLOPs) / (peak_j * efficiency[layer kind / resource kind])
    memory   = bytes touched / (memory bandwidth_j * memory efficiency[resource kind])
    oct_s    = max(compute, memory)                                   (the roofline)
    odt_s    = raw input read + sparse row pulls/pushes, over the unit's data path
Bytes touched per batch (fp32): dense parameters 6x (read fwd, read bwd, write grad, optimizer
read/write), activations 3x B x (in + out) (fwd write/read, bwd grads), embedding rows 3x
B x rows bytes (gather, gradient, scatter). The data path of a GPU is min(network, host link)
(rows and raw input cross both); a CPU VM reads over its network. Embedding rows come from the
parameter server with no batch de-duplication here (the PS issue measures real hit rates).
A layer cannot run on a type (NaN, "null" in JSON) when its state does not fit in 90% of the
unit's memory: 4x dense parameters (weights, grads, two Adam moments) + 2x B x (in + out)
activations + 2x B x embedding row bytes. Embedding tables themselves live on the parameter
server and need not fit. A measured trace (traces/profiles/*.csv) overrides roofline entries.
A cut after layer i moves B x (output_bytes + output_grad_bytes): activations forward, and
backward the gradients of those that have one (raw ids, labels and features have none).
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

from heterps_sim.core.files import UserFileError
from heterps_sim.core.problem import Problem
from heterps_sim.core.spec import Cluster, Layer, ModelSpec, ProfileOptions, ResourceType, Workload

DEFAULT_EFFICIENCY = {
    # Achieved fraction of peak FLOP/s. Dense GEMMs of CTR-sized MLPs reach about half of
    # peak on GPUs and a bit more of the (much lower) CPU peak; the rest are small kernels.
    "dense/gpu": 0.45, "dense/cpu": 0.55,
    "interaction/gpu": 0.2, "interaction/cpu": 0.3,
    "embedding/gpu": 0.05, "embedding/cpu": 0.1,
    "input/gpu": 0.05, "input/cpu": 0.1,
    "loss/gpu": 0.05, "loss/cpu": 0.1,
    # Achieved fraction of memory bandwidth (streaming, STREAM-like).
    "memory/gpu": 0.75, "memory/cpu": 0.6,
}
DEFAULT_ALPHA = {
    # Amdahl parallel fraction of one layer's work when split over k data-parallel units:
    # what does not split is per-step fixed work (optimizer step, kernel launches, sync).
    "dense": 0.97, "interaction": 0.95, "embedding": 0.9, "input": 0.85, "loss": 0.9,
}
MEMORY_HEADROOM = 0.9
"""Share of a unit's memory a layer's training state may use."""
TRACE_COLUMNS = ("model", "layer", "resource", "batch_size", "oct_s", "odt_s")


class TraceError(UserFileError):
    """A measured trace file that cannot be used; the message names file, row and column."""


def efficiency(options: ProfileOptions, key: str) -> float:
    return options.efficiency.get(key, DEFAULT_EFFICIENCY[key])


def compute_s(layer: Layer, rt: ResourceType, batch: int, options: ProfileOptions) -> float:
    peak = rt.peak_flops_fp16 if (options.use_fp16 and layer.kind == "dense") else rt.peak_flops_fp32
    flops_time = batch * layer.flops / (peak * efficiency(options, f"{layer.kind}/{rt.kind}"))
    touched = (6.0 * layer.param_bytes + 3.0 * batch * (layer.input_bytes + layer.output_bytes)
               + 3.0 * batch * layer.sparse_bytes)
    memory_time = touched / (rt.memory_bandwidth_bytes_per_s * efficiency(options, f"memory/{rt.kind}"))
    return max(flops_time, memory_time)


def data_path_bytes_per_s(rt: ResourceType) -> float:
    if rt.host_link_bytes_per_s is None:
        return rt.network_bytes_per_s
    return min(rt.network_bytes_per_s, rt.host_link_bytes_per_s)


def transfer_s(layer: Layer, rt: ResourceType, batch: int) -> float:
    moved = batch * (2.0 * layer.sparse_bytes + (layer.input_bytes if layer.reads_raw_input else 0.0))
    return moved / data_path_bytes_per_s(rt)


def fits(layer: Layer, rt: ResourceType, batch: int) -> bool:
    state = (4.0 * layer.param_bytes + 2.0 * batch * (layer.input_bytes + layer.output_bytes)
             + 2.0 * batch * layer.sparse_bytes)
    return state <= MEMORY_HEADROOM * rt.memory_bytes


def unit_memory(layer: Layer) -> tuple[float, float]:
    """(state, per-sample) bytes a unit holding the layer keeps: 4x dense parameters (weights,
    grads, two Adam moments), and 2 x (in + out) activations + 2 x embedding row bytes per
    sample in flight (the default model's memory limit; fits() is the paper's per-layer test)."""
    return 4.0 * layer.param_bytes, 2.0 * (layer.input_bytes + layer.output_bytes) + 2.0 * layer.sparse_bytes


def load_trace(path: str | Path) -> list[dict]:
    """Rows of a measured trace CSV (columns TRACE_COLUMNS; odt_s may be blank)."""
    path = Path(path)
    try:
        with path.open(newline="") as fh:
            reader = csv.DictReader(fh)
            missing = [c for c in TRACE_COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise TraceError(f"{path}: missing column(s) {', '.join(missing)}")
            rows = list(reader)
    except OSError as exc:
        raise TraceError(f"{path}: cannot read ({exc.strerror})") from None
    parsed = []
    for n, row in enumerate(rows, start=2):
        try:
            parsed.append({"model": row["model"], "layer": row["layer"], "resource": row["resource"],
                           "batch_size": int(row["batch_size"]), "oct_s": float(row["oct_s"]),
                           "odt_s": float(row["odt_s"]) if row["odt_s"] else None})
        except (ValueError, TypeError):
            raise TraceError(f"{path}: line {n}: batch_size, oct_s and odt_s must be numbers") from None
        problem = _bad_trace_value(parsed[-1])
        if problem:
            raise TraceError(f"{path}: line {n}: {problem}")
    return parsed


def _bad_trace_value(row: dict) -> str:
    """'' when a parsed trace row's numbers make sense: a batch of at least one sample (the
    times are scaled by batch / batch_size) and finite times >= 0."""
    from heterps_sim.core.limits import MAX_BATCH
    if not 1 <= row["batch_size"] <= MAX_BATCH:
        return f"batch_size: expected 1..{MAX_BATCH:,} samples, got {row['batch_size']}"
    for key in ("oct_s", "odt_s"):
        x = row[key]
        if x is not None and not (math.isfinite(x) and x >= 0):
            return f"{key}: expected a finite time >= 0 s, got {x}"
    return ""


def apply_traces(model: ModelSpec, cluster: Cluster, batch: int, oct_s, odt_s, traces) -> int:
    """Override entries from measured rows; returns how many entries were overridden.

    Of the rows for one (layer, type), the one measured at the batch size nearest this one (by
    ratio; a tie goes to the later row) is used, scaled linearly to this batch size: a row at
    exactly this batch size is used as measured."""
    layer_index = {name: i for i, name in enumerate(model.layer_names)}
    type_index = {name: j for j, name in enumerate(cluster.type_names)}
    nearest: dict[tuple[int, int], dict] = {}
    for row in traces:
        i, j = layer_index.get(row["layer"]), type_index.get(row["resource"])
        if row["model"] != model.name or i is None or j is None:
            continue
        distance = abs(np.log(row["batch_size"] / batch))
        if (i, j) not in nearest or distance <= abs(np.log(nearest[i, j]["batch_size"] / batch)):
            nearest[i, j] = row
    for (i, j), row in nearest.items():
        scale = batch / row["batch_size"]
        oct_s[i, j] = row["oct_s"] * scale
        if row["odt_s"] is not None:
            odt_s[i, j] = row["odt_s"] * scale
    return len(nearest)


def build_problem(model: ModelSpec, cluster: Cluster, workload: Workload,
                  options: ProfileOptions | None = None, traces=(), name: str = "",
                  costs=None) -> Problem:
    """The numeric problem of a scenario: roofline profile, measured traces on top.
    `costs`: the scenario's costs section (inputs/cost_section.py; None: its defaults)."""
    from heterps_sim.inputs.cost_section import CostsSection, unit_cost_params

    costs = costs or CostsSection()
    options = options or ProfileOptions()
    B = workload.batch_size
    L, M = len(model.layers), len(cluster.types)
    oct_s, odt_s, alpha = np.empty((L, M)), np.empty((L, M)), np.empty((L, M))
    for i, layer in enumerate(model.layers):
        for j, rt in enumerate(cluster.types):
            oct_s[i, j] = compute_s(layer, rt, B, options)
            odt_s[i, j] = transfer_s(layer, rt, B)
            alpha[i, j] = options.alpha.get(layer.kind, DEFAULT_ALPHA[layer.kind])
    apply_traces(model, cluster, B, oct_s, odt_s, traces)
    unfit = np.array([[not fits(layer, rt, B) for rt in cluster.types] for layer in model.layers])
    for a in (oct_s, odt_s, alpha):
        a[unfit.reshape(L, M)] = np.nan
    boundary = np.array([B * layer.boundary_bytes for layer in model.layers])
    boundary[-1] = 0.0
    return Problem(
        name=name or model.name, batch_size=B, throughput_limit=workload.throughput_limit,
        num_samples=workload.num_samples, oct_s=oct_s, odt_s=odt_s, alpha=alpha,
        odt_parallel=options.odt_parallel, boundary_bytes=boundary,
        network_bytes_per_s=np.array([t.network_bytes_per_s for t in cluster.types]),
        latency_s=options.latency_s,
        price_per_hour=np.array([t.price_per_hour for t in cluster.types]),
        available=cluster.available, type_names=cluster.type_names,
        layer_names=model.layer_names, type_kinds=tuple(t.kind for t in cluster.types),
        param_bytes=np.array([layer.param_bytes for layer in model.layers]),
        sparse_bytes=np.array([layer.sparse_bytes for layer in model.layers]),
        cost_model=costs.model, costs=unit_cost_params(
            costs, cluster, [unit_memory(layer)[0] for layer in model.layers],
            [unit_memory(layer)[1] for layer in model.layers]))
