"""A run of layers of a LayerChain as one executable torch.fx GraphModule.

    seg = build_segment(chain, lo, hi, holder)       # layers lo..hi
    outs, loss = seg.run(batch_size, {key: tensor})  # keys made there and read later (+ loss)

The nodes are copied from the captured graph in their original order. What the segment
reads from earlier layers (or the raw inputs) become placeholders; parameters, buffers and
constants are `get_attr` nodes on their ORIGINAL paths ("mlp.0.weight"), looked up in a
`holder` mapping shared by every segment of one model; integer sizes are recomputed from the
segment's batch size. Embedding tables (a parameter read only by `aten.embedding` /
`aten.embedding_bag` lookups) are reached through a table module at the table's path
("embedding.embedding"): an `nn.EmbeddingBag(mode="sum")` holding the same weight, read one
row per id, which the engine can swap for a parameter-server table without the graph noticing.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

import sympy
import torch
from torch import fx, nn
from torch.utils._sympy.functions import FloorDiv

from heterps_sim.inputs.torch_model.capture import CaptureError
from heterps_sim.inputs.torch_model.layers import LayerChain, is_symbolic
from heterps_sim.inputs.torch_model.section import LABEL

BATCH = "__batch__"
_aten = torch.ops.aten
EMBEDDING_OPS = {_aten.embedding.default}
BAG_OPS = {_aten.embedding_bag.padding_idx, _aten.embedding_bag.default, _aten._embedding_bag.default}


@dataclass(frozen=True, slots=True)
class Table:
    """An embedding table of the model, served through a table module at `path`."""

    path: str
    """Module path ("embedding.embedding"); its parameter is path + ".weight"."""
    rows: int
    dim: int


def find_tables(chain: LayerChain) -> dict[str, Table]:
    """Parameter target -> Table, for every weight read only by plain lookups (no padding
    index, no scaled gradients; a bag's per-sample weights and last offset are the pooling's,
    kept by bag_lookup); other weights stay dense."""
    gm = chain.captured.graph_module
    params = dict(chain.captured.module.named_parameters())
    out = {}
    for node in gm.graph.find_nodes(op="get_attr"):
        target = node.target
        if target not in params or not target.endswith(".weight") or not node.users:
            continue
        if all(_plain_lookup(u, node) for u in node.users):
            w = params[target]
            out[target] = Table(target.removesuffix(".weight"), int(w.shape[0]), int(w.shape[1]))
    return out


def _plain_lookup(user: fx.Node, weight: fx.Node) -> bool:
    if not user.args or user.args[0] is not weight:
        return False
    args = list(user.args) + [None] * 9
    if user.target in EMBEDDING_OPS:
        padding, scale = (args[2] if args[2] is not None else -1), bool(args[3])
        return padding == -1 and not scale and not user.kwargs
    if user.target in BAG_OPS:  # per-sample weights pool the fetched rows (bag_lookup)
        scale = bool(args[3])
        padding = args[8] if user.target is _aten.embedding_bag.padding_idx else None
        return not scale and padding in (None, -1) and not user.kwargs
    return False


def lookup(table: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """nn.Embedding's forward through a table module that sums bags: one id per bag."""
    rows = table(ids.reshape(-1, 1))
    return rows.reshape(*ids.shape, rows.shape[-1])


def bag_lookup(op, table: nn.Module, indices: torch.Tensor, *rest):
    """An embedding_bag op through a table module: fetch one row per id, then pool those
    rows with the original op (same offsets, mode, flags and per-sample weights)."""
    rows = table(indices.reshape(-1, 1))
    own = torch.arange(indices.numel(), device=indices.device, dtype=indices.dtype)
    return op(rows, own.reshape(indices.shape), *rest)


def make_holder(chain: LayerChain, module: nn.Module | None = None) -> dict:
    """target -> object for every get_attr of the graph: the module's own parameters and
    buffers (so training updates them), the graph's constants, and one table module per table
    (sharing the table's weight)."""
    module = chain.captured.module if module is None else module
    gm = chain.captured.graph_module
    own = dict(module.named_parameters()) | dict(module.named_buffers())
    holder = {}
    for node in gm.graph.find_nodes(op="get_attr"):
        t = node.target
        holder[t] = own[t] if t in own else _graph_attr(gm, t)
    for target, table in find_tables(chain).items():
        weight = holder.pop(target)
        bag = nn.EmbeddingBag(table.rows, table.dim, mode="sum", _weight=weight.detach(),
                              device=weight.device)
        bag.weight = weight if isinstance(weight, nn.Parameter) else nn.Parameter(weight)
        holder[table.path] = bag
    return holder


def _graph_attr(gm: fx.GraphModule, target: str):
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


@dataclass
class Segment:
    """Layers lo..hi as one GraphModule: gm(batch, *reads) -> (*makes[, loss])."""

    gm: fx.GraphModule
    lo: int
    hi: int
    reads: list[str]
    makes: list[str]
    has_loss: bool
    constants: set[str]
    """Targets that are graph constants (not parameters or buffers of the model)."""

    def run(self, batch: int, values: dict[str, torch.Tensor]
            ) -> tuple[dict[str, torch.Tensor], torch.Tensor | None]:
        outs = self.gm(batch, *[values[k] for k in self.reads])
        loss = outs[-1] if self.has_loss else None
        return dict(zip(self.makes, outs[:len(self.makes)], strict=True)), loss


def build_segment(chain: LayerChain, lo: int, hi: int, holder: dict) -> Segment:
    """The GraphModule for layers lo..hi (see the module docstring)."""
    gm = chain.captured.graph_module
    tables = {t: tb.path for t, tb in find_tables(chain).items()}
    g = fx.Graph()
    batch = g.placeholder(BATCH)
    reads = chain.reads(lo, hi)
    placeholder = {k: g.placeholder(_safe(k)) for k in reads}
    pos = {n: i for i, n in enumerate(gm.graph.nodes)}
    nodes = sorted((n for i in range(lo, hi + 1) for n in chain.nodes[i]), key=pos.__getitem__)
    for n in _written(nodes):  # an in-place update of what arrives over a cut: on a copy
        if chain.key.get(n) in placeholder:
            k = chain.key[n]
            placeholder[k] = g.call_function(torch.ops.aten.clone.default, (placeholder[k],))
    made: dict[fx.Node, fx.Node] = {}
    attrs: dict[str, fx.Node] = {}
    sym = _batch_symbol(chain)

    def attr(target: str) -> fx.Node:
        if target not in attrs:
            attrs[target] = g.get_attr(target)
        return attrs[target]

    def resolve(n: fx.Node):
        if n in made:
            return made[n]
        if n.op == "get_attr":
            return attr(tables.get(n.target, n.target))
        if n.op != "placeholder" and is_symbolic(n):
            made[n] = _emit(g, _expr(n), sym, batch, chain)
            return made[n]
        if n in chain.key and chain.key[n] in placeholder:
            return placeholder[chain.key[n]]
        raise CaptureError(f"{chain.captured.source}: model.layers: layers "
                           f"{chain.names[lo]!r}..{chain.names[hi]!r} need {n.name!r}, "
                           "which no earlier layer makes")

    for n in nodes:
        weight = n.args[0] if n.args else None
        if isinstance(weight, fx.Node) and weight.op == "get_attr" and weight.target in tables:
            args = [fx.node.map_arg(a, resolve) for a in n.args[1:]]
            if n.target in EMBEDDING_OPS:
                made[n] = g.call_function(lookup, (attr(tables[weight.target]), args[0]))
            else:
                made[n] = g.call_function(bag_lookup, (n.target, attr(tables[weight.target]), *args))
            continue
        made[n] = g.node_copy(n, resolve)
    makes = [k for k in chain.live_after(hi) if lo <= chain.made[k] <= hi]
    by_key = {chain.key[n]: made[n] for n in nodes}
    outs = [by_key[k] for k in makes]
    has_loss = hi == chain.loss_index
    if has_loss:
        out = by_key.get(chain.output_key) or placeholder[chain.output_key]
        outs.append(g.call_function(chain.captured.loss, (out, placeholder.get(LABEL))))
    g.output(tuple(outs))
    used = {n.target for n in g.nodes if n.op == "get_attr"}
    module = fx.GraphModule({t: holder[t] for t in used}, g, class_name="Segment")
    params = dict(chain.captured.module.named_parameters()) | dict(chain.captured.module.named_buffers())
    constants = {t for t in used if t not in params and t not in {tb for tb in tables.values()}}
    transient = constants | (used & _non_persistent(chain.captured.module))
    for t in transient:  # graph constants (numpy arrays, literals) and the module's own
        # non-persistent buffers stay out of state dicts, as in the eager module's
        owner, _, attr_name = t.rpartition(".")
        sub = module.get_submodule(owner) if owner else module
        if attr_name in sub._buffers:
            sub._non_persistent_buffers_set.add(attr_name)
    return Segment(module, lo, hi, reads, makes, has_loss, constants)


def _written(nodes: list[fx.Node]) -> set[fx.Node]:
    """The values the nodes update in place (`h += e`, `x[:, 0] *= 2`), followed back through
    views to the tensor they alias. A segment copies such a value when it arrives from an
    earlier layer: it arrives as a leaf that carries a gradient (a cut's receiving end), which
    autograd refuses to update in place; the copy is what the eager module updates."""
    out: set[fx.Node] = set()
    for n in nodes:
        schema = getattr(n.target, "_schema", None)
        for arg, value in zip(schema.arguments if schema else (), n.args):
            if arg.alias_info is not None and arg.alias_info.is_write and isinstance(value, fx.Node):
                out |= _aliases(value)
    return out


def _aliases(node: fx.Node) -> set[fx.Node]:
    """The node and every tensor it may be a view of."""
    seen, stack = set(), [node]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        schema = getattr(n.target, "_schema", None) if n.op == "call_function" else None
        for arg, value in zip(schema.arguments if schema else (), n.args):
            if arg.alias_info is not None and isinstance(value, fx.Node):
                stack.append(value)
    return seen


def _non_persistent(module: nn.Module) -> set[str]:
    """Paths of the module's buffers registered with persistent=False."""
    return {f"{path}.{name}" if path else name for path, sub in module.named_modules()
            for name in sub._non_persistent_buffers_set}


def _safe(key: str) -> str:
    return "v_" + "".join(c if c.isalnum() else "_" for c in key)


def _batch_symbol(chain: LayerChain):
    first = next(iter(chain.captured.graph_module.graph.find_nodes(op="placeholder")))
    return first.meta["val"].shape[0].node.expr


def _expr(n: fx.Node):
    val = n.meta["val"]
    return sympy.Integer(val) if isinstance(val, int) else val.node.expr


def _emit(g: fx.Graph, expr, sym, batch: fx.Node, chain: LayerChain):
    """fx nodes computing a size expression of the batch symbol."""
    if expr == sym:
        return batch
    if expr.is_Integer:
        return int(expr)
    args = [_emit(g, a, sym, batch, chain) for a in expr.args]
    if isinstance(expr, sympy.Add | sympy.Mul):
        op = operator.add if isinstance(expr, sympy.Add) else operator.mul
        acc = args[0]
        for a in args[1:]:
            acc = g.call_function(op, (acc, a))
        return acc
    if isinstance(expr, FloorDiv):
        return g.call_function(operator.floordiv, tuple(args))
    if isinstance(expr, sympy.Pow) and expr.exp.is_Integer:
        return g.call_function(operator.pow, tuple(args))
    raise CaptureError(f"{chain.captured.source}: model.module: {chain.captured.name} computes a "
                       f"size {expr} the stages cannot recompute from the batch size")
