"""Measured spans of one rank: what it did, when, and the time per category.

Times are wall-clock seconds from the rank's `t0` (set right after a start barrier, so ranks
on one machine share a time base). Categories are heterps_sim.core.trace.CATEGORIES, the ones the
simulator uses, so a measured trace and a simulated one read the same way.
"""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager

from heterps_sim.core.trace import CATEGORIES


class Recorder:
    def __init__(self, *, keep_spans: bool) -> None:
        self.t0 = time.time()
        self.keep_spans = keep_spans
        self.spans: list[tuple[str, str, float, float]] = []
        self.totals: dict[str, float] = defaultdict(float)
        self.cpu_totals: dict[str, float] = defaultdict(float)
        """This thread's CPU seconds inside the measured spans, per category: beside `totals`
        (wall) it says how much of a span the rank computed and how much it waited for a
        core the other ranks held (the device's own work, on a GPU, is not in it)."""
        self._measuring = False
        self._cpu_from: float | None = None

    @property
    def measuring(self) -> bool:
        """Whether spans count in `totals` (the measured steps, after the warm-up)."""
        return self._measuring

    @measuring.setter
    def measuring(self, on: bool) -> None:
        if on and not self._measuring:
            self._cpu_from = time.process_time()
        self._measuring = on

    def cpu_s(self) -> float:
        """CPU seconds of this process (every thread: gloo's too) since measuring began: with
        the wall time it tells whether the ranks had the cores they needed."""
        return time.process_time() - self._cpu_from if self._cpu_from is not None else 0.0

    def restart_clock(self) -> None:
        self.t0 = time.time()

    def now(self) -> float:
        return time.time() - self.t0

    @contextmanager
    def span(self, name: str, category: str):
        if category not in CATEGORIES:
            raise ValueError(f"unknown span category {category!r}")
        start, cpu = self.now(), time.thread_time()
        try:
            yield
        finally:
            end = self.now()
            if self.measuring:
                self.totals[category] += end - start
                self.cpu_totals[category] += time.thread_time() - cpu
            if self.keep_spans:
                self.spans.append((name, category, start, end))
