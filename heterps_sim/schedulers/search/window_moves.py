"""A bounded large-neighbourhood polish move: re-partition a window of consecutive stages.

window_moves(plan, width): for every run of `width` consecutive stages (layers s..e-1), every
re-partition of those layers into 1..width pieces (cut points anywhere inside), each piece
on one of the types on its (cheaper, faster) front (pareto_types, at most `most_types`, its
boundary costed on its own network), the rest of the plan unchanged. The plans are costed
exactly by the caller (search_space.PlanBudget). Local by construction: only the window's
layers change, and a window holds `width` stages of the current plan.
"""

from __future__ import annotations

from itertools import combinations, product

import numpy as np

from heterps_sim.schedulers.search.level_moves import StageOptions
from heterps_sim.schedulers.search.space import SearchSpace


def pareto_types(rate: np.ndarray, thr: np.ndarray, most: int) -> np.ndarray:
    """Types on the (cheaper, faster) front of one segment, cheapest first, at most `most`."""
    order = np.argsort(rate, kind="stable")
    front, fastest = [], 0.0
    for j in order:
        if not np.isfinite(rate[j]):
            break
        if thr[j] > fastest:
            front.append(int(j))
            fastest = float(thr[j])
    return np.array(front[:most], np.int64)


def window_moves(opts: StageOptions, a: np.ndarray, width: int = 2,
                 most_types: int = 6) -> np.ndarray:
    """(K, L): every re-partition of `width` consecutive stages into 1..width pieces (any cut
    points inside), each piece on one of its front types (pareto_types, its boundary on its
    own network), the rest of the plan fixed. A bounded neighbourhood: the window's layers
    only."""
    a = np.asarray(a, np.int64)
    starts, ends = SearchSpace.stages(a)
    L, own = len(a), np.arange(opts.problem.num_types)
    rows = [np.empty((0, L), np.int64)]
    fronts: dict[tuple[int, int], np.ndarray] = {}

    def front(lo: int, hi: int) -> np.ndarray:
        if (lo, hi) not in fronts:
            rate, thr = opts.table(np.array([lo]), np.array([hi]), own[None, :])
            fronts[lo, hi] = pareto_types(rate[0], thr[0], most_types)
        return fronts[lo, hi]

    for g in range(max(1, len(starts) - width + 1)):
        s, e = int(starts[g]), int(ends[min(g + width, len(starts)) - 1])
        for pieces in range(1, width + 1):
            for cuts in combinations(range(s + 1, e), pieces - 1):
                bounds = (s, *cuts, e)
                choices = [front(lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:])]
                if any(len(c) == 0 for c in choices):
                    continue
                combos = np.array(list(product(*choices)), np.int64)
                block = np.repeat(a[None, :], len(combos), axis=0)
                for p, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])):
                    block[:, lo:hi] = combos[:, p:p + 1]
                rows.append(block)
    out = np.concatenate(rows)
    out = out[np.any(out != a, axis=1)]
    if len(out) == 0:
        return out
    _, first = np.unique(out, axis=0, return_index=True)
    return out[np.sort(first)]
