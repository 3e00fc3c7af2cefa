"""The analytic cost model's per-stage terms (DESIGN.md's reference formulation).

A stage g = layers a..b on type j, followed by a stage on type j' (none for the last):

    OCT_g   = sum oct_s[i][j]                       (compute, one unit, one batch)
    ODT_g   = sum odt_s[i][j] + boundary_bytes[b] / min(net[j], net[j']) + latency   (not last)
    alpha_g = sum alpha[i][j] * oct_s[i][j] / OCT_g  (Amdahl parallel fraction)
    P_g = OCT_g + (ODT_g if odt_parallel else 0);   S_g = (0 if odt_parallel else ODT_g)
    ET_g(k) = P_g * ((1 - alpha_g) + alpha_g / k) + S_g

Mixed stages (plan.Stage.replicas, n_j units of type j; always fixed counts): each type gets its
own terms as above, with c_j = (1 - alpha_j) P_j + S_j and a_j = alpha_j P_j, and the units split
the batch's parallel part so that all finish together (sharing.finish_together):
    ET_g = T, the least T >= max_j c_j with sum_j n_j min(CAP / K, (T - c_j) / a_j) = 1
         = (1 + sum_j n_j c_j / a_j) / sum_j n_j / a_j   when no unit reaches CAP x its equal share
(one type: c + a / k, the ET above). Boundary rule: a transfer between stages uses the slowest
network among ALL types on both sides (one type each side: min(net_j, net_j') as above), since
some microbatch crosses every pair.
"""

from __future__ import annotations

from dataclasses import dataclass

from heterps_sim.core.files import UserFileError
from heterps_sim.core.plan import Plan
from heterps_sim.core.problem import Problem
from heterps_sim.core.sharing import finish_together
from heterps_sim.cost import amdahl

MODES = ("least", "exact")
MAX_REPLICAS = 65536
"""No stage is given more units than this (a safety bound; real caps come from `available`)."""


class PlanError(UserFileError):
    """The plan does not fit the problem (wrong layers, unknown type): bad input, not a result."""


@dataclass(frozen=True, slots=True)
class StageTerms:
    first: int
    last: int
    type_index: int
    oct: float
    odt: float
    alpha: float
    parallel_s: float
    serial_s: float

    def exec_time(self, k: int) -> float:
        return amdahl.step_time(self.parallel_s, self.serial_s, self.alpha, k)

    def groups(self, k: int) -> list[tuple[int, int]]:
        """(type index, units) of the stage with k units."""
        return [(self.type_index, k)]

    def min_exec_time(self) -> float:
        """ET as k -> infinity (the Amdahl limit)."""
        return amdahl.serial_time(self.parallel_s, self.serial_s, self.alpha)

    def least_units(self, batch_size: int, theta: float) -> int | None:
        """Fewest units with B / ET(k) >= theta; None when no number of units reaches theta."""
        slack = amdahl.slack(batch_size / theta, self.parallel_s, self.serial_s, self.alpha)
        if slack <= 0:
            return None
        return max(1, int(amdahl.units_for(self.parallel_s, self.alpha, slack)))


@dataclass(frozen=True, slots=True)
class MixedTerms:
    """A mixed stage: one StageTerms per type (primary first) and the units of each.

    first/last/type_index/oct/odt/alpha/parallel_s/serial_s are the primary type's (what
    per-stage tables show); exec_time is the finish-together step time of all the units.
    """

    parts: tuple[StageTerms, ...]
    counts: tuple[int, ...]

    first = property(lambda self: self.parts[0].first)
    last = property(lambda self: self.parts[0].last)
    type_index = property(lambda self: self.parts[0].type_index)
    oct = property(lambda self: self.parts[0].oct)
    odt = property(lambda self: self.parts[0].odt)
    alpha = property(lambda self: self.parts[0].alpha)
    parallel_s = property(lambda self: self.parts[0].parallel_s)
    serial_s = property(lambda self: self.parts[0].serial_s)

    def split(self) -> tuple[float, list[float]]:
        """(step time, batch share of one unit of each type): sharing.finish_together."""
        serial = [amdahl.serial_time(t.parallel_s, t.serial_s, t.alpha) for t in self.parts]
        parallel = [t.alpha * t.parallel_s for t in self.parts]
        return finish_together(serial, parallel, list(self.counts))

    def exec_time(self, k: int | None = None) -> float:
        return self.split()[0]

    def min_exec_time(self) -> float:
        return self.exec_time()

    def groups(self, k: int | None = None) -> list[tuple[int, int]]:
        return [(t.type_index, n) for t, n in zip(self.parts, self.counts)]


def stage_terms(problem: Problem, first: int, last: int, j: int, next_j: int,
                bandwidth: float | None = None) -> StageTerms:
    """Terms of the stage layers first..last on type j, followed by type next_j (-1: last).

    `bandwidth` overrides min(net[j], net[next_j]) for the boundary (mixed stages on a side).
    """
    octs = problem.oct_s[first:last + 1, j]
    oct_total = float(octs.sum())
    odt_total = float(problem.odt_s[first:last + 1, j].sum())
    if next_j >= 0:
        if bandwidth is None:
            bandwidth = min(problem.network_bytes_per_s[j], problem.network_bytes_per_s[next_j])
        odt_total += float(problem.boundary_bytes[last]) / bandwidth + problem.latency_s
    alpha = float((problem.alpha[first:last + 1, j] * octs).sum() / oct_total) if oct_total > 0 else 0.0
    if problem.odt_parallel:
        parallel_s, serial_s = oct_total + odt_total, 0.0
    else:
        parallel_s, serial_s = oct_total, odt_total
    return StageTerms(first, last, j, oct_total, odt_total, alpha, parallel_s, serial_s)


def plan_stages(problem: Problem, plan: Plan) -> list[StageTerms]:
    """Stage terms of a plan, or PlanError when it does not cover the model's layers in order."""
    issues = plan.problems(problem.layer_names, problem.type_names)
    if issues:
        raise PlanError("; ".join(issues))
    types = [[problem.type_index(t) for t, _ in s.groups] for s in plan.stages]
    net = problem.network_bytes_per_s
    terms, first = [], 0
    for g, stage in enumerate(plan.stages):
        last = first + len(stage.layers) - 1
        nxt = types[g + 1] if g + 1 < len(types) else []
        bandwidth = float(min(net[j] for j in types[g] + nxt)) if nxt else None
        parts = tuple(stage_terms(problem, first, last, j, nxt[0] if nxt else -1, bandwidth)
                      for j in types[g])
        terms.append(MixedTerms(parts, tuple(n for _, n in stage.groups))
                     if stage.is_mixed else parts[0])
        first = last + 1
    return terms


def stage_type_indices(t) -> list[int]:
    """Type indices of a stage's terms (several for a mixed stage)."""
    return [p.type_index for p in t.parts] if isinstance(t, MixedTerms) else [t.type_index]
