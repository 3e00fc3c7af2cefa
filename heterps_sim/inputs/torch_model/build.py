"""Import a user's module factory (and loss) and build the module.

    module = build_module(section, source="s.yaml", search_paths=[scenario_dir])
    loss = resolve_loss(section.loss, "s.yaml", [scenario_dir])

The factory runs with its kwargs (and feature columns, columns.py) under
`torch.manual_seed(seed)` on a device: "meta" for the capture (shapes only, no memory for big
tables), falling back to the CPU, with a line saying so, for a module that ignores the meta
device. Every failure is a one-line CaptureError naming the field.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Callable, Sequence
from contextlib import contextmanager

import torch
from torch import nn

from heterps_sim.inputs.torch_model import losses
from heterps_sim.inputs.torch_model.columns import feature_columns
from heterps_sim.inputs.torch_model.errors import CaptureError, exited, first_line
from heterps_sim.inputs.torch_model.notices import say_once
from heterps_sim.inputs.torch_model.section import TorchModelSection


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
                               f"{exited(exc)}") from None
        except Exception as exc:  # noqa: BLE001 - any import failure is the user's file
            raise CaptureError(f"{source}: {field}: cannot import module {mod_name!r} "
                               f"({type(exc).__name__}: {first_line(exc)})") from None
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
                               f"raised {type(exc).__name__}: {first_line(exc)}") from None
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
                               f"{exited(exc)}") from None
        except Exception as exc:  # noqa: BLE001 - the user's factory failed
            raise CaptureError(f"{source}: model.kwargs: {section.module}(**kwargs) raised "
                               f"{type(exc).__name__}: {first_line(exc)}") from None
    if not isinstance(module, nn.Module):
        raise CaptureError(f"{source}: model.module: {section.module} returned a "
                           f"{type(module).__name__}, not a torch.nn.Module")
    return module


def resolve_loss(name: str, source: str, search_paths: Sequence[str] = ()) -> Callable:
    if name in losses.BUILTIN:
        return losses.BUILTIN[name]
    fn = import_object(name, source, "model.loss", search_paths)
    if not callable(fn):
        raise CaptureError(f"{source}: model.loss: {name} is not callable")
    return losses.MeanTimesBatch(fn)
