"""Cut a model into pipeline stages by layer names, and describe what crosses each cut.

    stage = stage_model(graph, ("fc_0", "fc_1"), seed=0)    # only those layers, same names
    cut(model, ("fc_0", "fc_1"))                              # slice an existing model (copy)
    b = boundary_after(graph, "emb_7")                        # tensors a cut there must ship

A stage's parameters keep their original names ("fc_0.weight"), so a state dict saved under
one plan loads under another. The `Boundary` packs the live tensors of a cut into at most three
contiguous buffers - float tensors that carry a gradient (sent forward, their gradient comes
back), float tensors that do not (raw features) and int64 tensors (ids, class labels) - so a
microbatch crosses a cut in one to three point-to-point messages whatever the model.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from heterps_exec.data import raw_tensors
from heterps_exec.models import GraphModel, build_model
from heterps_sim.zoo_layers import F32, ModelGraph

KINDS = ("grad", "plain", "int")
"""Buffer kinds, in the order they are sent."""


def stage_model(graph: ModelGraph, layers: Sequence[str], *, seed: int = 0,
                device: str | torch.device = "cpu") -> GraphModel:
    """A stage holding `layers` only, initialised exactly as in the whole model."""
    return build_model(graph, seed=seed, device=device, layers=layers)


def cut(model: GraphModel, layers: Sequence[str]) -> GraphModel:
    """A deep copy of `model` keeping only `layers` (original names, current weights)."""
    missing = set(layers) - {name for name, _ in model.named_children()}
    if missing:
        raise ValueError(f"model has no layers {sorted(missing)}")
    part = copy.deepcopy(model)
    for name, _ in list(part.named_children()):
        if name not in layers:
            delattr(part, name)
    return part


@dataclass(frozen=True, slots=True)
class BoundaryTensor:
    name: str
    width: int
    kind: str
    """"grad" (float32, carries a gradient), "plain" (float32, none) or "int" (int64)."""


@dataclass(frozen=True, slots=True)
class Boundary:
    """The tensors live across one cut, grouped into the buffers that carry them."""

    tensors: tuple[BoundaryTensor, ...]

    def width(self, kind: str) -> int:
        return sum(t.width for t in self.tensors if t.kind == kind)

    @property
    def kinds(self) -> tuple[str, ...]:
        """The buffer kinds this cut sends (empty ones are skipped)."""
        return tuple(k for k in KINDS if self.width(k))

    def pack(self, env: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """{kind: [batch, width] buffer}; the grad buffer stays in the autograd graph."""
        out = {}
        for kind in self.kinds:
            parts = [env[t.name].reshape(env[t.name].shape[0], -1) for t in self.tensors
                     if t.kind == kind]
            buf = torch.cat(parts, 1) if len(parts) > 1 else parts[0]
            out[kind] = buf if kind == "grad" else buf.detach().contiguous()
        return out

    def unpack(self, buffers: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Views of the received buffers, one per tensor name."""
        env, offset = {}, dict.fromkeys(KINDS, 0)
        for t in self.tensors:
            lo = offset[t.kind]
            env[t.name] = buffers[t.kind][:, lo:lo + t.width]
            offset[t.kind] = lo + t.width
        return env

    def empty(self, batch: int, device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        """Receive buffers for a microbatch of `batch` samples."""
        return {k: torch.empty(batch, self.width(k), device=device,
                               dtype=torch.int64 if k == "int" else torch.float32)
                for k in self.kinds}


def boundary_after(graph: ModelGraph, layer: str) -> Boundary:
    """The cut after `layer`: every tensor made at or before it that a later layer reads."""
    index = [n.name for n in graph.nodes].index(layer)
    raw = {t.name: t for t in raw_tensors(graph)}
    tensors = []
    for name in graph.live_after(index):
        if name in raw:
            r = raw[name]
            kind = "int" if r.dtype == "int64" else "plain"
            tensors.append(BoundaryTensor(name, r.width, kind))
        else:
            kind = "grad" if graph.tensor_grad.get(name, True) else "plain"
            tensors.append(BoundaryTensor(name, int(graph.tensor_bytes[name] // F32), kind))
    return Boundary(tuple(tensors))
