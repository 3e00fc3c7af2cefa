"""Lossy encodings of float32 [rows, width] tensors for the wire (H-PS-style quantization).

    none   4 bytes per value (exact)
    fp16   2 bytes per value (IEEE half; values beyond +-65504 saturate)
    bf16   2 bytes per value (bfloat16: float32's range, 8 bits of mantissa)
    int8   1 byte per value + a float32 scale per row: q = round(x / s), s = max|x_row| / 127,
           so every value is off by at most s / 2 (half a step of its own row)

`encode(x, mode)` returns a uint8 [rows, nbytes(width, mode)] tensor; `decode(b, width, mode)`
returns float32 [rows, width]. Sizes depend only on (width, mode), so a receiver can post its
buffer before the data exists. No state: every tensor is encoded on its own.
"""

from __future__ import annotations

import torch

MODES = ("none", "fp16", "bf16", "int8")
_HALF = {"fp16": torch.float16, "bf16": torch.bfloat16}
FP16_MAX = 65504.0


def nbytes(width: int, mode: str) -> int:
    """Bytes per row of a `width`-wide float tensor encoded with `mode`."""
    if mode == "none":
        return 4 * width
    if mode in _HALF:
        return 2 * width
    if mode == "int8":
        return width + 4 if width else 0
    raise ValueError(f"quantize mode must be one of {MODES}, got {mode!r}")


def encode(x: torch.Tensor, mode: str) -> torch.Tensor:
    x = x.detach().to(torch.float32).contiguous()
    if mode == "none":
        return x.view(torch.uint8)
    if mode in _HALF:
        if mode == "fp16":
            x = x.clamp(-FP16_MAX, FP16_MAX)
        return x.to(_HALF[mode]).contiguous().view(torch.uint8)
    if mode == "int8":
        scale = x.abs().amax(dim=1, keepdim=True) / 127.0
        safe = torch.where(scale > 0, scale, torch.ones_like(scale))
        q = torch.round(x / safe).clamp(-127, 127).to(torch.int8)
        return torch.cat([q.view(torch.uint8), scale.view(torch.uint8)], 1)
    raise ValueError(f"quantize mode must be one of {MODES}, got {mode!r}")


def decode(b: torch.Tensor, width: int, mode: str) -> torch.Tensor:
    b = b.contiguous()
    if mode == "none":
        return b.view(torch.float32)
    if mode in _HALF:
        return b.view(_HALF[mode]).to(torch.float32)
    if mode == "int8":
        q = b[:, :width].contiguous().view(torch.int8).to(torch.float32)
        scale = b[:, width:width + 4].contiguous().view(torch.float32)
        return q * scale
    raise ValueError(f"quantize mode must be one of {MODES}, got {mode!r}")
