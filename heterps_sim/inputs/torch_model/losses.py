"""The losses a user model trains with, as functions returning the SUM over the samples.

The engine divides a microbatch's summed loss by the global batch size, so microbatches and
replicas add up to the batch mean (heterps_exec/runtime.py). Built-ins sum directly; a user's
"pkg.mod:fn" returns the batch MEAN, as torch's losses do by default, and is scaled by the
number of samples. The label's per-sample shape follows from the loss and the model output.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812 - torch's own convention


def bce(output: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
    """Sigmoid + binary cross-entropy on logits, summed."""
    return F.binary_cross_entropy_with_logits(output, label.to(output.dtype), reduction="sum")


def bce_probabilities(output: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
    """Binary cross-entropy of an output that is already a probability (a model ending in a
    sigmoid), summed; torch clamps each log at -100, so p = 0 or 1 stays finite."""
    return F.binary_cross_entropy(output, label.to(output.dtype), reduction="sum")


def softmax_ce(output: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
    """Softmax cross-entropy against a class index per sample, summed."""
    return F.cross_entropy(output, label.reshape(-1).long(), reduction="sum")


def mse(output: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
    return F.mse_loss(output, label.to(output.dtype), reduction="sum")


BUILTIN = {"bce": bce, "softmax_ce": softmax_ce, "mse": mse}


class MeanTimesBatch:
    """A user loss returning the batch mean, turned into a sum (mean x samples)."""

    def __init__(self, fn) -> None:
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", "user_loss")

    def __call__(self, output: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
        return self.fn(output, label) * output.shape[0]


def label_shape(loss_name: str, output_shape: tuple[int, ...]) -> tuple[tuple[int, ...], torch.dtype]:
    """(per-sample label shape, dtype) for a model output of `output_shape` (batch first)."""
    if loss_name == "softmax_ce":
        return (), torch.int64
    return tuple(output_shape[1:]), torch.float32
