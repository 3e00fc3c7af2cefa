"""The run files `heterps-sim plot` reads, checked as they are read.

A trace.json or result.json may come from anywhere (an older version, another tool, a hand
edit): each is held to the shape the figures read, so `[1]` as a result or `"traceEvents": 5`
is one line naming the file, the field and the problem (exit 2), never a traceback from deep
inside matplotlib. Fields the figures do not read are left alone (Chrome's trace format has
many); the ones they read must have their type and be finite. Sizes and nesting are bounded by
core.files.read_mapping, as for every input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from heterps_sim.core.files import MAX_INPUT_BYTES, UserFileError, read_mapping, validation_message

MAX_TRACE_BYTES = 512 * 2**20
"""Largest trace.json plot reads (the simulator's traces are not capped; a 512 MiB one is
millions of spans, more than a figure can show)."""
MAX_EVENTS = 5_000_000
"""Trace events a figure draws."""
MAX_STAGES = 10_000
MAX_TIME_US = 1e15
"""Trace times are microseconds: 1e15 is 31 years of simulated or measured time."""


class _Lenient(BaseModel):
    """Extra fields are allowed (the formats have more than a figure reads); the ones named
    must have their type, and numbers must be finite."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)


class TraceEvent(_Lenient):
    ph: str = ""
    name: str | int | float = ""
    cat: str = "other"
    pid: int = 0
    tid: int = 0
    ts: float = Field(default=0.0, ge=-MAX_TIME_US, le=MAX_TIME_US)
    dur: float = Field(default=0.0, ge=0, le=MAX_TIME_US)
    args: dict[str, Any] = {}

    @model_validator(mode="after")
    def _metadata(self) -> TraceEvent:
        """A span ("X") has a start and a duration; metadata events name a track or group
        ("args.name": text) or sort it."""
        if self.ph == "X" and not {"ts", "dur"} <= self.model_fields_set:
            raise ValueError('a complete ("X") event needs ts and dur')
        if self.ph == "M" and self.name in ("process_name", "thread_name"):
            if not isinstance(self.args.get("name"), str):
                raise ValueError(f"a {self.name} event needs args.name as text")
        if self.ph == "M" and self.name == "thread_sort_index":
            if not isinstance(self.args.get("sort_index"), int):
                raise ValueError("a thread_sort_index event needs args.sort_index, an integer")
        return self


class TraceFile(_Lenient):
    traceEvents: list[TraceEvent] = Field(default=[], max_length=MAX_EVENTS)  # noqa: N815


class StageRow(_Lenient):
    resource: str = "?"
    num_replicas: int = Field(default=1, ge=0)
    replicas: list[tuple[str, int]] = []
    utilisation: float | None = None
    comm_share: float | None = None
    bubble: float | None = None


class ResultFile(_Lenient):
    source: str = "?"
    throughput: float | None = None
    bottleneck_stage: int = -1
    stages: list[StageRow] = Field(default=[], max_length=MAX_STAGES)


def _read(path: Path, model: type[BaseModel], max_bytes: int = MAX_INPUT_BYTES) -> dict:
    """The file as the model reads it: every field a figure reads present, with its type."""
    data = read_mapping(path, max_bytes)  # a mapping (not `[1]`), finite, bounded depth
    try:
        return model.model_validate(data).model_dump()
    except ValidationError as exc:
        raise UserFileError(validation_message(str(path), exc)) from None


def read_meta(path: Path) -> dict:
    """sweep.json: titles only, any mapping."""
    return read_mapping(path)


def read_trace(path: Path) -> dict:
    """trace.json (core.trace's Chrome/Perfetto document), checked (TraceFile)."""
    return _read(path, TraceFile, MAX_TRACE_BYTES)


def read_result(path: Path) -> dict:
    """result.json (RunResult.to_json_dict()), checked (ResultFile)."""
    return _read(path, ResultFile)


SWEEP_NUMBERS = {"throughput_limit": (False, False), "throughput": (False, False),
                 "cost_usd": (True, True), "single_type_cost_usd": (True, True),
                 "single_type_throughput_same_cost": (True, True)}
"""tradeoff.csv's number columns: (may be infinite, may be empty). inf / nan / empty are how
the sweep writes "no plan"; every number is >= 0."""


def check_sweep(frame, path: Path) -> None:
    """Raise UserFileError naming the first cell of tradeoff.csv (`frame`, as read with
    its numbers parsed) that a figure cannot draw: no rows, an index that is not a row
    number, a non-number or negative number, a unit list not written as "type xN, ...", a
    feasible row without a finite cost and throughput."""
    import math

    import pandas as pd
    if frame.empty:
        raise UserFileError(f"{path}: no rows")
    missing = {"index", "units", "single_type_cost_usd",
               "single_type_throughput_same_cost"} - set(frame)
    if missing:
        raise UserFileError(f"{path}: missing columns {', '.join(sorted(missing))}")
    index = pd.to_numeric(frame["index"], errors="coerce")
    for line, (raw, value) in enumerate(zip(frame["index"], index, strict=True), start=2):
        if not (math.isfinite(value) and value >= 0 and float(value).is_integer()):
            raise UserFileError(f"{path}: line {line}: index: expected a row number, got {raw!r}")
    for column, (infinite_ok, empty_ok) in SWEEP_NUMBERS.items():
        if column not in frame:
            continue
        values = pd.to_numeric(frame[column], errors="coerce")
        for line, (raw, value) in enumerate(zip(frame[column], values, strict=True), start=2):
            empty = raw is None or (isinstance(raw, float) and math.isnan(raw)) or raw == ""
            if empty and empty_ok:
                continue
            ok = (not math.isnan(value) and value >= 0 and (infinite_ok or math.isfinite(value))
                  and value <= 1e300)
            if not ok and not (infinite_ok and value == math.inf):
                raise UserFileError(f"{path}: line {line}: {column}: expected a number >= 0"
                                    f"{'' if infinite_ok else ' (finite)'}, got {raw!r}")
    for line, name in enumerate(frame["scheduler"], start=2):
        if not isinstance(name, str) or not name:
            raise UserFileError(f"{path}: line {line}: scheduler: expected a name, got {name!r}")
    for line, (units, feasible, cost, thr) in enumerate(zip(
            frame["units"], frame["feasible"], frame["cost_usd"], frame["throughput"],
            strict=True), start=2):
        if feasible and not (math.isfinite(float(cost)) and float(thr) > 0):
            raise UserFileError(f"{path}: line {line}: a feasible row needs a finite cost_usd "
                                f"and a throughput > 0, got {cost!r} and {thr!r}")
        if isinstance(units, str) and units.strip() and not _units_ok(units):
            raise UserFileError(f"{path}: line {line}: units: expected \"type xN, ...\", "
                                f"got {units[:80]!r}")


def _units_ok(text: str) -> bool:
    for part in text.split(", "):
        name, sep, k = part.rpartition(" x")
        if not (sep and name and k.isdigit() and len(k) <= 12):
            return False
    return True
