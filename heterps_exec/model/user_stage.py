"""A pipeline stage of a user's captured PyTorch model, speaking the engine's stage contract.

    stage = UserStage(chain, lo, hi, holder)     # layers lo..hi of inputs/torch_model's chain
    out_env, loss_sum = stage(env)               # env: {key: [batch, width] tensor}
    cut = user_boundary(chain, hi, grad_keys)    # what the cut after layer hi ships

Like the zoo's stages (model/build.py), a stage maps an env of per-sample rows to the env a
cut after it must ship, plus the summed loss at the last stage; so the runtime, the boundary
wire format (model/partition.Boundary), replicas, schedules, checkpoints and the parameter
server serve both alike. On the wire every tensor is [batch, width]: floats as float32, ints
and bools as int64; the stage puts each back in its captured shape and dtype (the batch
dimension wherever the graph had it) before running its segment (inputs/torch_model/segment.py),
and flattens what it makes. Parameters keep their original paths ("mlp.mlp.0.weight") because
the stage registers the segment's top-level modules and tensors as its own, so a checkpoint
taken under one plan loads under any other, and `ps.bridge.attach` finds the stage's tables
(nn.EmbeddingBag at "embedding.embedding") by the names the parameter server knows.
"""

from __future__ import annotations

import sympy
import torch
from torch import nn

from heterps_exec.model.dropout import seed_graph, tag_dropouts
from heterps_exec.model.partition import Boundary, BoundaryTensor
from heterps_sim.inputs.torch_model.adopt import adopt
from heterps_sim.inputs.torch_model.chain import value_widths
from heterps_sim.inputs.torch_model.layers import LayerChain
from heterps_sim.inputs.torch_model.segment import _batch_symbol, build_segment


class WireShapes:
    """Each key's captured shape and dtype, to undo the wire's [batch, width] flattening."""

    def __init__(self, chain: LayerChain) -> None:
        self.sym = _batch_symbol(chain)
        raw = {r.name: r for r in (*chain.captured.inputs, chain.captured.label)}
        self.dims: dict[str, tuple] = {}
        self.dtype: dict[str, torch.dtype] = {}
        for k, r in raw.items():
            self.dims[k], self.dtype[k] = (self.sym, *r.shape), r.dtype
        for node, k in chain.key.items():
            val = node.meta.get("val")
            if k not in raw and isinstance(val, torch.Tensor):
                self.dims[k] = tuple(d.node.expr if isinstance(d, torch.SymInt) else int(d)
                                     for d in val.shape)
                self.dtype[k] = val.dtype
        self._cache: dict[tuple[str, int], tuple[int, ...]] = {}

    def shape(self, key: str, batch: int) -> tuple[int, ...]:
        if (key, batch) not in self._cache:
            self._cache[key, batch] = tuple(
                d if isinstance(d, int) else int(sympy.sympify(d).subs(self.sym, batch))
                for d in self.dims[key])
        return self._cache[key, batch]

    def unwire(self, key: str, x: torch.Tensor, batch: int) -> torch.Tensor:
        return x.reshape(self.shape(key, batch)).to(self.dtype[key])

    @staticmethod
    def wire(x: torch.Tensor, batch: int) -> torch.Tensor:
        x = x.reshape(batch, -1)
        return x.float() if x.is_floating_point() else x.long()


class UserStage(nn.Module):
    """Layers lo..hi of a captured user model; forward(env) -> (out_env, loss_sum | None)."""

    def __init__(self, chain: LayerChain, lo: int, hi: int, holder: dict,
                 shapes: WireShapes | None = None) -> None:
        super().__init__()
        tag_dropouts(chain.captured.graph_module)  # ordinals over the whole model
        segment = build_segment(chain, lo, hi, holder)
        self.dropouts = seed_graph(segment.gm)  # masks by (seed, step, microbatch, layer): model/dropout.py
        self.__dict__["segment"] = segment  # not a child: its contents are registered below
        gm = segment.gm
        adopt(self, gm)
        # one children dict for both: a top-level table (a root module's own nn.Embedding)
        # that ps.bridge.attach swaps for a PS-served one is swapped in the graph too; one
        # parameters dict too: async's weight versions (runtime/versions.py) swap a root
        # module's own nn.Parameter here, and the graph must read the swapped one
        gm._modules = self._modules
        gm._parameters = self._parameters
        self.shapes = shapes or WireShapes(chain)
        self.passes = [k for k in chain.live_after(hi) if chain.made[k] < lo] if hi < chain.loss_index else []
        self.ships = chain.live_after(hi) if hi < chain.loss_index else []

    def forward(self, env: dict[str, torch.Tensor]):
        batch = next(iter(env.values())).shape[0]
        seg = self.segment
        values = {k: self.shapes.unwire(k, env[k], batch) for k in seg.reads}
        made, loss = seg.run(batch, values)
        out = {k: (WireShapes.wire(made[k], batch) if k in made else env[k]) for k in self.ships}
        return out, loss


def hold_unused(stage: nn.Module, module: nn.Module, chain: LayerChain) -> list[str]:
    """Register, as persistent buffers of `stage` at their own paths, the state entries of
    the user's module that no layer reads (a submodule defined and never called): the saved
    state keeps every parameter of the module, used or not, as the eager module's state dict
    does, so a checkpoint or a held-out scorer loads it strictly. Buffers, not parameters:
    nothing trains them (no gradient reaches them, as in the eager module), so no optimizer
    or all-reduce sees them. Returns the keys added."""
    used = {t for i in range(len(chain.names)) for t in chain.params_of(i)} | set(stage.state_dict())
    added = []
    for key, value in module.state_dict().items():
        if key in used:
            continue
        owner, _, name = key.rpartition(".")
        holder = stage
        for part in owner.split(".") if owner else []:
            if part not in holder._modules:
                holder.add_module(part, nn.Module())
            holder = holder._modules[part]
        holder.register_buffer(name, value.detach().clone())
        added.append(key)
    return added


def user_boundary(chain: LayerChain, after: int, grad: dict[str, bool],
                  quantize_mode: str = "none") -> Boundary:
    """The cut after layer `after`: every live key as a [batch, width] row section."""
    widths = value_widths(chain)
    tensors = []
    for k in chain.live_after(after):
        width, is_float = widths[k]
        kind = ("grad" if grad.get(k) else "plain") if is_float else "int"
        tensors.append(BoundaryTensor(k, width, kind))
    return Boundary(tuple(tensors), quantize_mode)
