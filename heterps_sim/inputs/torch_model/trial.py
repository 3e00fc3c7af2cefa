"""One real forward pass of a user's model on an example batch, before its capture is trusted.

The capture runs on the meta device, where tensors have shapes but no values: a table with
fewer rows than the ids model.inputs declares (`field_dims: [-1, ...]`: the offsets send ids
below zero and past the end), a lookup past its table, or a model whose fresh output is NaN
passes it, and the first real step fails in a rank minutes later. So a model small enough to
build on the CPU (at most TRIAL_MAX_VALUES parameter and buffer values, 64 MiB in float32)
is built there with the scenario's kwargs and runs one batch of EXAMPLE_BATCH samples drawn
from model.inputs (ids inside their cardinality); an exception, or an output that is not
finite, is one line naming model.kwargs and model.inputs. A bigger model is not tried (its
tables would take the memory the meta capture avoids): its ranks' first step is its trial.

    check_runs(section, source="s.yaml", search_paths=[scenario_dir])   # or CaptureError
"""

from __future__ import annotations

from collections.abc import Sequence

TRIAL_MAX_VALUES = 1 << 24
"""Largest model (parameter and buffer values) built on the CPU for the trial."""


def check_runs(section, *, source: str, search_paths: Sequence[str] = ()) -> None:
    """Raise CaptureError unless the section's module, built with its kwargs, runs one example
    batch to a finite output (models over TRIAL_MAX_VALUES are not tried)."""
    import torch

    from heterps_sim.inputs.torch_model import capture as cap
    from heterps_sim.inputs.torch_model.bags import forward_args
    from heterps_sim.inputs.torch_model.errors import CaptureError, exited, first_line
    shapes = cap.build_module(section, source=source, device="meta", search_paths=search_paths)
    if _values(shapes) > TRIAL_MAX_VALUES:
        return
    module = (shapes if cap.module_device(shapes) == "cpu" else
              cap.build_module(section, source=source, device="cpu", search_paths=search_paths))
    inputs = cap.raw_inputs(section)
    gen = torch.Generator().manual_seed(0)
    batch = [cap.example_tensor(i, cap.EXAMPLE_BATCH, generator=gen) for i in inputs]
    name = section.name or section.module.rpartition(":")[2]
    fed = ", ".join(f"{i.name}[{cap.EXAMPLE_BATCH}, {', '.join(map(str, i.shape))}]"
                    for i in inputs)
    module.train()  # as the capture and the ranks run it (a throwaway copy: its norms' stats)
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=[]):
            out = module(*forward_args(inputs, batch))  # a bag's (ids, offsets): bags.py
    except SystemExit as exc:
        raise CaptureError(f"{source}: model.module: {name}.forward "
                               f"{exited(exc)}") from None
    except Exception as exc:  # noqa: BLE001 - the user's model failed on a real batch
        raise CaptureError(
            f"{source}: model.kwargs: {name} built with model.kwargs fails on an example "
            f"batch of model.inputs ({fed}): {type(exc).__name__}: "
            f"{first_line(exc)}") from None
    outs = out if isinstance(out, list | tuple) else [out]
    for t in outs:
        if isinstance(t, torch.Tensor) and t.is_floating_point() and not torch.isfinite(t).all():
            raise CaptureError(
                f"{source}: model.kwargs: {name} built with model.kwargs returns non-finite "
                f"values (NaN or infinity) on an example batch of model.inputs ({fed})")


def fits_the_cpu(section, *, source: str, search_paths: Sequence[str] = ()) -> bool:
    """Whether the section's module is small enough to build on the CPU (TRIAL_MAX_VALUES)."""
    from heterps_sim.inputs.torch_model import capture as cap
    shapes = cap.build_module(section, source=source, device="meta", search_paths=search_paths)
    return _values(shapes) <= TRIAL_MAX_VALUES


def _values(module) -> int:
    return sum(t.numel() for t in (*module.parameters(), *module.buffers()))
