"""Scheduler names -> "module:Class" strings, imported only when used.

Listing schedulers never imports torch (the RL scheduler lives behind its string). Adding a
scheduler = one file with one class + one line here.
"""

from __future__ import annotations

import importlib

SCHEDULERS: dict[str, str] = {
    "exact": "heterps_sim.schedulers.exact.sweep:ExactScheduler",
    "exact-flushed": "heterps_sim.schedulers.exact.flushed_scheduler:FlushedExactScheduler",
    "homogeneous": "heterps_sim.schedulers.baselines.single_type:HomogeneousScheduler",
    "cpu-only": "heterps_sim.schedulers.baselines.single_type:CpuOnlyScheduler",
    "gpu-only": "heterps_sim.schedulers.baselines.single_type:GpuOnlyScheduler",
    "random": "heterps_sim.schedulers.baselines.random_search:RandomSearchScheduler",
    "greedy": "heterps_sim.schedulers.baselines.greedy:GreedyScheduler",
    "genetic": "heterps_sim.schedulers.baselines.genetic:GeneticScheduler",
    "bayesian": "heterps_sim.schedulers.baselines.bayesian:BayesianScheduler",
    "paddle-heuristic": "heterps_sim.schedulers.baselines.paddle:PaddleHeuristicScheduler",
    "rl-paper": "heterps_sim.schedulers.rl.paper.scheduler:RLPaperScheduler",
    "rl": "heterps_sim.schedulers.rl.stagewise.scheduler:RLScheduler",
}


def scheduler_names() -> list[str]:
    return sorted(SCHEDULERS)


def scheduler_class(name: str):
    if name not in SCHEDULERS:
        raise KeyError(f"unknown scheduler {name!r} (known: {', '.join(scheduler_names())})")
    module_name, class_name = SCHEDULERS[name].split(":")
    return getattr(importlib.import_module(module_name), class_name)


def make_scheduler(name: str, **options):
    """Instantiate a scheduler with validated options (pydantic errors name the field)."""
    cls = scheduler_class(name)
    return cls(cls.Config(**options))
