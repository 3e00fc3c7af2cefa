"""Which leaf modules fuse into the layer they follow, and what each layer is called.

By default (`layers: grouped`) a layer is what a person draws as one box: a Linear, an
Embedding, an interaction block (an FM term, a cross layer), together with the activation,
normalisation and dropout that follow it.

    self.mlp = nn.Sequential(Linear, BatchNorm1d, ReLU, Dropout, Linear, ReLU, Linear)
    leaf layers     mlp.0  mlp.1  mlp.2  mlp.3  mlp.4  mlp.5  mlp.6
    grouped layers  mlp.0 ───────────────────┘  mlp.4 ─────┘  mlp.6

- A fusing leaf is never a layer of its own: every torch.nn activation but
  MultiheadAttention, every norm, every dropout, Identity, Flatten and Unflatten, and any
  parameter-free leaf whose every step is elementwise or a reshape (a user's `Swish`). Each
  CALL of it joins the layer that made what it reads (the latest such layer when it reads
  several), so one `self.act = nn.ReLU()` called after every Linear joins each in turn. A call
  that reads only raw inputs (a BatchNorm on the dense features at the start of `forward`)
  joins the first layer that reads its result instead.
- Every other leaf (the anchor) is a layer, named by the outermost module that holds it and
  no leaf called in another layer: `embedding` for a FeaturesEmbedding wrapping one
  nn.Embedding, `fm`, `mlp.0` above (its parent `mlp` holds other layers' leaves). Names are
  module paths: unique, and the same from run to run.

Fusing only joins steps to a neighbouring layer, so a grouped layer's FLOPs, parameters and
tables are the sums of its leaf layers' and the bytes after it are those after its last leaf
(tests/sim/inputs/torch_model/test_groups.py checks it against `layers: leaf`).
"""

from __future__ import annotations

import operator

import torch
from torch import fx, nn
from torch.nn.modules import activation, batchnorm, dropout, instancenorm, normalization

from heterps_sim.inputs.torch_model.capture import SHAPE_ONLY


def _classes(*modules) -> tuple[type, ...]:
    return tuple(c for m in modules for c in vars(m).values()
                 if isinstance(c, type) and issubclass(c, nn.Module) and c.__module__ == m.__name__
                 and c is not nn.Module)


FUSED = tuple(c for c in _classes(activation, batchnorm, dropout, instancenorm, normalization)
              if not issubclass(c, nn.MultiheadAttention)) + (nn.Identity, nn.Flatten, nn.Unflatten)
"""Leaf module types that always fuse into the layer they follow."""


def stack(node: fx.Node) -> list[tuple[str, str]]:
    """(call key, module path) of the modules a node ran in, outermost first; a module called
    twice has a fresh key per call (torch.export's `act`, `act@1`)."""
    return [(k, v[0]) for k, v in (node.meta.get("nn_module_stack") or {}).items()]


def _elementwise(node: fx.Node) -> bool:
    tags = getattr(node.target, "tags", ())
    return torch.Tag.pointwise in tags or node.target in SHAPE_ONLY or node.target is operator.getitem


def fusing_calls(compute: list[fx.Node], unit: dict, modules: dict[str, nn.Module],
                 named: set[str]) -> dict[fx.Node, tuple[str, str]]:
    """node -> (call key, leaf path) for every node run by a call of a fusing leaf (a node
    whose unit is a leaf, not a module named in `layers:`)."""
    by_leaf: dict[str, list[fx.Node]] = {}
    for n in compute:
        if unit[n] is not None and unit[n] not in named and stack(n) and stack(n)[-1][1] == unit[n]:
            by_leaf.setdefault(unit[n], []).append(n)
    out = {}
    for path, nodes in by_leaf.items():
        module = modules[path]
        plain = not any(True for _ in module.parameters()) and all(map(_elementwise, nodes))
        if isinstance(module, FUSED) or plain:
            for n in nodes:
                out[n] = (stack(n)[-1][0], path)
    return out


def follow_producers(compute: list[fx.Node], unit: dict, pos: dict[str, int],
                     calls: dict[fx.Node, tuple[str, str]]) -> dict[fx.Node, int]:
    """node -> layer for the nodes of each fusing call that reads what some layer made: the
    latest such layer (through code outside every layer, too). Calls reading only raw inputs
    are left out (they join their first reader, as code outside layers does)."""
    src: dict[fx.Node, int] = {}
    call_src: dict[str, int] = {}
    for n in compute:  # graph order: what a node reads is placed before it
        if unit[n] is not None and n not in calls:
            src[n] = pos[unit[n]]
            continue
        src[n] = max((src[u] for u in n.all_input_nodes if u in src), default=-1)
        if n in calls:
            key = calls[n][0]
            src[n] = call_src[key] = max(call_src.get(key, -1), src[n])
    return {n: call_src[key] for n, (key, _) in calls.items() if call_src[key] >= 0}


def call_readers(first: fx.Node, calls: dict, layer_of: dict, output_layer: int,
                 out_node: fx.Node) -> list[int]:
    """Layers reading what the call holding `first` makes (outside that call)."""
    key = calls[first][0]
    members = [n for n, (k, _) in calls.items() if k == key]
    readers = [layer_of[u] for n in members for u in n.users
               if u in layer_of and calls.get(u, ("",))[0] != key]
    if any(n is out_node or any(u.op == "output" for u in n.users) for n in members):
        readers.append(output_layer)
    return readers


def layer_names(order: list[str], named: set[str], compute: list[fx.Node], unit: dict,
                calls: dict, layer_of: dict[fx.Node, int]) -> list[str]:
    """The name of each layer of `order` (anchor paths, then the loss): a named unit keeps
    its name; an anchor takes the outermost module path holding it whose called leaves all
    lie in that layer (never the loss layer's name)."""
    held: dict[str, set[int]] = {}
    for n in compute:
        path = calls[n][1] if n in calls else unit[n]
        if path is None or n not in layer_of:
            continue
        parts = path.split(".")
        for k in range(1, len(parts) + 1):
            held.setdefault(".".join(parts[:k]), set()).add(layer_of[n])
    names = []
    for i, anchor in enumerate(order):
        name = anchor
        if anchor not in named and i < len(order) - 1:
            parts = anchor.split(".")
            name = next(p for p in (".".join(parts[:k]) for k in range(1, len(parts) + 1))
                        if (held.get(p) == {i} and p != order[-1]) or p == anchor)
        names.append(name)
    return names
