"""A wrapper module whose state is a wrapped module's own, names included: the children, the
parameters and the buffers registered on the wrapper under the same names (bags.BagInputs,
heterps_exec's UserWhole and UserStage). The wrapped module stays out of the module tree
(its state would get a prefix), so a state dict saved from one loads into the other.

The children are the same objects on both, so a swap inside a child shows on both. The root's
own parameters are the same tensors, but each module keeps them in a dict of its own: code
that swaps a parameter (async's weight versions, heterps_exec/model/swap.py) must swap it in
the module whose code reads it.
"""

from __future__ import annotations

from torch import nn


def adopt(wrapper: nn.Module, module: nn.Module) -> None:
    """Register `module`'s children, own parameters and own buffers on `wrapper`."""
    for name, child in module.named_children():
        wrapper.add_module(name, child)
    for name, p in module.named_parameters(recurse=False):
        wrapper.register_parameter(name, p)
    for name, b in module.named_buffers(recurse=False):
        wrapper.register_buffer(name, b, persistent=name not in module._non_persistent_buffers_set)
