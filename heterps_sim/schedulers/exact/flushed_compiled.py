"""The compiled flushed search for one problem (flushed_kernel.py): the stages a plan may hold
once, the bounds on a prefix once per microbatch count m, then any number of searches under
a cost ceiling and a work budget.

    search = CompiledSearch(problem)          # the stages (m-independent)
    search.lower_bound(m)                     # no plan at m costs less (prefix_tables at i = L)
    got = search.run(m, ceiling, max_labels=..., max_work=...)
    got.status                                # "found": got.best is m's optimum (< ceiling)
                                              # "none": no plan at m costs less than ceiling
                                              # "budget": the search stopped, nothing proven

A search under a ceiling X drops every partial plan whose completions all cost X or more, so
a search that ends proves a bound whatever it finds: the optimum at m below X, or that there
is none. That is what certified.py builds on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from heterps_sim.core import ps_odt
from heterps_sim.core.plan import Plan, Stage
from heterps_sim.core.problem import Problem
from heterps_sim.cost import ps_traffic
from heterps_sim.cost.flush import BACKWARD_FRACTION, FORWARD_BOUNDARY_SHARE
from heterps_sim.cost.reference import fixed_price_per_hour, ps_cap
from heterps_sim.schedulers.exact import flushed_kernel as kernel
from heterps_sim.schedulers.exact import flushed_stages
from heterps_sim.schedulers.exact.flushed_common import EFFECTS, FlushedOptimum


@dataclass(frozen=True, slots=True)
class Round:
    """One search under a ceiling at one m."""

    status: str
    """"found" (best: m's optimum, below the ceiling), "none" (no plan at m below the
    ceiling), "budget" (stopped past its labels or work: nothing proven) or "beam" (a
    heuristic search: best, when not None, is a real plan, nothing is proven)."""
    best: FlushedOptimum | None
    labels: int
    work: int


@dataclass
class _PerM:
    min_fill: np.ndarray
    min_fd: np.ndarray
    price: np.ndarray
    bp_start: np.ndarray
    bp_lev: np.ndarray
    pace: np.ndarray
    bpv_start: np.ndarray
    bpv_lev: np.ndarray
    pull_per_byte: float
    work: int
    bound: float = field(default=math.nan)
    levels: int = 0


class CompiledSearch:
    """One problem's compiled flushed search, restricted as flushed.solve restricts it:
    `types` (type indices), `ends` (layers a stage may end at; the last always),
    `stage_types` ({first layer of a stage: its one type}) and `fixed_cuts` (every stage ends
    at the first of `ends` at or after its first layer). `levels`: the prefix tables' time
    levels (flushed_kernel.LEVELS; certified.table_levels, refine)."""

    def __init__(self, problem: Problem, *, effects: tuple[str, ...] = EFFECTS,
                 types: tuple[int, ...] | None = None, ends: frozenset[int] | None = None,
                 stage_types: dict[int, int] | None = None, fixed_cuts: bool = False,
                 schedule: str = "gpipe", beta: float = BACKWARD_FRACTION,
                 forward_share: float = FORWARD_BOUNDARY_SHARE,
                 levels: int = kernel.LEVELS) -> None:
        from heterps_sim.schedulers.exact.sweep import _tables

        if problem.cost_model != "default":
            raise ValueError("flushed optimum: the default cost model only")
        unknown = set(effects) - set(EFFECTS)
        if unknown:
            raise ValueError(f"flushed optimum: unknown effects {sorted(unknown)}")
        self.p = problem
        self.levels = int(levels)
        self.schedule, self.beta, self.fs = schedule, float(beta), float(forward_share)
        self.ps = "ps" in effects and problem.sparse_bytes is not None
        self.holds = self.ps and ps_odt.odt_holds_ps_side(problem)
        self.one_f_one_b = schedule == "1f1b"
        self.allreduce = "allreduce" in effects
        self.transfers = "transfers" in effects
        self.contention = self.transfers and "contention" in effects
        self.L, self.M = L, M = problem.num_layers, problem.num_types
        self.B, self.N = float(problem.batch_size), float(problem.num_samples)
        self.cap = float(ps_cap(problem))
        self.fixed = float(fixed_price_per_hour(problem))
        self.t_max = self.B / problem.throughput_limit * (1 + 1e-12)
        self.gran = float(problem.unit_costs.billing_granularity_s)
        self.startup = np.asarray(problem.unit_costs.startup_s, np.float64)
        self.sparse = (np.zeros(L) if problem.sparse_bytes is None
                       else np.asarray(problem.sparse_bytes, dtype=np.float64))
        allowed_types = tuple(range(M)) if types is None else tuple(sorted(set(types)))
        allow = np.zeros((L, M), np.bool_)
        for i in range(L):
            if stage_types is not None and i in stage_types:
                allow[i, [j for j in allowed_types if j == stage_types[i]]] = True
            else:
                allow[i, list(allowed_types)] = True
        ends = frozenset(range(L)) if ends is None else frozenset(ends) | {L - 1}
        end_mask = np.zeros(L, np.bool_)
        end_mask[[e for e in ends if 0 <= e < L]] = True
        self.starts_at = np.zeros(L + 1, np.bool_)
        self.starts_at[0] = True
        self.starts_at[1:L] = end_mask[:L - 1]
        used = [j for j in allowed_types if allow[:, j].any()]
        self.least_startup = float(min(self.startup[used])) if used else math.inf
        self.capped = [j for j in range(M) if problem.available[j] is not None]
        self.slot = np.full(M, -1, np.int64)
        for n, j in enumerate(self.capped):
            self.slot[j] = n
        self.avail = np.array([int(problem.available[j]) for j in self.capped], np.int64)
        t = self.t = _tables(problem)
        flag, step_oh, layer_oh, net, capm, cum_p, cum_s, cum_a, lat2, batch, k_batch, _ = t.mt
        self.net = np.asarray(problem.network_bytes_per_s, np.float64)
        self.lev = np.unique(self.net)
        self.bytes = np.asarray(problem.boundary_bytes, np.float64)
        stages = flushed_stages.stage_table(
            t.oct_t, t.odt_t, t.aoct_t, t.run_t, t.kmax, t.par, step_oh, layer_oh, net, capm,
            cum_p, cum_s, cum_a, lat2, batch, k_batch, self.sparse, end_mask, allow,
            bool(fixed_cuts), self.t_max)
        self.stages_all = len(stages[2])
        if not (self.contention and self.one_f_one_b):  # (flushed_stages: not monotone there)
            bnd_max = np.where(np.arange(L) < L - 1, t.ext[:, 0], 0.0)
            capped = np.array([a is not None for a in problem.available], np.bool_)
            drop = flushed_stages.dominated_stages(
                *stages, L, M, t.par, t.price, self.net, self.startup, capped, allow, bnd_max)
            stages = flushed_stages.compact(*stages, ~drop, L, M)
        self.stages = stages
        self._per_m: dict[int, _PerM] = {}
        self._stage_types: np.ndarray | None = None
        self._starts: np.ndarray | None = None

    # ---- per m ---------------------------------------------------------------------------
    def pull_per_byte(self, m: int) -> float:
        """Seconds of one pull per byte of a stage's embedding rows per sample at m (one
        microbatch's B / m samples over the shards; cost/flush.py), 0 without the ps effect."""
        if not self.ps:
            return 0.0
        spec = ps_traffic.problem_ps(self.p)
        return self.B / m / spec.num_shards * spec.seconds_per_byte

    def all_pulls(self, m: int) -> float:
        """Q at m: the step's PS pulls' pace of the forwards, every plan's (all of them, less
        one microbatch's when the odt holds the PS side; cost/flush.py)."""
        if not self.ps:
            return 0.0
        spec = ps_traffic.problem_ps(self.p)
        return (self.B * float(self.sparse.sum()) / spec.num_shards * spec.seconds_per_byte
                * ((1.0 - 1.0 / m) if self.holds else 1.0))

    def refine(self, levels: int, ms) -> None:
        """Tables at `levels` time levels from now on; those of the m's `ms` already built are
        dropped (per_m builds them again)."""
        self.levels = int(levels)
        for m in ms:
            self._per_m.pop(m, None)

    def per_m(self, m: int) -> _PerM:
        got = self._per_m.get(m)
        if got is None:
            if m < 2:
                raise ValueError("flushed optimum: m must be >= 2 (m = 1 is the simulator's "
                                 "default)")
            got = self._per_m[m] = _PerM(*self._tables(m, self.stages))
            got.levels = self.levels
        return got

    def table_work(self) -> dict[int, int]:
        """{m: the work its tables took} for the m's whose tables are built at the current
        levels (what a table at another m will take is estimated from them)."""
        return {m: t.work for m, t in self._per_m.items() if t.levels == self.levels}

    def _tables(self, m: int, stages) -> tuple:
        """_PerM's fields for `stages` at m (kernel.prefix_tables and its breakpoints)."""
        first, count, E, F, K = stages
        ppb = self.pull_per_byte(m)
        mf, mfd, P, PV, work = kernel.prefix_tables(
            first, count, E, F, K, self.L, self.M, self.t.par, m, self.beta, self.fs,
            self.allreduce, self.transfers, self.contention, self.one_f_one_b, ppb,
            self.holds, self.all_pulls(m), float(self.p.latency_s) if self.transfers else 0.0,
            self.t.ext, self.t.lvl, self.lev, self.bytes, self.t.price, self.t_max, self.levels)
        start, lev = kernel.breakpoints(P)
        vstart, vlev = kernel.breakpoints(PV)
        return mf, mfd, P, start, lev, PV, vstart, vlev, ppb, int(work)

    def lower_bound(self, m: int) -> float:
        """USD: no plan at m costs less (prefix_tables over the whole model: a plan's step is
        at least max(its least fill and drain, its X); its startup at least the least of its
        types'); inf when no plan at m can meet the limit."""
        t = self.per_m(m)
        if math.isnan(t.bound):
            t.bound = math.inf
            if self.cap >= self.p.throughput_limit * (1 - 1e-12):
                # X and V of the whole plan are both at most its step: the larger bound
                t.bound = max(self._least(t.price, t.bp_start, t.bp_lev, t.min_fd),
                              self._least(t.pace, t.bpv_start, t.bpv_lev, t.min_fd))
        return t.bound

    def _least(self, price, start, levels, min_fd) -> float:
        """The least cost a whole plan can have by one of the level tables (inf: none)."""
        least = math.inf
        for b in range(start[self.L], start[self.L + 1]):
            g = int(levels[b])
            step = max(float(min_fd[self.L]),
                       kernel.level_floor(g, self.t_max, price.shape[0] - 1))
            least = min(least, float(kernel.job_cost(
                float(price[g, self.L]), self.fixed, self.least_startup, step, self.B,
                self.cap, self.N, self.gran)))
        return least

    # ---- one search ----------------------------------------------------------------------
    def run(self, m: int, ceiling: float = math.inf, *, max_labels: int = 2_000_000,
            max_work: int = 200_000_000, beam: int = 0) -> Round:
        """The cheapest plan at m below `ceiling` (module docstring). beam > 0: a heuristic
        search keeping `beam` labels per layer: a plan it finds is real (its cost exact) but
        "none" proves nothing (status "beam")."""
        if self.cap < self.p.throughput_limit * (1 - 1e-12) or self.lower_bound(m) >= ceiling:
            return Round("none", None, 0, 0)
        status, best, cost, FL, IL, labels, work = self._search(
            m, self.per_m(m), self.stages, ceiling, max_labels, max_work, beam)
        if status == kernel.TOO_MANY:
            return Round("budget", None, int(labels), int(work))
        found = None if best < 0 else self._optimum(m, int(best), float(cost), FL, IL,
                                                    int(labels))
        status = "beam" if beam > 0 else "none" if found is None else "found"
        return Round(status, found, int(labels), int(work))

    def _search(self, m, t, stages, ceiling, max_labels, max_work, beam):
        first, count, E, F, K = stages
        return kernel.search(
            first, count, E, F, K, self.starts_at, self.L, self.M, self.t.par, m,
            self.beta, self.fs, self.allreduce, self.transfers, self.contention,
            self.one_f_one_b, t.pull_per_byte, self.holds, self.all_pulls(m),
            float(self.p.latency_s) if self.transfers else 0.0, self.t.ext, self.t.lvl,
            self.lev, self.bytes, self.t.price, self.net, self.startup, self.slot, self.avail,
            self.t_max, self.cap, self.N, self.gran, self.B, self.fixed, t.min_fill, t.min_fd,
            t.price, t.bp_start, t.bp_lev, t.pace, t.bpv_start, t.bpv_lev, float(ceiling),
            int(max_labels), int(max_work), int(beam))

    def stage_types(self) -> np.ndarray:
        """Each stage's type index (the stage table is ordered by first layer, then type)."""
        if self._stage_types is None:
            self._starts, self._stage_types = self._stage_index()
        return self._stage_types

    def price(self, m: int, stages, ceiling: float = math.inf,
              max_work: int = 10**8) -> tuple:
        """(the cheapest plan at m below `ceiling` made of the table's stages `stages` alone
        (their unit counts free), work): the search over those stages, a plan priced exactly
        as the full search prices it; None when none meets the limit and the caps."""
        first, count, E, F, K = self.stages
        sel = np.unique(np.asarray(stages, np.int64))  # the table's order: layer, then type
        if self.cap < self.p.throughput_limit * (1 - 1e-12) or len(sel) == 0:
            return None, 0
        types = self.stage_types()[sel]
        starts = self._stage_starts()[sel]
        first2 = np.zeros((self.L, self.M), np.int64)
        count2 = np.zeros((self.L, self.M), np.int64)
        for x in range(len(sel) - 1, -1, -1):
            first2[starts[x], types[x]] = x
            count2[starts[x], types[x]] += 1
        sub = (first2, count2, E[sel].copy(), F[sel].copy(), K[sel].copy())
        t = _PerM(*self._tables(m, sub))
        if t.work >= max_work:
            return None, t.work
        status, best, cost, FL, IL, labels, work = self._search(m, t, sub, ceiling, 10**6,
                                                                max_work - t.work, 0)
        work = int(work) + t.work
        if status == kernel.TOO_MANY or best < 0:
            return None, work
        return self._optimum(m, int(best), float(cost), FL, IL, int(labels)), work

    def stages_near(self, plan: Plan, widen: int = 1) -> np.ndarray:
        """The table's stages (any type, any unit count) whose first and last layers are
        within `widen` layers of a stage boundary of `plan`: price()'s neighbourhood of it."""
        at = {name: i for i, name in enumerate(self.p.layer_names)}
        ends = np.zeros(self.L, np.bool_)
        for stage in plan.stages:
            e = at[stage.layers[-1]]
            ends[max(0, e - widen):min(self.L, e + widen + 1)] = True
        ends[self.L - 1] = True
        starts = np.zeros(self.L, np.bool_)
        starts[0] = True
        starts[1:] = ends[:-1]
        E = self.stages[2]
        return np.nonzero(ends[E] & starts[self._stage_starts()])[0]

    def _stage_starts(self) -> np.ndarray:
        """Each stage's first layer."""
        if self._starts is None:
            self._starts, self._stage_types = self._stage_index()
        return self._starts

    def _stage_index(self) -> tuple[np.ndarray, np.ndarray]:
        """(each stage's first layer, its type index), read off the table's (layer, type)
        blocks."""
        first, count, E, _, _ = self.stages
        starts = np.zeros(len(E), np.int64)
        types = np.zeros(len(E), np.int64)
        for i in range(self.L):
            for j in range(self.M):
                starts[first[i, j]:first[i, j] + count[i, j]] = i
                types[first[i, j]:first[i, j] + count[i, j]] = j
        return starts, types

    def _optimum(self, m, best, cost, FL, IL, labels) -> FlushedOptimum:
        p = self.p
        stages, first, x = [], 0, best
        while x >= 0:
            j, k, e, parent = (int(v) for v in IL[x])
            stages.append(Stage(layers=tuple(p.layer_names[first:e + 1]),
                                resource=p.type_names[j], num_replicas=k))
            first, x = e + 1, parent
        plan = Plan(stages=tuple(stages), num_microbatches=m, schedule=self.schedule)
        T = float(FL[best, 0] + max(FL[best, 2], self.all_pulls(m)) + FL[best, 3]
                  + FL[best, 4])
        return FlushedOptimum(plan, cost, min(self.B / T, self.cap), T, labels)
