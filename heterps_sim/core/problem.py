"""The numeric problem: everything the cost model needs, as plain arrays.

`heterps-sim problem SCENARIO --json` exports it, so any solver or checker can reproduce every
cost; every command also accepts such a JSON file as input. Indices: i = layer, j = type.
`oct_s[i][j]` / `odt_s[i][j]` are seconds for ONE unit and one batch of `batch_size` samples
(compute fwd+bwd / data transfer); NaN (JSON null) where layer i cannot run on type j.
No simpy, no torch.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from heterps_sim.core.limits import MAX_LAYERS, MAX_TYPES, MAX_UNITS
from heterps_sim.core.ps_spec import PsSpec
from heterps_sim.core.unit_costs import COST_MODELS, CostParams, costs_from_json_dict, default_costs

FORMAT = "heterps-problem/1"


@dataclass(frozen=True, slots=True, kw_only=True)
class Problem:
    batch_size: int
    throughput_limit: float
    num_samples: float
    oct_s: np.ndarray
    odt_s: np.ndarray
    alpha: np.ndarray
    odt_parallel: bool
    boundary_bytes: np.ndarray
    network_bytes_per_s: np.ndarray
    latency_s: float
    price_per_hour: np.ndarray
    available: tuple[int | None, ...]
    type_names: tuple[str, ...]
    layer_names: tuple[str, ...]
    type_kinds: tuple[str, ...] = ()
    """"cpu"/"gpu" per type when known (for the cpu-only / gpu-only baselines)."""
    name: str = ""
    param_bytes: np.ndarray | None = None
    """Dense parameter bytes per layer (what a stage's replicas all-reduce each step); the
    analytic model does not use it, the simulator does. None = unknown (treated as 0)."""
    sparse_bytes: np.ndarray | None = None
    """Embedding row bytes each sample pulls per layer (pushed back again as gradients);
    the simulator's parameter-server model uses it. None = unknown (treated as 0)."""
    ps: PsSpec | None = None
    """The parameter server of the embedding layers (core/ps_spec.py); None = DEFAULT_PS."""
    cost_model: str = "paper"
    """The analytic model: "paper" (HeterPS's Amdahl model) or "default" (adds what dominates
    at scale; docs/design.md). A Problem built in code is the paper's unless it says so;
    scenarios and problem files are "default" unless they say "paper"."""
    costs: CostParams | None = None
    """The default model's numbers (core/unit_costs.py); None = the documented defaults."""

    def __post_init__(self) -> None:
        if self.cost_model not in COST_MODELS:
            raise ValueError(f"cost_model must be one of {COST_MODELS}, got {self.cost_model!r}")

    @property
    def unit_costs(self) -> CostParams:
        """`costs`, or the documented defaults by type kind when the problem carries none."""
        if self.costs is not None:
            return self.costs
        return default_costs(self.type_kinds, self.num_types, self.num_layers)

    def with_model(self, cost_model: str) -> Problem:
        """The same problem under another analytic model ("paper" or "default"); odt_s gains
        or loses the parameter server's side of embedding traffic (core/ps_odt.py)."""
        from heterps_sim.core.ps_odt import model_odt_s
        fields = {f: getattr(self, f) for f in self.__dataclass_fields__}
        fields["cost_model"] = cost_model
        fields["odt_s"] = model_odt_s(self, cost_model)
        return Problem(**fields)

    @property
    def num_layers(self) -> int:
        return len(self.layer_names)

    @property
    def num_types(self) -> int:
        return len(self.type_names)

    @property
    def runnable(self) -> np.ndarray:
        """Bool (L, M): layer i can run on type j."""
        return ~(np.isnan(self.oct_s) | np.isnan(self.odt_s) | np.isnan(self.alpha))

    @property
    def available_array(self) -> np.ndarray:
        """Units available per type as int64, -1 = unlimited (for numba kernels)."""
        return np.array([-1 if a is None else int(a) for a in self.available], dtype=np.int64)

    def type_index(self, name: str) -> int:
        try:
            return self.type_names.index(name)
        except ValueError:
            raise KeyError(f"unknown resource type {name!r}") from None

    def with_limit(self, throughput_limit: float) -> Problem:
        """The same problem under another throughput floor (sweeps)."""
        fields = {f: getattr(self, f) for f in self.__dataclass_fields__}
        fields["throughput_limit"] = float(throughput_limit)
        return Problem(**fields)

    def to_json_dict(self) -> dict:
        def grid(a: np.ndarray) -> list:
            return [[None if math.isnan(x) else float(x) for x in row] for row in a]

        return {
            "format": FORMAT,
            "name": self.name,
            "batch_size": self.batch_size,
            "throughput_limit": self.throughput_limit,
            "num_samples": self.num_samples,
            "oct_s": grid(self.oct_s),
            "odt_s": grid(self.odt_s),
            "alpha": grid(self.alpha),
            "odt_parallel": self.odt_parallel,
            "boundary_bytes": [float(x) for x in self.boundary_bytes],
            "network_bytes_per_s": [float(x) for x in self.network_bytes_per_s],
            "latency_s": self.latency_s,
            "price_per_hour": [float(x) for x in self.price_per_hour],
            "available": list(self.available),
            "type_names": list(self.type_names),
            "layer_names": list(self.layer_names),
            "type_kinds": list(self.type_kinds),
            "param_bytes": None if self.param_bytes is None else [float(x) for x in self.param_bytes],
            "sparse_bytes": None if self.sparse_bytes is None else [float(x) for x in self.sparse_bytes],
            "ps": None if self.ps is None else self.ps.model_dump(),
            "cost_model": self.cost_model,
            "costs": None if self.costs is None else self.costs.to_json_dict(),
        }


class ProblemModel(BaseModel):
    """Validation of a problem JSON file (`extra="forbid"`: a typo is an error)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    format: str = FORMAT
    name: str = ""
    batch_size: int = Field(gt=0)
    throughput_limit: float = Field(gt=0, allow_inf_nan=False)
    num_samples: float = Field(gt=0, allow_inf_nan=False)
    oct_s: list[list[float | None]]
    odt_s: list[list[float | None]]
    alpha: list[list[float | None]]
    odt_parallel: bool = True
    boundary_bytes: list[float]
    network_bytes_per_s: list[float]
    latency_s: float = Field(ge=0, allow_inf_nan=False)
    price_per_hour: list[float]
    available: list[int | None]
    type_names: list[str]
    layer_names: list[str]
    type_kinds: list[str] = []
    param_bytes: list[float] | None = None
    sparse_bytes: list[float] | None = None
    ps: PsSpec | None = None
    cost_model: str = Field(default="default", pattern="^(default|paper)$")
    costs: dict | None = None

    @field_validator("format")
    @classmethod
    def _known_format(cls, v: str) -> str:
        if v != FORMAT:
            raise ValueError(f"unsupported format {v!r}, expected {FORMAT!r}")
        return v

    @model_validator(mode="after")
    def _shapes_and_signs(self) -> ProblemModel:
        num_layers, num_types = len(self.layer_names), len(self.type_names)
        if num_layers == 0:
            raise ValueError("layer_names: the model has no layers")
        if num_types == 0:
            raise ValueError("type_names: no resource types")
        if num_layers > MAX_LAYERS or num_types > MAX_TYPES:
            raise ValueError(f"at most {MAX_LAYERS:,} layers and {MAX_TYPES:,} types, got "
                             f"{num_layers:,} x {num_types:,}")
        for key in ("oct_s", "odt_s", "alpha"):
            rows = getattr(self, key)
            if len(rows) != num_layers or any(len(r) != num_types for r in rows):
                raise ValueError(f"{key}: must be {num_layers} rows x {num_types} columns")
            for i, row in enumerate(rows):
                for j, x in enumerate(row):
                    if x is not None and (not math.isfinite(x) or x < 0):
                        raise ValueError(f"{key}[{i}][{j}]: must be a finite number >= 0 or null")
                    if key == "alpha" and x is not None and x >= 1:
                        raise ValueError(f"alpha[{i}][{j}]: a parallel fraction must be < 1 "
                                         "(alpha = 1 would make any throughput reachable)")
        for i in range(num_layers):
            for j in range(num_types):
                o, d = self.oct_s[i][j], self.odt_s[i][j]
                if o is not None and d is not None and o + d <= 0:
                    raise ValueError(f"oct_s[{i}][{j}] + odt_s[{i}][{j}]: a layer must take some "
                                     "time (both are 0)")
        for key, n in (("boundary_bytes", num_layers), ("network_bytes_per_s", num_types),
                       ("price_per_hour", num_types), ("available", num_types)):
            if len(getattr(self, key)) != n:
                raise ValueError(f"{key}: needs {n} entries, got {len(getattr(self, key))}")
        for key in ("boundary_bytes", "network_bytes_per_s", "price_per_hour"):
            for k, x in enumerate(getattr(self, key)):
                if not math.isfinite(x) or x < 0 or (x == 0 and key != "boundary_bytes"):
                    bound = ">= 0" if key == "boundary_bytes" else "> 0"
                    raise ValueError(f"{key}[{k}]: must be a finite number {bound}, got {x}")
        for k, a in enumerate(self.available):
            if a is not None and not 0 <= a <= MAX_UNITS:
                raise ValueError(f"available[{k}]: must be 0..{MAX_UNITS:,} units or null, got {a}")
        for key in ("param_bytes", "sparse_bytes"):
            values = getattr(self, key)
            if values is not None and len(values) != num_layers:
                raise ValueError(f"{key}: needs {num_layers} entries, got {len(values)}")
            if values is not None and any(not math.isfinite(x) or x < 0 for x in values):
                raise ValueError(f"{key}: every entry must be a finite number >= 0")
        if self.type_kinds and len(self.type_kinds) != num_types:
            raise ValueError(f"type_kinds: needs {num_types} entries")
        for key in ("type_names", "layer_names"):
            names = getattr(self, key)
            if len(set(names)) != len(names):
                raise ValueError(f"{key}: names must be unique")
        self._costs()  # a malformed costs section is bad input here, named
        return self

    def to_problem(self) -> Problem:
        def grid(rows: list) -> np.ndarray:
            return np.array([[np.nan if x is None else x for x in r] for r in rows], np.float64)

        oct_s, odt_s, alpha = grid(self.oct_s), grid(self.odt_s), grid(self.alpha)
        unusable = np.isnan(oct_s) | np.isnan(odt_s) | np.isnan(alpha)
        for a in (oct_s, odt_s, alpha):
            a[unusable] = np.nan
        return Problem(
            name=self.name, batch_size=self.batch_size, throughput_limit=self.throughput_limit,
            num_samples=self.num_samples, oct_s=oct_s, odt_s=odt_s, alpha=alpha,
            odt_parallel=self.odt_parallel,
            boundary_bytes=np.array(self.boundary_bytes, np.float64),
            network_bytes_per_s=np.array(self.network_bytes_per_s, np.float64),
            latency_s=self.latency_s, price_per_hour=np.array(self.price_per_hour, np.float64),
            available=tuple(self.available), type_names=tuple(self.type_names),
            layer_names=tuple(self.layer_names), type_kinds=tuple(self.type_kinds),
            param_bytes=None if self.param_bytes is None else np.array(self.param_bytes, np.float64),
            sparse_bytes=None if self.sparse_bytes is None else np.array(self.sparse_bytes, np.float64),
            ps=self.ps, cost_model=self.cost_model, costs=self._costs(),
        )

    def _costs(self) -> CostParams | None:
        if self.costs is None:
            return None
        try:
            costs = costs_from_json_dict(self.costs)
        except (KeyError, TypeError) as exc:
            raise ValueError(f"costs: missing or malformed field {exc}") from None
        for key, n in (("step_overhead_s", len(self.type_names)),
                       ("state_bytes", len(self.layer_names))):
            if len(getattr(costs, key)) != n:
                raise ValueError(f"costs.{key}: needs {n} entries")
        return costs


def problem_from_dict(data: dict) -> Problem:
    """Validate a problem dict (raises pydantic.ValidationError naming the field)."""
    return ProblemModel.model_validate(data).to_problem()


def save_problem(problem: Problem, path: str | Path) -> None:
    from heterps_sim.core.outputs import atomic_write  # whole or absent, fsynced
    atomic_write(Path(path), json.dumps(problem.to_json_dict(), indent=1) + "\n")
