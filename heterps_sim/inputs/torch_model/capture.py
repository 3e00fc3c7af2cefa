"""Capture a user's built module with torch.export and check its output and loss.

    module = build_module(section, source="s.yaml", search_paths=[scenario_dir])   # build.py
    captured = capture(module, raw_inputs(section), loss, "bce", name="DeepFM", source="s.yaml")

The batch dimension is one dynamic `torch.export.Dim` shared by every input, so the captured
graph serves any microbatch size. Every failure is a one-line `CaptureError` naming the file,
the field (model.module, model.inputs, model.loss) and the way out. build.py imports and
builds the module, raw.py describes its raw inputs and draws example batches, errors.py holds
the error; their public names are importable from here too, as before the split.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import fx, nn

from heterps_sim.inputs.torch_model import losses
from heterps_sim.inputs.torch_model.bags import (
    BagInputs,
    has_bags,
    offsets_hint,
    weights_refusal,
)
from heterps_sim.inputs.torch_model.build import (  # noqa: F401 - importable from here too
    build_module,
    factory_kwargs,
    import_object,
    module_device,
    resolve_loss,
)
from heterps_sim.inputs.torch_model.errors import CaptureError, exited, first_line
from heterps_sim.inputs.torch_model.notices import say_once
from heterps_sim.inputs.torch_model.raw import (  # noqa: F401 - importable from here too
    BAG_WEIGHTS,
    RawInput,
    example_tensor,
    raw_inputs,
)
from heterps_sim.inputs.torch_model.section import LABEL

EXAMPLE_BATCH = 4
"""Samples in the example batch the capture traces (any size >= 2 would do)."""
MIN_BATCH = 2
"""The dynamic batch dimension's lower bound (torch.export specialises sizes 0 and 1)."""


@dataclass
class CapturedModel:
    """A user's module and its captured graph (torch.export, unlifted: parameters are get_attr
    nodes named by their original paths)."""

    name: str
    module: nn.Module
    graph_module: fx.GraphModule
    inputs: tuple[RawInput, ...]
    """The forward's inputs, in order (placeholders of the graph)."""
    label: RawInput
    loss: Callable
    """(output, label) -> the summed loss of the samples."""
    loss_name: str
    source: str = ""
    device: str = "cpu"
    """Where the module lives: "meta" (shapes only) or a real device."""
    output: str = "logits"
    """What forward returns: "logits" or "probabilities" (declared, or detected)."""
    extra_loss: Callable | None = None
    """fn(module) -> a scalar added to the batch's mean loss once per step (hooks.py)."""


def capture(module: nn.Module, inputs: Sequence[RawInput], loss: Callable, loss_name: str, *,
            name: str, source: str = "<model>", device: str = "cpu",
            output: str | None = None) -> CapturedModel:
    """torch.export the module with a dynamic batch dimension, then check its output and the
    loss on an example batch. `output` is what forward returns, logits or probabilities
    (None: probabilities when the graph ends in a sigmoid); the built-in bce reads it so.
    Raises CaptureError (inputs that do not fit the model, an operation torch.export cannot
    capture, an output or loss of the wrong kind)."""
    module.train()
    args = tuple(example_tensor(i, EXAMPLE_BATCH, device=device,
                                generator=torch.Generator().manual_seed(k))
                 for k, i in enumerate(inputs))
    batch = torch.export.Dim("batch", min=MIN_BATCH)
    dims = tuple({0: batch} for _ in args)
    traced = module
    if has_bags(inputs):  # forward gets (ids, offsets) for each bag: bags.py
        traced, dims = BagInputs(module, inputs), (dims,)  # (one *raw argument)
    try:
        exported = torch.export.export(traced, args, dynamic_shapes=dims)
    except SystemExit as exc:
        raise CaptureError(f"{source}: model.module: {name}.forward {exited(exc)}") from None
    except Exception as exc:  # noqa: BLE001 - classify the user model's failure
        raise _capture_failure(module, inputs, exc, name, source) from None
    gm = exported.module()
    out_nodes = [n for n in gm.graph.find_nodes(op="output")][0].args[0]
    flat = list(out_nodes) if isinstance(out_nodes, list | tuple) else [out_nodes]
    vals = [n.meta.get("val") if isinstance(n, fx.Node) else n for n in flat]
    if len(flat) != 1 or not isinstance(vals[0], torch.Tensor):
        raise CaptureError(f"{source}: model.module: {name}.forward must return one tensor "
                           f"(the model output the loss reads), got {len(flat)} outputs")
    out_shape = tuple(_hint(d) for d in vals[0].shape)
    if not out_shape or out_shape[0] != EXAMPLE_BATCH:
        raise CaptureError(f"{source}: model.module: {name}'s output has shape {out_shape}; "
                           "it needs the batch as its first dimension")
    if output is None:
        output = "probabilities" if ends_in_sigmoid(gm) else "logits"
        if output == "probabilities":
            say_once(f"{source}: model.output: not set; {name}.forward ends in a sigmoid, so "
                      "its output is read as probabilities (set model.output to say so)")
    if loss_name == "bce" and output == "probabilities":
        loss = losses.bce_probabilities
    label_shape, label_dtype = losses.label_shape(loss_name, out_shape)
    card = int(out_shape[-1]) if loss_name == "softmax_ce" else None
    label = RawInput(LABEL, label_shape, label_dtype, card, (0.0, 1.0) if card is None else None)
    _check_loss(loss, loss_name, vals[0], label, source)
    return CapturedModel(name=name, module=module, graph_module=gm, inputs=tuple(inputs),
                         label=label, loss=loss, loss_name=loss_name, source=source,
                         device=str(device), output=output)


SHAPE_ONLY = {torch.ops.aten.squeeze.dim, torch.ops.aten.squeeze.default,
               torch.ops.aten.squeeze.dims, torch.ops.aten.view.default,
               torch.ops.aten.reshape.default, torch.ops.aten.unsqueeze.default,
               torch.ops.aten.flatten.using_ints, torch.ops.aten._unsafe_view.default,
               torch.ops.aten.clone.default, torch.ops.aten.contiguous.default}


def ends_in_sigmoid(gm: fx.GraphModule) -> bool:
    """Whether the graph's output is a sigmoid's, up to reshapes (so every value lies in
    [0, 1]: a probability, not a logit)."""
    out = next(iter(gm.graph.find_nodes(op="output"))).args[0]
    node = out[0] if isinstance(out, list | tuple) else out
    while isinstance(node, fx.Node) and node.target in SHAPE_ONLY:
        node = node.args[0]
    return isinstance(node, fx.Node) and node.target in (torch.ops.aten.sigmoid.default,
                                                          torch.sigmoid)


def _hint(d) -> int:
    return d if isinstance(d, int) else EXAMPLE_BATCH if isinstance(d, torch.SymInt) else int(d)


def _check_loss(loss: Callable, loss_name: str, out_val: torch.Tensor, label: RawInput,
                source: str) -> None:
    out = torch.zeros((EXAMPLE_BATCH, *out_val.shape[1:]), dtype=out_val.dtype, requires_grad=True)
    target = example_tensor(label, EXAMPLE_BATCH, generator=torch.Generator().manual_seed(0))
    try:
        value = loss(out, target)
    except SystemExit as exc:
        raise CaptureError(f"{source}: model.loss: {loss_name} {exited(exc)}") from None
    except Exception as exc:  # noqa: BLE001 - the user's loss failed on the model's output
        raise CaptureError(f"{source}: model.loss: {loss_name} fails on the model output of "
                           f"shape {tuple(out.shape)}: {type(exc).__name__}: {first_line(exc)}") from None
    check_scalar_with_grad(value, f"{source}: model.loss: {loss_name}", "the model output")


def check_scalar_with_grad(value, what: str, on: str) -> None:
    """A user function's value must be a scalar tensor that `on` flows back into; else a
    CaptureError beginning with `what` (the file, field and function)."""
    if not isinstance(value, torch.Tensor) or value.numel() != 1 or value.dim() != 0:
        shape = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
        raise CaptureError(f"{what} must return a scalar tensor, got {shape}")
    if not value.requires_grad:
        raise CaptureError(f"{what} does not depend on {on} (no gradient flows back)")


def _capture_failure(module: nn.Module, inputs: Sequence[RawInput], exc: Exception, name: str,
                     source: str) -> CaptureError:
    """One line: a shape the model rejects (model.inputs), or the module and operation
    torch.export cannot capture (model.module) and the way out."""
    text = str(exc)
    where = _user_frame(text, module)
    shapes = ", ".join(f"{i.name}[B, {', '.join(map(str, i.shape))}]" if i.shape else
                       f"{i.name}[B]" for i in inputs)
    message = first_line(exc)
    refused = weights_refusal(module, inputs, text)
    if refused:
        return CaptureError(f"{source}: model.module: {name}: {refused}")
    if _looks_like_shape_error(text):
        return CaptureError(f"{source}: model.inputs: {name} rejects inputs {shapes}"
                            f"{where}: {message}{offsets_hint(module, inputs)}")
    return CaptureError(
        f"{source}: model.module: torch.export cannot capture {name}{where}: "
        f"{type(exc).__name__}: {message}; way out: make that code traceable (torch.cond / "
        "torch.where instead of a Python branch on tensor values), then choose coarser layers "
        "(model.layers) or split points (model.split_points) if it must stay in one piece")


_SHAPE_WORDS = ("shape", "size", "mat1 and mat2", "dimension", "must match", "out of range",
                "expected input", "cannot be multiplied", "index out of")


def _looks_like_shape_error(text: str) -> bool:
    low = text.lower()
    data_dependent = "data-dependent" in low or "data dependent" in low or "guard" in low
    return not data_dependent and any(w in low for w in _SHAPE_WORDS)


def _user_frame(text: str, module: nn.Module) -> str:
    """' in <module path> (<Class>.forward, file:line)' for the deepest user frame the
    message cites, when it lies in a module's forward."""
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\w+)', text)
    for path, line, _fn in reversed(frames):
        if "/torch/" in path or "/heterps_" in path:
            continue
        line = int(line)
        for mod_path, mod in module.named_modules():
            try:
                src, start = inspect.getsourcelines(type(mod).forward)
                file = inspect.getsourcefile(type(mod).forward)
            except (OSError, TypeError):
                continue
            if file == path and start <= line < start + len(src):
                return f" in module {mod_path or '(root)'} ({type(mod).__name__}.forward, line {line})"
        return f" (at {path}:{line})"
    return ""
