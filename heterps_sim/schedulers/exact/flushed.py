"""The cheapest plan under the flushed step time (cost/flush.py), exactly, for a fixed
microbatch count m: a label-setting dynamic program over the pipeline from its last stage to
its first.

The stage model's DP (sweep.py) prices each stage on its own. A flushed step also pays sums
over the stages (fill, drain, boundary messages) and maxima over them (the busiest unit, the
latest step-end phase), so no per-stage price ranks partial plans. Instead every partial plan,
a suffix of stages g..S-1, keeps the few numbers that decide how any prefix can complete it.
With a_h = (1 - beta) w_h + d_fwd_h (its forward fill), c_h = beta w_h + d_bwd_h (backward
drain), pf_h / pb_h its forward / backward pace terms (busiest unit's extra microbatches, its
network interface's queue under contention), r_h = AR_h + u_h its step-end phase, and
C_h = sum_{x>=h} c_x, PB_h = max_{x>=h} pb_x, cost/flush.py's step time is

    T = sum_h (a_h + c_h) + max(max_h pf_h, PS pulls) + max_h (C_h + PB_h + r_h) - ...
      = D + PF + PB_g + Z                       with  Z = max_h (C_h + PB_h + r_h) - C_g - PB_g

and prepending a stage changes each number by one add or max:

    D' = D + a + c,  PF' = max(PF, pf),  PB' = max(PB, pb),  Z' = max(Z - c - (PB' - PB), r)

(T' >= T + a: a suffix's own D + PF + PB + Z bounds every completion from below.) With
Y = PB + Z, T = D + max(PF, pulls) + Y and Y' = max(Y - c, PB' + r): the final T is D plus
numbers that move at most one for one with the suffix's PF and with its Y, PB (and pending
r, below). So a suffix is at least as good as another for every completion when its USD per
hour, slowest startup, units of each capped type, PS flag and -net of its first type are <=
and its D plus its excess PF plus its largest excess of Y, PB, r is <= the other's D
(_dominates): the other is dropped. A suffix is also dropped when the cheapest completion of
it misses the limit or costs the incumbent.
Nothing the optimum needs is dropped: the search is exact.

Two terms need the stage before the suffix: a stage's interface queue (contention) counts the
busier of its two boundaries, so the suffix's first stage keeps its microbatches per unit n
and r until the stage before it is known (then PB, Z and PF take that boundary in).

A stage's units only matter through n = ceil(m / k), its price and its all-reduce; the last
two grow with k, so for each n only the fewest units can be optimal: k in
{max(k_lo, ceil(m / n))}, within [k_lo, min(k_hi, available)] (at most ~2 sqrt(m) counts).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from heterps_sim.core.plan import Plan, Stage
from heterps_sim.core.problem import Problem
from heterps_sim.cost import dominant, ps_traffic
from heterps_sim.cost.flush import BACKWARD_FRACTION, FORWARD_BOUNDARY_SHARE
from heterps_sim.cost.reference import MAX_REPLICAS, job_cost, ps_cap
from heterps_sim.cost.terms import model_arrays, stage_terms

EFFECTS = ("allreduce", "transfers", "contention", "ps")
"""The closed form's terms the search prices (cost/flush.flushed_throughput's switches)."""


WORK_PER_LABEL = 100
"""The compiled search also stops past max_labels x this many stage options tried: under a
near cost ceiling most options are pruned before they become labels, and trying them is
then where the time goes (64 x 64: over a minute at a few thousand labels)."""


class LabelLimit(RuntimeError):
    """The search made more labels than allowed (its answer would not be proven optimal)."""


@dataclass(frozen=True, slots=True)
class FlushedOptimum:
    plan: Plan
    cost_usd: float
    throughput: float
    """samples/s under the flushed closed form (PS cap applied)."""
    step_time_s: float
    labels: int
    """labels created: the search's work."""


def unit_candidates(m: int, k_lo: int, k_hi: int) -> list[int]:
    """Unit counts that can be optimal for a stage: the fewest for each ceil(m / k)."""
    out = sorted({max(k_lo, -(-m // q)) for q in range(1, m + 1)})
    return [k for k in out if k <= k_hi]


@dataclass(frozen=True, slots=True)
class _Option:
    k: int
    a: float      # forward fill
    c: float      # backward drain
    pf: float     # forward pace (busiest unit), before the boundary terms
    pb: float     # backward pace, with its own next boundary under contention
    r: float      # step-end phase: all-reduce + non-splitting work + fixed costs
    price: float  # USD per hour
    n: int        # microbatches per unit per step (ceil(m / k))
    ser: float    # seconds of its next boundary's message (0: last stage)
    pulls: bool   # an embedding stage with several forwards per unit (PS pulls pace)


class _Search:
    """One problem at one m: stage options, bounds and the label sweep."""

    def __init__(self, problem: Problem, m: int, effects: tuple[str, ...], beta: float,
                 forward_share: float, types: tuple[int, ...] | None = None,
                 ends: frozenset[int] | None = None,
                 stage_types: dict[int, int] | None = None, fixed_cuts: bool = False) -> None:
        if problem.cost_model != "default":
            raise ValueError("flushed optimum: the default cost model only")
        if m < 2:
            raise ValueError("flushed optimum: m must be >= 2 (m = 1 is the simulator's default)")
        unknown = set(effects) - set(EFFECTS)
        if unknown:
            raise ValueError(f"flushed optimum: unknown effects {sorted(unknown)}")
        self.p, self.m, self.beta, self.fs = problem, m, beta, forward_share
        self.allreduce = "allreduce" in effects
        self.transfers = "transfers" in effects
        self.contention = self.transfers and "contention" in effects
        self.L, self.M = problem.num_layers, problem.num_types
        self.B, self.N = float(problem.batch_size), float(problem.num_samples)
        self.cap = ps_cap(problem)
        self.t_max = self.B / problem.throughput_limit * (1 + 1e-12)
        self.net = problem.network_bytes_per_s
        self.starts = problem.unit_costs.startup_s
        self.arrays = model_arrays(problem)
        self.capped = [j for j in range(self.M) if problem.available[j] is not None]
        self.slot = {j: i for i, j in enumerate(self.capped)}
        self.sparse = (np.zeros(self.L) if problem.sparse_bytes is None
                       else np.asarray(problem.sparse_bytes, dtype=np.float64))
        self.pulls_q = 0.0
        if "ps" in effects and problem.sparse_bytes is not None:
            spec = ps_traffic.problem_ps(problem)
            self.pulls_q = (self.B * float(self.sparse.sum()) / spec.num_shards
                            * spec.seconds_per_byte * (1.0 - 1.0 / m))
        self.types = tuple(range(self.M)) if types is None else tuple(sorted(set(types)))
        # allowed[i]: the types a stage starting at layer i may use
        self.allowed = [self.types if stage_types is None or i not in stage_types
                        else tuple(j for j in self.types if j == stage_types[i])
                        for i in range(self.L)]
        ends = frozenset(range(self.L)) if ends is None else frozenset(ends) | {self.L - 1}
        self.ends = sorted(e for e in ends if 0 <= e < self.L)
        self.starts_at = [0] + [e + 1 for e in self.ends if e + 1 < self.L]
        self.fixed_cuts = fixed_cuts
        # next_end[a]: the end a stage from layer a takes when the cuts are fixed
        self.next_end = [min(e for e in self.ends if e >= a) for a in range(self.L)]
        self._cache: dict = {}

    # ---- stage options -------------------------------------------------------------------
    def options(self, a: int, e: int, j: int, nj: int) -> list[_Option]:
        """Layers a..e on type j, followed by type nj (-1: the last stage)."""
        bw = math.inf if nj < 0 else float(min(self.net[j], self.net[nj]))
        key = (a, e, j, bw)
        got = self._cache.get(key)
        if got is not None:
            return got
        out: list[_Option] = []
        p = self.p
        if p.runnable[a:e + 1, j].all():
            t = stage_terms(p, a, e, j, nj, bandwidth=None if nj < 0 else bw,
                            arrays=self.arrays)
            k_hi = min(t.k_hi, MAX_REPLICAS,
                       p.available[j] if p.available[j] is not None else MAX_REPLICAS)
            w = t.alpha * t.parallel_s / self.m
            u = (1.0 - t.alpha) * t.parallel_s + t.serial_s + t.fixed_s
            ser = d_f = d_b = 0.0
            if nj >= 0:
                lat = p.latency_s if self.transfers else 0.0
                ser = float(p.boundary_bytes[e]) / self.m / bw if self.transfers else 0.0
                d_f = self.fs * ser + lat
                d_b = (1.0 - self.fs) * ser + lat
            sparse = bool(self.sparse[a:e + 1].sum() > 0)
            for k in unit_candidates(self.m, max(1, t.k_lo), k_hi):
                n = -(-self.m // k)
                ar = dominant.allreduce_time(t.bw_s, t.lat_s, k) if self.allreduce else 0.0
                pb = self.beta * (n - 1) * w
                if self.contention:
                    pb = max(pb, (1.0 - self.fs) * (n - 1) * ser)
                pf = (1.0 - self.beta) * (n - 1) * w
                if self.contention:
                    pf = max(pf, self.fs * (n - 1) * ser)
                out.append(_Option(k, (1.0 - self.beta) * w + d_f, self.beta * w + d_b, pf, pb,
                                   ar + u, float(p.price_per_hour[j]) * k, n, ser,
                                   sparse and n > 1))
        self._cache[key] = out
        return out

    def _bounds(self) -> None:
        """For a prefix of layers 0..i-1 still to be planned: min_fill[i], its least forward
        fill (boundaries left out), and min_price[i], its least USD per hour when each of its
        stages alone fits the limit's step time (a stage's busiest unit and step-end phase,
        n w + r <= B / TL, bound T from below; boundaries left out, which only adds time)."""
        L = self.L
        self.min_fill = np.full(L + 1, math.inf)
        self.min_price = np.full(L + 1, math.inf)
        self.min_fill[0] = self.min_price[0] = 0.0
        for e in self.ends:
            for a in self.starts_at:
                if a > e or self.min_fill[a] == math.inf or (
                        self.fixed_cuts and self.next_end[a] != e):
                    continue
                for j in self.allowed[a]:
                    opts = self.options(a, e, j, -1)
                    if not opts:
                        continue
                    w = opts[0].a + opts[0].c  # no boundary: a = (1 - beta) w, c = beta w
                    self.min_fill[e + 1] = min(self.min_fill[e + 1],
                                               self.min_fill[a] + (1.0 - self.beta) * w)
                    fits = [o.price for o in opts if o.n * w + o.r <= self.t_max]
                    if fits:
                        self.min_price[e + 1] = min(self.min_price[e + 1],
                                                    self.min_price[a] + min(fits))

    # ---- costs ---------------------------------------------------------------------------
    def cost(self, per_hour: float, startup_s: float, step_s: float) -> float:
        thr = min(self.B / step_s, self.cap) if step_s > 0 else self.cap
        return job_cost(self.p, per_hour, thr, startup_s) if per_hour > 0 else 0.0

    def step_time(self, lab) -> float:
        """T of a complete plan's label (module docstring)."""
        D, PF, PB, Z = lab[0], lab[2], lab[3], lab[4]
        return D + max(PF, self.pulls_q if lab[8] else 0.0) + PB + Z

    # ---- the sweep -----------------------------------------------------------------------
    def run(self, incumbent: float, max_labels: int):
        """(cost, label) of the cheapest plan below `incumbent`, or None.

        labels[i]: the suffixes starting at layer i, whatever their first stage's type: a
        label is (D, f, PF, PB, Z, r_first, n_first, startup, pulls, capped units,
        -net of its first type, first type, back) with back = (option, last layer, next
        label); the first type's interface only matters through the bandwidth of the
        boundary before it (more is never worse), so it is one more number to dominate on."""
        L = self.L
        self._bounds()
        best = None
        labels: list[list] = [[] for _ in range(L + 1)]
        labels[L] = [None]
        count = 0
        for i in reversed(self.starts_at):
            rest_fill, rest_price = self.min_fill[i], self.min_price[i]
            new: list = []
            for e in self.ends:
                if e < i or (self.fixed_cuts and e != self.next_end[i]):
                    continue
                for lab in labels[e + 1]:
                    nj = -1 if lab is None else lab[11]
                    for j in self.allowed[i]:
                        for o in self.options(i, e, j, nj):
                            made = self.prepend(lab, o, j)
                            if made is None:
                                continue
                            t_lo = self.step_time(made) + rest_fill
                            if t_lo > self.t_max or self.cost(made[1] + rest_price, made[7],
                                                              t_lo) >= incumbent * (1 - 1e-12):
                                continue
                            new.append(made + (-float(self.net[j]), j, (o, e, lab)))
                            count += 1
                            if count > max_labels:
                                raise LabelLimit(f"more than {max_labels} labels")
            kept = _pareto(new)
            labels[i] = kept
        for lab in labels[0]:  # complete plans: their exact cost
            c = self.cost(lab[1], lab[7], self.step_time(lab))
            if c < incumbent:
                incumbent, best = c, (c, lab)
        self.labels_made = count
        return best

    def prepend(self, lab, o: _Option, j: int):
        """The label of stage o (on type j) followed by suffix `lab` (None: o is the last)."""
        if lab is None:
            use = tuple((o.k if c == j else 0) for c in self.capped)
            if j in self.slot and o.k > self.p.available[j]:
                return None
            return (o.a + o.c, o.price, o.pf, o.pb, o.r,
                    o.r if self.contention and o.n > 1 else 0.0,
                    o.n if self.contention else 1, float(self.starts[j]), o.pulls, use)
        D, f, PF, PB, Z, r1, n1, s, pulls, use = lab[:10]
        if j in self.slot:
            used = list(use)
            used[self.slot[j]] += o.k
            if used[self.slot[j]] > self.p.available[j]:
                return None
            use = tuple(used)
        pf, pb = o.pf, o.pb
        if self.contention:
            # the boundary between o and the suffix's first stage: the first stage's queue
            # (backward pace, so its own step-end term moves with it) and either side's forward
            x = (1.0 - self.fs) * (n1 - 1) * o.ser
            if x > PB:
                Z = max(Z - (x - PB), r1)
                PB = x
            pf = max(pf, self.fs * (max(n1, o.n) - 1) * o.ser)
        pb_new = max(PB, pb)
        Z = max(Z - o.c - (pb_new - PB), o.r)
        return (D + o.a + o.c, f + o.price, max(PF, pf), pb_new, Z,
                o.r if self.contention and o.n > 1 else 0.0, o.n if self.contention else 1,
                max(s, float(self.starts[j])), pulls or o.pulls, use)

    def plan(self, lab, schedule: str) -> Plan:
        stages, first = [], 0
        while lab is not None:
            o, e, nxt = lab[12]
            stages.append(Stage(layers=tuple(self.p.layer_names[first:e + 1]),
                                resource=self.p.type_names[lab[11]], num_replicas=int(o.k)))
            first, lab = e + 1, nxt
        return Plan(stages=tuple(stages), num_microbatches=self.m, schedule=schedule)


def _pareto(labels: list) -> list:
    """The labels no other label dominates (_dominates), least f first."""
    labels.sort(key=lambda x: (x[1], x[0], x[4]))
    kept: list = []
    for lab in labels:
        if not any(_dominates(o, lab) for o in kept):
            kept.append(lab)
    return kept


def _dominates(a, b) -> bool:
    """Every completion of suffix `a` costs at most the same completion of `b`.

    f, startup, pulls, the first stage's n, -net of its first type and the capped units must
    each be <=. The time numbers may trade against D: with Y = PB + Z, the step time is
    T = D + max(PF, pulls) + Y, and prepending a stage maps (Y, PB, r_first) through maxima
    and subtractions only (Y' = max(Y1 - c, max(PB1, pb) + r), Y1 = max(Y, x + r_first),
    PB1 = max(PB, x)), so the final Y exceeds b's by at most the largest excess of a's Y, PB
    or r_first over b's, and the final PF by at most PF's excess; a wider interface before a
    (-net <=) only shrinks the prepended stage's terms, its drain c by as much as its D. So
    D_a + excess(PF) + excess(Y, PB, r_first) <= D_b is enough (module docstring)."""
    if not (a[1] <= b[1] and a[6] <= b[6] and a[7] <= b[7] and a[8] <= b[8]
            and a[10] <= b[10] and all(x <= y for x, y in zip(a[9], b[9]))):
        return False
    excess_y = max(0.0, (a[3] + a[4]) - (b[3] + b[4]), a[3] - b[3], a[5] - b[5])
    return a[0] + max(0.0, a[2] - b[2]) + excess_y <= b[0]


def solve(problem: Problem, m: int, schedule: str = "gpipe", *,
          effects: tuple[str, ...] = EFFECTS, incumbent: float = math.inf,
          max_labels: int = 2_000_000, types: tuple[int, ...] | None = None,
          ends: frozenset[int] | None = None, stage_types: dict[int, int] | None = None,
          fixed_cuts: bool = False, beta: float = BACKWARD_FRACTION, forward_share: float = FORWARD_BOUNDARY_SHARE,
          compiled: bool = True) -> FlushedOptimum | None:
    """The plan of least cost whose flushed throughput (cost/flush.flushed_throughput with
    `effects`, m microbatches) meets the limit; None when no plan does (or none costs less
    than `incumbent`). Raises LabelLimit past max_labels (the compiled search also past
    max_labels x WORK_PER_LABEL stage options tried). `types` (type indices), `ends` (layers a
    stage may end at; the last always) and `stage_types` ({first layer of a stage: the one type
    it may use}) restrict the plans searched: the answer is then the cheapest among those.
    `fixed_cuts`: every stage ends at the first of `ends` at or after its first layer (with
    `stage_types`, the units of one given plan: cost/flushed_provision.py). `compiled`: the numba
    sweep (flushed_kernel.py: the same optimum, with more bounds) instead of this module's
    Python one (the reference)."""
    search = _Search(problem, m, tuple(effects), beta, forward_share, types, ends, stage_types,
                     fixed_cuts)
    if search.cap < problem.throughput_limit * (1 - 1e-12):
        return None
    if compiled:
        return _solve_compiled(search, schedule, incumbent, max_labels)
    found = search.run(incumbent, max_labels)
    if found is None:
        return None
    cost, lab = found
    T = search.step_time(lab)
    return FlushedOptimum(search.plan(lab, schedule), cost, min(search.B / T, search.cap),
                          T, search.labels_made)


def _solve_compiled(search: _Search, schedule: str, incumbent: float,
                    max_labels: int) -> FlushedOptimum | None:
    from heterps_sim.schedulers.exact.flushed_kernel import TOO_MANY
    from heterps_sim.schedulers.exact.flushed_kernel import search as sweep
    from heterps_sim.schedulers.exact.sweep import _tables

    p = search.p
    t = _tables(p)
    flag, step_oh, layer_oh, net, capm, cum_p, cum_s, cum_a, lat2, batch, k_batch, _ = t.mt
    slot = np.full(search.M, -1, np.int64)
    for i, j in enumerate(search.capped):
        slot[j] = i
    avail = np.array([int(p.available[j]) for j in search.capped], np.int64)
    ends = np.zeros(search.L, np.bool_)
    ends[list(search.ends)] = True
    types = np.zeros((search.L, search.M), np.bool_)
    for i, allowed in enumerate(search.allowed):
        types[i, list(allowed)] = True
    sparse_cum = np.concatenate(([0.0], np.cumsum(search.sparse > 0)))
    status, best, cost, FL, IL, _, count = sweep(
        t.oct_t, t.odt_t, t.aoct_t, t.run_t, t.ext, t.lvl,
        np.unique(np.asarray(p.network_bytes_per_s, np.float64)), t.price, t.kmax, t.batch,
        t.par, flag, step_oh, layer_oh, net, capm, cum_p, cum_s, cum_a, lat2, k_batch,
        search.m, search.beta, search.fs, search.allreduce, search.transfers,
        search.contention, search.pulls_q, float(p.latency_s) if search.transfers else 0.0,
        np.asarray(p.boundary_bytes, np.float64), sparse_cum,
        np.asarray(search.starts, np.float64), slot, avail, search.t_max, search.cap,
        search.N, float(p.unit_costs.billing_granularity_s), ends, types, search.fixed_cuts,
        incumbent, max_labels, max_labels * WORK_PER_LABEL)
    if status == TOO_MANY:
        raise LabelLimit(f"more than {max_labels} labels or {max_labels * WORK_PER_LABEL} "
                         "stage options tried")
    if best < 0:
        return None
    stages, first, x = [], 0, int(best)
    while x >= 0:
        j, k, e, parent = (int(v) for v in IL[x])
        stages.append(Stage(layers=tuple(p.layer_names[first:e + 1]),
                            resource=p.type_names[j], num_replicas=k))
        first, x = e + 1, parent
    plan = Plan(stages=tuple(stages), num_microbatches=search.m, schedule=schedule)
    T = float(FL[best, 0] + max(FL[best, 2], search.pulls_q if FL[best, 8] > 0 else 0.0)
              + FL[best, 3] + FL[best, 4])
    return FlushedOptimum(plan, float(cost), min(search.B / T, search.cap), T, int(count))


RAISE = 1.25
"""optimum(): each round's cost ceiling over the last one's."""
MAX_ROUNDS = 12
"""optimum(): rounds under a raised ceiling before the last (ceiling: the one-stage plan, or
none at all), ~14x the first ceiling."""


def optimum(problem: Problem, m: int, schedule: str = "gpipe", *,
            effects: tuple[str, ...] = EFFECTS, max_labels: int = 2_000_000,
            types: tuple[int, ...] | None = None, ends: frozenset[int] | None = None,
            lower_bound: float | None = None,
            top: float = math.inf) -> FlushedOptimum | None:
    """solve(), exact, in rounds under a rising cost ceiling X: a search told to keep only
    plans cheaper than X drops every partial plan that cannot be, so it is fast when X is
    close to the optimum, and whatever X is, a round that finds a plan has found the optimum
    (every cheaper plan was searched). X starts at `lower_bound` (default: the stage model's
    exact optimum, a plan's flushed step time being never below its slowest stage's time)
    and grows by RAISE until a round finds a plan or X passes the cheapest one-stage plan,
    which then is the last round's ceiling. `top`: a known plan's cost (at any m); then only
    plans cheaper than it are sought, and None means there is none at this m. `labels` counts
    every round."""
    kw = dict(effects=effects, max_labels=max_labels, types=types, ends=ends)
    try:  # every layer on one stage: the last ceiling
        one = solve(problem, m, schedule, effects=effects, types=types, ends=frozenset())
    except LabelLimit:
        one = None
    made = one.labels if one else 0
    ceiling = lower_bound if lower_bound is not None else _stage_model_bound(problem)
    if one is not None and one.cost_usd >= top:
        one = None
    top = min(one.cost_usd * (1 + 1e-9) if one else math.inf, top)
    for round_ in range(MAX_ROUNDS + 1):
        if not math.isfinite(ceiling) or ceiling <= 0.0 or ceiling >= top \
                or round_ == MAX_ROUNDS:
            ceiling = top
        got = solve(problem, m, schedule, incumbent=ceiling, **kw)
        made += got.labels if got else 0
        if got is not None:
            return FlushedOptimum(got.plan, got.cost_usd, got.throughput, got.step_time_s, made)
        if ceiling == top:
            if one is None:
                return None
            return FlushedOptimum(one.plan, one.cost_usd, one.throughput, one.step_time_s,
                                  made)
        ceiling *= RAISE


def _stage_model_bound(problem: Problem) -> float:
    """The stage model's exact optimum cost (over every plan, same-type cuts included, and
    every unit count), or 0."""
    return stage_model_optimum(problem)[0]


def stage_model_optimum(problem: Problem) -> tuple[float, Plan | None]:
    """(bound, plan): the stage model's exact optimum over every plan (same-type cuts
    included) and every unit count, and its cost a hair below, a lower bound on every plan's
    flushed cost (a flushed step is never shorter than its slowest stage's); (0, None) when
    the stage model has no plan."""
    from heterps_sim.cost.reference import evaluate_plan
    from heterps_sim.schedulers.base import NoFeasiblePlan
    from heterps_sim.schedulers.exact.sweep import ExactScheduler

    try:
        plan = ExactScheduler(ExactScheduler.Config(allow_same_type_cuts=True))._sweep(
            problem, "exact")
    except NoFeasiblePlan:
        return 0.0, None
    result = evaluate_plan(problem, plan, "exact")
    if not result.feasible:
        return 0.0, None
    return float(result.cost_usd) * (1 - 1e-9), plan


@dataclass(frozen=True, slots=True)
class OverMicrobatches:
    """best_over_microbatches' answer: the cheapest plan over the searched m's (None: none
    meets the limit at any of them), and the m's whose search ran past its labels."""

    best: FlushedOptimum | None
    searched: tuple[int, ...]
    skipped: tuple[int, ...]
    labels: int


def best_over_microbatches(problem: Problem, ms, schedule: str = "gpipe", *,
                           effects: tuple[str, ...] = EFFECTS, max_labels: int = 2_000_000,
                           types: tuple[int, ...] | None = None,
                           ends: frozenset[int] | None = None,
                           max_skipped: int | None = None,
                           upper: FlushedOptimum | None = None,
                           lower_bound: float | None = None) -> OverMicrobatches:
    """The cheapest plan over every m in `ms`, each m searched exactly: optimum() at the first
    m, then each other m only for a plan cheaper than the best so far (solve() with that
    ceiling: none found proves there is none at that m, and the ceiling keeps it fast). A
    unit count k makes ceil(m / k) jump between neighbouring m's, so the cheapest m is not
    where a few round numbers would look (nce-cpu-gpu: 192 USD at m = 12, 251 at m = 16).
    `max_skipped`: once that many m's ran past max_labels, the rest are skipped unsearched
    (a problem too large for the budget at one m mostly is at the others). `upper`: a known
    plan (e.g. another planner's, provisioned under this form), the answer when nothing
    searched is cheaper; `lower_bound`: optimum()'s first ceiling."""
    ms = tuple(sorted({int(m) for m in ms if 2 <= int(m) <= problem.batch_size}))
    first = sorted(ms, key=lambda m: (abs(m - 8), m))  # a middling m first: a good ceiling
    best, skipped, labels, seeded = upper, [], 0, upper is not None
    for m in first:
        if max_skipped is not None and len(skipped) >= max_skipped:
            skipped.append(m)
            continue
        try:
            if best is None or seeded:  # the first m: rising ceilings up to the known plan
                seeded = False
                got = optimum(problem, m, schedule, effects=effects, max_labels=max_labels,
                              types=types, ends=ends, lower_bound=lower_bound,
                              top=best.cost_usd * (1 - 1e-9) if best else math.inf)
            else:
                got = solve(problem, m, schedule, effects=effects, max_labels=max_labels,
                            types=types, ends=ends, incumbent=best.cost_usd * (1 - 1e-9))
        except LabelLimit:
            skipped.append(m)
            continue
        if got is not None:
            labels += got.labels
            if best is None or got.cost_usd < best.cost_usd:
                best = got
    if best is not None:
        best = FlushedOptimum(best.plan, best.cost_usd, best.throughput, best.step_time_s,
                              labels)
    return OverMicrobatches(best, ms, tuple(sorted(skipped)), labels)
