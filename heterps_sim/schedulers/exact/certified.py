"""The cheapest plan under the flushed closed form over every microbatch count, with a proof of
optimality or a certified gap: `certified_optimum`.

For each m the compiled search (flushed_compiled.CompiledSearch) keeps a proven bound lb[m]:
no plan at m costs less. It starts at the m's table bound (flushed_kernel.prefix_tables over
the whole model) and rises with each search under a ceiling X that ends: a search that finds
nothing proves lb[m] = X, one that finds a plan has found m's optimum. The m whose bound is
lowest is searched next (best first; an m whose tables are not built yet counts 0 and gets
them first, so a budget that ends early leaves no bound claimed for it), under a ceiling between its bound and the best plan so
far, so the work goes where the global bound min_m lb[m] is; an m whose bound reaches the best
plan's cost is closed. The answer is proven when every m is closed; when the work budget runs
out first, the answer is the best plan found and lower_bound_usd = min over open m of lb[m],
a bound every plan in the searched space respects. Where the searches after the relaxation
could not table every open m, all the tables come first (_Run._all_tables).

Why these bounds (measured on synthetic-64x64, 2-core VM): the stage model's exact optimum
(a flushed step is never shorter than its slowest stage) is 2.4 USD there against a flushed
optimum near 9 and costs 2.5 s to compute; the per-m tables cost ~40 ms per m at 64 x 64 (~1 ms
for one type) and are 2.8-6 USD, and the searches under ceilings lift them from there. A
quick heuristic (the same search keeping a few labels per layer, BEAM_WIDTHS) gives the
first plan to beat at a few m's, so the exact searches start with a ceiling.

Incumbents: the beam gives a first plan at a few m's; its neighbourhood (stage boundaries
moved by a layer, any types and unit counts, m within 2: _polish) is searched while it
improves (synthetic-64x64: 11.19 -> 9.80 USD in about 11 M units); the Lagrangian bound's
shortest paths are searched as plans too (flushed_lagrange.py).

Work is counted in deterministic units (stage options tried, dominance tests, table entries),
never time: the same problem and budget give the same answer on any machine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from heterps_sim.core.problem import Problem
from heterps_sim.schedulers.exact import flushed_kernel
from heterps_sim.schedulers.exact.flushed_common import EFFECTS, FlushedOptimum
from heterps_sim.schedulers.exact.flushed_compiled import CompiledSearch
from heterps_sim.schedulers.exact.flushed_lagrange import LagrangeBound

MAX_MICROBATCHES = 64
"""microbatches=None: m = 2..this (within the batch size) unless the scenario sets m."""
DEFAULT_MAX_WORK = 75_000_000
"""Work units one call may spend on up to BUDGET_SIZE layers x types (about 5 s on the 2-core
VM at 64 layers x 64 types: a unit is one stage option tried or one dominance test, 10-20
million a second there); default_max_work scales it past that."""
BUDGET_SIZE = 64 * 64
"""The layers x types DEFAULT_MAX_WORK is for: a search's stages grow as the layers squared
times the types, so a larger search gets DEFAULT_MAX_WORK x layers x types / BUDGET_SIZE
(256 layers x 64 types: 300 M units, about 15-30 s here); a smaller one keeps the default
(the one-type searches of a 256-layer model among them)."""
MAX_LEVELS = 1024
"""The most time levels of the prefix tables (table_levels)."""
LEVEL_SHARE = 0.15
"""The share of the budget the prefix tables' passes over their levels may take, all m's
together (table_levels)."""
MAX_LABELS = 2_000_000
"""Labels one search may hold (memory: ~170 bytes each)."""
BEAM_WIDTHS = (2, 8, 32)
"""Labels per layer of the heuristic searches that find the first plan to beat, a round of
beams per width (_heuristic), the later rounds at the m's whose beams found the cheapest
plans. (2, 8) was chosen against one round of 8 and rounds of (1, 2, 4, 8), (4, 8),
(2, 4, 8), (4, 8, 16) on synthetic-64x64, synthetic-256x64, dlrm-64types and ctr-dnn-64types
(it found the cheapest plan on all four: 5.62, 3.95, 4.81, 0.617 USD; one round of 8 answered
256x64 at 18.54 USD, rounds from 1 up 64x64 at 6.97). A third round of 32 then kept those
answers and random 64x64 seeds 1, 2 and 7 as they were, cut seed 3's from 1.626 to 1.587 USD
and found seed 4's first plan (4.12 USD; none before); on the 50 random problems 12x12..32x32
of the slow test it proved 32 (31), was cheaper on 3 (by 1.3%, 8.3% and 9.7%) and dearer on 2
(by 3.7% and 0.2%), the family's time the same (150 s against 147)."""
BEAM_MS = (2, 4, 8, 16, 32, 64)
"""The m's the heuristic runs at (those the space covers)."""
HEURISTIC_SHARE = 0.3
"""The share of the budget the beams may spend (synthetic-256x64: the six beams cost about
380 M units, five times the default budget, and left nothing for the bounds)."""
RAISE = 1.25
"""A search's ceiling over its m's bound while no plan is known (and the most it rises)."""
LEAST_RAISE = 1.02
"""The least a ceiling rises over its m's bound (below the best plan's cost)."""
POLISH_WIDEN = 1
"""Layers a stage boundary of the best plan may move in its neighbourhood (_polish)."""
POLISH_M = 2
"""How far from the best plan's m its neighbourhood's m's go."""
POLISH_STAGES = 0.25
"""The largest neighbourhood searched, as a share of the problem's stages."""
POLISH_WORK = 5_000_000
"""The most work one neighbourhood search may spend (past it, it gives no plan)."""
POLISH_SHARE = 0.2
"""The share of the budget the neighbourhood searches may spend in all."""
FEWER_M_WORK = 2_000_000
"""Work units the answer's last step (_fewest_microbatches) may spend, past the budget: a few
small searches over the answer's own stage boundaries."""
SEARCH_FIRST = 0.2
"""The share of the budget the label searches spend before the Lagrangian bounds are tried
(they close small problems well inside it)."""
LAGRANGE_SHARE = 0.7
"""Of the work left after the first searches (SEARCH_FIRST), the share the Lagrangian bounds
(flushed_lagrange.py) may spend: one run whose boxes cover every open m (ranges of m's,
split where the bound stays low). It runs only when the share covers a first sweep
(LagrangeBound.sweep_work). (Default budget: synthetic-64x64's bound is 4.49 USD at 0.6,
5.00 at 0.7, 5.56 at 0.85; dlrm-64types is proven at 0.6 and 0.7, not at 0.85: the searches
after the bound close it.)"""


@dataclass(frozen=True, slots=True)
class Certified:
    """certified_optimum's answer."""

    best: FlushedOptimum | None
    """The cheapest plan found over every m searched (units, m, cuts, types); None when none
    was found (none exists, none is cheaper than the incumbent, or the budget ran out)."""
    lower_bound_usd: float
    """Certified: no plan in the searched space costs less (inf: none exists; 0.0 when
    nothing better is known)."""
    proven: bool
    """best is optimal (cost <= lower_bound x (1 + 1e-9)), or it is proven that no plan exists
    (best None; or none cheaper than the incumbent, notes['none_below_incumbent'])."""
    gap: float
    """best.cost_usd / lower_bound_usd - 1; 0.0 when proven, inf when no bound or no plan."""
    microbatches: tuple[int, ...]
    """The m's the space covers."""
    work: int
    """Deterministic work units spent."""
    notes: dict
    """Per m ('per_m': {m: (status, bound or cost)}) and the search's counts, for printing."""


def microbatch_counts(problem: Problem, microbatches=None) -> tuple[int, ...]:
    """The m's searched: `microbatches` when given, else the scenario's m when it sets one,
    else 2..MAX_MICROBATCHES; always within 2 and the batch size."""
    if microbatches is not None:
        ms = {int(m) for m in microbatches}
    elif problem.unit_costs.num_microbatches > 1:
        ms = {int(problem.unit_costs.num_microbatches)}
    else:
        ms = set(range(2, MAX_MICROBATCHES + 1))
    return tuple(sorted(m for m in ms if 2 <= m <= problem.batch_size))


def default_max_work(problem: Problem, types: tuple[int, ...] | None = None) -> int:
    """The work budget of a search on `problem` (over `types`, None: all) when the caller
    sets none (BUDGET_SIZE)."""
    size = problem.num_layers * (problem.num_types if types is None else len(types))
    return int(DEFAULT_MAX_WORK * max(1.0, size / BUDGET_SIZE))


def table_levels(num_ms: int, num_stages: int, max_work: int) -> int:
    """The prefix tables' time levels (flushed_kernel.LEVELS): the most, a power of two from
    LEVELS up to MAX_LEVELS, whose passes over the levels (LEVELS_PER_UNIT) for every m cost
    at most LEVEL_SHARE of the budget.

    Why: a table rounds each stage's fill and drain down to whole levels, so at large m,
    where they are a fraction of a level, 64 levels left the tables 20-40% below the optimum
    (random 32x32, seed 9029, m = 32: 100 USD at 64 levels, 114 at 256, 118 at 1,024, against
    a 143 USD plan). On the 50 random problems 12x12..32x32 the default budget proves 38 with
    the open m's tables at 1,024 levels, 32 at 64 (docs/results/
    2026-11-29-certified-finer-levels.md). A 64x64 problem's tables (50,000 stages) keep 64
    levels: more would take the budget the searches need."""
    levels = flushed_kernel.LEVELS
    while (levels * 2 <= MAX_LEVELS and num_ms * num_stages * (levels * 2)
           // flushed_kernel.LEVELS_PER_UNIT <= LEVEL_SHARE * max_work):
        levels *= 2
    return levels


def certified_optimum(problem: Problem, *, schedule: str = "gpipe", microbatches=None,
                      types: tuple[int, ...] | None = None,
                      effects: tuple[str, ...] = EFFECTS, max_work: int | None = None,
                      target_gap: float = 0.0, incumbent: float | None = None,
                      lagrange: bool = True) -> Certified:
    """The cheapest plan whose flushed throughput (cost/flush.py, `effects`, `schedule`)
    meets the limit over every m in the space (microbatch_counts), and how far from optimal
    it can be (module docstring). `types`: only these type indices (types=(j,): the best plan
    on type j alone). `incumbent`: the cost of a plan known elsewhere; only cheaper plans are
    sought. `target_gap`: stop once the best plan is within this fraction of the bound.
    `max_work`: the budget in work units (deterministic; None: default_max_work).
    `lagrange`: raise the m's bounds by the Lagrangian relaxation (flushed_lagrange.py) when
    the budget covers it (LAGRANGE_SHARE); False: the prefix tables and the searches alone."""
    if problem.cost_model != "default":
        raise ValueError("certified_optimum: the flushed form prices the default cost model "
                         "only")
    ms = microbatch_counts(problem, microbatches)
    search = CompiledSearch(problem, effects=tuple(effects), types=types, schedule=schedule)
    if max_work is None:
        max_work = default_max_work(problem, types)
    run = _Run(search, ms, max_work, target_gap, incumbent)
    run.use_lagrange = bool(lagrange)
    return run.answer()


class _Run:
    """One certified_optimum call: per-m bounds, the best plan, the work spent."""

    def __init__(self, search: CompiledSearch, ms: tuple[int, ...], max_work: int,
                 target_gap: float, incumbent: float | None) -> None:
        self.search, self.ms, self.max_work = search, ms, int(max_work)
        self.target_gap = max(0.0, float(target_gap))
        self.incumbent = math.inf if incumbent is None else float(incumbent)
        self.upper = self.incumbent
        self.best: FlushedOptimum | None = None
        self.lb: dict[int, float] = {}
        self.status: dict[int, str] = {}
        self.tries: dict[int, int] = {}
        self.tabled: set[int] = set()
        self.work = self.rounds = self.labels = self.lagranged = self.tabled_ahead = 0
        self.out_of_work = False
        self.use_lagrange = True

    # ---- the search ----------------------------------------------------------------------
    def answer(self) -> Certified:
        if not self.ms or self.search.cap < self.search.p.throughput_limit * (1 - 1e-12):
            for m in self.ms:
                self.status[m] = "none"
                self.lb[m] = math.inf
            return self._certified()
        for m in self.ms:  # no bound known yet: 0 until the m's tables are built
            self.lb[m], self.status[m] = 0.0, "open"
        self._heuristic()
        self._polish()
        # The searches first: most problems (one type, few layers) are proven by them in a
        # sliver of the budget, and the relaxation would cost more than it saves there. Only
        # what they leave open after SEARCH_FIRST of the budget gets the Lagrangian bounds.
        if self._searches(int(SEARCH_FIRST * self.max_work)):
            self._refine()
            self._all_tables()
            before = self.upper
            self._lagrange()
            if self.upper < before:
                self._polish()
            self._searches(self.max_work)
        self._fewest_microbatches()
        return self._certified()

    def _refine(self) -> None:
        """Finer prefix tables (table_levels) for the m's the first searches left open: their
        bounds are built again when next searched (a bound only rises: lb[m] keeps the
        larger). The first tables, beams and searches keep LEVELS, which suffice where the
        searches alone prove the answer (most small problems)."""
        open_ = [m for m in self.ms if self.status[m] == "open"]
        levels = table_levels(len(open_), len(self.search.stages[2]), self.max_work)
        if levels <= self.search.levels:
            return
        self.search.refine(levels, open_)
        self.tabled -= set(open_)

    def _all_tables(self) -> None:
        """The tables of every open m not tabled yet, before the Lagrangian bounds, when the
        searches' share after the relaxation (1 - LAGRANGE_SHARE of what is left) could not
        build them all (_table_estimate) but the whole of what is left can; else none (the
        searches build them as they need them, as before).

        Why: an m without tables has only the relaxation's bound, and a table is the
        cheaper one there: on synthetic-64x64 (default budget) the relaxation took 28 M
        units to bound the m's at 2.26 USD or more, and the searches then tabled 17 of the
        63 m's; all the tables cost 33 M units and bound every m at 3.83 or more (the best
        plan costs 5.62). Where the tables fit beside a full relaxation, or were just
        refined, the order stays as it was: on the 50 random problems 12x12..32x32 tables
        first always left the relaxation less and made one answer dearer (152.53 USD ->
        154.50; its shortest paths had found the cheaper plan)."""
        todo = [m for m in self.ms if self.status[m] == "open" and m not in self.tabled]
        if not self.search.table_work():
            return  # none at these levels to go by: just refined (table_levels budgets them)
        left = self.max_work - self.work
        if not todo or not (1 - LAGRANGE_SHARE) * left < self._table_estimate(todo) <= left:
            return
        for m in todo:
            self._tables(m)
        self.tabled_ahead = len(todo)

    def _table_estimate(self, todo: list[int]) -> int:
        """The work the tables of the m's `todo` will take, from those built at the current
        levels: each m's as much as the next larger built m's (a table's work grows with m:
        it tries a stage option per distinct share of the m microbatches a unit count
        gives), past the largest built m in proportion to m."""
        built = sorted(self.search.table_work().items())
        top, top_work = built[-1]
        total = 0
        for m in todo:
            above = [w for b, w in built if b >= m]
            total += above[0] if above else int(math.ceil(top_work * m / top))
        return total

    def _searches(self, until: int) -> bool:
        """Best-first rounds until every m is closed (False) or `until` work is spent (True:
        m's remain open)."""
        while not self.out_of_work and self.work < until:
            m = self._next()
            if m is None:
                return False
            if m not in self.tabled:
                self._tables(m)
            else:
                self._round(m)
        return not self.out_of_work and self._next() is not None

    def _tables(self, m: int) -> None:
        """m's bounds on a prefix and its whole-plan bound (flushed_kernel.prefix_tables)."""
        if self.out_of_work:
            return
        self.tabled.add(m)
        self._charge(self.search.per_m(m).work)
        self.lb[m] = max(self.lb[m], self.search.lower_bound(m))
        if self.lb[m] == math.inf:
            self.status[m] = "none"

    def _charge(self, work: int) -> None:
        self.work += int(work)
        if self.work >= self.max_work:
            self.out_of_work = True

    def _improve(self, got: FlushedOptimum | None) -> None:
        if got is not None and got.cost_usd < self.upper:
            self.upper, self.best = got.cost_usd, got

    def _fewest_microbatches(self) -> None:
        """Of the plans that cost what the best one does (billing granules make ties
        common), answer the one with the fewest microbatches: the best plan's stage
        boundaries, any type and unit counts, priced at each smaller m in turn
        (CompiledSearch.price) until one costs no more, within FEWER_M_WORK.

        Why: which tie a search meets first is an accident of its order, and the closed
        form has no per-microbatch launch cost while real devices do: the worked example's
        two-L4 plan, the same bill at m = 3 and m = 64, trained at 11,753 samples/s with 3
        microbatches and 1,998 with 64 on the engine here."""
        if self.best is None:
            return
        m0 = self.best.plan.num_microbatches
        near = self.search.stages_near(self.best.plan, 0)
        pool = FEWER_M_WORK
        for m in self.ms:
            if m >= m0 or pool <= 0:
                return
            got, work = self.search.price(m, near, self.upper * (1 + 1e-9), pool)
            pool -= work
            self.work += int(work)
            if got is not None and got.cost_usd <= self.upper * (1 + 1e-9):
                self.upper, self.best = min(self.upper, got.cost_usd), got
                return

    def _heuristic(self) -> None:
        """A first plan to beat: beam searches (cheap; they prove nothing) at the m's of
        BEAM_MS, a round per width of BEAM_WIDTHS, all of them within HEURISTIC_SHARE of the
        budget (a beam past it gives no plan).

        The m's tables come first (the beams' scores need them): the first round goes to
        the m whose tables promise least first, later rounds to the m's whose beams found
        the cheapest plans. Why rounds: a beam's plan is not monotone in its width
        (synthetic-256x64 at m = 64: 3.95 USD with 2 labels per layer, 5.03 with 8), a
        narrow beam costs a fraction of a wide one, and a share that ends mid-way should
        have tried the promising m's once (synthetic-64x64: one round of 8 in ascending m
        spent the share before m = 64, whose beam finds 5.62 USD, and answered 6.97)."""
        until = self.work + int(HEURISTIC_SHARE * self.max_work)
        ms = [m for m in BEAM_MS if m in self.lb]
        for m in ms:
            if self.work < until:
                self._tables(m)
        found: dict[int, float] = {}
        order = sorted(ms, key=lambda x: (self.lb[x], -x))
        for width in BEAM_WIDTHS:
            for m in order:
                if self.work >= until or self.out_of_work:
                    return  # (so every m here has its tables)
                if self.status[m] != "open" or self.lb[m] >= self.upper * (1 - 1e-9):
                    continue
                got = self.search.run(m, self.upper, max_labels=MAX_LABELS,
                                      max_work=min(self.max_work, until) - self.work,
                                      beam=width)
                self._charge(got.work)
                if got.best is not None:
                    found[m] = min(found.get(m, math.inf), got.best.cost_usd)
                self._improve(got.best)
            order = sorted(ms, key=lambda x: (found.get(x, math.inf), self.lb[x], -x))

    def _polish(self) -> None:
        """Improve the best plan by searching its neighbourhood (CompiledSearch.stages_near:
        stage boundaries moved by up to POLISH_WIDEN layers, any types and unit counts) at
        its m and the open m's within POLISH_M of it, again while it improves; each search
        within POLISH_WORK, all of them within POLISH_SHARE of the budget."""
        pool = int(POLISH_SHARE * self.max_work)
        tried: set = set()
        while self.best is not None and pool > 0 and not self.out_of_work:
            plan = self.best.plan
            near = self.search.stages_near(plan, POLISH_WIDEN)
            if len(near) > POLISH_STAGES * len(self.search.stages[2]):
                return  # the neighbourhood is most of the problem: the searches' job
            m0 = plan.num_microbatches
            improved = False
            for m in self.ms:
                if abs(m - m0) > POLISH_M or self.status[m] != "open" or pool <= 0 \
                        or self.lb[m] >= self.upper * (1 - 1e-9) or self.out_of_work:
                    continue
                key = (m, near.tobytes())
                if key in tried:
                    continue
                tried.add(key)
                got, work = self.search.price(m, near, self.upper,
                                              min(POLISH_WORK, pool, self.max_work - self.work))
                pool -= work
                self._charge(work)
                if got is not None and got.cost_usd < self.upper:
                    self._improve(got)
                    improved = True
            if not improved:
                return

    def _lagrange(self) -> None:
        """Raise the open m's bounds by the Lagrangian relaxation (flushed_lagrange.py)
        towards the best plan's cost, over boxes that cover ranges of m's (one first sweep
        bounds them all); an m it lifts there is closed by _next. Its shortest paths are
        priced as plans: a cheaper one becomes the best plan."""
        if not self.use_lagrange:
            return
        todo = [m for m in self.ms
                if self.status[m] == "open" and self.lb[m] < self.upper * (1 - 1e-9)]
        left = self.max_work - self.work
        pool = min(int(LAGRANGE_SHARE * left), left)
        bound = LagrangeBound(self.search)
        if not todo or pool < bound.sweep_work():
            return
        got = bound.bounds(todo, self.upper, pool)
        self.lagranged += got.priced
        self._charge(got.work)
        self._improve(got.best)
        for m, usd in got.per_m.items():
            self.lb[m] = max(self.lb[m], usd)

    def _next(self) -> int | None:
        """The open m of least bound, or None when every m is closed or the gap is met."""
        for m in self.ms:
            if self.status[m] == "open" and self.lb[m] >= self.upper * (1 - 1e-9):
                self.status[m] = "none"  # nothing at m is cheaper than the best plan
        open_ = [m for m in self.ms if self.status[m] == "open"]
        if not open_:
            return None
        m = min(open_, key=lambda x: (self.lb[x], x))
        if self.best is not None and self.upper <= self.lb[m] * (1 + self.target_gap) \
                and self.target_gap > 0:
            return None
        return m

    def _ceiling(self, m: int) -> float:
        lb = self.lb[m]
        if lb <= 0.0:  # free units: only a search without a ceiling bounds it
            return self.upper
        if not math.isfinite(self.upper):
            # no plan known: rising ever faster (RAISE, its square, its fourth power, ...),
            # so an m where no plan exists is closed by a search without a ceiling
            tries = self.tries.get(m, 0)
            self.tries[m] = tries + 1
            return lb * RAISE ** (2 ** tries) if tries < 6 else math.inf
        # halfway (geometrically) to the best plan, within [LEAST_RAISE, RAISE] of the bound
        step = min(RAISE, max(LEAST_RAISE, math.sqrt(self.upper / lb)))
        ceiling = lb * step
        return self.upper if ceiling >= self.upper / LEAST_RAISE else ceiling

    def _round(self, m: int) -> None:
        ceiling = self._ceiling(m)
        got = self.search.run(m, ceiling, max_labels=MAX_LABELS,
                              max_work=self.max_work - self.work)
        self.rounds += 1
        self.labels += got.labels
        self._charge(got.work)
        if got.status == "found":
            self._improve(got.best)
            self.lb[m] = got.best.cost_usd
            self.status[m] = "optimal"
        elif got.status == "none":
            self.lb[m] = max(self.lb[m], ceiling)
            if ceiling >= self.upper * (1 - 1e-12) or ceiling == math.inf:
                self.status[m] = "none"
        else:  # the budget ran out inside this search: its bound stays
            self.out_of_work = True

    # ---- the answer ----------------------------------------------------------------------
    def _certified(self) -> Certified:
        open_ = [m for m in self.ms if self.status[m] == "open"]
        bound = min([self.upper] + [self.lb[m] for m in open_])
        best = self.best
        if best is None:
            proven = not open_
            gap = 0.0 if proven else math.inf
            lower = bound
        else:
            proven = not open_ or best.cost_usd <= bound * (1 + 1e-9)
            lower = min(bound, best.cost_usd)
            gap = 0.0 if proven else (best.cost_usd / lower - 1.0 if lower > 0 else math.inf)
        notes = {
            "per_m": {m: (self.status[m], self.lb[m]) for m in self.ms},
            "open_microbatches": open_, "rounds": self.rounds, "labels": self.labels,
            "lagrange_paths_priced": self.lagranged, "tabled_ahead": self.tabled_ahead,
            "out_of_work": self.out_of_work,
        }
        if best is None and not open_ and math.isfinite(self.incumbent):
            notes["none_below_incumbent"] = True
        return Certified(best, float(lower), bool(proven), float(gap), self.ms, int(self.work),
                         notes)
