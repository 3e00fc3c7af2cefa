"""A scheduling plan: ordered pipeline stages, each a run of layers on one or more resource types.

Shared by the analytic model, the simulator and the execution engine; `Stage.layers` are the
torch module names, so one plan.json drives all three. A single-type stage names `resource`,
with `num_replicas=None` meaning "provision it" and a number "use exactly this". A mixed stage
lists `replicas`, (type, count) per distinct type, counts required: e.g. 2 x V100 + 1 x T4
(the replicas split each batch by speed; cost/reference.py). No simpy, no torch.

plan.json format 2 (written) adds the mixed form; format 1 files still load (`upgrade_plan_dict`,
and `heterps-sim convert-plan OLD.json -o NEW.json` rewrites them):

    {"layers": [...], "resource": "v100", "num_replicas": 2}              (either version)
    {"layers": [...], "replicas": [{"resource": "v100", "count": 2},
                                   {"resource": "t4", "count": 1}]}        (version 2)

A plan may also say who hosts the parameter server (cost/ps_hosts.py: a priced PS is
num_shards units of a plan type), an optional top-level entry written only when set, so a plan
without it reads and writes as before:

    "ps": {"resource": "r7i-8xlarge", "num_shards": 2}
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from heterps_sim.core.limits import MAX_MICROBATCHES, MAX_REPLICAS

FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
SCHEDULES = ("gpipe", "1f1b", "async")


@dataclass(frozen=True, slots=True, kw_only=True)
class Stage:
    layers: tuple[str, ...]
    resource: str = ""
    """The stage's type; of a mixed stage, the first (primary) type of `replicas`."""
    num_replicas: int | None = None
    """Units of the stage (None: provision it); of a mixed stage, the total over its types."""
    replicas: tuple[tuple[str, int], ...] = ()
    """Mixed stage: (type, count) per distinct type, primary first; () for one type. A single
    entry is normalised to `resource` + `num_replicas`, so each stage has one spelling."""

    def __post_init__(self) -> None:
        if not self.layers:
            raise ValueError("a stage needs at least one layer")
        if self.replicas:
            self._normalise_replicas()
        elif not self.resource:
            raise ValueError("a stage needs a resource (or replicas)")
        if self.num_replicas is not None and self.num_replicas < 1:
            raise ValueError("num_replicas must be >= 1 when given")

    def _normalise_replicas(self) -> None:
        groups = tuple((str(t), int(n)) for t, n in self.replicas)
        names = [t for t, _ in groups]
        if len(set(names)) != len(names):
            dup = next(t for t in names if names.count(t) > 1)
            raise ValueError(f"replicas: type {dup!r} is listed twice (one entry per type)")
        if any(n < 1 for _, n in groups):
            raise ValueError("replicas: every count must be >= 1")
        if self.resource and self.resource != groups[0][0]:
            raise ValueError("give either resource or replicas, not both")
        total = sum(n for _, n in groups)
        if self.num_replicas is not None and self.num_replicas != total:
            raise ValueError(f"num_replicas {self.num_replicas} differs from the {total} replicas")
        object.__setattr__(self, "resource", groups[0][0])
        object.__setattr__(self, "num_replicas", total)
        object.__setattr__(self, "replicas", groups if len(groups) > 1 else ())

    @property
    def is_mixed(self) -> bool:
        return len(self.replicas) > 1

    @property
    def groups(self) -> tuple[tuple[str, int | None], ...]:
        """(type, count) per type: one entry (count None when provisioned) unless mixed."""
        return self.replicas if self.replicas else ((self.resource, self.num_replicas),)

    @property
    def replica_types(self) -> tuple[str, ...]:
        """Type of each replica in replica order (groups in order); needs fixed counts."""
        if self.num_replicas is None:
            raise ValueError("replica_types needs num_replicas (provision the plan first)")
        return tuple(t for t, n in self.groups for _ in range(n))

    @property
    def label(self) -> str:
        """'v100', '3xv100' or '2xv100+1xt4'."""
        if self.num_replicas is None:
            return self.resource
        return "+".join(f"{n}x{t}" for t, n in self.groups)


@dataclass(frozen=True, slots=True, kw_only=True)
class PsHosts:
    """The parameter server a plan rents: num_shards units of `resource`, one per shard."""

    resource: str
    num_shards: int

    def __post_init__(self) -> None:
        if not self.resource:
            raise ValueError("ps.resource: the PS hosts need a resource type")
        if self.num_shards < 1:
            raise ValueError("ps.num_shards: must be >= 1")

    @property
    def label(self) -> str:
        """'2 x r7i-8xlarge'."""
        return f"{self.num_shards} x {self.resource}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    stages: tuple[Stage, ...]
    num_microbatches: int = 1
    schedule: str = "gpipe"
    ps: PsHosts | None = None
    """Who hosts the parameter server (None: the problem's PS, priced or free, as it is)."""

    def __post_init__(self) -> None:
        if not self.stages:
            raise ValueError("a plan needs at least one stage")
        if not 1 <= self.num_microbatches <= MAX_MICROBATCHES:
            raise ValueError(f"num_microbatches must be in 1..{MAX_MICROBATCHES}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}")

    @property
    def layer_names(self) -> tuple[str, ...]:
        return tuple(name for stage in self.stages for name in stage.layers)

    @property
    def has_mixed(self) -> bool:
        return any(s.is_mixed for s in self.stages)

    def units_by_type(self) -> dict[str, int]:
        """Units the stages rent, per type, in the order the types first appear (the PS's hosts
        not included; every stage's units must be set)."""
        used: dict[str, int] = {}
        for stage in self.stages:
            for name, n in stage.groups:
                used[name] = used.get(name, 0) + int(n)
        return used

    def problems(self, layer_names: tuple[str, ...], type_names: tuple[str, ...]) -> list[str]:
        """What makes this plan unusable for a model/cluster; empty when it is fine."""
        issues = []
        if self.layer_names != tuple(layer_names):
            issues.append(_coverage_problem(self.layer_names, tuple(layer_names)))
        for g, stage in enumerate(self.stages):
            if not stage.is_mixed and stage.resource not in type_names:
                issues.append(f"stages[{g}].resource: unknown resource type {stage.resource!r}")
            for r, (t, _) in enumerate(stage.replicas):
                if t not in type_names:
                    issues.append(f"stages[{g}].replicas[{r}].resource: unknown resource type {t!r}")
        if self.ps is not None and self.ps.resource not in type_names:
            issues.append(f"ps.resource: unknown resource type {self.ps.resource!r}")
        return issues

    def with_replicas(self, replicas: list[int] | None) -> Plan:
        """The same plan with every single-type stage's replica count fixed (None = all
        provisioned); mixed stages keep their counts."""
        ks = replicas if replicas is not None else [None] * len(self.stages)
        stages = tuple(s if s.is_mixed else Stage(layers=s.layers, resource=s.resource,
                                                  num_replicas=k)
                       for s, k in zip(self.stages, ks))
        return Plan(stages=stages, num_microbatches=self.num_microbatches, schedule=self.schedule,
                    ps=self.ps)

    def to_json_dict(self) -> dict:
        stages = []
        for s in self.stages:
            entry: dict = {"layers": list(s.layers)}
            if s.is_mixed:
                entry["replicas"] = [{"resource": t, "count": n} for t, n in s.replicas]
            else:
                entry["resource"] = s.resource
                if s.num_replicas is not None:
                    entry["num_replicas"] = s.num_replicas
            stages.append(entry)
        out = {"format_version": FORMAT_VERSION, "num_microbatches": self.num_microbatches,
               "schedule": self.schedule, "stages": stages}
        if self.ps is not None:
            out["ps"] = {"resource": self.ps.resource, "num_shards": self.ps.num_shards}
        return out


def _coverage_problem(got: tuple[str, ...], want: tuple[str, ...]) -> str:
    for pos, (g, w) in enumerate(zip(got, want)):
        if g != w:
            return (f"stages: layer #{pos} is {g!r} but the model's layer #{pos} is {w!r} "
                    "(a plan must cover every layer once, in model order)")
    if len(got) < len(want):
        return f"stages: the plan stops before layer {want[len(got)]!r} (covers {len(got)} of {len(want)})"
    return f"stages: the plan lists {len(got) - len(want)} layer(s) beyond the model's last, {want[-1]!r}"


class _ReplicaGroupModel(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    resource: str
    count: int = Field(ge=1, le=MAX_REPLICAS)


class _StageModel(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    layers: list[str] = Field(min_length=1)
    resource: str | None = None
    num_replicas: int | None = Field(default=None, ge=1, le=MAX_REPLICAS)
    replicas: list[_ReplicaGroupModel] | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _one_spelling(self) -> _StageModel:
        if self.replicas is None:
            if self.resource is None:
                raise ValueError("give resource (one type) or replicas (several types)")
            return self
        if self.resource is not None or self.num_replicas is not None:
            raise ValueError("give either resource/num_replicas or replicas, not both")
        names = [r.resource for r in self.replicas]
        for name in names:
            if names.count(name) > 1:
                raise ValueError(f"replicas: type {name!r} is listed twice (one entry per type)")
        return self

    def to_stage(self) -> Stage:
        if self.replicas is not None:
            return Stage(layers=tuple(self.layers),
                         replicas=tuple((r.resource, r.count) for r in self.replicas))
        return Stage(layers=tuple(self.layers), resource=self.resource,
                     num_replicas=self.num_replicas)


class _PsModel(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    resource: str = Field(min_length=1)
    num_shards: int = Field(ge=1, le=MAX_REPLICAS)


class PlanModel(BaseModel):
    """Validation of plan.json, format 2 (`extra="forbid"`); older formats are upgraded first."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    format_version: int = Field(default=FORMAT_VERSION, ge=FORMAT_VERSION, le=FORMAT_VERSION)
    num_microbatches: int = Field(default=1, ge=1, le=MAX_MICROBATCHES)
    schedule: str = Field(default="gpipe", pattern="^(gpipe|1f1b|async)$")
    stages: list[_StageModel] = Field(min_length=1)
    ps: _PsModel | None = None

    def to_plan(self) -> Plan:
        ps = None if self.ps is None else PsHosts(resource=self.ps.resource,
                                                  num_shards=self.ps.num_shards)
        return Plan(stages=tuple(s.to_stage() for s in self.stages),
                    num_microbatches=self.num_microbatches, schedule=self.schedule, ps=ps)


def upgrade_plan_dict(data: dict) -> dict:
    """A plan.json mapping in any readable format, as format FORMAT_VERSION.

    1 -> 2: the stage spelling `resource` (+ `num_replicas`) is unchanged; `replicas` is new,
    so a version-1 file that uses it is an error rather than silently read.
    A missing format_version means the current one.
    """
    version = data.get("format_version", FORMAT_VERSION)
    if version not in READABLE_VERSIONS:
        return data  # PlanModel reports the unsupported version with its field name
    if version == 1:
        for g, stage in enumerate(data.get("stages") or []):
            if isinstance(stage, dict) and "replicas" in stage:
                raise ValueError(f"stages[{g}].replicas: mixed-type stages need "
                                 f"format_version {FORMAT_VERSION} (the file says 1)")
        data = {**data, "format_version": 2}
    return data


def plan_from_dict(data: dict) -> Plan:
    return PlanModel.model_validate(upgrade_plan_dict(data)).to_plan()


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
    from heterps_sim.core.outputs import atomic_write  # whole or absent, fsynced
    atomic_write(Path(path), json.dumps(plan.to_json_dict(), indent=1) + "\n")
