"""Binding: which real device runs each resource type of a plan, or how it is emulated.

    # binding.yaml
    types:
      t4:                  {device: "cuda:0"}
      xeon-icelake-16vcpu: {device: cpu}
      epyc-milan-32vcpu:   {device: cpu, emulate: true}     # slowed to its relative speed
      a100-80gb:           {device: cpu, slowdown: 2.5}     # or an explicit factor
    default: {device: cpu, emulate: true}                     # types not listed (optional)

`--binding cpu` maps every type to the CPU at full speed (nothing emulated). A type bound with
`emulate: true` runs on its device with compute time dilated so that the plan's emulated types
keep the ratios of their peak fp32 FLOP/s: the fastest of them runs at the device's own speed,
a type with half its peak takes twice as long. Results name the emulated types, always.
A mixed stage (several types) gives each replica its own type's dilation; its types must
share one device (one process group per stage). Validated against the plan before any
process starts. No torch at import.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from heterps_exec.runtime.layout import StageBinding
from heterps_sim.core.files import UserFileError, read_mapping, validation_message
from heterps_sim.core.limits import MAX_SLOWDOWN
from heterps_sim.core.plan import Plan
from heterps_sim.core.spec import ResourceType

DEVICE = re.compile(r"^(cpu|cuda:\d+)$")


class TypeBinding(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    device: str = Field(default="cpu", description='"cpu" or "cuda:N"')
    host: str = Field(default="localhost", description="Machine that hosts this type's ranks "
                      "(informational with one node; multi-node runs place ranks by node).")
    emulate: bool = Field(default=False, description="Dilate compute time to the type's "
                          "relative peak speed.")
    slowdown: float | None = Field(default=None, ge=1.0, le=MAX_SLOWDOWN,
                                   description="Explicit dilation factor.")

    @field_validator("device")
    @classmethod
    def _device(cls, v: str) -> str:
        if not DEVICE.match(v):
            raise ValueError(f'device must be "cpu" or "cuda:N", got {v!r}')
        return v


class BindingFile(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    types: dict[str, TypeBinding] = Field(default_factory=dict)
    default: TypeBinding | None = None


class BindingError(UserFileError):
    """A binding that cannot serve the plan; one line."""


def load_binding(source: str) -> BindingFile:
    """"cpu" or a YAML file."""
    if source == "cpu":
        return BindingFile(default=TypeBinding())
    from heterps_sim.inputs.shipped import resolve
    data = read_mapping(resolve(source))  # a shipped binding by its docs path, from anywhere
    try:
        return BindingFile.model_validate(data)
    except ValidationError as exc:
        raise BindingError(validation_message(source, exc)) from None


def stage_bindings(binding: BindingFile, plan: Plan, types: dict[str, ResourceType],
                   source: str, num_gpus: int) -> list[StageBinding]:
    """One StageBinding per plan stage; raises BindingError naming the problem."""
    chosen = {}
    for g, stage in enumerate(plan.stages):
        for name, _ in stage.groups:
            tb = binding.types.get(name, binding.default)
            if tb is None:
                raise BindingError(f"{source}: types: no binding for resource type "
                                   f"{name!r} (add it, or a `default:`)")
            if tb.device.startswith("cuda") and int(tb.device[5:]) >= num_gpus:
                raise BindingError(f"{source}: types.{name}.device: {tb.device} but this "
                                   f"machine has {num_gpus} CUDA device(s)")
            chosen[name] = tb
        devices = {chosen[name].device for name, _ in stage.groups}
        if len(devices) > 1:
            raise BindingError(f"{source}: stage {g} mixes types bound to different devices "
                               f"({', '.join(sorted(devices))}); bind them to one device")
    emulated = [n for n, tb in chosen.items() if tb.emulate and tb.slowdown is None]
    fastest = max((types[n].peak_flops_fp32 for n in emulated), default=1.0)

    def dilation(name: str) -> tuple[float, bool]:
        tb = chosen[name]
        if tb.slowdown is not None:
            return tb.slowdown, True
        if tb.emulate:
            factor = fastest / types[name].peak_flops_fp32
            if not factor <= MAX_SLOWDOWN:
                raise BindingError(f"{source}: types.{name}.emulate: {name} is {factor:.3g}x "
                                   "slower than the fastest emulated type, past the "
                                   f"{MAX_SLOWDOWN:g}x an emulation may dilate by")
            return factor, True
        return 1.0, False

    out = []
    for stage in plan.stages:
        slow, emulated_here = dilation(stage.resource)
        per_replica: tuple[float, ...] = ()
        if stage.is_mixed:
            per_replica = tuple(dilation(name)[0] for name in stage.replica_types)
            emulated_here = any(dilation(name)[1] for name, _ in stage.groups)
        out.append(StageBinding(device=chosen[stage.resource].device, slowdown=slow,
                                emulated=emulated_here, replica_slowdowns=per_replica))
    return out


def nccl_device_clash(bindings: list[StageBinding], plan: Plan, source: str) -> str:
    """'' when NCCL can run these ranks on one machine, else the one line that says why not.
    Every stage on a GPU means the NCCL backend (runtime/worker.py), and NCCL runs one rank per
    GPU: two ranks on one device fail inside NCCL after every rank has started ("duplicate
    GPU"). A binding names one device per type, so a stage's replicas all land on it."""
    if not bindings or not all(b.device.startswith("cuda") for b in bindings):
        return ""
    users: dict[str, list[str]] = {}
    counts: dict[str, int] = {}
    for g, (b, stage) in enumerate(zip(bindings, plan.stages)):
        k = int(stage.num_replicas or 1)
        users.setdefault(b.device, []).append(f"stage {g} x{k}" if k > 1 else f"stage {g}")
        counts[b.device] = counts.get(b.device, 0) + k
    for device, count in counts.items():
        if count > 1:
            return (f"{source}: {count} ranks ({', '.join(users[device])}) would share {device}, and "
                    "NCCL runs one rank per GPU: bind the types to separate devices, give those "
                    "stages one unit each, or bind them to cpu (gloo)")
    return ""
