"""Import a user's module factory, build it, make example inputs, and capture it with torch.export.

    module = build_module(section, source="s.yaml", search_paths=[scenario_dir])
    captured = capture(module, example_args, input_names, loss="bce", source="s.yaml")

The batch dimension is one dynamic `torch.export.Dim` shared by every input, so the captured
graph serves any microbatch size. Every failure is a one-line `CaptureError` naming the file,
the field (model.module, model.kwargs, model.inputs, model.loss) and the way out.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import sys
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch
from torch import fx, nn

from heterps_sim.core.files import UserFileError
from heterps_sim.inputs.torch_model import losses
from heterps_sim.inputs.torch_model.bags import BagInputs, has_bags, offsets_hint
from heterps_sim.inputs.torch_model.columns import feature_columns
from heterps_sim.inputs.torch_model.notices import say_once
from heterps_sim.inputs.torch_model.section import LABEL, LENGTHS, WEIGHTS, TorchModelSection

EXAMPLE_BATCH = 4
"""Samples in the example batch the capture traces (any size >= 2 would do)."""
MIN_BATCH = 2
"""The dynamic batch dimension's lower bound (torch.export specialises sizes 0 and 1)."""
BAG_WEIGHTS = (0.5, 1.5)
"""Where example batches and synthetic data draw a weighted bag's per-id weights."""


class CaptureError(UserFileError):
    """A user model that cannot be imported, built, captured or trained: one line."""


@dataclass(frozen=True, slots=True)
class RawInput:
    """A raw per-sample tensor the model reads: an input of forward, or the label."""

    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    cardinality: int | tuple[int, ...] | None = None
    range: tuple[float, float] | None = None
    id_columns: tuple[int, ...] = ()
    """A float input's first columns hold ids below these bounds (section.ModelInput)."""
    bag: bool = False
    """A multi-hot input's padded ids; the next RawInput holds its lengths (bags.py)."""
    lengths_for: str = ""
    """The lengths of this bag input: one number per sample in [1, its max_len]."""
    mean_length: float = 0.0
    """A bag's ids per sample, as the cost model counts them."""
    last_offset: bool = False
    """A bag whose offsets end with the number of ids (include_last_offset=True)."""
    weighted: bool = False
    """A bag with per-id weights: the RawInput after its lengths holds them, padded."""

    @property
    def width(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1


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


@contextmanager
def _on_path(paths: Sequence[str]):
    """The given folders, then the working directory, on sys.path for the import (a console
    script's sys.path holds neither)."""
    added = [p for p in dict.fromkeys([*map(str, paths), os.getcwd()]) if p not in sys.path]
    sys.path[:0] = added
    try:
        yield
    finally:
        for p in added:
            if p in sys.path:
                sys.path.remove(p)


def import_object(dotted: str, source: str, field: str, search_paths: Sequence[str] = ()):
    """The object `package.module:attr.attr` names; a CaptureError naming `field` if not."""
    mod_name, _, attr = dotted.partition(":")
    with _on_path(search_paths):
        try:
            obj = importlib.import_module(mod_name)
        except SystemExit as exc:  # sys.exit() at import: the command would end, silently
            raise CaptureError(f"{source}: {field}: importing module {mod_name!r} "
                               f"{_exited(exc)}") from None
        except Exception as exc:  # noqa: BLE001 - any import failure is the user's file
            raise CaptureError(f"{source}: {field}: cannot import module {mod_name!r} "
                               f"({type(exc).__name__}: {_first_line(exc)})") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise CaptureError(f"{source}: {field}: module {mod_name!r} has no {attr!r}")
        obj = getattr(obj, part)
    return obj


def build_module(section: TorchModelSection, *, source: str, seed: int = 0,
                 device: str | torch.device = "cpu", search_paths: Sequence[str] = ()
                 ) -> nn.Module:
    """Call the factory with its kwargs under `torch.manual_seed(seed)` on `device`
    ("meta": shapes only, no memory for big tables)."""
    factory = import_object(section.module, source, "model.module", search_paths)
    if not callable(factory):
        raise CaptureError(f"{source}: model.module: {section.module} is not callable")
    if torch.device(device).type != "meta":
        return _call_factory(factory, section, source, seed, device, search_paths)
    try:
        module = _call_factory(factory, section, source, seed, device, search_paths)
        why = _off_meta(module)
    except CaptureError as exc:
        raised = str(exc).partition(" raised ")[2] or str(exc)
        why = f"there its factory raised {re.split(r'[.!;] ', raised)[0]}"
    if not why:
        return module
    module = _call_factory(factory, section, source, seed, "cpu", search_paths)
    say_once(f"{source}: model.module: {section.module} ignores the meta device ({why}); "
              "built it on the CPU to capture it (its tables take memory)")
    return module


def _off_meta(module: nn.Module) -> str:
    """Why a module built under torch.device("meta") is not wholly on it ("" if it is):
    torch.Tensor(n, m) ignores the device context, and so does a module that moves itself."""
    for name, t in (*module.named_parameters(), *module.named_buffers()):
        if t.device.type != "meta":
            return f"{name} was made on {t.device.type}"
    return ""


def module_device(module: nn.Module) -> str:
    """"meta" when every tensor of the module is on the meta device, else its first one's."""
    tensors = [*module.parameters(), *module.buffers()]
    if tensors and all(t.device.type == "meta" for t in tensors):
        return "meta"
    return str(tensors[0].device) if tensors else "cpu"


def factory_kwargs(section: TorchModelSection, source: str,
                   search_paths: Sequence[str] = ()) -> dict:
    """The factory's keyword arguments: `kwargs`, and the feature columns (columns.py) as
    `columns_arg`, each made by `column_factory` when the scenario names one."""
    if not section.columns:
        return dict(section.kwargs)
    columns = feature_columns(section)
    if section.column_factory:
        make = import_object(section.column_factory, source, "model.column_factory",
                             search_paths)
        try:
            columns = [make(c) for c in columns]
        except Exception as exc:  # noqa: BLE001 - the user's column factory failed
            raise CaptureError(f"{source}: model.column_factory: {section.column_factory} "
                               f"raised {type(exc).__name__}: {_first_line(exc)}") from None
    return {**section.kwargs, section.columns_arg: columns}


def _call_factory(factory, section: TorchModelSection, source: str, seed: int, device,
                  search_paths: Sequence[str]) -> nn.Module:
    kwargs = factory_kwargs(section, source, search_paths)
    with torch.random.fork_rng(devices=[]), torch.device(device), _on_path(search_paths):
        torch.manual_seed(seed)
        try:
            module = factory(**kwargs)
        except SystemExit as exc:
            raise CaptureError(f"{source}: model.module: {section.module}(**kwargs) "
                               f"{_exited(exc)}") from None
        except Exception as exc:  # noqa: BLE001 - the user's factory failed
            raise CaptureError(f"{source}: model.kwargs: {section.module}(**kwargs) raised "
                               f"{type(exc).__name__}: {_first_line(exc)}") from None
    if not isinstance(module, nn.Module):
        raise CaptureError(f"{source}: model.module: {section.module} returned a "
                           f"{type(module).__name__}, not a torch.nn.Module")
    return module


def raw_inputs(section: TorchModelSection) -> tuple[RawInput, ...]:
    """The raw tensors of the section's inputs, in order (a bag: its ids, then its lengths)."""
    out = []
    for i in section.inputs:
        card = tuple(i.cardinality) if isinstance(i.cardinality, list) else i.cardinality
        if not i.bag:
            out.append(RawInput(i.name, tuple(i.shape), getattr(torch, i.dtype), card, i.range,
                                tuple(i.id_columns or ())))
            continue
        top = i.shape[0]
        out.append(RawInput(i.name, (top,), getattr(torch, i.dtype), card, bag=True,
                            mean_length=i.mean_length or (1 + top) / 2,
                            last_offset=i.include_last_offset, weighted=i.per_sample_weights))
        out.append(RawInput(i.name + LENGTHS, (), torch.int64, top + 1, lengths_for=i.name))
        if i.per_sample_weights:  # positive floats, padded like the ids
            out.append(RawInput(i.name + WEIGHTS, (top,), torch.float32, range=BAG_WEIGHTS))
    return tuple(out)


def example_tensor(spec: RawInput, batch: int, *, device="cpu", generator=None) -> torch.Tensor:
    """A [batch, *shape] tensor of the input's dtype, inside its cardinality or range."""
    shape = (batch, *spec.shape)
    if device == "meta" or (isinstance(device, torch.device) and device.type == "meta"):
        return torch.empty(shape, dtype=spec.dtype, device="meta")
    if spec.dtype == torch.bool:
        return torch.rand(shape, generator=generator) < 0.5
    if spec.lengths_for:  # a bag's lengths: 1..max_len (cardinality is max_len + 1)
        top = spec.cardinality - 1
        return 1 + (torch.rand(shape, generator=generator, dtype=torch.float64) * top).long()
    if not spec.dtype.is_floating_point:
        card = spec.cardinality
        bound = torch.tensor(card if isinstance(card, tuple) else [card], dtype=torch.float64)
        ids = (torch.rand(shape, generator=generator, dtype=torch.float64) * bound).long()
        return ids.to(spec.dtype)
    if spec.range is not None:
        lo, hi = spec.range
        x = lo + (hi - lo) * torch.rand(shape, generator=generator)
    else:
        x = torch.randn(shape, generator=generator)
    if spec.id_columns:  # the first columns: whole-number ids below each column's bound
        bound = torch.tensor(spec.id_columns, dtype=torch.float64)
        ids = (torch.rand((batch, len(bound)), generator=generator, dtype=torch.float64) * bound)
        x[:, :len(bound)] = ids.floor().float()
    return x.to(spec.dtype)


def resolve_loss(name: str, source: str, search_paths: Sequence[str] = ()) -> Callable:
    if name in losses.BUILTIN:
        return losses.BUILTIN[name]
    fn = import_object(name, source, "model.loss", search_paths)
    if not callable(fn):
        raise CaptureError(f"{source}: model.loss: {name} is not callable")
    return losses.MeanTimesBatch(fn)


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
        raise CaptureError(f"{source}: model.module: {name}.forward {_exited(exc)}") from None
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
        raise CaptureError(f"{source}: model.loss: {loss_name} {_exited(exc)}") from None
    except Exception as exc:  # noqa: BLE001 - the user's loss failed on the model's output
        raise CaptureError(f"{source}: model.loss: {loss_name} fails on the model output of "
                           f"shape {tuple(out.shape)}: {type(exc).__name__}: {_first_line(exc)}") from None
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
    message = _first_line(exc)
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


def _exited(exc: SystemExit) -> str:
    """What a user's code that called sys.exit() (or raised SystemExit) is told: the command
    goes on to say so, instead of ending with that code and nothing produced."""
    return (f"called sys.exit({exc.code!r}); model code must return or raise, not end the "
            "process")


def _first_line(exc: BaseException) -> str:
    for line in str(exc).splitlines():
        if line.strip():
            return line.strip()[:300]
    return type(exc).__name__
