"""RunResult: one record for the analytic model, the simulator and the real engine.

Predictions and measurements line up row for row because all three write this record.
No simpy, no torch.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

SOURCES = ("analytic", "des", "exec")


@dataclass(frozen=True, slots=True, kw_only=True)
class StageStats:
    layers: tuple[str, ...]
    resource: str
    num_replicas: int
    oct_s: float
    """Compute seconds per batch on one unit (fwd + bwd, summed over the stage's layers)."""
    odt_s: float
    """Data-transfer seconds per batch on one unit, boundary transfer included."""
    alpha: float
    """Amdahl parallel fraction of the stage."""
    exec_time_s: float
    """ET_g(k): seconds per batch with num_replicas units."""
    throughput: float
    """Samples/s this stage alone could sustain."""
    utilisation: float
    """Pipeline throughput / this stage's throughput (1.0 at the bottleneck)."""
    cost_per_hour: float
    bubble: float = 0.0
    comm_share: float = 0.0
    """Share of the stage's time spent on data transfer."""
    replicas: tuple[tuple[str, int], ...] = ()
    """Mixed stage: (type, units) per type, primary (`resource`) first; () for one type.
    oct_s, odt_s and alpha are then the primary type's; exec_time_s is the whole stage's."""

    @property
    def label(self) -> str:
        """'3xv100' or, mixed, '2xv100+1xt4'."""
        groups = self.replicas or ((self.resource, self.num_replicas),)
        return "+".join(f"{n}x{t}" for t, n in groups)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    source: str
    feasible: bool
    reason: str
    """Empty when feasible; otherwise which stage, which type, which cap or limit."""
    throughput: float
    """Samples/s of the whole pipeline (0 when it cannot run)."""
    step_time_s: float
    """Seconds per batch at that throughput."""
    cost_usd: float
    """Total cost of training num_samples (inf when the plan cannot run)."""
    hours: float
    cost_per_hour: float
    provisioning: str
    """"least" | "exact" | "fixed" (every stage had num_replicas)."""
    throughput_limit: float
    bottleneck_stage: int = -1
    stages: tuple[StageStats, ...] = ()
    units_per_type: dict[str, int] = field(default_factory=dict)
    extra: dict = field(default_factory=dict)
    """Source-specific details (e.g. emulated types, proven optimality)."""

    def to_json_dict(self) -> dict:
        d = asdict(self)
        for key in ("cost_usd", "hours", "step_time_s"):
            if not math.isfinite(d[key]):
                d[key] = None
        return d


def result_from_dict(data: dict) -> RunResult:
    data = dict(data)
    for key in ("cost_usd", "hours", "step_time_s"):
        if data.get(key) is None:
            data[key] = math.inf
    data["stages"] = tuple(StageStats(**{**s, "layers": tuple(s["layers"]),
                                         "replicas": tuple(tuple(r) for r in s.get("replicas", ()))})
                           for s in data.get("stages", ()))
    return RunResult(**data)


def save_result(result: RunResult, path: str | Path) -> None:
    from heterps_sim.core.outputs import atomic_write  # whole or absent, fsynced
    atomic_write(Path(path), json.dumps(result.to_json_dict(), indent=1) + "\n")
