"""A recorded spot availability trace: how many units of one type could be held, over time, and
what a Poisson model fitted to it predicts.

    trace = load_availability("traces/spot/bamboo-g4dn-xlarge-us-east-1c-2020-11-20.csv")
    trace.at(t)                       units available t seconds into the window
    trace.changes(offset, horizon)    (t, units) of each change, from `offset` into the window,
                                      replayed cyclically (the window wraps around)
    trace.fit(k)                      for a job holding k units: its reclaims per unit-hour and
                                      the mean wait until k are available again

A file is one of two forms, told apart by its first row:

- levels: two columns, seconds since the window's start and units available from then on (a
  step function; the shipped Bamboo trace writes each change as two rows, the level before
  and after, at the same second);
- events: three columns, milliseconds since the window's start, `add` or `remove`, and a
  unit's name (Oobleck's simulator traces): the level is the units added and not yet removed.
  A name must be added before it is removed and not twice while held.

The job-level simulator (des/job.py) replays one on a lease:
the job is reclaimed when fewer than its units are available, and its replacements are ready
`restart_s` after enough are available again.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from heterps_sim.core.files import UserFileError

MAX_ROWS = 1_000_000


@dataclass(frozen=True, slots=True)
class Availability:
    times_s: tuple[float, ...]
    """Increasing; the first is 0."""
    units: tuple[int, ...]
    """Units available from times_s[i] until the next change."""
    period_s: float
    """The window's length: a replay wraps around after it."""
    source: str = ""

    def __post_init__(self) -> None:
        if not self.times_s or self.times_s[0] != 0.0 or len(self.times_s) != len(self.units):
            raise ValueError("an availability trace starts at 0 s with one level per time")
        if any(b <= a for a, b in zip(self.times_s, self.times_s[1:])):
            raise ValueError("an availability trace's times must increase")
        if any(u < 0 for u in self.units) or not self.period_s > self.times_s[-1]:
            raise ValueError("an availability trace needs levels >= 0 and a period past its "
                             "last change")

    def at(self, t: float) -> int:
        t = t % self.period_s
        lo, hi = 0, len(self.times_s) - 1
        while lo < hi:  # the last change at or before t
            mid = (lo + hi + 1) // 2
            if self.times_s[mid] <= t:
                lo = mid
            else:
                hi = mid - 1
        return self.units[lo]

    def changes(self, offset: float, horizon: float) -> Iterator[tuple[float, int]]:
        """(t, units) for each change within (0, horizon] of a replay starting `offset` seconds
        into the window (t counted from the replay's start)."""
        base = -(offset % self.period_s)
        while base < horizon:
            for t, u in zip(self.times_s, self.units):
                at = base + t
                if 0.0 < at <= horizon:
                    yield at, u
            base += self.period_s

    def window(self, start_s: float, end_s: float) -> Availability:
        """The part of the trace from start_s to end_s (seconds into this window), as a trace
        of its own that starts at 0 and wraps after end_s - start_s: to fit a model on one part
        of a recording and replay another (a held-out window)."""
        if not 0.0 <= start_s < end_s <= self.period_s:
            raise ValueError(f"a trace window must lie within 0 to {self.period_s:g} s and end "
                             f"after it starts (got {start_s:g} to {end_s:g})")
        times, units = [0.0], [self.at(start_s)]
        for t, u in zip(self.times_s, self.units):
            if start_s < t < end_s and u != units[-1]:
                times.append(t - start_s)
                units.append(u)
        return Availability(tuple(times), tuple(units), end_s - start_s,
                            f"{self.source} [{start_s:g} s, {end_s:g} s)")

    def fit(self, k: int) -> tuple[float, float]:
        """(reclaims per unit-hour, mean wait s) of a job holding k units, over one window:
        the times the level falls below k per hour it is at least k, shared by the k units,
        and the mean time it then stays below k. (inf, inf) when it is never at least k."""
        up = 0.0
        waits: list[float] = []
        spans = list(zip(self.times_s, self.units, list(self.times_s[1:]) + [self.period_s]))
        fell_at = None  # when the level last fell below k (None: at least k, or never fell)
        for i, (t0, u, t1) in enumerate(spans):
            if u >= k:
                up += t1 - t0
                if fell_at is not None:
                    waits.append(t0 - fell_at)
                    fell_at = None
            elif i > 0 and spans[i - 1][1] >= k:
                fell_at = t0
        falls = len(waits) + (fell_at is not None)
        if fell_at is not None:  # the window ends below k: the wait runs on into the wrap
            first_up = next((t for t, u in zip(self.times_s, self.units) if u >= k), None)
            waits.append(self.period_s - fell_at + (first_up or 0.0))
        if up <= 0.0:
            return math.inf, math.inf
        return falls / (up / 3600.0) / k, (sum(waits) / len(waits) if waits else 0.0)


def load_availability(path: str | Path, period_s: float | None = None) -> Availability:
    """A trace file (module docstring: levels or events): rows at the same time keep the last
    level (the level after the change). `period_s`: the window's length (default: the last
    row's time, which then only closes the window)."""
    path = Path(path)
    try:
        with path.open(newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
    except FileNotFoundError:
        raise UserFileError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise UserFileError(f"{path}: cannot read the trace ({exc})") from None
    if not rows or len(rows) > MAX_ROWS:
        raise UserFileError(f"{path}: expected 1 to {MAX_ROWS:,} rows of seconds,units or "
                            "milliseconds,add|remove,name")
    levels = _events(path, rows) if len(rows[0]) == 3 else _levels(path, rows)
    times: list[float] = []
    units: list[int] = []
    for n, t, u in levels:
        if times and t < times[-1]:
            raise UserFileError(f"{path}: row {n}: time {t:g} is before the row above")
        if times and t == times[-1]:
            units[-1] = u
        else:
            times.append(t)
            units.append(u)
    if times[0] != 0.0:
        times.insert(0, 0.0)
        units.insert(0, units[0])
    period = times[-1] if period_s is None else float(period_s)
    if period_s is None and len(times) > 1:  # the last row closes the window
        times.pop()
        units.pop()
    if not period > times[-1]:
        raise UserFileError(f"{path}: the window ({period:g} s) must end after the last "
                            f"change ({times[-1]:g} s)")
    return Availability(tuple(times), tuple(units), period, str(path))


def _levels(path: Path, rows: list) -> Iterator[tuple[int, float, int]]:
    """(row, seconds, units) of a levels file."""
    for n, row in enumerate(rows, start=1):
        try:
            if len(row) != 2:
                raise ValueError
            t, u = float(row[0]), int(row[1])
            if not math.isfinite(t) or t < 0 or u < 0:
                raise ValueError
        except ValueError:
            raise UserFileError(f"{path}: row {n}: expected two numbers, seconds >= 0 and "
                                f"units >= 0, got {','.join(row)!r}") from None
        yield n, t, u


def _events(path: Path, rows: list) -> Iterator[tuple[int, float, int]]:
    """(row, seconds, units held after it) of an events file."""
    held: set[str] = set()
    for n, row in enumerate(rows, start=1):
        try:
            if len(row) != 3 or row[1] not in ("add", "remove") or not row[2]:
                raise ValueError
            t = float(row[0]) / 1000.0
            if not math.isfinite(t) or t < 0:
                raise ValueError
        except ValueError:
            raise UserFileError(f"{path}: row {n}: expected milliseconds >= 0, add or remove, "
                                f"and a unit's name, got {','.join(row)!r}") from None
        name = row[2]
        if row[1] == "add":
            if name in held:
                raise UserFileError(f"{path}: row {n}: {name} is added while it is held")
            held.add(name)
        else:
            if name not in held:
                raise UserFileError(f"{path}: row {n}: {name} is removed but not held")
            held.remove(name)
        yield n, t, len(held)


__all__ = ["Availability", "load_availability"]
