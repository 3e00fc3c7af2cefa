"""Cut a model into pipeline stages by layer names, and describe what crosses each cut.

    stage = stage_model(graph, ("fc_0", "fc_1"), seed=0)    # only those layers, same names
    cut(model, ("fc_0", "fc_1"))                              # slice an existing model (copy)
    b = boundary_after(graph, "emb_7")                        # tensors a cut there must ship

A stage's parameters keep their original names ("fc_0.weight"), so a state dict saved under
one plan loads under another. The `Boundary` packs the live tensors of a cut - float tensors
that carry a gradient (their gradient comes back), float tensors that do not (raw features)
and int64 tensors (ids, class labels) - into one message, so a microbatch crosses a cut in
one point-to-point message forward and at most one backward, whatever the model.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from heterps_exec.data import raw_tensors
from heterps_exec.hps import quantize
from heterps_exec.model.build import GraphModel, build_model
from heterps_sim.inputs.graph import F32, ID_BYTES, ModelGraph

KINDS = ("grad", "plain", "int")
"""Tensor kinds at a cut: float32 with a gradient, float32 without, int64."""
SECTIONS = ("grad", "plain", "back")
"""The float sections on the wire, each with its own encoding: the forward message's two
float kinds and the backward gradient message."""


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
    """The tensors live across one cut, and their wire format.

    Forward, one uint8 message per microbatch, each row one sample's bytes: int64 tensors
    first, then the float32 tensors that carry a gradient, then those that do not, padded to
    8 bytes (so every section can be viewed back in place). Backward, the gradient of the
    grad section as one message. One message each way keeps the per-microbatch cost of a cut
    to one gloo round of latency. With `quantize` (quantize.MODES) both float sections and the
    gradient travel as fp16 / bf16 / int8 with per-row scales; ids always travel exactly.
    `modes` sets the three float sections (grad, plain, back) one by one instead: that is how
    `quantize="auto"` travels, re-chosen per step and link (hps/auto_quantize.py); "auto" without
    `modes` sends exactly.
    """

    tensors: tuple[BoundaryTensor, ...]
    quantize: str = "none"
    modes: tuple[str, str, str] | None = None
    """(grad section, plain section, backward gradient) encodings; None: all `quantize`."""

    def mode(self, section: str) -> str:
        """Encoding of "grad", "plain" (forward sections) or "back" (the gradient message)."""
        if self.modes is not None:
            return self.modes[SECTIONS.index(section)]
        return "none" if self.quantize == quantize.AUTO else self.quantize

    def with_modes(self, modes: tuple[str, str, str]) -> Boundary:
        return replace(self, modes=tuple(modes))

    def width(self, kind: str) -> int:
        return sum(t.width for t in self.tensors if t.kind == kind)

    @property
    def has_grad(self) -> bool:
        return self.width("grad") > 0

    def _sections(self) -> dict[str, tuple[int, int]]:
        """Byte [lo, hi) of each kind in a row."""
        out, lo = {}, 0
        for kind in ("int", "grad", "plain"):
            w = self.width(kind)
            hi = lo + (w * ID_BYTES if kind == "int" else quantize.nbytes(w, self.mode(kind)))
            out[kind] = (lo, int(hi))
            lo = int(hi)
        return out

    @property
    def grad_bytes(self) -> int:
        """Bytes per row of the backward message."""
        return quantize.nbytes(self.width("grad"), self.mode("back"))

    def encode_grad(self, grad: torch.Tensor) -> torch.Tensor:
        return quantize.encode(grad, self.mode("back"))

    def decode_grad(self, message: torch.Tensor) -> torch.Tensor:
        return quantize.decode(message, self.width("grad"), self.mode("back"))

    def empty_grad(self, batch: int, device: str | torch.device = "cpu") -> torch.Tensor:
        """A receive buffer for one microbatch's backward message."""
        return torch.empty(batch, self.grad_bytes, dtype=torch.uint8, device=device)

    @property
    def row_bytes(self) -> int:
        return -(-self._sections()["plain"][1] // 8) * 8

    def encode(self, env: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(the forward message, the grad section still in the autograd graph, or None)."""
        batch = next(iter(env.values())).shape[0]
        by_kind = {k: [env[t.name].reshape(batch, -1) for t in self.tensors if t.kind == k]
                   for k in KINDS}
        grad = torch.cat(by_kind["grad"], 1) if by_kind["grad"] else None
        parts = [x.detach().contiguous().view(torch.uint8) for x in by_kind["int"]]
        for k in ("grad", "plain"):  # each float section as one [batch, width] tensor
            if by_kind[k]:
                section = torch.cat(by_kind[k], 1) if len(by_kind[k]) > 1 else by_kind[k][0]
                parts.append(quantize.encode(section, self.mode(k)))
        pad = self.row_bytes - self._sections()["plain"][1]
        if pad:
            parts.append(torch.zeros(batch, pad, dtype=torch.uint8, device=parts[0].device))
        return torch.cat(parts, 1), grad

    def float_sections(self, message: torch.Tensor) -> dict[str, torch.Tensor]:
        """The forward message's float sections ("grad", "plain"), decoded to float32."""
        return {k: quantize.decode(message[:, lo:hi], self.width(k), self.mode(k))
                for k, (lo, hi) in self._sections().items() if k != "int" and hi > lo}

    def decode(self, message: torch.Tensor) -> tuple[dict[str, torch.Tensor], torch.Tensor | None]:
        """(tensor name -> view, the grad section as a fresh leaf that collects the gradient)."""
        views = self.float_sections(message)
        lo, hi = self._sections()["int"]
        if hi > lo:
            views["int"] = message[:, lo:hi].view(torch.int64)
        leaf = views["grad"].clone().requires_grad_(True) if "grad" in views else None
        if leaf is not None:
            views["grad"] = leaf
        env, offset = {}, dict.fromkeys(KINDS, 0)
        for t in self.tensors:
            lo = offset[t.kind]
            env[t.name] = views[t.kind][:, lo:lo + t.width]
            offset[t.kind] = lo + t.width
        return env, leaf

    def empty(self, batch: int, device: str | torch.device = "cpu") -> torch.Tensor:
        """A receive buffer for one microbatch's forward message."""
        return torch.empty(batch, self.row_bytes, dtype=torch.uint8, device=device)


def boundary_after(graph: ModelGraph, layer: str, quantize_mode: str = "none") -> Boundary:
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
    return Boundary(tuple(tensors), quantize_mode)
