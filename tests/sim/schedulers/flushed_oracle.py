"""The brute-force oracle of the flushed searches: every contiguous partition x type per stage
x unit count of a tiny problem, each plan costed by cost/flush.flushed_throughput and the job's
bill (cost/reference.job_cost, the fixed price included)."""

import itertools
import math

import numpy as np

from heterps_sim.core.plan import Plan, Stage
from heterps_sim.cost.flush import flushed_throughput
from heterps_sim.cost.reference import MAX_REPLICAS, job_cost, plan_stages, plan_startup_s
from heterps_sim.cost.terms import stage_terms
from heterps_sim.schedulers.exact.flushed import EFFECTS


def switches(effects):
    return {e: e in effects for e in EFFECTS}


def partitions(n):
    """Every split of 0..n-1 into contiguous (first, last) runs."""
    for cuts in itertools.product((False, True), repeat=n - 1):
        out, first = [], 0
        for i, cut in enumerate(cuts):
            if cut:
                out.append((first, i))
                first = i + 1
        out.append((first, n - 1))
        yield out


def brute_force(p, m, effects=EFFECTS, types=None, ends=None, schedule="gpipe"):
    """(least cost, its plan) over every plan; units per stage from k_lo up to well past the
    point where more units cannot change ceil(m / k)."""
    best, best_plan = math.inf, None
    allowed = range(p.num_types) if types is None else types
    for parts in partitions(p.num_layers):
        if ends is not None and any(b not in ends for _, b in parts[:-1]):
            continue
        for types in itertools.product(allowed, repeat=len(parts)):
            if not all(p.runnable[a:b + 1, j].all() for (a, b), j in zip(parts, types)):
                continue
            ranges = []
            for g, ((a, b), j) in enumerate(zip(parts, types)):
                nj = types[g + 1] if g + 1 < len(types) else -1
                t = stage_terms(p, a, b, j, nj)
                hi = min(t.k_hi, MAX_REPLICAS, p.available[j] or MAX_REPLICAS)
                ranges.append(range(max(1, t.k_lo), min(hi, max(t.k_lo, m) + 3) + 1))
            for ks in itertools.product(*ranges):
                used = np.zeros(p.num_types, int)
                for j, k in zip(types, ks):
                    used[j] += k
                if any(a is not None and used[j] > a for j, a in enumerate(p.available)):
                    continue
                plan = Plan(stages=tuple(
                    Stage(layers=tuple(p.layer_names[a:b + 1]), resource=p.type_names[j],
                          num_replicas=k) for (a, b), j, k in zip(parts, types, ks)),
                    num_microbatches=m, schedule=schedule)
                thr = flushed_throughput(p, plan, m, **switches(effects))
                if thr < p.throughput_limit * (1 - 1e-12):
                    continue
                per_hour = sum(p.price_per_hour[j] * k for j, k in zip(types, ks))
                cost = job_cost(p, per_hour, thr, plan_startup_s(p, plan_stages(p, plan)))
                if cost < best:
                    best, best_plan = cost, plan
    return best, best_plan
