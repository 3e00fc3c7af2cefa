"""The cheapest plan under the flushed closed form over several microbatch counts, within a
label budget: the search `simulate`'s re-plan and the commands' answer (schedulers/as_it_runs.py)
share.

flushed.py is exact for one m. The m's are searched smallest first (a small m has few unit
options per stage, so its search is the cheapest and gives a ceiling for the rest):
optimum() in full until one m has a plan, then only below the best cost so far, under
ceilings rising from the stage model's bound (_cheaper). Each search has a label budget
(deterministic, unlike a time limit): an m past it is skipped (its answer would not be proven
optimal), and MAX_SKIPPED_IN_A_ROW skipped m's in a row end the search (a larger m is a
larger search). flushed.best_over_microbatches searches a middling m first instead, which
proves small problems fastest but on 64-type problems spends its budget where every search
passes it (dlrm-64types: 5.89 USD from its seed plan, 3.70 at m = 3 this way).
"""

from __future__ import annotations

from dataclasses import dataclass

from heterps_sim.core.problem import Problem

MAX_MICROBATCHES = 64
"""The largest m searched (the exact-flushed scheduler's range)."""
MAX_WORK = 180_000
"""budgeted_counts: the m's searched are 2..m_hi, the most for which the sum over m of
layers x types x m stays within this: a deterministic measure of the searches' time, which
grows about linearly with m and with the problem's size (measured per m on the 2-core VM:
dlrm-64types, 36 x 64, 0.34 s at m = 16; ctr-dnn-64types, 8 x 64, 0.05 s at 16, 0.1 s at 44).
Small problems get every m to MAX_MICROBATCHES or far up (the built-in scenario 2..49,
nce-cpu-gpu 2..42, the worked example 2..64), the 64-type ones few. simulate's whole check
(before: the simulator's m and 4, 8, 16, the search ending at the first m past the budget):
dlrm-64types (m = 2..12) 0.54 -> 0.9 s, 4.32 -> 3.70 USD at m = 3 (m = 6-8 now pass the
search's stage-option bound, 100 x max_labels, and end it; before that bound 2..10 took 1.5 s,
2..12 2.0 s, 2..16 3.3 s, the same plan, none skipped); synthetic-64x64 (2..8; 3 skipped
in a row end it at 4) 1.5 -> 1.7 s, no plan within the label budget before or after;
ctr-dnn-64types (2..26) 0.18 -> 1.1 s,
0.66 -> 0.633 USD at m = 24 (2..28 finds 0.617 at 28 in 1.25 s of search, 2..48 3.3 s).
The built-in scenario 235 -> 211 USD (m = 7), 2emb-aws 189 -> 155 (7), nce-cpu-gpu
192 -> 154 (9), 2emb-ps-contention 235 -> 211 (7), the worked example 0.133 (11, was 16)."""
MAX_SKIPPED_IN_A_ROW = 3
"""Skipped m's (past MAX_LABELS) in a row that end the search: synthetic-64x64 passes the
budget at every m (~0.1-0.4 s each, ~4.9 s over 2..16 and its own m), so it stops after
m = 2, 3, 4 (+0.4 s); 2emb-aws skips 5 and 6 before its cheapest plan at 7, so 2 would lose
it."""


def budgeted_counts(problem: Problem, extra: tuple[int, ...] = ()) -> list[int]:
    """The m's to search, smallest first: 2..m_hi, the most for which the sum over m of
    layers x types x m stays within MAX_WORK (up to MAX_MICROBATCHES), and the `extra` ones,
    within 2 to the batch size."""
    per_m = problem.num_layers * problem.num_types
    hi, work = 1, 0
    while hi < MAX_MICROBATCHES and work + per_m * (hi + 1) <= MAX_WORK:
        hi += 1
        work += per_m * hi
    ms = {*extra, *range(2, hi + 1)}
    return sorted(m for m in ms if 2 <= m <= problem.batch_size)


@dataclass(frozen=True, slots=True)
class MicrobatchSearch:
    """The exact search over microbatch counts: the cheapest plan (None: none found), the
    m's searched in full, skipped (past the label budget) and not reached (the search
    stopped), and the labels of the searches that finished."""

    best: object | None  # schedulers.exact.flushed.FlushedOptimum
    searched: tuple[int, ...]
    skipped: tuple[int, ...]
    not_reached: tuple[int, ...]
    labels: int

    @property
    def complete(self) -> bool:
        """Every m was searched in full (the best is the cheapest over all of them)."""
        return not self.skipped and not self.not_reached


def search_microbatches(problem: Problem, ms, schedule: str, *, effects: tuple[str, ...],
                        max_labels: int, lower_bound: float | None = None) -> MicrobatchSearch:
    """The cheapest plan under the flushed form over `ms`, smallest m first (module docstring);
    the same search as flushed.best_over_microbatches, with its order, the per-m outcome and
    the stop after MAX_SKIPPED_IN_A_ROW."""
    from heterps_sim.schedulers.exact.flushed import LabelLimit, optimum
    order = sorted({int(m) for m in ms if 2 <= int(m) <= problem.batch_size})
    best, searched, skipped, labels, in_a_row = None, [], [], 0, 0
    for n, m in enumerate(order):
        try:
            if best is None:
                got = optimum(problem, m, schedule, effects=effects, max_labels=max_labels,
                              lower_bound=lower_bound)
            else:
                got = _cheaper(problem, m, schedule, effects, max_labels, lower_bound,
                               best.cost_usd * (1 - 1e-9))
        except LabelLimit:
            skipped.append(m)
            in_a_row += 1
            if in_a_row >= MAX_SKIPPED_IN_A_ROW:
                return MicrobatchSearch(best, tuple(searched), tuple(skipped),
                                        tuple(order[n + 1:]), labels)
            continue
        in_a_row = 0
        searched.append(m)
        if got is not None:
            labels += got.labels
            if best is None or got.cost_usd < best.cost_usd:
                best = got
    return MicrobatchSearch(best, tuple(searched), tuple(skipped), (), labels)


def _cheaper(problem: Problem, m: int, schedule: str, effects: tuple[str, ...],
             max_labels: int, lower_bound: float | None, ceiling: float):
    """The cheapest plan at m below `ceiling` (None: none), as optimum() finds one: under
    ceilings rising from `lower_bound` by RAISE while they are below ceiling / RAISE, then
    under `ceiling` itself. A search under a loose ceiling keeps many partial plans: on the
    built-in scenario m = 7..9 pass 30,000 labels under m = 6's best cost (356 USD), while
    m = 7's 211 USD plan is found from below; a ceiling within RAISE of the bound is searched
    at once (each round costs about as much as the last: dlrm-64types)."""
    from heterps_sim.schedulers.exact.flushed import RAISE, solve
    kw = dict(effects=effects, max_labels=max_labels)
    c = lower_bound if lower_bound is not None and 0 < lower_bound else ceiling
    while c * RAISE < ceiling:
        got = solve(problem, m, schedule, incumbent=c, **kw)
        if got is not None:
            return got
        c *= RAISE
    return solve(problem, m, schedule, incumbent=ceiling, **kw)
