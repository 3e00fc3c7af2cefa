"""Which graph node belongs to which layer, and which tensors are live across each cut.

A layer is a module boundary of the user's model: by default ("grouped") every leaf module (a
module without children: nn.Linear, nn.Embedding, a parameter-free FM block, ...) but the
activations, norms and dropouts, whose calls join the layer they follow (groups.py, which
also names each layer); with "leaf" every leaf module, named by its path; with
`layers: [names]` the named submodules count as one layer each (the rest grouped);
`split_points` then merge runs of layers, a new one starting at each named module. Code
outside every layer (the forward of a container: `torch.cat`, `view`, adding branch
outputs, numpy constants) joins the first layer that reads its result; what only the output
reads joins the last layer, "loss", which also applies the loss to the output and the
label. Steps whose results nothing reads (the attention weights of an nn.MultiheadAttention
whose caller drops them) are in no layer, unless they update a buffer in place or draw
random numbers.

    emb ── fm ──┐                     chain (leaf): embedding.embedding, fm, mlp.0, mlp.1, loss
       └─ mlp.0 ─ mlp.1 ─── (+) ── loss      grouped, mlp.1 a ReLU: embedding, fm, mlp.0, loss
                                         live after fm: {emb output, fm output, label}

Parameters, buffers and constants are free: each stage that reads one holds it. Integer
sizes (SymInts, e.g. the batch size a `view` uses) are free too: a stage recomputes them
from its own batch size, so they never force a tensor across a cut.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field

import torch
from torch import fx

from heterps_sim.inputs.torch_model import groups
from heterps_sim.inputs.torch_model.capture import CapturedModel, CaptureError
from heterps_sim.inputs.torch_model.section import LABEL

LOSS_LAYER = "loss"
DROPPED = {torch.ops.aten._assert_tensor_metadata.default, torch.ops.aten._assert_scalar.default,
           torch.ops.aten.sym_constrain_range_for_size.default}
"""Checks torch.export leaves in the graph; a stage has no use for them."""


def is_symbolic(node: fx.Node) -> bool:
    """A node computing an integer size (recomputed from the batch in every stage)."""
    val = node.meta.get("val")
    return isinstance(val, torch.SymInt | torch.SymBool | torch.SymFloat | int)


@dataclass
class LayerChain:
    """The captured graph cut into an ordered chain of layers."""

    captured: CapturedModel
    names: list[str]
    nodes: list[list[fx.Node]]
    """Compute nodes of each layer, in graph order."""
    key: dict[fx.Node, str]
    """Env key of each value: raw inputs by their input name, compute nodes by node name."""
    made: dict[str, int]
    """Layer that makes each key (-1: raw input or label)."""
    last_use: dict[str, int]
    output_key: str
    units: list[tuple[str, ...]] = field(default_factory=list)
    """The module paths each layer covers."""

    @property
    def loss_index(self) -> int:
        return len(self.names) - 1

    def index(self, name: str) -> int:
        try:
            return self.names.index(name)
        except ValueError:
            raise KeyError(f"model {self.captured.name!r} has no layer {name!r}") from None

    def live_after(self, i: int) -> list[str]:
        """Keys made at or before layer i and read after it (what a cut after i ships)."""
        return [k for k in self.made if self.made[k] <= i < self.last_use.get(k, -2)]

    def reads(self, lo: int, hi: int) -> list[str]:
        """Keys made before layer lo that layers lo..hi read."""
        out = []
        for i in range(lo, hi + 1):
            for n in self.nodes[i]:
                for k in self.input_keys(n):
                    if self.made[k] < lo and k not in out:
                        out.append(k)
        if hi == self.loss_index:
            for k in (self.output_key, LABEL):
                if self.made[k] < lo and k not in out:
                    out.append(k)
        return out

    def input_keys(self, node: fx.Node) -> list[str]:
        return [self.key[u] for u in node.all_input_nodes if u in self.key]

    def params_of(self, i: int) -> set[str]:
        return {u.target for n in self.nodes[i] for u in n.all_input_nodes if u.op == "get_attr"}


def _unit_of(node: fx.Node, units: set[str], leaves: set[str]) -> str | None:
    stack = node.meta.get("nn_module_stack") or {}
    paths = [v[0] for v in stack.values()]
    for p in paths:  # outermost named unit wins
        if p in units:
            return p
    deepest = paths[-1] if paths else ""
    return deepest if deepest in leaves else None


def build_chain(captured: CapturedModel, layers: str | list[str] = "grouped",
                split_points: list[str] | tuple[str, ...] = ()) -> LayerChain:
    """Assign every compute node to a layer and order the layers (see the module docstring)."""
    gm, source, name = captured.graph_module, captured.source, captured.name
    modules = dict(captured.module.named_modules())
    units = set() if layers in ("grouped", "leaf") else set(layers)
    _check_paths(units, modules, source, name, "model.layers")
    _check_paths(set(split_points), modules, source, name, "model.split_points")
    nested = sorted(a for a in units for b in units if a != b and a.startswith(b + "."))
    if nested:
        raise CaptureError(f"{source}: model.layers: {nested[0]!r} lies inside another named layer")
    leaves = {p for p, m in modules.items() if p and not any(True for _ in m.children())}

    key: dict[fx.Node, str] = {}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(captured.inputs):
        raise CaptureError(f"{source}: model.inputs: {name} takes {len(placeholders)} tensor "
                           f"inputs, the scenario names {len(captured.inputs)}")
    for n, spec in zip(placeholders, captured.inputs, strict=True):
        key[n] = spec.name
    needed = _needed(gm)
    compute = [n for n in gm.graph.nodes if n.op in ("call_function", "call_method")
               and n.target not in DROPPED and not is_symbolic(n) and n in needed]
    taken = set(key.values()) | {LABEL}
    for n in compute:
        key[n] = n.name if n.name not in taken else f"{n.name}__v"
    unit = {n: _unit_of(n, units, leaves) for n in compute}
    _check_named_layers_compute(units, compute, source, name)
    calls = {} if layers == "leaf" else groups.fusing_calls(compute, unit, modules, units)

    order: list[str] = []
    for n in compute:
        if unit[n] is not None and n not in calls and unit[n] not in order:
            order.append(unit[n])
    if LOSS_LAYER in order:
        raise CaptureError(f"{source}: model.layers: a submodule is named {LOSS_LAYER!r}, the "
                           "name of the last layer; rename it")
    order.append(LOSS_LAYER)
    pos = {u: i for i, u in enumerate(order)}
    output = next(iter(gm.graph.find_nodes(op="output")))
    out_arg = output.args[0]
    out_node = (out_arg[0] if isinstance(out_arg, list | tuple) else out_arg)
    layer_of = groups.follow_producers(compute, unit, pos, calls)
    unread = []
    for n in reversed(compute):  # code outside layers joins its first reader's layer
        if n in layer_of:
            continue
        if unit[n] is not None and n not in calls:
            layer_of[n] = pos[unit[n]]
            continue
        if n in calls:  # a fusing call reading raw inputs only: with its first reader
            readers = groups.call_readers(n, calls, layer_of, pos[LOSS_LAYER], out_node)
            members = [m for m in calls if calls[m][0] == calls[n][0]]
        else:
            readers = [layer_of[u] for u in n.users if u in layer_of]
            if n is out_node or any(u.op == "output" for u in n.users):
                readers.append(pos[LOSS_LAYER])
            members = [n]
        for m in members:
            if readers:
                layer_of[m] = min(readers)
            else:
                unread.append(m)
    for n in reversed(unread):  # a side effect nothing reads: after what it reads
        made = [layer_of[u] for u in n.all_input_nodes if u in layer_of]
        layer_of[n] = max(made, default=0)
    for n in compute:  # a tuple's items stay with the op that made it
        if n.target is operator.getitem and n.args[0] in layer_of:
            layer_of[n] = layer_of[n.args[0]]
    _check_order(compute, layer_of, key, order, source, name)
    chain_nodes = [[n for n in compute if layer_of[n] == i] for i in range(len(order))]
    index = {n: i for i, n in enumerate(gm.graph.nodes)}
    shown = (list(order) if layers == "leaf" else
             groups.layer_names(order, units, compute, unit, calls, layer_of))
    _check_split_points(split_points, order, shown, calls, layer_of, source)
    names, nodes, unit_lists = _merge(order, shown, chain_nodes, list(split_points), index)
    remap = {}
    for j, group in enumerate(unit_lists):
        for u in group:
            remap[pos[u]] = j
    layer_of = {n: remap[i] for n, i in layer_of.items()}
    made = {spec.name: -1 for spec in captured.inputs} | {LABEL: -1}
    last_use: dict[str, int] = {}
    for n in compute:
        made[key[n]] = layer_of[n]
        for u in n.all_input_nodes:
            if u in key:
                last_use[key[u]] = max(last_use.get(key[u], -1), layer_of[n])
    loss = len(names) - 1
    for k in (key[out_node], LABEL):
        last_use[k] = loss
    _check_tuples(compute, layer_of, source, name, names)
    covered = [list(g) for g in unit_lists]
    for n in compute:  # the fused leaves each layer holds, after its anchors
        if n in calls and calls[n][1] not in covered[layer_of[n]]:
            covered[layer_of[n]].append(calls[n][1])
    return LayerChain(captured=captured, names=names, nodes=nodes, key=key, made=made,
                      last_use=last_use, output_key=key[out_node],
                      units=[tuple(g) for g in covered])


def _needed(gm: fx.GraphModule) -> set[fx.Node]:
    """The nodes the output or a side effect (an in-place update of a buffer, a random draw)
    depends on. torch.export keeps steps whose results nothing reads (the attention weights
    nn.MultiheadAttention computes when the caller throws them away); they belong to no layer,
    so they never pull other code into an earlier layer or onto a cut."""
    roots = [n for n in gm.graph.nodes if n.op == "output" or (
        n.op == "call_function" and n.target not in DROPPED and n.is_impure())]
    needed: set[fx.Node] = set()
    while roots:
        n = roots.pop()
        if n not in needed:
            needed.add(n)
            roots.extend(n.all_input_nodes)
    return needed


def _check_paths(paths: set[str], modules: dict, source: str, name: str, field_name: str) -> None:
    for p in sorted(paths):
        if p not in modules or not p:
            some = ", ".join(list(m for m in modules if m)[:8])
            raise CaptureError(f"{source}: {field_name}: {p!r} is not a submodule of {name} "
                               f"(its submodules include: {some})")


def _check_named_layers_compute(units: set[str], compute: list[fx.Node], source: str,
                                name: str) -> None:
    """A layer the scenario names must do some work in the captured graph (in it or in a
    module under it): one that does none was built empty by the factory's arguments (a cross
    network of -1 layers) or is never called, and would silently vanish from the chain."""
    paths = {v[0] for n in compute for v in (n.meta.get("nn_module_stack") or {}).values()}
    idle = sorted(u for u in units if not any(p == u or p.startswith(u + ".") for p in paths))
    if idle:
        raise CaptureError(f"{source}: model.layers: {idle[0]!r} does no computation in "
                           f"{name}'s captured graph (built empty by model.kwargs, or never "
                           "called by forward)")


def _check_order(compute, layer_of, key, order, source, name) -> None:
    for n in compute:
        for u in n.all_input_nodes:
            if u in layer_of and layer_of[u] > layer_of[n]:
                a, b = order[layer_of[n]], order[layer_of[u]]
                raise CaptureError(
                    f"{source}: model.layers: layer {a!r} reads {key[u]!r} made by layer {b!r}, "
                    f"which first runs after it ({a!r} is called again later); name a module "
                    f"holding both as one layer (model.layers) so the chain has an order")


def _check_tuples(compute, layer_of, source, name, names) -> None:
    for n in compute:
        val = n.meta.get("val")
        if isinstance(val, list | tuple):
            for u in n.users:
                if u in layer_of and layer_of[u] != layer_of[n]:
                    raise CaptureError(f"{source}: model.layers: {names[layer_of[u]]!r} reads a "
                                       f"tuple made in {names[layer_of[n]]!r}; merge them")


def _check_split_points(split_points, order, shown, calls, layer_of, source) -> None:
    """A split point must hold a layer's module: not only steps fused into another layer."""
    for s in split_points:
        if any(u == s or u.startswith(s + ".") for u in order[:-1]):
            continue
        fused = [layer_of[n] for n, (_, path) in calls.items()
                 if path == s or path.startswith(s + ".")]
        if fused:
            raise CaptureError(
                f"{source}: model.split_points: {s!r} is fused into layer {shown[fused[0]]!r} "
                "(activations, norms and dropout join the layer they follow); split at a "
                "layer's module instead, or set model.layers: leaf")


def _merge(order: list[str], shown: list[str], nodes: list[list], split_points: list[str],
           index: dict):
    """Group consecutive layers: a new group at the first layer inside each split point.
    `order` holds each layer's anchor module (a split point is matched against it),
    `shown` its name."""
    if not split_points:
        return list(shown), nodes, [[u] for u in order]

    def inside(u: str) -> str | None:
        return next((s for s in split_points if u == s or u.startswith(s + ".")), None)

    names, groups_, units = [], [], []
    current = None
    for i, u in enumerate(order):
        sp = inside(u) if u != LOSS_LAYER else None
        starts = not names or u == LOSS_LAYER or (sp is not None and sp != current)
        if starts:
            names.append(sp or shown[i])
            groups_.append([])
            units.append([])
        current = sp if u != LOSS_LAYER else None
        groups_[-1].extend(nodes[i])
        units[-1].append(u)
    return names, [sorted(g, key=index.__getitem__) for g in groups_], units
