"""Paddle's documented rule: embedding and IO layers on CPUs, dense layers on GPUs.

Which layers are "embedding / IO": with per-layer `sparse_bytes` and type kinds known (every
scenario), the layers that pull embedding rows (sparse_bytes > 0) and the first layer (data
input). Otherwise (a bare numeric problem) the layers whose data transfer outweighs their
compute (mean odt_s > mean oct_s over the types that can run them). Every other layer is
dense.

"Best" CPU and GPU type: every (CPU type, GPU type) pair is costed with the shared
provisioning and the cheapest feasible plan is kept; no search beyond that. A layer that
cannot run on its side's type of a pair goes to the pair's other type (if neither holds it,
the pair is skipped). A cluster with no CPU (or no GPU) types, or no type kinds at all, lets
every type play that side.
"""

from __future__ import annotations

import numpy as np

from heterps_sim.core.plan import Plan
from heterps_sim.core.problem import Problem
from heterps_sim.schedulers.base import Evaluator, NoFeasiblePlan, SchedulerConfig
from heterps_sim.schedulers.search.space import PlanBudget, SearchSpace


def io_layers(problem: Problem) -> np.ndarray:
    """(L,) bool: the embedding / IO layers Paddle places on CPUs."""
    if problem.sparse_bytes is not None and problem.type_kinds:
        io = np.asarray(problem.sparse_bytes) > 0
        io[0] = True  # the data input layer
        return io
    runnable = problem.runnable
    odt = np.where(runnable, problem.odt_s, 0.0).sum(axis=1)
    oct_ = np.where(runnable, problem.oct_s, 0.0).sum(axis=1)
    return odt > oct_


class PaddleHeuristicScheduler:
    """Embedding / IO layers on the best CPU type, dense layers on the best GPU type."""

    name = "paddle-heuristic"

    class Config(SchedulerConfig):
        pass

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or self.Config()
        self.notes: dict = {}

    def schedule(self, problem: Problem, evaluate: Evaluator) -> Plan:
        space = SearchSpace(problem)
        io = io_layers(problem)
        cpus, gpus = self._side("cpu", problem), self._side("gpu", problem)
        rows = [row for c in cpus for g in gpus
                if (row := self._pair_plan(space, io, int(c), int(g))) is not None]
        self.notes = {"io_layers": [n for n, x in zip(problem.layer_names, io) if x],
                      "pairs": len(cpus) * len(gpus), "pairs_usable": len(rows)}
        if not rows:
            raise NoFeasiblePlan("paddle-heuristic: no CPU x GPU type pair can hold the "
                                 "embedding / IO layers on the CPU and the dense ones on the GPU")
        budget = PlanBudget(problem, evaluate, None)
        budget.scores(np.array(rows))
        self.notes["evaluations"] = budget.used
        if budget.top:
            best = budget.top[0][1]
            self.notes["cpu_type"] = problem.type_names[int(best[io][0])] if io.any() else None
            self.notes["gpu_type"] = problem.type_names[int(best[~io][0])] if (~io).any() else None
        return budget.final_plan(self.name + " (embedding / IO on a CPU, dense on a GPU type)")

    @staticmethod
    def _side(kind: str, problem: Problem) -> np.ndarray:
        kinds = np.array(problem.type_kinds or ["?"] * problem.num_types)
        types = np.flatnonzero(kinds == kind)
        return types if types.size else np.arange(problem.num_types)

    @staticmethod
    def _pair_plan(space: SearchSpace, io: np.ndarray, cpu: int, gpu: int) -> np.ndarray | None:
        own = np.where(io, cpu, gpu)
        other = np.where(io, gpu, cpu)
        layers = np.arange(space.num_layers)
        a = np.where(space.usable[layers, own], own, other)
        return a if space.usable[layers, a].all() else None
