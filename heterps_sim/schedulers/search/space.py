"""Shared parts of the search baselines: the space of runnable plans, moves in it, and a
budgeted evaluator of many plans at once.

A plan is searched as an *assignment*: a type index per layer, an (L,) int array; its stages
are the maximal runs of one type (plan.plan_from_assignment). Only *usable* (layer, type)
pairs are ever proposed: the layer runs on the type (problem.runnable) and the type has units
(available != 0). Uniform per-layer types are mostly infeasible (~L stages, each paying a
boundary transfer), so sampling is stage-structured: 1..S stages, random cut points, one
usable type per stage. The shipped scenarios' optima have 1-4 stages, random problems' (the
factories' independent times per layer x type) up to ~L/2: the number of stages is drawn
log-uniformly, so one-stage plans stay common (~1/4 of draws at S = 16) and long ones occur.

`PlanBudget` counts every plan it costs (on `evaluate.count`, like a call of `evaluate`),
never costs the same assignment twice (a cache: a repeat is not an evaluation) and stops at
the budget. With the analytic evaluator it costs batches through cost_batch (same model,
~1e6 plans/s); with any other evaluator (the simulator) it calls `evaluate` plan by plan.
One evaluation is kept back to re-check the winner with `evaluate` itself, so a search
uses at most `budget` evaluations; only if that check disagrees with the batch model (never
seen) are up to SLACK more spent on the runners-up.

Searches compare plans by *score*: a feasible plan's cost in USD; an infeasible one scores
INFEASIBLE * (1 + shortfall), above every feasible plan and graded by how far it is from
feasible: shortfall = the largest of, over stages, the Amdahl time (1 - alpha) P + S over
B / TL (> 1: no number of units reaches the limit) and, when every stage can reach it, over
capped types, the units the stages need at the limit over the units available (> 1: a cap
is broken). So a search among infeasible plans still has a direction. Under the default
model the same, with its own terms (shortfall(): ET at the fastest unit count, memory over the
minimum batch's bound, the parameter server's capacity).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from heterps_sim.core.plan import Plan, plan_from_assignment
from heterps_sim.core.problem import Problem
from heterps_sim.cost import amdahl_numba as amdahl
from heterps_sim.cost import dominant_numba as dominant
from heterps_sim.cost.provision import provision
from heterps_sim.cost.reference import ps_cap
from heterps_sim.cost.terms import boundary_latency_s, model_arrays
from heterps_sim.schedulers.base import Evaluator, NoFeasiblePlan

SLACK = 2
"""Evaluations a search may use beyond its budget (re-checks of runners-up, see above)."""
_KEEP = SLACK + 1
_CHUNK = 4096
INFEASIBLE = 1e200
"""Scores at or above this are infeasible plans (no plan costs 1e200 USD)."""


@numba.njit(cache=True)
def _shortfall(assign, oct_s, odt_s, alpha, boundary, net, latency, batch, limit, par, caps):
    """Per plan: max over stages of the Amdahl time (1 - alpha) P + S over B / TL and, when
    every stage can reach TL, of units needed at TL over units available, per capped type."""
    n, L = assign.shape
    out = np.zeros(n)
    used = np.zeros(len(caps), np.int64)
    for p in range(n):
        worst, reachable = 0.0, True
        used[:] = 0
        s_oct = s_odt = s_aoct = 0.0
        for i in range(L):
            j = assign[p, i]
            s_oct += oct_s[i, j]
            s_odt += odt_s[i, j]
            s_aoct += alpha[i, j] * oct_s[i, j]
            if i == L - 1 or assign[p, i + 1] != j:
                if i < L - 1:
                    s_odt += boundary[i] / min(net[j], net[assign[p, i + 1]]) + latency
                a = s_aoct / s_oct if s_oct > 0 else 0.0
                par_s = s_oct + s_odt if par else s_oct
                ser_s = 0.0 if par else s_odt
                worst = max(worst, amdahl.serial_time(par_s, ser_s, a))
                slack = amdahl.slack(batch / limit, par_s, ser_s, a)
                if slack > 0:
                    used[j] += max(1, int(amdahl.units_for(par_s, a, slack)))
                else:
                    reachable = False
                s_oct = s_odt = s_aoct = 0.0
        out[p] = worst * limit / batch
        if reachable:
            for j in range(len(caps)):
                if caps[j] > 0:
                    out[p] = max(out[p], used[j] / caps[j])
    return out


@numba.njit(cache=True)
def _shortfall_default(assign, oct_s, odt_s, alpha, boundary, net, latency, batch, limit, par,
                       caps, step_oh, layer_oh, capacity, cum_param, cum_state, cum_act, lat2,
                       k_batch, ps_limit):
    """_shortfall under the default model (cost/dominant.py): a stage's least time is ET at
    its fastest unit count; a stage no unit count fits (memory over the minimum batch's
    bound) falls short by k_lo / k_hi; the parameter server by TL / its capacity."""
    n, L = assign.shape
    out = np.zeros(n)
    used = np.zeros(len(caps), np.int64)
    binv = batch / limit
    for p in range(n):
        worst, reachable = limit / ps_limit, True
        used[:] = 0
        s_oct = s_odt = s_aoct = 0.0
        start = 0
        for i in range(L):
            j = assign[p, i]
            s_oct += oct_s[i, j]
            s_odt += odt_s[i, j]
            s_aoct += alpha[i, j] * oct_s[i, j]
            if i == L - 1 or assign[p, i + 1] != j:
                if i < L - 1:
                    s_odt += boundary[i] / min(net[j], net[assign[p, i + 1]]) + latency
                a = s_aoct / s_oct if s_oct > 0 else 0.0
                par_s = s_oct + s_odt if par else s_oct
                ser_s = 0.0 if par else s_odt
                f, r, q, k_lo, k_hi = dominant.stage_extras(
                    step_oh[j], layer_oh[j], net[j], capacity[j], cum_param, cum_state,
                    cum_act, start, i, lat2, batch, k_batch)
                if k_lo > k_hi:
                    worst = max(worst, k_lo / max(k_hi, 1))
                    reachable = False
                else:
                    kf = dominant.fastest_units(par_s, ser_s, a, f, r, q, k_lo, k_hi)
                    worst = max(worst, dominant.step_time(par_s, ser_s, a, f, r, q, kf) / binv)
                    k = dominant.least_units(par_s, ser_s, a, f, r, q, binv, k_lo, k_hi)
                    if k >= 0:
                        used[j] += k
                    else:
                        reachable = False
                s_oct = s_odt = s_aoct = 0.0
                start = i + 1
        out[p] = worst
        if reachable:
            for j in range(len(caps)):
                if caps[j] > 0:
                    out[p] = max(out[p], used[j] / caps[j])
    return out


class SearchSpace:
    """Usable (layer, type) pairs of one problem, random plans and moves between plans."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self.num_layers, self.num_types = problem.num_layers, problem.num_types
        self.usable = problem.runnable & (problem.available_array != 0)[None, :]
        self._bad = np.zeros((self.num_layers + 1, self.num_types), np.int64)
        self._bad[1:] = np.cumsum(~self.usable, axis=0)  # unusable layers before i, per type
        self.cheapest = np.argmin(np.where(self.usable, _layer_cost(problem), np.inf), axis=1)
        """Per layer, the usable type on which the layer alone costs least per batch (paper:
        one unit; default: its least unit-seconds, fixed costs and all-reduce included)."""

    def check(self) -> None:
        """NoFeasiblePlan when some layer runs on no type that has units."""
        for i in np.flatnonzero(~self.usable.any(axis=1)):
            raise NoFeasiblePlan(f"layer {self.problem.layer_names[i]} runs on no resource type "
                                 "that has units available")

    def segment_ok(self, start: int, end: int) -> np.ndarray:
        """(M,) bool: types usable on every layer start..end-1."""
        return self._bad[end] == self._bad[start]

    def homogeneous(self) -> np.ndarray:
        """Every usable single-type plan, (K, L)."""
        types = np.flatnonzero(self.segment_ok(0, self.num_layers))
        return np.repeat(types[:, None], self.num_layers, axis=1)

    def sample(self, rng: np.random.Generator, n: int, max_stages: int) -> np.ndarray:
        """n plans, (n, L): 1..max_stages stages (log-uniform: few-stage plans stay common,
        many-stage ones are reached), random cuts, a type per stage drawn uniformly from
        those usable on all its layers. A stage that no type can hold whole is split into
        the longest runs some type can (`split_unusable`). Adjacent stages that draw the
        same type merge."""
        return np.concatenate([self._sample(rng, min(_CHUNK, n - s), max_stages)
                               for s in range(0, n, _CHUNK)] or [np.empty((0, self.num_layers),
                                                                          np.int64)])

    def _sample(self, rng: np.random.Generator, n: int, max_stages: int) -> np.ndarray:
        L, S = self.num_layers, max(1, min(max_stages, self.num_layers))
        num = np.minimum(np.exp(rng.uniform(0.0, np.log(S + 1), size=n)).astype(np.int64), S)
        rank = np.argsort(np.argsort(rng.random((n, L - 1)), axis=1), axis=1)
        cut = rank < (num - 1)[:, None]  # cut[p, i]: a stage ends after layer i
        stage_of = np.zeros((n, L), np.int64)
        stage_of[:, 1:] = np.cumsum(cut, axis=1)
        cuts = np.sort(np.where(cut, np.arange(1, L), L), axis=1)[:, :S - 1]
        starts = np.concatenate([np.zeros((n, 1), np.int64), cuts], axis=1)
        ends = np.concatenate([cuts, np.full((n, 1), L)], axis=1)
        ok = (self._bad[ends] == self._bad[starts]) & (starts < ends)[:, :, None]  # (n, S, M)
        keys = np.where(ok, rng.random(ok.shape), -1.0)
        stage_type = keys.argmax(axis=2)
        out = np.take_along_axis(stage_type, stage_of, axis=1)
        for p, g in zip(*np.nonzero(~ok.any(axis=2) & (starts < ends))):
            self.split_unusable(rng, out[p], int(starts[p, g]), int(ends[p, g]))
        return out

    def split_unusable(self, rng: np.random.Generator, a: np.ndarray, start: int,
                       end: int) -> None:
        """Give layers start..end-1 of `a` types in place: from `start`, the longest run some
        type can hold, a type drawn from those, and so on to `end`."""
        while start < end:
            stop = start + 1
            while stop < end and self.segment_ok(start, stop + 1).any():
                stop += 1
            a[start:stop] = rng.choice(np.flatnonzero(self.segment_ok(start, stop)))
            start = stop

    @staticmethod
    def stages(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(starts, ends) of the stages (maximal runs) of an assignment; ends exclusive."""
        cuts = np.flatnonzero(a[1:] != a[:-1]) + 1
        return np.concatenate(([0], cuts)), np.concatenate((cuts, [len(a)]))

    def neighbours(self, a: np.ndarray, max_shift: int = 2) -> np.ndarray:
        """Every plan one move away, (K, L), unique: give a usable type to one layer, one
        stage, two adjacent stages (merge), or up to `max_shift` layers on either side of a
        stage boundary (a shifted boundary, or a split off with a new type)."""
        starts, ends = self.stages(a)
        segs = [(i, i + 1) for i in range(self.num_layers)]
        segs += [(s, e) for s, e in zip(starts, ends) if e - s > 1]
        segs += [(s, e) for s, e in zip(starts[:-1], ends[1:])]
        for b in starts[1:]:
            segs += [(b - d, b) for d in range(2, max_shift + 1) if b - d >= 0]
            segs += [(b, b + d) for d in range(2, max_shift + 1) if b + d <= self.num_layers]
        rows = [np.empty((0, self.num_layers), np.int64)]
        for s, e in set(segs):
            types = np.flatnonzero(self.segment_ok(s, e))
            block = np.repeat(a[None, :], len(types), axis=0)
            block[:, s:e] = types[:, None]
            rows.append(block[np.any(block[:, s:e] != a[s:e], axis=1)])
        out = np.ascontiguousarray(np.concatenate(rows))
        as_bytes = out.view(np.dtype((np.void, out.dtype.itemsize * self.num_layers))).ravel()
        return out[np.sort(np.unique(as_bytes, return_index=True)[1])]

    def recolour(self, rng: np.random.Generator, a: np.ndarray, start: int, end: int,
                 types: np.ndarray | None = None) -> np.ndarray:
        """a with layers start..end-1 on one usable type drawn from `types` (default: all),
        other than what they have now; a unchanged when there is none."""
        ok = self.segment_ok(start, end)
        if types is not None:
            only = np.zeros_like(ok)
            only[types] = True
            ok &= only
        if end - start == 1 or (a[start:end] == a[start]).all():
            ok[a[start]] = False
        choices = ok.nonzero()[0]
        if choices.size == 0:
            return a
        out = a.copy()
        out[start:end] = rng.choice(choices)
        return out

    def mutate(self, rng: np.random.Generator, a: np.ndarray) -> np.ndarray:
        """One random move: a layer's type, a stage's type, a boundary shift, a split, a merge."""
        starts, ends = self.stages(a)
        g = int(rng.integers(len(starts)))
        s, e = int(starts[g]), int(ends[g])
        move = int(rng.integers(5))
        if move == 0:
            i = int(rng.integers(self.num_layers))
            return self.recolour(rng, a, i, i + 1)
        if move == 1 or (move >= 2 and len(starts) == 1 and e - s < 2):
            return self.recolour(rng, a, s, e)
        if move == 3 and e - s >= 2:  # split: the tail (or head) of stage g gets a new type
            p = int(rng.integers(s + 1, e))
            return self.recolour(rng, a, p, e) if rng.random() < 0.5 else self.recolour(rng, a, s, p)
        if len(starts) == 1:
            return self.recolour(rng, a, s, e)
        b = int(starts[int(rng.integers(1, len(starts)))])  # a boundary
        left, right = int(a[b - 1]), int(a[b])
        if move == 4:  # merge: one side takes the other's type
            lo = int(starts[starts < b][-1])
            hi = int(ends[ends > b][0])
            return self.recolour(rng, a, lo, b, [right]) if rng.random() < 0.5 else \
                self.recolour(rng, a, b, hi, [left])
        d = int(rng.integers(1, 3))  # shift the boundary by d layers
        if rng.random() < 0.5:
            return self.recolour(rng, a, max(0, b - d), b, [right])
        return self.recolour(rng, a, b, min(self.num_layers, b + d), [left])

    def crossover(self, rng: np.random.Generator, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Two-point crossover at stage boundaries of either parent: a outside, b inside, so
        whole stages travel; every layer keeps a parent's (usable) type."""
        points = np.flatnonzero((a[1:] != a[:-1]) | (b[1:] != b[:-1])) + 1
        points = np.concatenate(([0], points, [self.num_layers]))
        x, y = np.sort(rng.choice(points, size=2, replace=False))
        child = a.copy()
        child[x:y] = b[x:y]
        return child


class PlanBudget:
    """Scores assignments against an evaluation budget, keeping the best few feasible ones."""

    def __init__(self, problem: Problem, evaluate: Evaluator, budget: int | None) -> None:
        self.problem, self.evaluate = problem, evaluate
        self.mode = getattr(evaluate, "mode", "least")
        self.capacity = None if budget is None else max(1, budget - 1)  # 1 kept to re-check
        self.used = 0
        self._cache: dict[bytes, float] = {}
        self.top: list[tuple[float, np.ndarray]] = []
        """The best few feasible (cost, assignment), cheapest first."""

    @property
    def left(self) -> int | float:
        return math.inf if self.capacity is None else self.capacity - self.used

    @property
    def best_cost(self) -> float:
        return self.top[0][0] if self.top else math.inf

    def seen(self, row: np.ndarray) -> bool:
        return _key(row) in self._cache

    def scores(self, plans: np.ndarray) -> np.ndarray:
        """Score per plan (see the module docstring) for the first rows that fit in the budget:
        shorter than `plans` when the budget ran out. Repeats are not evaluated again."""
        plans = np.asarray(plans, np.int64)
        keys = [_key(row) for row in plans]
        new: dict[bytes, int] = {}
        stop = len(keys)
        for r, key in enumerate(keys):
            if key not in self._cache and key not in new:
                if len(new) >= self.left:
                    stop = r
                    break
                new[key] = r
        if new:
            rows = plans[list(new.values())]
            for key, row, score in zip(new, rows, self._score_new(rows)):
                self._cache[key] = float(score)
                self._offer(float(score), row)
        return np.array([self._cache[k] for k in keys[:stop]], np.float64)

    def _score_new(self, rows: np.ndarray) -> np.ndarray:
        self.used += len(rows)
        cost = self.evaluate.evaluate_many(rows)
        return np.where(np.isfinite(cost), cost, INFEASIBLE * (1.0 + shortfall(self.problem, rows)))

    def _offer(self, score: float, row: np.ndarray) -> None:
        if score < INFEASIBLE and (len(self.top) < _KEEP or score < self.top[-1][0]):
            self.top = sorted(self.top + [(score, row.copy())], key=lambda t: t[0])[:_KEEP]

    def plan(self, row: np.ndarray) -> Plan:
        return plan_from_assignment(self.problem.layer_names, self.problem.type_names, row)

    def final_plan(self, who: str) -> Plan:
        """The best plan found, re-checked with `evaluate`; NoFeasiblePlan when none is."""
        reason = ""
        for _, row in self.top:
            plan = self.plan(row)
            result = self.evaluate(plan)
            if result.feasible:
                return plan
            reason = result.reason
        if not reason and self._cache:  # nothing feasible: the nearest miss says why
            key = min(self._cache, key=self._cache.__getitem__)
            reason = self.evaluate(self.plan(np.frombuffer(key, np.int16))).reason
        detail = f"; e.g. {reason}" if reason else ""
        raise NoFeasiblePlan(f"{who}: none of the {self.used} plans evaluated meets the "
                             f"throughput limit within the caps{detail}")


def _layer_cost(problem: Problem) -> np.ndarray:
    """(L, M) USD-hours x 3600 per batch of each layer alone on each type (cost/provision.py)."""
    p = problem
    if p.cost_model != "default":
        return (p.oct_s + p.odt_s) * p.price_per_hour
    run = p.runnable
    oct_s, odt_s = np.where(run, p.oct_s, 0.0), np.where(run, p.odt_s, 0.0)
    alpha = np.where(run, p.alpha, 0.0)
    par, ser = (oct_s + odt_s, 0.0) if p.odt_parallel else (oct_s, odt_s)
    layer = np.arange(p.num_layers)[:, None]
    unit_s = provision(p, par, ser, alpha, layer, layer, np.arange(p.num_types)[None, :],
                       p.batch_size / p.throughput_limit).unit_s
    return unit_s * p.price_per_hour


def shortfall(problem: Problem, rows: np.ndarray) -> np.ndarray:
    """How far each plan (row of type indices) is from feasible, under the problem's model
    (see the module docstring; > 1: a stage or a cap cannot meet the limit)."""
    p = problem
    args = (np.asarray(rows, np.int64), p.oct_s, p.odt_s, p.alpha, p.boundary_bytes,
            p.network_bytes_per_s, float(boundary_latency_s(p)), float(p.batch_size),
            float(p.throughput_limit), bool(p.odt_parallel), p.available_array)
    if p.cost_model != "default":
        return _shortfall(*args)
    m = model_arrays(p)
    return _shortfall_default(*args, m.step_oh, m.layer_oh, m.capacity, m.cum_param,
                              m.cum_state, m.cum_act, m.lat2_s, m.k_batch, float(ps_cap(p)))


def _key(row: np.ndarray) -> bytes:
    return np.asarray(row, np.int16).tobytes()


def start_search(problem, evaluate, config) -> tuple[SearchSpace, PlanBudget, np.random.Generator]:
    """What every budgeted search begins with: the checked space, the evaluation budget of
    `config` (a BudgetedConfig) and its seeded random generator."""
    space = SearchSpace(problem)
    space.check()
    return space, PlanBudget(problem, evaluate, config.budget), np.random.default_rng(config.seed)
