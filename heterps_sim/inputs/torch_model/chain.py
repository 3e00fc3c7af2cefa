"""Measure a LayerChain into the ModelSpec the planner sees.

Each layer runs alone, in chain order, on an example batch (on the "meta" device when the
model was built there: shapes only, so tables of any size cost nothing), forward then
backward, under torch.utils.flop_counter.FlopCounterMode. Per sample:
- forward / backward FLOPs: what FlopCounterMode counts (matmuls, convolutions, bmm; bias
  adds and activations count 0, the zoo's convention), plus lookups x dim each way for every
  embedding table read (row sums and gradient scatter-adds, as the zoo counts them);
- dense parameter bytes: the parameters the layer reads, tables excepted;
- tables: rows and dim of each table the layer reads, ids looked up per sample;
- output_bytes: every tensor made at or before the layer and read after it (tensor liveness
  in the captured graph), float tensors at 4 bytes, integer tensors at 8 (they travel as
  float32 and int64); output_grad_bytes: the float ones that carry a gradient back.
"""

from __future__ import annotations

import re

import sympy
import torch
from torch.utils.flop_counter import FlopCounterMode

from heterps_sim.core.spec import Layer, ModelSpec
from heterps_sim.inputs.torch_model.capture import EXAMPLE_BATCH
from heterps_sim.inputs.torch_model.errors import CaptureError, first_line
from heterps_sim.inputs.torch_model.layers import LOSS_LAYER, LayerChain
from heterps_sim.inputs.torch_model.raw import example_tensor
from heterps_sim.inputs.torch_model.segment import (
    BAG_OPS,
    EMBEDDING_OPS,
    _batch_symbol,
    build_segment,
    find_tables,
    make_holder,
)

FLOAT_BYTES, INT_BYTES = 4, 8


def value_widths(chain: LayerChain) -> dict[str, tuple[int, bool]]:
    """key -> (numbers per sample, is float) of every value that crosses some cut."""
    sym = _batch_symbol(chain)
    raw = {r.name: r for r in (*chain.captured.inputs, chain.captured.label)}
    crossing = {k for i in range(len(chain.names) - 1) for k in chain.live_after(i)}
    nodes = {k: n for n, k in chain.key.items()}
    out = {}
    for k in crossing:
        if k in raw:
            r = raw[k]
            out[k] = (r.width, r.dtype.is_floating_point)
            continue
        val = nodes[k].meta.get("val")
        if not isinstance(val, torch.Tensor):
            raise CaptureError(f"{chain.captured.source}: model.layers: {k!r} (made in layer "
                               f"{chain.names[chain.made[k]]!r}) is not a tensor and cannot "
                               "cross a cut; merge the layers around it")
        numel = sympy.Integer(1)
        for d in val.shape:
            numel *= d.node.expr if isinstance(d, torch.SymInt) else sympy.Integer(d)
        per = sympy.simplify(numel / sym)
        if not per.is_Integer:
            raise CaptureError(
                f"{chain.captured.source}: model.layers: {k!r} (made in layer "
                f"{chain.names[chain.made[k]]!r}, read in {chain.names[chain.last_use[k]]!r}) "
                f"has {numel} elements, not a whole number per sample, so no cut may fall "
                "between those layers; name a module holding both as one layer")
        out[k] = (int(per), val.dtype.is_floating_point)
    return out


def _flops(fn) -> tuple[object, float]:
    with FlopCounterMode(display=False) as counter:
        result = fn()
    return result, float(counter.get_total_flops())


def measure(chain: LayerChain, *, device: str | torch.device | None = None,
            batch: int = EXAMPLE_BATCH) -> tuple[ModelSpec, dict[str, bool]]:
    """(the ModelSpec, key -> whether the value carries a gradient) of the chain, measured
    on `device` (default: where the module was captured)."""
    cap = chain.captured
    device = cap.device if device is None else device
    holder = make_holder(chain)
    tables = find_tables(chain)
    widths = value_widths(chain)
    gen = torch.Generator().manual_seed(0)
    values = {r.name: example_tensor(r, batch, device=device, generator=gen)
              for r in (*cap.inputs, cap.label)}
    grad = dict.fromkeys(values, False)
    sizes = {}
    for i in range(len(chain.names)):
        seg = build_segment(chain, i, i, holder)
        inputs = {k: values[k].detach().requires_grad_(grad[k]) for k in seg.reads}
        try:
            (outs, loss), fwd, bwd = _run_layer(seg, inputs, batch)
        except Exception as exc:  # noqa: BLE001 - the user's code failed in one layer
            raise _layer_failure(exc, chain.names[i], cap, device) from None
        for k, v in outs.items():
            grad[k] = bool(v.requires_grad and v.is_floating_point())
        values.update({k: v.detach() for k, v in outs.items()})
        lookups, rows, width = _tables_read(chain, i, tables)
        dim = round(width / lookups) if lookups else 0  # (mixed dims in one layer: rounded)
        sizes[i] = (fwd / batch + width, bwd / batch + width, rows, lookups, dim)
    return _spec(chain, sizes, widths, grad, holder, tables), grad


class NeedsRealTensors(CaptureError):
    """An operation of the model cannot run on the meta device: measure it on real tensors."""


class _BackwardFailed(Exception):
    """A layer's forward ran and its backward raised (the cause is chained)."""


def _layer_failure(exc: Exception, name: str, cap, device) -> CaptureError:
    """One line naming the layer, the pass that failed and the way out."""
    where = f"{cap.source}: model.module: layer {name!r} of {cap.name}"
    backward = isinstance(exc, _BackwardFailed)
    cause = exc.__cause__ if backward and exc.__cause__ is not None else exc
    if _no_meta_kernel(cause, device):
        part = "'s backward" if backward else ""
        return NeedsRealTensors(f"{where}{part} calls {_op_named(cause)}, which cannot run "
                                "on the meta device")
    what = f"{type(cause).__name__}: {first_line(cause)}"
    if backward:
        return CaptureError(
            f"{where} cannot be trained: its backward fails on an example batch ({what}); "
            "give every operation on its path to the loss a gradient "
            "(torch.library.register_autograd for a custom op), or detach what needs none")
    return CaptureError(
        f"{where} fails when run alone on an example batch: {what}; name a module holding "
        "it and its neighbours as one layer (model.layers)")


def _run_layer(seg, inputs, batch):
    """((outputs, loss), forward FLOPs, backward FLOPs) of one layer's segment (a backward
    that raises: _BackwardFailed)."""
    (outs, loss), fwd = _flops(lambda: seg.run(batch, inputs))
    ends = [v for v in outs.values() if v.requires_grad] + ([loss] if loss is not None else [])
    bwd = 0.0
    if ends and any(e.requires_grad for e in ends):
        leaves = _leaves(seg, inputs)
        try:
            _, bwd = _flops(lambda: torch.autograd.backward(
                ends, [torch.ones_like(t) for t in ends], inputs=leaves))
        except Exception as exc:  # noqa: BLE001 - told apart from a forward failure
            raise _BackwardFailed() from exc
    return (outs, loss), fwd, bwd


def _op_named(exc: Exception) -> str:
    """The operator a failure names (aten::bincount), or "an operation"."""
    found = re.search(r"\b(\w+::\w+|torch\.\w+\(\))", str(exc))
    return found.group(1) if found else "an operation"


def _no_meta_kernel(exc: Exception, device) -> bool:
    """Whether a failure on the meta device says an operation cannot run there (no Meta
    kernel, or an output whose size depends on the data)."""
    return (torch.device(device).type == "meta" and isinstance(exc, NotImplementedError)
            and "meta" in str(exc).lower())


def _leaves(seg, inputs) -> list[torch.Tensor]:
    """What a backward differentiates: the layer's float inputs and its parameters."""
    leaves = [v for v in inputs.values() if v.requires_grad]
    leaves += [p for p in seg.gm.parameters() if p.requires_grad]
    return leaves


def _tables_read(chain, i, tables) -> tuple[float, int, float]:
    """(ids looked up per sample, rows of the tables read, numbers read per sample) for
    layer i, from the shapes the capture traced (its example batch)."""
    lookups, rows, width = 0.0, 0, 0
    seen = set()
    for n in chain.nodes[i]:
        if n.target not in EMBEDDING_OPS | BAG_OPS:
            continue
        weight = n.args[0]
        table = tables.get(getattr(weight, "target", None))
        if table is None:
            continue
        ids = n.args[1].meta["val"]
        per = _hint_numel(ids) / EXAMPLE_BATCH if _backed(ids) else _bag_length(chain, n.args[1])
        lookups += per
        width += per * table.dim
        if table.path not in seen:
            seen.add(table.path)
            rows += table.rows
    return lookups, rows, width


def _backed(val: torch.Tensor) -> bool:
    """Whether every dimension has a size hint (not a bag's data-dependent id count)."""
    return all(not isinstance(d, torch.SymInt) or d.node.hint is not None for d in val.shape)


def _bag_length(chain: LayerChain, node) -> float:
    """Ids per sample of a lookup whose id count depends on the data: the mean length of the
    bag input its ids come from (bags.py; section.ModelInput.mean_length)."""
    bags = {r.name: r.mean_length for r in chain.captured.inputs if r.bag}
    seen, todo = set(), [node]
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if n.op == "placeholder" and chain.key.get(n) in bags:
            return bags[chain.key[n]]
        todo += n.all_input_nodes
    raise CaptureError(f"{chain.captured.source}: model.module: an embedding lookup of "
                       f"{chain.captured.name} reads a number of ids that depends on the data "
                       "and comes from no bag input; declare that input with bag: true")


def _hint_numel(val: torch.Tensor) -> float:
    out = 1
    for d in val.shape:
        out *= int(d.node.hint) if isinstance(d, torch.SymInt) else int(d)
    return float(out)


def _spec(chain, sizes, widths, grad, holder, tables) -> ModelSpec:
    cap = chain.captured
    params = dict(cap.module.named_parameters())
    table_targets = set(tables)
    layers, prev = [], float(sum(r.width * (FLOAT_BYTES if r.dtype.is_floating_point else INT_BYTES)
                                 for r in (*cap.inputs, cap.label)))
    for i, name in enumerate(chain.names):
        live = chain.live_after(i) if i < chain.loss_index else []
        out = sum(widths[k][0] * (FLOAT_BYTES if widths[k][1] else INT_BYTES) for k in live)
        out_grad = sum(widths[k][0] * FLOAT_BYTES for k in live if widths[k][1] and grad.get(k))
        dense = sum(params[t].numel() * params[t].element_size()
                    for t in chain.params_of(i) if t in params and t not in table_targets)
        fwd, bwd, rows, lookups, dim = sizes[i]
        kind = ("loss" if name == LOSS_LAYER and i == chain.loss_index else
                "embedding" if rows else "dense" if dense else "interaction")
        layers.append(Layer(name=name, kind=kind, forward_flops=fwd, backward_flops=bwd,
                            param_bytes=float(dense), table_rows=rows, table_dim=dim,
                            lookups_per_sample=round(lookups), input_bytes=prev,
                            output_bytes=float(out), output_grad_bytes=float(out_grad),
                            reads_raw_input=(i == 0)))
        prev = float(out)
    return ModelSpec(name=cap.name, layers=tuple(layers),
                     source=f"user model {cap.name} captured with torch.export ({cap.source})")


