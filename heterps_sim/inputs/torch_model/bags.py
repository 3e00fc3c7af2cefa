"""Multi-hot (bag) inputs: padded ids and lengths in the data, (ids, offsets) in forward.

    model:
      inputs:
        - {name: history, shape: [8], dtype: int64, cardinality: 1000, bag: true}

    data (per sample)      history [8] (ids, padded)   history_lengths [] (1..8)
    forward(...)           ids = the batch's ids, one sample after another, 1-D
                           offsets = where each sample's ids start: nn.EmbeddingBag(ids, offsets)

The engine moves every raw tensor as [batch, width] rows and cuts microbatches by rows, so a
bag travels padded to its max_len with each sample's length beside it; `BagInputs` turns the
pair into the jagged (ids, offsets) the module's forward takes, in front of the module. The
conversion is captured with the model (its 1-D ids have a data-dependent size, so a bag is
measured on the CPU, not the meta device) and joins the layer that looks the ids up; the
module's parameters keep their paths (the wrapper registers the module's children as its own).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from heterps_sim.inputs.torch_model.adopt import adopt


def forward_args(inputs: Sequence, raw: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """The forward's arguments from the raw tensors (capture.RawInput order: a bag's ids then
    its lengths): every bag's padded ids and lengths become (ids, offsets)."""
    args, k = [], 0
    while k < len(inputs):
        if not inputs[k].bag:
            args.append(raw[k])
            k += 1
            continue
        padded, lengths = raw[k], raw[k + 1].reshape(-1).to(torch.int64)
        keep = torch.arange(padded.shape[1], device=padded.device) < lengths.reshape(-1, 1)
        args += [padded[keep], torch.cumsum(lengths, 0) - lengths]
        k += 2
    return args


def has_bags(inputs: Sequence) -> bool:
    return any(getattr(i, "bag", False) for i in inputs)


class BagInputs(nn.Module):
    """The user's module behind raw inputs: forward(*raw) = module(*forward_args(raw)). Its
    state (names included) is the module's own."""

    def __init__(self, module: nn.Module, inputs: Sequence) -> None:
        super().__init__()
        self.__dict__["inner"] = module
        self.__dict__["inputs"] = tuple(inputs)
        adopt(self, module)

    def forward(self, *raw):
        return self.inner(*forward_args(self.inputs, raw))
