"""Multi-hot (bag) inputs: padded ids and lengths in the data, (ids, offsets) in forward.

    model:
      inputs:
        - {name: history, shape: [8], dtype: int64, cardinality: 1000, bag: true}

    data (per sample)      history [8] (ids, padded)   history_lengths [] (1..8)
    forward(...)           ids = the batch's ids, one sample after another, 1-D
                           offsets = where each sample's ids start: nn.EmbeddingBag(ids, offsets)

With `include_last_offset: true` the offsets have one more entry, the number of ids (as
nn.EmbeddingBag(include_last_offset=True) reads them); with `per_sample_weights: true` the
data also holds history_weights [8] (padded like the ids) and forward receives a third
argument, the ids' weights (1-D, beside the ids: per_sample_weights of a mode="sum" bag).

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
    """The forward's arguments from the raw tensors (capture.RawInput order: a bag's ids, its
    lengths, then its weights if it has them): every bag's padded ids and lengths become
    (ids, offsets), and its padded weights the weights of those ids."""
    args, k = [], 0
    while k < len(inputs):
        if not inputs[k].bag:
            args.append(raw[k])
            k += 1
            continue
        padded, lengths = raw[k], raw[k + 1].reshape(-1).to(torch.int64)
        keep = torch.arange(padded.shape[1], device=padded.device) < lengths.reshape(-1, 1)
        where = keep.reshape(-1).nonzero().reshape(-1)  # one index: ids and weights agree
        ends = torch.cumsum(lengths, 0)
        offsets = torch.cat([ends.new_zeros(1), ends]) if inputs[k].last_offset else \
            ends - lengths
        args += [padded.reshape(-1)[where], offsets]
        k += 2
        if inputs[k - 2].weighted:
            args.append(raw[k].reshape(-1)[where])
            k += 1
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


def weights_refusal(module: nn.Module, inputs: Sequence, text: str) -> str:
    """Why a capture that failed on per-sample weights did: an nn.EmbeddingBag whose mode is
    not "sum" ("" if that is not it)."""
    if "per_sample_weights" not in text or not any(getattr(i, "weighted", False) for i in inputs):
        return ""
    for path, m in module.named_modules():
        if isinstance(m, nn.EmbeddingBag) and m.mode != "sum":
            return (f"{path} is nn.EmbeddingBag(mode={m.mode!r}) and is given "
                    "per_sample_weights, which torch pools only with mode='sum'; use "
                    "mode='sum' (a weighted mean: divide by the weights' sum), or drop "
                    "per_sample_weights from the bag input")
    return ""


def offsets_hint(module: nn.Module, inputs: Sequence) -> str:
    """Why a capture that failed may have: the module's nn.EmbeddingBag reads offsets with a
    last entry and a bag input does not declare them so, or the other way round ("" if
    neither)."""
    last = [n for n, m in module.named_modules()
            if isinstance(m, nn.EmbeddingBag) and m.include_last_offset]
    plain = [n for n, m in module.named_modules()
             if isinstance(m, nn.EmbeddingBag) and not m.include_last_offset]
    bags = [i for i in inputs if getattr(i, "bag", False)]
    short = [i.name for i in bags if not i.last_offset]
    if last and short:
        return (f"; {last[0]} is nn.EmbeddingBag(include_last_offset=True): declare "
                f"include_last_offset: true on input {short[0]!r}")
    long = [i.name for i in bags if i.last_offset]
    if plain and long and not last:
        return (f"; input {long[0]!r} declares include_last_offset but {plain[0]} is "
                "nn.EmbeddingBag(include_last_offset=False)")
    return ""
