"""The flushed search's labels, in plain Python: the reference the compiled kernel
(flushed_kernel.py) is tested against, and the arithmetic flushed.py's docstring describes.

A label is a suffix of stages g..S-1 (the plan's last stages) with the numbers that decide how
any prefix can complete it; the fields, in order (NAMES):

    D   sum of the stages' fills a_h and drains c_h (boundary messages included)
    f   USD per hour of their units
    PF  max forward pace pf_h (busiest unit's extra microbatches; interface queue)
    PB  max backward pace pb_h
    Z   max_h (C_h + PB_h + r_h) - C_g - PB_g (step-end phases past the drain)
    r1, n1, w1, sa1   the first stage's step-end phase, microbatches per unit, microbatch
        work and own next boundary's seconds, while its interface queue waits for the
        boundary before it (contention; zeros otherwise)
    s   slowest startup among its types
    use units of each capped type

With the ps effect the step's PS pulls pace the forwards of every plan (cost/flush.py: no pull
crosses a step end, and every plan holds all the rows): Q = B sum sparse / shards x s/byte,
x (1 - 1/m) when the model's odt holds the PS side, the same for every plan at one m, so the
labels carry nothing for it: T = D + max(PF, Q) + PB + Z. A stage with rows has its units'
start stagger in its forward pace and its pushes' drain in its step-end phase (Option).

then -net of its first type, the first type and (option, last layer, next label) are
appended by the sweep (NET, TYPE, BACK).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from heterps_sim.core import ps_odt
from heterps_sim.core.plan import Plan, Stage
from heterps_sim.core.problem import Problem
from heterps_sim.cost import dominant, ps_stage, ps_traffic
from heterps_sim.cost.reference import MAX_REPLICAS, fixed_price_per_hour, job_cost, ps_cap
from heterps_sim.cost.terms import model_arrays, stage_terms
from heterps_sim.schedulers.exact.flushed_common import EFFECTS, LabelLimit

NAMES = ("D", "f", "PF", "PB", "Z", "r1", "n1", "s", "w1", "sa1",
         "use")
D_, F_, PF_, PB_, Z_, R1, N1, S_, W1, SA1, USE = range(len(NAMES))
NET, TYPE, BACK = len(NAMES), len(NAMES) + 1, len(NAMES) + 2


def unit_candidates(m: int, k_lo: int, k_hi: int) -> list[int]:
    """Unit counts that can be optimal for a stage: the fewest for each ceil(m / k)."""
    out = sorted({max(k_lo, -(-m // q)) for q in range(1, m + 1)})
    return [k for k in out if k <= k_hi]


def interface_1f1b(before: float, after: float, fs: float) -> float:
    """Under 1F1B a unit's busier interface per extra microbatch: each carries one
    direction's activations and the other's gradients at once (cost/flush.py)."""
    return max(fs * after + (1.0 - fs) * before, fs * before + (1.0 - fs) * after)


@dataclass(frozen=True, slots=True)
class Option:
    k: int
    a: float      # forward fill
    c: float      # backward drain
    pf: float     # forward pace (busiest unit; with rows its units' pull stagger), before
    #               the boundary terms
    pb: float     # backward pace, with its own next boundary under contention
    r: float      # step-end phase: all-reduce + non-splitting work + fixed costs, at least
    #               its pushes' drain when it holds rows
    price: float  # USD per hour
    n: int        # microbatches per unit per step (ceil(m / k))
    ser: float    # seconds of its next boundary's message (0: last stage)
    w: float      # one microbatch's splitting work on one unit


class Search:
    """One problem at one m: stage options, bounds and the label sweep."""

    def __init__(self, problem: Problem, m: int, effects: tuple[str, ...], beta: float,
                 forward_share: float, types: tuple[int, ...] | None = None,
                 ends: frozenset[int] | None = None,
                 stage_types: dict[int, int] | None = None, fixed_cuts: bool = False,
                 schedule: str = "gpipe") -> None:
        if problem.cost_model != "default":
            raise ValueError("flushed optimum: the default cost model only")
        if m < 2:
            raise ValueError("flushed optimum: m must be >= 2 (m = 1 is the simulator's default)")
        unknown = set(effects) - set(EFFECTS)
        if unknown:
            raise ValueError(f"flushed optimum: unknown effects {sorted(unknown)}")
        self.p, self.m, self.beta, self.fs = problem, m, beta, forward_share
        self.one_f_one_b = schedule == "1f1b"
        self.allreduce = "allreduce" in effects
        self.transfers = "transfers" in effects
        self.contention = self.transfers and "contention" in effects
        self.L, self.M = problem.num_layers, problem.num_types
        self.B, self.N = float(problem.batch_size), float(problem.num_samples)
        self.cap = ps_cap(problem)
        self.fixed = fixed_price_per_hour(problem)
        self.t_max = self.B / problem.throughput_limit * (1 + 1e-12)
        self.net = problem.network_bytes_per_s
        self.starts = problem.unit_costs.startup_s
        self.arrays = model_arrays(problem)
        self.capped = [j for j in range(self.M) if problem.available[j] is not None]
        self.slot = {j: i for i, j in enumerate(self.capped)}
        self.sparse = (np.zeros(self.L) if problem.sparse_bytes is None
                       else np.asarray(problem.sparse_bytes, dtype=np.float64))
        # one pull's seconds per byte of a stage's embedding rows (0: no ps effect)
        self.pull_per_byte = 0.0
        self.holds = False
        self.ps = "ps" in effects and problem.sparse_bytes is not None
        self.all_pulls = 0.0  # Q: the step's pulls (less one microbatch's when held)
        if self.ps:
            spec = ps_traffic.problem_ps(problem)
            self.pull_per_byte = self.B / m / spec.num_shards * spec.seconds_per_byte
            self.holds = ps_odt.odt_holds_ps_side(problem)
            self.all_pulls = (self.B * float(self.sparse.sum()) / spec.num_shards
                              * spec.seconds_per_byte
                              * ((1.0 - 1.0 / m) if self.holds else 1.0))
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
    def options(self, a: int, e: int, j: int, nj: int) -> list[Option]:
        """Layers a..e on type j, followed by type nj (-1: the last stage)."""
        bw = math.inf if nj < 0 else float(min(self.net[j], self.net[nj]))
        key = (a, e, j, bw)
        got = self._cache.get(key)
        if got is not None:
            return got
        out: list[Option] = []
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
            rows = int(self.ps and self.sparse[a:e + 1].sum() > 0)
            pull = self.pull_per_byte * float(self.sparse[a:e + 1].sum())
            for k in unit_candidates(self.m, max(1, t.k_lo), k_hi):
                n = -(-self.m // k)
                ar = dominant.allreduce_time(t.bw_s, t.lat_s, k) if self.allreduce else 0.0
                pf, pb = self.paces(n, w, 0.0, ser)
                r = ar + u
                if rows:  # its units' pull stagger and its pushes' drain
                    pace, drain = ps_stage.stage_terms(pull, k, self.m, n, (n - 1) * w, w,
                                                       self.beta, self.holds, nj < 0)
                    pf = max(pf, pace)
                    r = max(r, drain)
                out.append(Option(k, (1.0 - self.beta) * w + d_f, self.beta * w + d_b, pf, pb,
                                  r, float(p.price_per_hour[j]) * k, n, ser, w))
        self._cache[key] = out
        return out

    def paces(self, n: int, w: float, before: float, after: float) -> tuple[float, float]:
        """(pf, pb) of a stage with n microbatches per unit, work w per microbatch and the
        boundary seconds before and after it (cost/flush.py: busiest unit, interfaces)."""
        pf = (1.0 - self.beta) * (n - 1) * w
        pb = self.beta * (n - 1) * w
        if self.contention and self.one_f_one_b:
            pb = max(pb, (n - 1) * interface_1f1b(before, after, self.fs)
                     - (1.0 - self.beta) * (n - 1) * w)
        elif self.contention:
            pf = max(pf, self.fs * (n - 1) * max(before, after))
            pb = max(pb, (1.0 - self.fs) * (n - 1) * max(before, after))
        return pf, pb

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
                    w = opts[0].w  # no boundary: a = (1 - beta) w, c = beta w
                    self.min_fill[e + 1] = min(self.min_fill[e + 1],
                                               self.min_fill[a] + (1.0 - self.beta) * w)
                    fits = [o.price for o in opts if o.n * w + o.r <= self.t_max]
                    if fits:
                        self.min_price[e + 1] = min(self.min_price[e + 1],
                                                    self.min_price[a] + min(fits))

    # ---- costs ---------------------------------------------------------------------------
    def cost(self, per_hour: float, startup_s: float, step_s: float) -> float:
        """USD of a plan of `per_hour` (its stages; job_cost adds the fixed price)."""
        thr = min(self.B / step_s, self.cap) if step_s > 0 else self.cap
        return job_cost(self.p, per_hour, thr, startup_s) if per_hour + self.fixed > 0 else 0.0

    def step_time(self, lab) -> float:
        """T of a complete plan's label: D + max(PF, Q) + PB + Z."""
        return lab[D_] + max(lab[PF_], self.all_pulls) + lab[PB_] + lab[Z_]

    # ---- the sweep -----------------------------------------------------------------------
    def run(self, incumbent: float, max_labels: int):
        """(cost, label) of the cheapest plan below `incumbent`, or None.

        labels[i]: the suffixes starting at layer i, whatever their first stage's type; the
        first type's interface only matters through the bandwidth of the boundary before it
        (more is never worse), so -net is one more number to dominate on."""
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
                    nj = -1 if lab is None else lab[TYPE]
                    for j in self.allowed[i]:
                        for o in self.options(i, e, j, nj):
                            made = self.prepend(lab, o, j)
                            if made is None:
                                continue
                            t_lo = self.step_time(made) + rest_fill
                            if t_lo > self.t_max or self.cost(made[F_] + rest_price, made[S_],
                                                              t_lo) >= incumbent * (1 - 1e-12):
                                continue
                            new.append(made + (-float(self.net[j]), j, (o, e, lab)))
                            count += 1
                            if count > max_labels:
                                raise LabelLimit(f"more than {max_labels} labels")
            labels[i] = pareto(new, self)
        for lab in labels[0]:  # complete plans: their exact cost
            c = self.cost(lab[F_], lab[S_], self.step_time(lab))
            if c < incumbent:
                incumbent, best = c, (c, lab)
        self.labels_made = count
        return best

    def prepend(self, lab, o: Option, j: int):
        """The label of stage o (on type j) followed by suffix `lab` (None: o is the last)."""
        pending = self.contention and o.n > 1
        first = (o.r if pending else 0.0, o.n if self.contention else 1,
                 o.w if self.contention else 0.0, o.ser if self.contention else 0.0)
        if lab is None:
            use = tuple((o.k if c == j else 0) for c in self.capped)
            if j in self.slot and o.k > self.p.available[j]:
                return None
            return (o.a + o.c, o.price, o.pf, o.pb, o.r, first[0], first[1],
                    float(self.starts[j]), first[2], first[3], use)
        D, f, PF, PB, Z, r1, n1, s, w1, sa1, use = lab[:len(NAMES)]
        if j in self.slot:
            used = list(use)
            used[self.slot[j]] += o.k
            if used[self.slot[j]] > self.p.available[j]:
                return None
            use = tuple(used)
        pf, pb = o.pf, o.pb
        if self.contention:
            # the boundary between o and the suffix's first stage: the first stage's queue
            # (backward pace, so its own step-end term moves with it) and, under gpipe,
            # either side's forward
            x = self.paces(n1, w1, o.ser, sa1)[1]
            if x > PB:
                Z = max(Z - (x - PB), r1)
                PB = x
            if not self.one_f_one_b:
                pf = max(pf, self.fs * (max(n1, o.n) - 1) * o.ser)
        pb_new = max(PB, pb)
        Z = max(Z - o.c - (pb_new - PB), o.r)
        return (D + o.a + o.c, f + o.price, max(PF, pf), pb_new, Z, first[0], first[1],
                max(s, float(self.starts[j])), first[2], first[3], use)

    def plan(self, lab, schedule: str) -> Plan:
        stages, first = [], 0
        while lab is not None:
            o, e, nxt = lab[BACK]
            stages.append(Stage(layers=tuple(self.p.layer_names[first:e + 1]),
                                resource=self.p.type_names[lab[TYPE]], num_replicas=int(o.k)))
            first, lab = e + 1, nxt
        return Plan(stages=tuple(stages), num_microbatches=self.m, schedule=schedule)


def pareto(labels: list, search: Search) -> list:
    """The labels no other label dominates (dominates), least f first."""
    labels.sort(key=lambda x: (x[F_], x[D_], x[Z_]))
    kept: list = []
    for lab in labels:
        if not any(dominates(o, lab, search) for o in kept):
            kept.append(lab)
    return kept


def dominates(a, b, search: Search) -> bool:
    """Every completion of suffix `a` costs at most the same completion of `b`.

    f, startup, the first stage's n, -net of its first type and the capped units must each be
    <=. The time numbers may trade against D: the step time is T = D + max(PF, Q) + Y
    with Y = PB + Z, and prepending stages maps PF and (Y, PB, r1, the first stage's pending
    queue x) through sums and maxima that move at most one for one, so the final T exceeds
    b's by at most excess(max(PF, pulls)) + excess(Y): with n1 <= the pending queue x exceeds
    b's by at most E_x (0 under gpipe: x = (1 - fs)(n1 - 1) x the boundary before; under 1F1B
    the largest gap of its affine pieces, n1 - 1 times constants); Q is every plan's. A wider
    interface before a
    (-net <=) only shrinks the prepended
    stage's terms, its drain c by as much as its D. So D_a + excess(PF) +
    max(excess Y, PB, E_x, E_x + excess r1) <= D_b is enough (module docstring)."""
    if not (a[F_] <= b[F_] and a[N1] <= b[N1] and a[S_] <= b[S_] and a[NET] <= b[NET]
            and all(x <= y for x, y in zip(a[USE], b[USE]))):
        return False
    e_pf = max(0.0, a[PF_] - b[PF_])
    e_x = 0.0
    if search.contention and search.one_f_one_b:
        e_x = pending_excess(a[N1], a[W1], a[SA1], b[N1], b[W1], b[SA1], search.beta, search.fs)
    excess_y = max(0.0, (a[PB_] + a[Z_]) - (b[PB_] + b[Z_]), a[PB_] - b[PB_], e_x,
                   e_x + a[R1] - b[R1])
    return a[D_] + e_pf + excess_y <= b[D_]


def pending_excess(n_a, w_a, s_a, n_b, w_b, s_b, beta, fs) -> float:
    """sup over the boundary seconds x >= 0 before the first stage of its 1F1B backward pace
    for label a minus that for label b (n_a <= n_b): the pace is (n - 1) max(beta w,
    fs s + (1 - fs) x - (1 - beta) w, (1 - fs) s + fs x - (1 - beta) w), each piece's slope
    in x is no steeper for a, so the gap is at most the largest gap of the pieces at x = 0."""
    ca, cb = n_a - 1.0, n_b - 1.0
    gaps = (ca * beta * w_a - cb * beta * w_b,
            ca * (fs * s_a - (1.0 - beta) * w_a) - cb * (fs * s_b - (1.0 - beta) * w_b),
            ca * ((1.0 - fs) * s_a - (1.0 - beta) * w_a)
            - cb * ((1.0 - fs) * s_b - (1.0 - beta) * w_b))
    return max(0.0, max(gaps))
