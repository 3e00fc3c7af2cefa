"""A scheduling plan: ordered pipeline stages, each a run of layers on one resource type.

Shared by the analytic model, the simulator and the execution engine; `Stage.layers` are the
torch module names, so one plan.json drives all three. A stage with `num_replicas=None` means
"provision it"; with a number, "use exactly this". No simpy, no torch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

FORMAT_VERSION = 1
SCHEDULES = ("gpipe", "1f1b", "async")


@dataclass(frozen=True, slots=True, kw_only=True)
class Stage:
    layers: tuple[str, ...]
    resource: str
    num_replicas: int | None = None

    def __post_init__(self) -> None:
        if not self.layers:
            raise ValueError("a stage needs at least one layer")
        if self.num_replicas is not None and self.num_replicas < 1:
            raise ValueError("num_replicas must be >= 1 when given")


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    stages: tuple[Stage, ...]
    num_microbatches: int = 1
    schedule: str = "gpipe"

    def __post_init__(self) -> None:
        if not self.stages:
            raise ValueError("a plan needs at least one stage")
        if self.num_microbatches < 1:
            raise ValueError("num_microbatches must be >= 1")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}")

    @property
    def layer_names(self) -> tuple[str, ...]:
        return tuple(name for stage in self.stages for name in stage.layers)

    def problems(self, layer_names: tuple[str, ...], type_names: tuple[str, ...]) -> list[str]:
        """What makes this plan unusable for a model/cluster; empty when it is fine."""
        issues = []
        if self.layer_names != tuple(layer_names):
            issues.append(_coverage_problem(self.layer_names, tuple(layer_names)))
        for g, stage in enumerate(self.stages):
            if stage.resource not in type_names:
                issues.append(f"stages[{g}].resource: unknown resource type {stage.resource!r}")
        return issues

    def with_replicas(self, replicas: list[int] | None) -> Plan:
        """The same plan with every stage's replica count fixed (None = all provisioned)."""
        ks = replicas if replicas is not None else [None] * len(self.stages)
        stages = tuple(Stage(layers=s.layers, resource=s.resource, num_replicas=k)
                       for s, k in zip(self.stages, ks))
        return Plan(stages=stages, num_microbatches=self.num_microbatches, schedule=self.schedule)

    def to_json_dict(self) -> dict:
        stages = []
        for s in self.stages:
            entry: dict = {"layers": list(s.layers), "resource": s.resource}
            if s.num_replicas is not None:
                entry["num_replicas"] = s.num_replicas
            stages.append(entry)
        return {"format_version": FORMAT_VERSION, "num_microbatches": self.num_microbatches,
                "schedule": self.schedule, "stages": stages}


def _coverage_problem(got: tuple[str, ...], want: tuple[str, ...]) -> str:
    for pos, (g, w) in enumerate(zip(got, want)):
        if g != w:
            return (f"stages: layer #{pos} is {g!r} but the model's layer #{pos} is {w!r} "
                    "(a plan must cover every layer once, in model order)")
    if len(got) < len(want):
        return f"stages: the plan stops before layer {want[len(got)]!r} (covers {len(got)} of {len(want)})"
    return f"stages: the plan lists {len(got) - len(want)} layer(s) beyond the model's last, {want[-1]!r}"


class _StageModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    layers: list[str] = Field(min_length=1)
    resource: str
    num_replicas: int | None = Field(default=None, ge=1)


class PlanModel(BaseModel):
    """Validation of plan.json (`extra="forbid"`)."""

    model_config = ConfigDict(extra="forbid")
    format_version: int = Field(default=FORMAT_VERSION, ge=FORMAT_VERSION, le=FORMAT_VERSION)
    num_microbatches: int = Field(default=1, ge=1)
    schedule: str = Field(default="gpipe", pattern="^(gpipe|1f1b|async)$")
    stages: list[_StageModel] = Field(min_length=1)

    def to_plan(self) -> Plan:
        return Plan(
            stages=tuple(Stage(layers=tuple(s.layers), resource=s.resource,
                               num_replicas=s.num_replicas) for s in self.stages),
            num_microbatches=self.num_microbatches, schedule=self.schedule)


def plan_from_dict(data: dict) -> Plan:
    return PlanModel.model_validate(data).to_plan()


def plan_from_assignment(layer_names, type_names, assignment, cuts=None) -> Plan:
    """Build a plan from a type index per layer: maximal runs of one type are stages.

    `cuts`, optional, is a set of layer positions i after which a stage ends even when layer
    i+1 has the same type (the `allow_same_type_cuts` option).
    """
    cuts = set(cuts or ())
    stages, start = [], 0
    for i in range(1, len(layer_names) + 1):
        if i == len(layer_names) or assignment[i] != assignment[i - 1] or (i - 1) in cuts:
            stages.append(Stage(layers=tuple(layer_names[start:i]),
                                resource=type_names[int(assignment[start])]))
            start = i
    return Plan(stages=tuple(stages))


def save_plan(plan: Plan, path: str | Path) -> None:
    Path(path).write_text(json.dumps(plan.to_json_dict(), indent=1) + "\n")
