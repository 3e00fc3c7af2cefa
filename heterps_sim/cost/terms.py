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

import math
from dataclasses import dataclass

import numpy as np

from heterps_sim.core.files import UserFileError
from heterps_sim.core.limits import MAX_REPLICAS  # the one bound (plans, the search, caps)
from heterps_sim.core.plan import Plan
from heterps_sim.core.problem import Problem
from heterps_sim.core.sharing import finish_together
from heterps_sim.cost import amdahl, dominant

MODES = ("least", "exact")


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
    default: bool = False
    """The default model (cost/dominant.py): the fields below count; else the paper's."""
    fixed_s: float = 0.0
    """F: per-unit fixed seconds per step."""
    bw_s: float = 0.0
    """R: 2 x dense parameter bytes / net_j (the ring all-reduce's bandwidth seconds)."""
    lat_s: float = 0.0
    """Q: 2 x latency_s (the ring's latency per extra replica)."""
    k_lo: int = 1
    """Fewest units whose memory holds the stage."""
    k_hi: int = MAX_REPLICAS
    """Most units: MAX_REPLICAS and B // min_unit_batch (availability is checked per type)."""

    def exec_time(self, k: int) -> float:
        if self.default:
            return dominant.step_time(self.parallel_s, self.serial_s, self.alpha, self.fixed_s,
                                      self.bw_s, self.lat_s, k)
        return amdahl.step_time(self.parallel_s, self.serial_s, self.alpha, k)

    def fastest_units(self) -> int:
        """The unit count of least ET (default model; the paper's ET falls forever)."""
        return dominant.fastest_units(self.parallel_s, self.serial_s, self.alpha, self.fixed_s,
                                      self.bw_s, self.lat_s, self.k_lo, self.k_hi)

    def groups(self, k: int) -> list[tuple[int, int]]:
        """(type index, units) of the stage with k units."""
        return [(self.type_index, k)]

    def min_exec_time(self) -> float:
        """The least ET over unit counts: the Amdahl limit (paper) or ET at fastest_units
        (default; inf when no unit count fits memory and the minimum batch)."""
        if self.default:
            k = self.fastest_units()
            return self.exec_time(k) if k > 0 else math.inf
        return amdahl.serial_time(self.parallel_s, self.serial_s, self.alpha)

    def least_units(self, batch_size: int, theta: float) -> int | None:
        """Fewest units with B / ET(k) >= theta; None when no number of units reaches theta."""
        if self.default:
            k = dominant.least_units(self.parallel_s, self.serial_s, self.alpha, self.fixed_s,
                                     self.bw_s, self.lat_s, batch_size / theta, self.k_lo,
                                     self.k_hi)
            return None if k == dominant.NONE else k
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
        serial = [amdahl.serial_time(t.parallel_s, t.serial_s, t.alpha) + t.fixed_s
                  for t in self.parts]
        parallel = [t.alpha * t.parallel_s for t in self.parts]
        return finish_together(serial, parallel, list(self.counts))

    def exec_time(self, k: int | None = None) -> float:
        """Finish-together time, plus (default model) the all-reduce of all the stage's units
        over the slowest member's network (the parts' R differ only by their network)."""
        et = self.split()[0]
        first = self.parts[0]
        if first.default:
            et += dominant.allreduce_time(max(t.bw_s for t in self.parts), first.lat_s,
                                          sum(self.counts))
        return et

    def min_exec_time(self) -> float:
        return self.exec_time()

    def groups(self, k: int | None = None) -> list[tuple[int, int]]:
        return [(t.type_index, n) for t, n in zip(self.parts, self.counts)]


def boundary_latency_s(problem: Problem) -> float:
    """Latency seconds a stage boundary adds to ODT per step: one transfer (paper); each of the
    m microbatches crossing forward and back (default: 2 m latency_s)."""
    if problem.cost_model == "default":
        return 2.0 * problem.unit_costs.num_microbatches * problem.latency_s
    return problem.latency_s


@dataclass(frozen=True, slots=True)
class ModelArrays:
    """The default model's inputs as the formulas read them (prefix sums over layers)."""

    step_oh: np.ndarray
    layer_oh: np.ndarray
    net: np.ndarray
    capacity: np.ndarray
    """headroom x memory per type (inf: unknown)"""
    cum_param: np.ndarray
    cum_state: np.ndarray
    cum_act: np.ndarray
    lat2_s: float
    k_batch: int
    """B // min_unit_batch, capped at MAX_REPLICAS"""


def model_arrays(problem: Problem) -> ModelArrays:
    c = problem.unit_costs
    params = np.zeros(problem.num_layers) if problem.param_bytes is None else problem.param_bytes

    def cum(a) -> np.ndarray:
        return np.concatenate(([0.0], np.cumsum(np.asarray(a, np.float64))))

    return ModelArrays(
        step_oh=np.asarray(c.step_overhead_s, np.float64),
        layer_oh=np.asarray(c.layer_overhead_s, np.float64),
        net=np.asarray(problem.network_bytes_per_s, np.float64),
        capacity=np.asarray(c.memory_headroom * c.memory_bytes, np.float64),
        cum_param=cum(params), cum_state=cum(c.state_bytes), cum_act=cum(c.activation_bytes),
        lat2_s=2.0 * problem.latency_s,
        k_batch=min(MAX_REPLICAS, problem.batch_size // c.min_unit_batch))


def stage_terms(problem: Problem, first: int, last: int, j: int, next_j: int,
                bandwidth: float | None = None, arrays: ModelArrays | None = None) -> StageTerms:
    """Terms of the stage layers first..last on type j, followed by type next_j (-1: last).

    `bandwidth` overrides min(net[j], net[next_j]) for the boundary (mixed stages on a side);
    `arrays`: model_arrays(problem), when the caller has them already.
    """
    octs = problem.oct_s[first:last + 1, j]
    oct_total = float(octs.sum())
    odt_total = float(problem.odt_s[first:last + 1, j].sum())
    if next_j >= 0:
        if bandwidth is None:
            bandwidth = min(problem.network_bytes_per_s[j], problem.network_bytes_per_s[next_j])
        odt_total += float(problem.boundary_bytes[last]) / bandwidth + boundary_latency_s(problem)
    alpha = float((problem.alpha[first:last + 1, j] * octs).sum() / oct_total) if oct_total > 0 else 0.0
    if problem.odt_parallel:
        parallel_s, serial_s = oct_total + odt_total, 0.0
    else:
        parallel_s, serial_s = oct_total, odt_total
    if problem.cost_model != "default":
        return StageTerms(first, last, j, oct_total, odt_total, alpha, parallel_s, serial_s)
    m = arrays or model_arrays(problem)
    fixed_s, bw_s, lat_s, k_lo, k_hi = dominant.stage_extras(
        m.step_oh[j], m.layer_oh[j], m.net[j], m.capacity[j], m.cum_param, m.cum_state,
        m.cum_act, first, last, m.lat2_s, float(problem.batch_size), m.k_batch)
    return StageTerms(first, last, j, oct_total, odt_total, alpha, parallel_s, serial_s, True,
                      float(fixed_s), float(bw_s), float(lat_s), int(k_lo), int(k_hi))


def plan_stages(problem: Problem, plan: Plan) -> list[StageTerms]:
    """Stage terms of a plan, or PlanError when it does not cover the model's layers in order."""
    issues = plan.problems(problem.layer_names, problem.type_names)
    if issues:
        raise PlanError("; ".join(issues))
    types = [[problem.type_index(t) for t, _ in s.groups] for s in plan.stages]
    net = problem.network_bytes_per_s
    arrays = model_arrays(problem) if problem.cost_model == "default" else None
    terms, first = [], 0
    for g, stage in enumerate(plan.stages):
        last = first + len(stage.layers) - 1
        nxt = types[g + 1] if g + 1 < len(types) else []
        bandwidth = float(min(net[j] for j in types[g] + nxt)) if nxt else None
        parts = tuple(stage_terms(problem, first, last, j, nxt[0] if nxt else -1, bandwidth,
                                  arrays) for j in types[g])
        terms.append(MixedTerms(parts, tuple(n for _, n in stage.groups))
                     if stage.is_mixed else parts[0])
        first = last + 1
    return terms


def stage_type_indices(t) -> list[int]:
    """Type indices of a stage's terms (several for a mixed stage)."""
    return [p.type_index for p in t.parts] if isinstance(t, MixedTerms) else [t.type_index]
