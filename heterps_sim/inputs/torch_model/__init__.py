"""A user's own PyTorch model as the planner's layer chain (torch.export capture).

    from heterps_sim.inputs.torch_model import model_spec
    spec = model_spec(MyDeepFM(...), (ids,), loss="bce")          # a heterps ModelSpec

    model:                                   # the same from a scenario (section.py)
      module: my_models:DeepFM
      inputs: [{name: ids, shape: [3], dtype: int64, cardinality: 100}]

section.py (the scenario fields, no torch) -> build.py (import the factory, build the module)
-> capture.py (torch.export with a dynamic batch, on raw.py's example inputs; bags.py turns a
bag's raw tensors into forward's arguments) -> layers.py (nodes -> layers at module
boundaries, tensor liveness) -> segment.py (a run of layers as one fx GraphModule; the
engine's stages are built from it) -> chain.py (per-layer FLOPs, bytes and tables: the
ModelSpec) -> trial.py (one real forward of the whole model); groups.py says which leaves
fuse into one layer and what it is called, cache.py keeps the ModelSpec on disk, columns.py
makes the feature columns a factory receives, hooks.py checks the extra loss, errors.py holds
the one error (CaptureError). Only this
package's functions import torch, and only when called: a zoo scenario never does, nor a
user model's scenario whose capture is cached.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def capture_section(section, *, source: str, search_paths: Sequence[str | Path] = (),
                    device: str = "meta", seed: int = 0, module=None):
    """The LayerChain of a scenario's torch model section (module built on `device` unless
    given)."""
    from heterps_sim.inputs.torch_model import capture as cap
    from heterps_sim.inputs.torch_model.hooks import extra_loss
    from heterps_sim.inputs.torch_model.layers import build_chain
    paths = [str(p) for p in search_paths]
    if device == "meta" and any(i.bag for i in section.inputs):
        device = "cpu"  # a bag's ids have a data-dependent size: measured on real tensors
    if module is None:  # on the CPU instead when the module ignores the meta device
        module = cap.build_module(section, source=source, seed=seed, device=device,
                                  search_paths=paths)
        device = cap.module_device(module) if device == "meta" else device
    loss = cap.resolve_loss(section.loss, source, paths)
    name = section.name or section.module.rpartition(":")[2]
    captured = cap.capture(module, cap.raw_inputs(section), loss, section.loss, name=name,
                           source=source, device=device, output=section.output)
    captured.extra_loss = extra_loss(section, module, source=source, search_paths=paths)
    return build_chain(captured, section.layers, section.split_points)


_SPECS: dict = {}


def section_model_spec(section, *, source: str, search_paths: Sequence[str | Path] = ()):
    """The ModelSpec of a scenario's torch model section (captured on the meta device; once
    per section and folder in a process, and kept in the capture cache across processes:
    cache.py)."""
    from heterps_sim.inputs.torch_model.cache import cached_spec
    paths = tuple(map(str, search_paths))
    key = (section.model_dump_json(), source, paths)
    if key not in _SPECS:
        _SPECS[key] = cached_spec(section, source, paths,
                                  lambda: _captured_spec(section, source, paths))
    return _SPECS[key]


def _captured_spec(section, source: str, search_paths: Sequence[str]):
    from heterps_sim.inputs.torch_model.trial import check_runs
    spec = measured_section(section, source=source, search_paths=search_paths)[1]
    check_runs(section, source=source, search_paths=search_paths)  # values, not only shapes
    return spec


def measured_section(section, *, source: str, search_paths: Sequence[str] = ()):
    """(LayerChain, ModelSpec, key -> carries a gradient) of a section, captured and measured
    on the meta device, or on the CPU when an operation cannot run on meta (said once)."""
    from heterps_sim.inputs.torch_model.chain import NeedsRealTensors, measure
    from heterps_sim.inputs.torch_model.trial import fits_the_cpu
    chain = capture_section(section, source=source, search_paths=search_paths)
    try:
        return (chain, *measure(chain))
    except NeedsRealTensors as exc:  # an op with no meta kernel: measured on the CPU
        if not fits_the_cpu(section, source=source, search_paths=search_paths):
            raise NeedsRealTensors(f"{exc}; the model is too big to measure on the CPU "
                                   "instead; give that op a meta kernel "
                                   "(torch.library.register_fake)") from None
        from heterps_sim.inputs.torch_model.notices import say_once
        say_once(f"{exc}; measured on the CPU instead (its tables take memory)")
    chain = capture_section(section, source=source, search_paths=search_paths, device="cpu")
    return (chain, *measure(chain))


def scenario_model_spec(section, source: str, path: Path | None):
    """The scenario hook: a torch section's ModelSpec, importing from the scenario's folder."""
    return section_model_spec(section, source=source,
                              search_paths=[path.resolve().parent] if path else [])


def model_spec(module, example_inputs, loss="bce", *, input_names: Sequence[str] | None = None,
               layers="grouped", split_points: Sequence[str] = (), name: str | None = None,
               output: str | None = None):
    """The ModelSpec of an nn.Module: `example_inputs` are a batch of its forward's inputs
    (batch first; integer ids inside their tables), `loss` one of bce, softmax_ce, mse, or a
    callable (output, label) -> batch mean; `output` "logits" or "probabilities" (None:
    detected, as a scenario's model.output)."""
    import torch

    from heterps_sim.inputs.torch_model import capture as cap
    from heterps_sim.inputs.torch_model.chain import measure
    from heterps_sim.inputs.torch_model.layers import build_chain
    from heterps_sim.inputs.torch_model.losses import BUILTIN, MeanTimesBatch
    example_inputs = tuple(example_inputs)
    names = list(input_names or [f"input_{k}" for k in range(len(example_inputs))])
    inputs = []
    for n, x in zip(names, example_inputs, strict=True):
        card = None if x.dtype.is_floating_point or x.dtype == torch.bool else int(x.max()) + 1
        inputs.append(cap.RawInput(n, tuple(x.shape[1:]), x.dtype, card))
    if isinstance(loss, str):
        fn, loss_name = (BUILTIN[loss], loss) if loss in BUILTIN else (None, loss)
        if fn is None:
            fn = cap.resolve_loss(loss, "<python>")
    else:
        fn, loss_name = MeanTimesBatch(loss), getattr(loss, "__name__", "user_loss")
    device = next((p.device for p in module.parameters()), torch.device("cpu"))
    captured = cap.capture(module, inputs, fn, loss_name, name=name or type(module).__name__,
                           source="<python>", device=str(device), output=output)
    chain = build_chain(captured, layers, list(split_points))
    return measure(chain, device=device)[0]
