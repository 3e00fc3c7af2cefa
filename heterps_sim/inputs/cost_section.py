"""The scenario's `costs:` section: which analytic model plans, and the default model's knobs.

    costs:
      model: default            # or paper: HeterPS's Amdahl model, for reproducing the paper
      min_unit_batch: 64        # no unit gets fewer samples per step
      num_microbatches: 8       # each crosses every stage boundary forward and back
      billing_granularity_s: 60
      by_kind:                  # per resource kind (gpu | cpu), over core/unit_costs.KIND_DEFAULTS
        gpu: {startup_s: 240}
      by_type:                  # per type name, over its kind's values
        a100-40gb-sxm: {step_overhead_s: 0.002}

Memory per unit comes from the catalog (each type's memory), the state and activation bytes
from the model's layers (inputs/roofline.py: unit_memory). docs/design.md has the formulas.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from heterps_sim.core.unit_costs import (
    BILLING_GRANULARITY_S,
    KIND_DEFAULTS,
    MEMORY_HEADROOM,
    CostParams,
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class UnitCosts(_Strict):
    step_overhead_s: float | None = Field(default=None, ge=0, allow_inf_nan=False,
                                          description="Fixed seconds per unit and step.")
    layer_overhead_s: float | None = Field(default=None, ge=0, allow_inf_nan=False,
                                           description="Fixed seconds per unit, step and layer.")
    startup_s: float | None = Field(default=None, ge=0, allow_inf_nan=False,
                                    description="Seconds from launch until a unit trains (billed).")


class CostsSection(_Strict):
    model: Literal["default", "paper"] = Field(
        default="default", description="The analytic model: default, or paper (HeterPS's Amdahl "
        "model, kept exactly for reproducing the paper).")
    min_unit_batch: int = Field(default=1, ge=1, description="Fewest samples per unit and step.")
    num_microbatches: int = Field(default=1, ge=1, description="Microbatches per step (each pays "
                                  "the boundary latency forward and back).")
    billing_granularity_s: float = Field(default=BILLING_GRANULARITY_S, ge=0, allow_inf_nan=False,
                                         description="Billed time is rounded up to this.")
    memory_headroom: float = Field(default=MEMORY_HEADROOM, gt=0, le=1,
                                   description="Share of a unit's memory its state may use.")
    by_kind: dict[Literal["gpu", "cpu"], UnitCosts] = Field(default_factory=dict)
    by_type: dict[str, UnitCosts] = Field(default_factory=dict)


def unit_cost_params(section: CostsSection, cluster, state_bytes, activation_bytes) -> CostParams:
    """CostParams of a scenario: per type, its type's values over its kind's over the defaults."""
    rows = []
    for t in cluster.types:
        row = dict(KIND_DEFAULTS.get(t.kind, KIND_DEFAULTS["gpu"]))
        for layer in (section.by_kind.get(t.kind), section.by_type.get(t.name)):
            if layer is not None:
                row.update({k: v for k, v in layer.model_dump().items() if v is not None})
        rows.append(row)
    return CostParams(
        step_overhead_s=np.array([r["step_overhead_s"] for r in rows], np.float64),
        layer_overhead_s=np.array([r["layer_overhead_s"] for r in rows], np.float64),
        startup_s=np.array([r["startup_s"] for r in rows], np.float64),
        memory_bytes=np.array([t.memory_bytes for t in cluster.types], np.float64),
        state_bytes=np.asarray(state_bytes, np.float64),
        activation_bytes=np.asarray(activation_bytes, np.float64),
        billing_granularity_s=section.billing_granularity_s,
        memory_headroom=section.memory_headroom, min_unit_batch=section.min_unit_batch,
        num_microbatches=section.num_microbatches)


def unknown_types(section: CostsSection, type_names) -> list[str]:
    """costs.by_type names that are not among the scenario's types (bad input)."""
    return [f"costs.by_type.{n}: unknown resource type {n!r} (not among the selected types)"
            for n in section.by_type if n not in type_names]
