"""The measured files `heterps-exec validate` reads back: a links JSON and a profile CSV.

Both are what `heterps-exec profile` writes, but a user may pass any file: each is checked as
it is read, so a list where a mapping belongs, a missing field, a negative, NaN or absurd
number, or a row that is not a number is one line naming the file, the field and the problem
(exit 2), found before minutes of profiling and runs, never a traceback in the middle.
No torch at import.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from heterps_sim.core.files import UserFileError, read_mapping, read_text, validation_message

MAX_LATENCY_S = 60.0
"""A measured one-way latency longer than a minute is not a link measurement."""
MAX_BYTES_PER_S = 1e15
"""1 PB/s: beyond any link (and keeps bytes / bandwidth far from underflow)."""
MAX_SECONDS = 3600.0
"""A measured all-reduce or layer time of more than an hour is not a measurement."""
MAX_RANKS = 4096


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=False)


class AllReduceRow(_Strict):
    ranks: int = Field(ge=1, le=MAX_RANKS)
    bytes: float = Field(ge=0, le=2**50)
    seconds: float = Field(ge=0, le=MAX_SECONDS)
    cpu_s: float | None = Field(default=None, ge=0, le=MAX_SECONDS)
    """Each member's process CPU in one all-reduce (absent in files measured before it was)."""


class MessageCpuRow(_Strict):
    """CPU seconds of one gloo message on each side: per message + per byte x bytes."""

    send_s: float = Field(ge=0, le=MAX_SECONDS)
    send_s_per_byte: float = Field(default=0.0, ge=0, le=1.0)
    recv_s: float = Field(ge=0, le=MAX_SECONDS)
    recv_s_per_byte: float = Field(default=0.0, ge=0, le=1.0)


class LinksFile(_Strict):
    """What `heterps-exec profile` measures about the host's links (calibration/links.py)."""

    latency_s: float = Field(ge=0, le=MAX_LATENCY_S)
    """One-way latency of a gloo message."""
    bytes_per_s: float = Field(gt=0, le=MAX_BYTES_PER_S)
    """Point-to-point bandwidth."""
    allreduce: list[AllReduceRow] = []
    """Measured all-reduce times (ranks, bytes, seconds)."""
    message_cpu: MessageCpuRow | None = None
    """What a boundary message costs the sender's and the receiver's CPU
    (benchmarks/bench_message_cpu.py): the simulator charges it on the host's cores."""
    message_cpu_origin: str = ""
    """Informational: the machine, date and command that measured message_cpu."""
    points: list[dict[str, Any]] = []
    host: str = ""
    after_compute_s: float = 0.0
    statistic: str = ""
    hot: dict[str, Any] = {}
    measured_at: str = ""
    """Informational: the back-to-back figures, the raw points, where and when measured."""


def read_links(path: str | Path) -> dict:
    """The links JSON at `path`, checked (LinksFile); UserFileError names the field."""
    data = read_mapping(Path(path))  # a mapping, finite numbers, bounded size and depth
    try:
        LinksFile.model_validate(data)
    except ValidationError as exc:
        raise UserFileError(validation_message(str(path), exc)) from None
    return data


PROFILE_TIMES = ("forward_s", "backward_s", "encode_s", "decode_s")
"""The per-layer times validate fits (optimizer_s is optional)."""


def read_profile_rows(path: str | Path, model: str) -> list[dict]:
    """The rows of profile CSV `path` for `model`, every number the fit reads checked:
    batch_size an integer >= 1, each time a finite number of seconds in [0, MAX_SECONDS]."""
    text = read_text(Path(path))  # bounded, UTF-8
    try:
        rows = list(csv.DictReader(io.StringIO(text, newline="")))
    except csv.Error as exc:
        raise UserFileError(f"{path}: malformed CSV ({exc})") from None
    columns = set(rows[0]) if rows else set()
    missing = [c for c in ("model", "layer", "batch_size", *PROFILE_TIMES) if c not in columns]
    if missing:
        raise UserFileError(f"{path}: not a heterps-exec profile (missing columns "
                            f"{', '.join(missing)})")
    mine = [r for r in rows if r.get("model") == model]
    if not mine:
        raise UserFileError(f"{path}: no heterps-exec profile rows for model {model!r}")
    for line, row in enumerate(rows, start=2):  # line 1 is the header
        if row.get("model") != model:
            continue
        _check_number(path, line, "batch_size", row.get("batch_size"), 1, 2**31, integer=True)
        for key in PROFILE_TIMES:
            _check_number(path, line, key, row.get(key), 0.0, MAX_SECONDS)
        if row.get("optimizer_s"):
            _check_number(path, line, "optimizer_s", row["optimizer_s"], 0.0, MAX_SECONDS)
    return mine


def _check_number(path, line: int, key: str, text, low: float, high: float, *,
                  integer: bool = False) -> None:
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = math.nan
    ok = math.isfinite(value) and low <= value <= high and (not integer or value.is_integer())
    if not ok:
        what = "an integer" if integer else "a number of seconds"
        raise UserFileError(f"{path}: line {line}: {key}: expected {what} in "
                            f"[{low:g}, {high:g}], got {text!r}")
