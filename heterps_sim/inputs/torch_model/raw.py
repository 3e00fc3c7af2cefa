"""The raw per-sample tensors a user model reads, and example batches of them.

    inputs = raw_inputs(section)           # RawInput per forward input (a bag: ids, lengths[,
    x = example_tensor(inputs[0], 4)       # weights]); a [4, *shape] tensor inside its bounds

The data readers produce these tensors; bags.forward_args turns them into the forward's
arguments; the capture, the per-layer measurement and the trial draw example batches of them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from heterps_sim.inputs.torch_model.section import LENGTHS, WEIGHTS, TorchModelSection

BAG_WEIGHTS = (0.5, 1.5)
"""Where example batches and synthetic data draw a weighted bag's per-id weights."""


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
