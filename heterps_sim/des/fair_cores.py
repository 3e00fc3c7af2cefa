"""cores with core_sharing="fair": the host's cores shared the way an OS time-slices them.

With n computations running on c cores, each progresses at min(1, c / n) CPU seconds per
second (processor sharing, what Linux's fair scheduler approximates at the time scale of a
step). Unlike the FIFO queue (`simpy.Resource`), a computation that arrives while the cores
are taken starts at once, slower, and every running one slows with it.

    cores = FairCores(env, 2)
    yield cores.run(0.003)        # 3 ms of CPU work; the event fires when it is done

Completions are found by one timer at a time, for the job that ends first at the current
rate; an arrival or a completion changes the rate, so the timer is replaced (a stale one is
ignored when it fires). Jobs that end together complete in arrival order (deterministic).
"""

from __future__ import annotations

import simpy

DONE_S = 1e-12
"""Remaining CPU seconds below which a job is complete (float rounding of the updates)."""


class FairCores:
    def __init__(self, env: simpy.Environment, cores: int) -> None:
        self.env = env
        self.cores = cores
        self.jobs: dict[simpy.Event, float] = {}
        """Running jobs (in arrival order) -> CPU seconds left."""
        self.updated = 0.0
        self.timer: object | None = None

    def rate(self) -> float:
        """CPU seconds per second each running job gets now."""
        n = len(self.jobs)
        return 1.0 if n <= self.cores else self.cores / n

    def run(self, cpu_s: float) -> simpy.Event:
        self._advance()
        done = self.env.event()
        if cpu_s <= 0:
            done.succeed(self.env.now)
            return done
        self.jobs[done] = cpu_s
        self._arm()
        return done

    def _advance(self) -> None:
        """Charge every running job for the time since the last change."""
        spent = (self.env.now - self.updated) * self.rate()
        if spent > 0:
            for job in self.jobs:
                self.jobs[job] -= spent
        self.updated = self.env.now

    def _arm(self) -> None:
        if not self.jobs:
            self.timer = None
            return
        token = self.timer = object()
        wait = max(min(self.jobs.values()), 0.0) / self.rate()
        self.env.timeout(wait).callbacks.append(lambda _ev: self._fire(token))

    def _fire(self, token: object) -> None:
        if token is not self.timer:
            return  # an arrival or completion re-armed the timer since
        self._advance()
        first = min(self.jobs.values())
        for job in [j for j, left in self.jobs.items() if left <= max(first, 0.0) + DONE_S]:
            del self.jobs[job]
            job.succeed(self.env.now)
        self._arm()
