"""Lossy encodings of float32 [rows, width] tensors for the wire (H-PS-style quantization).

    none   4 bytes per value (exact)
    fp16   2 bytes per value (IEEE half; values beyond +-65504 saturate)
    bf16   2 bytes per value (bfloat16: float32's range, 8 bits of mantissa)
    int8   1 byte per value + a float32 scale per row: q = round(x / s), s = max|x_row| / 127,
           so every value is off by at most s / 2 (half a step of its own row)

`encode(x, mode)` returns a uint8 [rows, nbytes(width, mode)] tensor; `decode(b, width, mode)`
returns float32 [rows, width]. Sizes depend only on (width, mode), so a receiver can post its
buffer before the data exists. No state: every tensor is encoded on its own.

`auto` is not an encoding but a rule (`choose_mode`): the narrowest mode whose relative error
stays within a bound, judged from statistics of the traffic itself (`traffic_stats`); the engine
re-chooses it every step per link (hps/auto_quantize.py).
"""

from __future__ import annotations

import torch

from heterps_sim.core.hps import ENCODINGS

MODES = ENCODINGS
"""The encodings, in the order of the wire protocol's index (the simulator models the same:
heterps_sim.core.hps)."""
AUTO = "auto"
CHOICES = (*MODES, AUTO)
"""What `--quantize` accepts."""
_HALF = {"fp16": torch.float16, "bf16": torch.bfloat16}
FP16_MAX = 65504.0
FP16_EPS = 2.0 ** -11
"""Largest relative rounding error of fp16 (10 mantissa bits), inside its range."""
BF16_EPS = 2.0 ** -8
"""Largest relative rounding error of bf16 (7 mantissa bits)."""
DEFAULT_ERROR_BOUND = 0.01
"""`auto`'s default bound on a tensor's relative error (norm of the error / norm)."""


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
    if mode == "none":  # a view in place when the bytes are aligned (a message's sections are)
        try:
            return b.view(torch.float32)
        except RuntimeError:
            return b.contiguous().view(torch.float32)
    b = b.contiguous()
    if mode in _HALF:
        return b.view(_HALF[mode]).to(torch.float32)
    if mode == "int8":
        q = b[:, :width].contiguous().view(torch.int8).to(torch.float32)
        scale = b[:, width:width + 4].contiguous().view(torch.float32)
        return q * scale
    raise ValueError(f"quantize mode must be one of {MODES}, got {mode!r}")


def traffic_stats(x: torch.Tensor) -> tuple[float, float]:
    """(int8 error estimate, max |x|) of a float [rows, width] tensor, in float64.

    The estimate is the relative error int8 with per-row scales would make: rounding to steps
    of s = max|row| / 127 errs uniformly, s^2 / 12 per value on average, so
    sqrt(sum_rows width * s^2 / 12) / ||x||. It depends on each row's peak-to-norm ratio, not
    on the mode the tensor travelled in, so both ends of a link compute it from what crossed.
    """
    x = x.detach().to(torch.float64)
    if x.numel() == 0:
        return 0.0, 0.0
    peak = x.abs().amax(dim=1)
    norm2 = float((x * x).sum())
    if norm2 == 0.0:
        return 0.0, 0.0
    err2 = float((peak * peak).sum()) / (127.0 ** 2) * x.shape[1] / 12.0
    return (err2 / norm2) ** 0.5, float(peak.max())


def choose_mode(int8_error: float, absmax: float, bound: float, travelled: str = "none") -> str:
    """The narrowest encoding whose relative error stays within `bound`, judged from traffic
    that `travelled` in some encoding. fp16 traffic that hit the edge of fp16's range was
    clipped, so its statistics say nothing: move to a range-safe encoding and look again."""
    range_safe = "bf16" if BF16_EPS <= bound else "none"
    if travelled == "fp16" and absmax >= FP16_MAX:
        return range_safe
    if int8_error <= bound:
        return "int8"
    if FP16_EPS <= bound and absmax < FP16_MAX:
        return "fp16"
    return range_safe


def parse_choice(text: str) -> tuple[str, float]:
    """`--quantize` text -> (mode or "auto", error bound): "int8", "auto", "auto:0.02"."""
    mode, _, bound_text = text.partition(":")
    if mode not in CHOICES or (bound_text and mode != AUTO):
        raise ValueError(f"expected one of {', '.join(CHOICES)} (auto:BOUND sets auto's "
                         f"error bound), got {text!r}")
    if not bound_text:
        return mode, DEFAULT_ERROR_BOUND
    try:
        bound = float(bound_text)
    except ValueError:
        bound = -1.0
    if not 0.0 <= bound < 1.0:
        raise ValueError(f"auto's error bound must be a number in [0, 1), got {bound_text!r}")
    return mode, bound
