"""A Problem calibrated to this machine for one plan: what the engine will really do.

The scenario's problem uses the roofline of the catalog types; the engine runs them on this
machine's CPU, each stage slowed by its binding's slowdown. So, per plan (microbatches m,
batch B, cuts), from a profile (profiler.profile_layers rows) and the link fit:

    oct_s[i][j] = slowdown_j * (m * a_i + c_i * B)     a_i + c_i b = layer i's F+B at b samples
                  + m * (encode at a cut after i, decode at a cut before i)
    + slowdown_j * u_i                                  u_i = one update of layer i's parameters
    alpha_i = 1 - u_i / oct_i   microbatches split over replicas; every replica updates once
    odt_s = 0   local embeddings: lookups are compute; data loading is prefetched
    boundary: bytes over the loopback bandwidth, latency L per message (the simulator's
    `transfers`); the analytic model has one latency per batch, so it gets 2 m L (a forward
    and a backward message per microbatch).
    param_bytes: every stage parameter, tables included (local tables are all-reduced).
    step_overhead_s + m * microbatch_overhead_s: the runtime's work outside layers (batch
    loading, bookkeeping; per step, and per microbatch: slicing, scheduling, spans), not
    dilated by an emulated type; the per-step part is serial on every replica, the
    per-microbatch part splits with the microbatches. calibration/validate.py measures both from the idle
    time of one-rank runs at 1 and 8 microbatches, where nothing waits on a peer.

The calibrated problem is under the PAPER model (cost_model "paper", whatever the scenario's):
every term above is measured and folded into the paper's terms (the runtime's fixed work in
oct and alpha, a batch's 2 m messages in latency_s). The default model would add its own
fixed costs (catalog guesses, docs/design.md) on top of the measured ones, 2 m latencies on
top of 2 m L, and a ring all-reduce where the simulator applies the measured one. So the
analytic prediction is the paper's formula on this machine's numbers, and the simulator adds
what that formula leaves out (bubbles, messages, the measured all-reduce, shared cores).
No torch.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from heterps_exec.calibration.profiler import fit_linear
from heterps_sim.core.plan import Plan
from heterps_sim.core.problem import Problem
from heterps_sim.inputs.graph import ModelGraph


@dataclass(frozen=True, slots=True)
class LayerFit:
    """Per-layer a + c * samples (seconds) of forward+backward, encode and decode."""

    compute: dict[str, tuple[float, float]]
    encode: dict[str, tuple[float, float]]
    decode: dict[str, tuple[float, float]]
    optimizer: dict[str, float]
    """Seconds of one update of the layer's parameters (once per step and replica)."""

    @staticmethod
    def from_rows(rows: list[dict]) -> LayerFit:
        by_layer: dict[str, list[dict]] = {}
        for r in rows:
            by_layer.setdefault(r["layer"], []).append(r)

        def fit(key):
            return {name: fit_linear([float(r["batch_size"]) for r in rs],
                                     [float(r[key]) for r in rs]) for name, rs in by_layer.items()}

        compute = {name: fit_linear([float(r["batch_size"]) for r in rs],
                                    [float(r["forward_s"]) + float(r["backward_s"]) for r in rs])
                   for name, rs in by_layer.items()}
        optimizer = {name: float(np.median([float(r.get("optimizer_s") or 0.0) for r in rs]))
                     for name, rs in by_layer.items()}
        return LayerFit(compute, fit("encode_s"), fit("decode_s"), optimizer)


def _at(fit: tuple[float, float], samples: float, times: int) -> float:
    a, c = fit
    return times * a + c * samples


def calibrated_problem(base: Problem, graph: ModelGraph | None, plan: Plan, fit: LayerFit,
                       slowdowns: list[float], latency_s: float, bytes_per_s: float,
                       *, for_des: bool, step_overhead_s: float = 0.0,
                       microbatch_overhead_s: float = 0.0,
                       param_bytes: list[float] | None = None) -> Problem:
    """The base problem with oct/odt/alpha/links replaced by this machine's numbers, under the
    paper model (the module docstring says why). `param_bytes` (per layer, tables included) stands in for the graph's where there is no
    zoo graph (a PyTorch module: calibration/user_profiler.layer_param_bytes)."""
    layers = list(base.layer_names)
    missing = [n for n in layers if n not in fit.compute]
    if missing:
        raise ValueError(f"the profile has no layers {missing[:3]} (profile model "
                         f"{graph.name if graph else 'of the scenario'!r}?)")
    m, batch = plan.num_microbatches, base.batch_size
    per_layer = np.array([_at(fit.compute[n], batch, m) for n in layers])
    cuts = {stage.layers[-1] for stage in plan.stages[:-1]}
    starts = {stage.layers[0] for stage in plan.stages[1:]}
    for i, name in enumerate(layers):
        if name in cuts:
            per_layer[i] += _at(fit.encode[name], batch, m)
        if i and layers[i - 1] in cuts and name in starts:
            per_layer[i] += _at(fit.decode[layers[i - 1]], batch, m)
    update = np.array([fit.optimizer.get(n, 0.0) for n in layers])
    oct_s = np.full((len(layers), base.num_types), np.nan)
    alpha = np.full_like(oct_s, np.nan)
    for stage, slow in zip(plan.stages, slowdowns, strict=True):
        j = base.type_index(stage.resource)
        # the runtime's own work (loading, bookkeeping) is not dilated: divided by `slow` here,
        # multiplied back below; per step it is serial, per microbatch it splits
        first = layers.index(stage.layers[0])
        serial, split = update.copy(), per_layer.copy()
        serial[first] += step_overhead_s / slow
        split[first] += m * microbatch_overhead_s / slow
        for name in stage.layers:
            i = layers.index(name)
            oct_s[i, j] = (split[i] + serial[i]) * slow
            alpha[i, j] = split[i] / (split[i] + serial[i]) if oct_s[i, j] > 0 else 1.0
    runnable = ~np.isnan(oct_s)
    params = np.array(param_bytes if param_bytes is not None else
                      [_param_bytes(graph, n) for n in layers], dtype=float)
    return replace(
        base, oct_s=oct_s, odt_s=np.where(runnable, 0.0, np.nan),
        alpha=alpha, odt_parallel=True,
        network_bytes_per_s=np.full(base.num_types, bytes_per_s),
        latency_s=latency_s if for_des else 2 * m * latency_s, param_bytes=params,
        sparse_bytes=None, available=(None,) * base.num_types,
        cost_model="paper", costs=None)  # measured terms: nothing of the default model's added


def _param_bytes(graph: ModelGraph, layer: str) -> float:
    node = graph.node(layer)
    tables = node.attrs.get("tables", ()) if node.op == "embedding" else ()
    return node.param_bytes + 4.0 * node.attrs.get("dim", 0) * sum(tables)
