"""The nouns the flushed searches share (flushed.py, flushed_compiled.py, certified.py): the
closed form's effects, the optimum at one m, and the error of a search past its budget."""

from __future__ import annotations

from dataclasses import dataclass

from heterps_sim.core.plan import Plan

EFFECTS = ("allreduce", "transfers", "contention", "ps")
"""The closed form's terms the search prices (cost/flush.flushed_throughput's switches)."""


class LabelLimit(RuntimeError):
    """The search made more labels than allowed (its answer would not be proven optimal)."""


@dataclass(frozen=True, slots=True)
class FlushedOptimum:
    plan: Plan
    """The plan with its units per stage and its microbatch count."""
    cost_usd: float
    throughput: float
    """samples/s under the flushed closed form (PS cap applied)."""
    step_time_s: float
    labels: int
    """labels created: the search's work."""
