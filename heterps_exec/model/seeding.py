"""The key of every seeded random call: (run seed, step, microbatch, the call's ordinal).

    with microbatch(seed, step, mu):            # around one microbatch's forward
        gen = generator(x.device, layer)        # that call's own torch.Generator

Outside `microbatch` (profiling, scoring) `active()` is False and every random call is
torch's own. dropout.py seeds the dropout family and attention with it, draws.py the random
tensors a forward makes (torch.rand_like, torch.bernoulli, ...).
"""

from __future__ import annotations

import hashlib
import struct
from contextlib import contextmanager

import torch

_current: list = [None]
"""(seed, step, microbatch) of the forward running now, or None."""


@contextmanager
def microbatch(seed: int, step: int, mu: int):
    """Random calls inside draw the masks of microbatch `mu` (0..m-1) of step `step`."""
    before, _current[0] = _current[0], (seed, step, mu)
    try:
        yield
    finally:
        _current[0] = before


def active() -> bool:
    """Whether a microbatch's key is set (else random calls are torch's own)."""
    return _current[0] is not None


def mask_seed(seed: int, step: int, mu: int, layer: int) -> int:
    """The generator seed of one random call (a hash: nearby keys give unrelated masks)."""
    digest = hashlib.blake2b(struct.pack("<4q", seed, step, mu, layer), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def generator(device: torch.device, layer: int) -> torch.Generator:
    """A fresh generator on `device` for call `layer` of the current microbatch."""
    return torch.Generator(device=device).manual_seed(mask_seed(*_current[0], layer))
