"""What a unit costs beyond its share of the work: the default cost model's inputs.

`Problem.cost_model` picks the analytic model: "paper" (HeterPS's Amdahl model, kept exactly
for reproducing the paper) or "default" (the paper's terms plus what dominates at scale: the
stage all-reduce, per-microbatch boundary latency, the parameter server's shared bandwidth,
per-unit fixed costs, per-unit memory, startup and billing). `Problem.costs` holds the
default model's numbers; docs/design.md gives the formulas and where each default comes from.
numpy only (core: no simpy, no torch).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

COST_MODELS = ("default", "paper")

KIND_DEFAULTS = {
    # step_overhead_s: per unit and step, whatever the stage: the optimizer step's launches,
    #   zero_grad and one host-device synchronisation - about 100 kernel launches of ~10 us on
    #   a GPU; a tenth of it on a CPU (eager operator dispatch, no device to wait for).
    # layer_overhead_s: per unit, step and layer: about 20 kernel launches (forward, backward,
    #   optimizer update) of ~10 us on a GPU; ~2.5 us per operator dispatch on a CPU.
    # startup_s: from launch until the unit trains: VM boot, image pull and framework start
    #   (2 min for a CPU VM); GPU VMs add the driver, CUDA context and a larger image (5 min).
    "gpu": {"step_overhead_s": 1e-3, "layer_overhead_s": 2e-4, "startup_s": 300.0},
    "cpu": {"step_overhead_s": 1e-4, "layer_overhead_s": 5e-5, "startup_s": 120.0},
}
"""Documented defaults per resource kind; a type of unknown kind takes the gpu row."""

BILLING_GRANULARITY_S = 60.0
"""Cloud providers bill per second with a one-minute minimum: whole minutes, a stated rule
(it over-charges a job by under a minute)."""

MEMORY_HEADROOM = 0.9
"""Share of a unit's memory its training state may use (as the roofline's per-layer test)."""

@dataclass(frozen=True, slots=True, kw_only=True)
class CostParams:
    """The default model's per-type, per-layer and global numbers (SI units)."""

    step_overhead_s: np.ndarray
    """(M,) seconds a unit of type j spends per step on fixed work, whatever its batch."""
    layer_overhead_s: np.ndarray
    """(M,) seconds per step and per layer of its stage (kernel launches, update)."""
    startup_s: np.ndarray
    """(M,) seconds from launch until a unit of type j trains (billed, no samples)."""
    memory_bytes: np.ndarray
    """(M,) a unit's memory; inf = unknown (no memory limit)."""
    state_bytes: np.ndarray
    """(L,) training state a unit holding layer i keeps whatever its batch: weights,
    gradients and two Adam moments (4x the dense parameters)."""
    activation_bytes: np.ndarray
    """(L,) bytes a unit holds per sample in flight: 2 x (input + output) activations and
    2 x embedding row bytes, as the roofline counts them."""
    billing_granularity_s: float = BILLING_GRANULARITY_S
    """Billed time is rounded up to a multiple of this (0: billed to the second)."""
    memory_headroom: float = MEMORY_HEADROOM
    min_unit_batch: int = 1
    """No unit gets fewer samples per step than this: k <= B // min_unit_batch."""
    num_microbatches: int = 1
    """Microbatches per step: each crosses a stage boundary forward and back, paying the
    latency each time."""

    def __post_init__(self) -> None:
        for name in ("step_overhead_s", "layer_overhead_s", "startup_s", "state_bytes",
                     "activation_bytes"):
            a = getattr(self, name)
            if np.any(~np.isfinite(a)) or np.any(a < 0):
                raise ValueError(f"costs.{name}: every entry must be a finite number >= 0")
        if np.any(np.isnan(self.memory_bytes)) or np.any(self.memory_bytes <= 0):
            raise ValueError("costs.memory_bytes: every entry must be > 0 (inf: unknown)")
        if not (math.isfinite(self.billing_granularity_s) and self.billing_granularity_s >= 0):
            raise ValueError("costs.billing_granularity_s: must be a finite number >= 0")
        if not 0 < self.memory_headroom <= 1:
            raise ValueError("costs.memory_headroom: must lie in (0, 1]")
        if self.min_unit_batch < 1 or self.num_microbatches < 1:
            raise ValueError("costs.min_unit_batch and costs.num_microbatches: must be >= 1")

    def to_json_dict(self) -> dict:
        def floats(a) -> list:
            return [None if math.isinf(x) else float(x) for x in a]

        return {"step_overhead_s": floats(self.step_overhead_s),
                "layer_overhead_s": floats(self.layer_overhead_s),
                "startup_s": floats(self.startup_s), "memory_bytes": floats(self.memory_bytes),
                "state_bytes": floats(self.state_bytes),
                "activation_bytes": floats(self.activation_bytes),
                "billing_granularity_s": self.billing_granularity_s,
                "memory_headroom": self.memory_headroom, "min_unit_batch": self.min_unit_batch,
                "num_microbatches": self.num_microbatches}


def costs_from_json_dict(d: dict) -> CostParams:
    """The inverse of CostParams.to_json_dict (null = inf for memory and PS bandwidth)."""
    def arr(key: str) -> np.ndarray:
        return np.array([math.inf if x is None else float(x) for x in d[key]], np.float64)

    return CostParams(
        step_overhead_s=arr("step_overhead_s"), layer_overhead_s=arr("layer_overhead_s"),
        startup_s=arr("startup_s"), memory_bytes=arr("memory_bytes"),
        state_bytes=arr("state_bytes"), activation_bytes=arr("activation_bytes"),
        billing_granularity_s=float(d.get("billing_granularity_s", BILLING_GRANULARITY_S)),
        memory_headroom=float(d.get("memory_headroom", MEMORY_HEADROOM)),
        min_unit_batch=int(d.get("min_unit_batch", 1)),
        num_microbatches=int(d.get("num_microbatches", 1)))


def default_costs(type_kinds, num_types: int, num_layers: int, *,
                  overrides: dict | None = None) -> CostParams:
    """KIND_DEFAULTS per type (by kind), no memory limit, no state: for problems that carry
    no costs (problem files of the paper's format, problems built in code)."""
    kinds = list(type_kinds) if type_kinds else ["gpu"] * num_types
    row = [KIND_DEFAULTS.get(k, KIND_DEFAULTS["gpu"]) for k in kinds]
    fields = dict(
        step_overhead_s=np.array([r["step_overhead_s"] for r in row], np.float64),
        layer_overhead_s=np.array([r["layer_overhead_s"] for r in row], np.float64),
        startup_s=np.array([r["startup_s"] for r in row], np.float64),
        memory_bytes=np.full(num_types, math.inf), state_bytes=np.zeros(num_layers),
        activation_bytes=np.zeros(num_layers))
    fields.update(overrides or {})
    return CostParams(**fields)
